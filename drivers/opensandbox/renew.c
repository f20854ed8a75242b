/* renew.c - one renewal pass over every opensandbox instance (pisb renew).
 *
 * Due: the last renewal (or create/connect) is at least min(timeout/2,
 * 1 h) ago.  Not renewed: a sandbox known to be gone, one being created,
 * one whose owner process is gone (so it expires, as it should), one the
 * server says has no expiration.  Each renewal sends expiresAt = now +
 * timeoutSeconds and runs under the instance's renew.lock, taken without
 * waiting: a busy lock means a stop, destroy or another pass is at work
 * on that sandbox, and it is skipped this time.  The due test is repeated
 * under the lock, so concurrent passes (cron every minute plus a --watch
 * loop) never renew one sandbox twice.
 *
 * The requests run in parallel on one libcurl multi handle, at most
 * `parallel` at a time, so 1,000 sandboxes on a server answering in 50 ms
 * take well under a second of network time.  Only that many instance
 * directories and locks are open at once.
 */
#include "opensandbox.h"
#include "os_internal.h"
#include "err.h"
#include "json.h"
#include "lock.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct keyent {
	char *file;                 /* apiKeyFile, NULL = the environment */
	struct curl_slist *hdrs;    /* with the key; wiped at the end */
	char *error;                /* the key could not be loaded */
	bool have_key;
	const char *source;
};

struct item {
	char *name;
	/* while in flight */
	int idir, lock;
	struct pisb_config *cfg;
	char *sid;
	CURL *h;
	char *url;
	const struct keyent *key;
	char body[96];
	int64_t sent_at, want_ms;   /* the expiry asked for */
	bool reread;                /* the GET after a refused renewal */
	char refused[512];          /* why the renewal was refused */
	struct pisb_http_call call;
	struct pisb_http_resp r;
};

struct pass {
	struct pisb_state *st;
	struct keyent **keys;       /* each its own allocation: items point at them */
	size_t nkeys;
	struct pisb_strv renewed;
	struct pisb_buf failed, skipped;   /* JSON members, comma-joined */
	int nfailed;
	int64_t now;
	bool force;                 /* named sandboxes: renewed now if allowed */
	const struct pisb_renew_opts *o;
};

static void add_pair(struct pisb_buf *b, const char *k1, const char *name,
		     const char *k2, const char *text)
{
	struct pisb_jw w;

	if (b->len)
		pisb_buf_addc(b, ',');
	pisb_jw_init(&w, b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, k1, name);
	pisb_jw_kstr(&w, k2, text);
	pisb_jw_obj_end(&w);
}

static void skip(struct pass *p, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void skip(struct pass *p, const char *name, const char *fmt, ...)
{
	char reason[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	add_pair(&p->skipped, "name", name, "reason", reason);
}

static const struct keyent *key_for(struct pass *p, const struct pisb_os_config *os)
{
	struct keyent *k;
	char *key = NULL;
	const char *src = NULL;
	struct pisb_err e = PISB_ERR_INIT;

	for (size_t i = 0; i < p->nkeys; i++) {
		k = p->keys[i];
		if ((!k->file && !os->api_key_file) ||
		    (k->file && os->api_key_file && !strcmp(k->file, os->api_key_file)))
			return k;
	}
	p->keys = xrealloc(p->keys, (p->nkeys + 1) * sizeof(*p->keys));
	k = p->keys[p->nkeys++] = xcalloc(1, sizeof(*k));
	k->file = os->api_key_file ? xstrdup(os->api_key_file) : NULL;
	k->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	k->hdrs = curl_slist_append(k->hdrs, "Accept: application/json");
	k->hdrs = curl_slist_append(k->hdrs, "Expect:");
	if (os_load_key(os, &key, &src, &e) < 0) {
		k->error = xstrdup(e.msg);
	} else if (key) {
		_cleanup_free_ char *h = xasprintf("OPEN-SANDBOX-API-KEY: %s", key);
		k->have_key = true;
		k->source = src;
		k->hdrs = curl_slist_append(k->hdrs, h);
		explicit_bzero(h, strlen(h));
		explicit_bzero(key, strlen(key));
		free(key);
	}
	return k;
}

static void keys_release(struct pass *p)
{
	for (size_t i = 0; i < p->nkeys; i++) {
		for (struct curl_slist *s = p->keys[i]->hdrs; s; s = s->next)
			explicit_bzero(s->data, strlen(s->data));
		curl_slist_free_all(p->keys[i]->hdrs);
		free(p->keys[i]->file);
		free(p->keys[i]->error);
		free(p->keys[i]);
	}
	free(p->keys);
}

/* Is it due?  Fills why (for a skip) when not. */
static bool due(const struct pisb_runtime *rt, const struct os_extra *x,
		const struct pisb_record *rec, long long timeout, int64_t now,
		bool force, char *why, size_t n)
{
	int64_t next;
	char ts[32];

	if (!strcmp(rt->state, "gone")) {
		snprintf(why, n, "the sandbox no longer exists on the server");
		return false;
	}
	if (!strcmp(rt->state, "creating")) {
		snprintf(why, n, "it is being created");
		return false;
	}
	if (rec->owner.pid > 0 && !pisb_proc_id_alive(&rec->owner)) {
		snprintf(why, n, "its owner process %d is gone: it is left to expire", (int)rec->owner.pid);
		return false;
	}
	if (!strcmp(rt->state, "paused")) {
		/* use has ended: it is renewed again once started */
		snprintf(why, n, "it is paused: renewal resumes at 'pisb start'");
		return false;
	}
	if (x->no_expiry) {
		snprintf(why, n, "the server says it has no automatic expiration");
		return false;
	}
	next = x->renewed_at + os_renew_interval(timeout);
	if (!force && x->renewed_at && now < next) {
		pisb_time_rfc3339(next, ts);
		snprintf(why, n, "not due until %s", ts);
		return false;
	}
	/* never shorten: a known expiry later than now + timeout stays */
	if (x->expires_at && os_time_ms(x->expires_at) >= pisb_now_ms() + timeout * 1000) {
		snprintf(why, n, "it expires at %s, later than a renewal would set", x->expires_at);
		return false;
	}
	return true;
}

static void item_close(struct item *it)
{
	if (it->lock >= 0)
		close(it->lock);
	if (it->idir >= 0)
		close(it->idir);
	it->lock = it->idir = -1;
	if (it->cfg)
		pisb_config_free(it->cfg);
	it->cfg = NULL;
	free(it->sid);
	it->sid = NULL;
	free(it->url);
	it->url = NULL;
	pisb_http_resp_release(&it->r);
}

/* Open, lock and re-check one candidate; 1 = ready to send, 0 = skipped
 * or failed (reported). */
static int prepare(struct pass *p, struct item *it)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_record rec;
	struct pisb_runtime rt;
	struct os_extra x;
	const struct keyent *k;
	char why[256];
	bool ok;

	it->lock = -1;
	it->idir = pisb_instance_open(p->st, "instances", it->name, &e);
	if (it->idir < 0) {
		skip(p, it->name, "it was removed meanwhile");
		return 0;
	}
	it->lock = pisb_lock_acquire(it->idir, "renew.lock", true, 0, "renewal", &e);
	if (it->lock < 0) {
		skip(p, it->name, "busy: a stop, destroy or another renewal is at work on it");
		item_close(it);
		return 0;
	}
	if (pisb_record_load(it->idir, &rec, &e) < 0) {
		add_pair(&p->failed, "name", it->name, "error", e.msg);
		p->nfailed++;
		item_close(it);
		return 0;
	}
	if (pisb_record_config(&rec, &it->cfg, &e) < 0 || pisb_runtime_load(it->idir, &rt, &e) < 0) {
		add_pair(&p->failed, "name", it->name, "error", e.msg);
		p->nfailed++;
		pisb_record_release(&rec);
		item_close(it);
		return 0;
	}
	os_extra_parse(rt.extra_json, &x);
	/* again, under the lock: another pass may have renewed it */
	ok = due(&rt, &x, &rec, it->cfg->os.timeout_seconds, pisb_now_ms() / 1000, p->force,
		 why, sizeof(why));
	{
		struct pisb_json j;
		if (rec.remote_json && pisb_json_parse(&j, rec.remote_json, strlen(rec.remote_json), &e) == 0) {
			it->sid = pisb_json_str(&j, pisb_json_get(&j, 0, "sandboxId"));
			pisb_json_release(&j);
		}
	}
	pisb_record_release(&rec);
	pisb_runtime_release(&rt);
	os_extra_release(&x);
	if (!ok) {
		skip(p, it->name, "%s", why);
		item_close(it);
		return 0;
	}
	if (!it->sid) {
		add_pair(&p->failed, "name", it->name, "error", "its record has no sandbox id");
		p->nfailed++;
		item_close(it);
		return 0;
	}
	k = key_for(p, &it->cfg->os);
	if (k->error) {
		add_pair(&p->failed, "name", it->name, "error", k->error);
		p->nfailed++;
		item_close(it);
		return 0;
	}
	{
		struct pisb_buf u = PISB_BUF_INIT;
		pisb_buf_addf(&u, "%s://%s/v1/sandboxes/", it->cfg->os.protocol, it->cfg->os.domain);
		pisb_http_escape(&u, it->sid);
		pisb_buf_adds(&u, "/renew-expiration");
		it->url = pisb_buf_detach(&u);
	}
	it->sent_at = pisb_now_ms() / 1000;
	it->want_ms = pisb_now_ms() + it->cfg->os.timeout_seconds * 1000;
	it->reread = false;
	os_renew_body_at(it->want_ms, it->body);
	memset(&it->call, 0, sizeof(it->call));
	it->call.method = "POST";
	it->call.url = it->url;
	it->call.headers = k->hdrs;
	it->key = k;
	it->call.body = it->body;
	it->call.nbody = strlen(it->body);
	it->call.max_body = 1 << 20;
	pisb_http_resp_init(&it->r);
	return 1;
}

static char *expires_of(const struct pisb_http_resp *r)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;
	char *s = NULL;

	if (r->body.len && pisb_json_parse(&j, r->body.s, r->body.len, &ig) == 0) {
		s = pisb_json_str(&j, pisb_json_get(&j, 0, "expiresAt"));
		pisb_json_release(&j);
	}
	return s;
}

/* The GET after a refused renewal, on the same handle. */
static void reread(struct item *it)
{
	struct pisb_buf u = PISB_BUF_INIT;

	pisb_buf_addf(&u, "%s://%s/v1/sandboxes/", it->cfg->os.protocol, it->cfg->os.domain);
	pisb_http_escape(&u, it->sid);
	free(it->url);
	it->url = pisb_buf_detach(&u);
	it->reread = true;
	it->call.method = "GET";
	it->call.url = it->url;
	it->call.body = NULL;
	it->call.nbody = 0;
	pisb_http_resp_release(&it->r);
	pisb_http_resp_init(&it->r);
	pisb_http_setup(it->h, &it->call, &it->r);
}

enum { RENEWED, FAILED, GONE, NOEXP, KEPT };

/* Record the outcome of one request (still under its lock).  Returns 1
 * when the renewal was refused (409 or 400) and the sandbox must be read
 * again (reread() set up the GET), else 0. */
static int finish(struct pass *p, struct item *it, CURLcode rc)
{
	struct pisb_err e = PISB_ERR_INIT, ig = PISB_ERR_INIT;
	struct pisb_runtime rt;
	struct os_extra x;
	const char *state;
	int64_t now = pisb_now_ms() / 1000;
	int outcome;
	char what[300];
	_cleanup_free_ char *ex = NULL;
	struct os_conn c;

	snprintf(what, sizeof(what), "the OpenSandbox server at %s://%s", it->cfg->os.protocol,
		 it->cfg->os.domain);
	memset(&c, 0, sizeof(c));
	c.what = what;
	c.have_key = it->key->have_key;
	c.key_source = it->key->source;
	if (pisb_http_done(it->h, rc, &it->r, what, &e) < 0) {
		outcome = FAILED;
	} else if (it->r.status == 404) {
		outcome = GONE;
		snprintf(e.msg, sizeof(e.msg), "sandbox %s no longer exists on the server: it expired or was deleted",
			 it->sid);
	} else if (!it->reread && (it->r.status == 409 || it->r.status == 400)) {
		/* 409 is any state conflict, not "no expiration": ask the
		 * sandbox what its expiry is now */
		os_fail(&c, &it->r, "renew", &e);
		snprintf(it->refused, sizeof(it->refused), "%s", e.msg);
		reread(it);
		return 1;
	} else if (it->r.status != 200) {
		os_fail(&c, &it->r, it->reread ? "read the sandbox after a refused renewal" : "renew", &e);
		outcome = FAILED;
	} else {
		ex = expires_of(&it->r);
		if (!it->reread)
			outcome = RENEWED;
		else if (!ex)
			outcome = NOEXP;
		else if (os_time_ms(ex) >= it->want_ms)
			outcome = KEPT;
		else {
			outcome = FAILED;
			snprintf(e.msg, sizeof(e.msg), "%s (the sandbox still expires at %s)", it->refused, ex);
		}
	}
	if (pisb_runtime_load(it->idir, &rt, &ig) < 0)
		memset(&rt, 0, sizeof(rt));
	os_extra_parse(rt.extra_json, &x);
	if (!x.sandbox_id)
		x.sandbox_id = xstrdup(it->sid);
	state = rt.state[0] ? rt.state : "running";
	if (ex) {
		free(x.expires_at);
		x.expires_at = xstrdup(ex);
	}
	switch (outcome) {
	case RENEWED:
	case KEPT:
		x.renewed_at = it->sent_at;
		x.next_renew_at = it->sent_at + os_renew_interval(it->cfg->os.timeout_seconds);
		x.failures = 0;
		x.no_expiry = false;
		if (outcome == RENEWED) {
			os_log(it->idir, "renewed sandbox %s: expires %s", it->sid, ex ? ex : "(not said)");
			pisb_strv_push(&p->renewed, it->name);
		} else {
			os_log(it->idir, "renew refused (%s), but sandbox %s already expires at %s: kept",
			       it->refused, it->sid, ex);
			skip(p, it->name, "it already expires at %s, later than a renewal would set", ex);
		}
		break;
	case GONE:
		state = "gone";
		free(x.remote_state);
		x.remote_state = NULL;
		free(x.last_error);
		x.last_error = xstrdup(e.msg);
		x.last_error_at = now;
		os_log(it->idir, "renew failed: %s", e.msg);
		add_pair(&p->failed, "name", it->name, "error", e.msg);
		p->nfailed++;
		break;
	case NOEXP:
		x.no_expiry = true;
		x.next_renew_at = 0;
		os_log(it->idir, "renew refused (%s); sandbox %s has no automatic expiration: no more renewals",
		       it->refused, it->sid);
		skip(p, it->name, "the server says it has no automatic expiration");
		break;
	default:
		free(x.last_error);
		x.last_error = xstrdup(e.msg);
		x.last_error_at = now;
		x.failures++;
		os_log(it->idir, "renew failed (retried at the next pass): %s", e.msg);
		add_pair(&p->failed, "name", it->name, "error", e.msg);
		p->nfailed++;
		break;
	}
	x.checked_at = now;
	os_status_save(it->idir, &rt, state, &x, false, &ig);
	os_extra_release(&x);
	pisb_runtime_release(&rt);
	item_close(it);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool wanted(const struct pass *p, const char *name)
{
	if (!p->o || !p->o->nnames)
		return true;
	for (size_t i = 0; i < p->o->nnames; i++)
		if (!strcmp(p->o->names[i], name))
			return true;
	return false;
}

/* The candidates: opensandbox instances that look due (cheap checks). */
static void scan(struct pass *p, struct pisb_strv *cand)
{
	_cleanup_strv_ struct pisb_strv names = PISB_STRV_INIT;
	int fd = openat(p->st->fd, "instances", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (pisb_name_valid(de->d_name) && wanted(p, de->d_name))
			pisb_strv_push(&names, de->d_name);
	closedir(d);
	if (names.n)
		qsort(names.v, names.n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < names.n; i++) {
		struct pisb_err e = PISB_ERR_INIT;
		_cleanup_close_ int idir = pisb_instance_open(p->st, "instances", names.v[i], &e);
		struct pisb_record rec;
		struct pisb_runtime rt;
		struct os_extra x;
		long long timeout = 3600;
		char why[256];

		if (idir < 0 || pisb_record_load(idir, &rec, &e) < 0)
			continue;
		if (strcmp(rec.driver, "opensandbox")) {
			pisb_record_release(&rec);
			continue;
		}
		if (pisb_runtime_load(idir, &rt, &e) < 0) {
			add_pair(&p->failed, "name", names.v[i], "error", e.msg);
			p->nfailed++;
			pisb_record_release(&rec);
			continue;
		}
		{
			/* the timeout is in the record's remote object: no
			 * config parse for sandboxes that are not due */
			struct pisb_json j;
			struct pisb_err ig = PISB_ERR_INIT;
			if (rec.remote_json &&
			    pisb_json_parse(&j, rec.remote_json, strlen(rec.remote_json), &ig) == 0) {
				long long v;
				if (pisb_json_int(&j, pisb_json_get(&j, 0, "timeoutSeconds"), &v) == 0 && v > 0)
					timeout = v;
				pisb_json_release(&j);
			}
		}
		os_extra_parse(rt.extra_json, &x);
		if (due(&rt, &x, &rec, timeout, p->now, p->force, why, sizeof(why)))
			pisb_strv_push(cand, names.v[i]);
		else
			skip(p, names.v[i], "%s", why);
		os_extra_release(&x);
		pisb_runtime_release(&rt);
		pisb_record_release(&rec);
	}
}

static void more_files(int need)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)need &&
	    rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max < (rlim_t)need ? rl.rlim_max : (rlim_t)need;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int pisb_os_renew_pass(struct pisb_state *st, const struct pisb_renew_opts *o,
		       struct pisb_jw *w, struct pisb_err *e)
{
	struct pass p;
	_cleanup_strv_ struct pisb_strv cand = PISB_STRV_INIT;
	int par = o && o->parallel > 0 ? o->parallel : 256;
	long tmo = o && o->timeout_ms > 0 ? o->timeout_ms : 30000;
	struct item *items;
	CURL **pool;
	CURLM *m;
	size_t next = 0, npool = 0;
	int inflight = 0;

	memset(&p, 0, sizeof(p));
	p.st = st;
	p.o = o;
	p.now = pisb_now_ms() / 1000;
	/* named ones: each must be an opensandbox instance, renewed now */
	for (size_t i = 0; o && i < o->nnames; i++) {
		_cleanup_close_ int idir = pisb_instance_open(st, "instances", o->names[i], e);
		struct pisb_record rec;
		bool os;

		if (idir < 0)
			return -1;
		if (pisb_record_load(idir, &rec, e) < 0)
			return -1;
		os = !strcmp(rec.driver, "opensandbox");
		if (!os)
			pisb_err_set(e, PISB_EXIT_USAGE,
				     "sandbox '%s' uses driver '%s': only opensandbox sandboxes are renewed",
				     o->names[i], rec.driver);
		pisb_record_release(&rec);
		if (!os)
			return -1;
		p.force = true;
	}
	pisb_http_init();
	more_files(par * 4 + 64);
	scan(&p, &cand);
	items = xcalloc(cand.n + 1, sizeof(*items));
	pool = xcalloc((size_t)par, sizeof(*pool));
	m = curl_multi_init();
	if (!m) {
		free(items);
		free(pool);
		keys_release(&p);
		return pisb_err_set(e, PISB_EXIT_PISB, "curl_multi_init failed");
	}
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)par);
	for (size_t i = 0; i < cand.n; i++) {
		items[i].name = cand.v[i];
		items[i].idir = items[i].lock = -1;
	}
	while (next < cand.n || inflight > 0) {
		int running, q;
		CURLMsg *msg;

		while (inflight < par && next < cand.n) {
			struct item *it = &items[next++];
			if (prepare(&p, it) != 1)
				continue;
			it->h = npool ? pool[--npool] : curl_easy_init();
			if (!it->h) {
				add_pair(&p.failed, "name", it->name, "error", "curl_easy_init failed");
				p.nfailed++;
				item_close(it);
				continue;
			}
			it->call.timeout_ms = tmo;
			pisb_http_setup(it->h, &it->call, &it->r);
			curl_multi_add_handle(m, it->h);
			inflight++;
		}
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &q))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			for (size_t i = 0; i < next; i++) {
				struct item *it = &items[i];
				if (it->h != msg->easy_handle)
					continue;
				{
					CURL *h = it->h;
					CURLcode rc = msg->data.result;
					curl_multi_remove_handle(m, h);
					if (finish(&p, it, rc) == 1) {
						curl_multi_add_handle(m, h);
						break;
					}
					it->h = NULL;
					pool[npool++] = h;
				}
				inflight--;
				break;
			}
		}
		if (inflight > 0)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	for (size_t i = 0; i < npool; i++)
		curl_easy_cleanup(pool[i]);
	curl_multi_cleanup(m);
	free(pool);
	free(items);
	keys_release(&p);

	pisb_jw_obj(w);
	pisb_jw_key(w, "renewed");
	pisb_jw_arr(w);
	for (size_t i = 0; i < p.renewed.n; i++)
		pisb_jw_str(w, p.renewed.v[i]);
	pisb_jw_arr_end(w);
	{
		_cleanup_buf_ struct pisb_buf a = PISB_BUF_INIT;
		pisb_buf_addf(&a, "[%s]", p.failed.s ? p.failed.s : "");
		pisb_jw_key(w, "failed");
		pisb_jw_raw(w, a.s, a.len);
		pisb_buf_reset(&a);
		pisb_buf_addf(&a, "[%s]", p.skipped.s ? p.skipped.s : "");
		pisb_jw_key(w, "skipped");
		pisb_jw_raw(w, a.s, a.len);
	}
	pisb_jw_obj_end(w);
	pisb_strv_release(&p.renewed);
	pisb_buf_release(&p.failed);
	pisb_buf_release(&p.skipped);
	return p.nfailed;
}
