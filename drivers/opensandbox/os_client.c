/* os_client.c - the OpenSandbox lifecycle API and execd, over libcurl.
 *
 * The wire as it really behaves (shared/reference/opensandbox.md §1-2):
 * lifecycle under {protocol}://{domain}/v1 with OPEN-SANDBOX-API-KEY;
 * execd at {protocol}://{endpoint of port 44772} (the endpoint has no
 * scheme) with the headers the endpoint answer carries.  The API key is
 * never sent to execd.
 */
#include "os_internal.h"
#include "err.h"
#include "json.h"
#include "state.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int os_ready_ms(void)
{
	const char *v = getenv("PISB_OS_READY_MS");
	long long n;

	if (v && pisb_parse_ll(v, 100, 3600 * 1000, &n) == 0)
		return (int)n;
	return 180 * 1000;
}

/* ---- signals during create, and who we are ---- */

volatile sig_atomic_t os_stop_sig;
static void on_stop(int sig) { os_stop_sig = sig; }
static const int stop_sigs[3] = { SIGINT, SIGTERM, SIGHUP };

void os_stop_catch(struct os_sigsave *sv)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	os_stop_sig = 0;
	for (int i = 0; i < 3; i++)
		sigaction(stop_sigs[i], &sa, &sv->old[i]);
}

void os_stop_restore(struct os_sigsave *sv)
{
	for (int i = 0; i < 3; i++)
		sigaction(stop_sigs[i], &sv->old[i], NULL);
}

int os_stop_check(struct pisb_err *e)
{
	int sig = os_stop_sig;

	if (!sig)
		return 0;
	return pisb_err_set(e, 128 + sig, "interrupted by %s", sig == SIGINT ? "SIGINT" :
			    sig == SIGTERM ? "SIGTERM" : "SIGHUP");
}

void os_state_label(const struct pisb_state *st, char out[64])
{
	char host[256] = "";
	uint64_t h = 1469598103934665603ULL;
	const char *parts[2] = { host, st->path ? st->path : "" };

	gethostname(host, sizeof(host) - 1);
	for (int k = 0; k < 2; k++)
		for (const char *p = parts[k];; p++) {
			h ^= (unsigned char)*p;
			h *= 1099511628211ULL;
			if (!*p)
				break;
		}
	snprintf(out, 64, "s%016llx", (unsigned long long)h);
}

/* ---- the key ---- */

int os_load_key(const struct pisb_os_config *os, char **key,
		const char **source, struct pisb_err *e)
{
	*key = NULL;
	*source = NULL;
	if (os->api_key_file) {
		_cleanup_close_ int fd = open(os->api_key_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		struct pisb_buf b = PISB_BUF_INIT;
		struct stat sb;

		if (fd < 0)
			return pisb_err_sys(e, PISB_EXIT_USAGE, "opensandbox.apiKeyFile '%s'",
					    os->api_key_file);
		if (fstat(fd, &sb) < 0)
			return pisb_err_sys(e, PISB_EXIT_USAGE, "stat '%s'", os->api_key_file);
		if (!S_ISREG(sb.st_mode))
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "opensandbox.apiKeyFile '%s' is not a regular file",
					    os->api_key_file);
		if ((sb.st_mode & 0077) != 0)
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "opensandbox.apiKeyFile '%s' has mode %04o: it must be 0600 (run: chmod 600 '%s')",
					    os->api_key_file, (unsigned)(sb.st_mode & 07777), os->api_key_file);
		if (pisb_read_fd(fd, &b, 64 * 1024) < 0) {
			pisb_buf_release(&b);
			return pisb_err_sys(e, PISB_EXIT_USAGE, "read '%s'", os->api_key_file);
		}
		while (b.len && (b.s[b.len - 1] == '\n' || b.s[b.len - 1] == '\r' ||
				 b.s[b.len - 1] == ' ' || b.s[b.len - 1] == '\t'))
			b.s[--b.len] = '\0';
		if (!b.len || strchr(b.s, '\n') || strchr(b.s, '\r')) {
			pisb_buf_release(&b);
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "opensandbox.apiKeyFile '%s' must hold the key on one line",
					    os->api_key_file);
		}
		*key = pisb_buf_detach(&b);
		*source = "opensandbox.apiKeyFile";
		return 0;
	}
	{
		const char *k = getenv("OPEN_SANDBOX_API_KEY");
		if (k && *k) {
			if (strchr(k, '\n') || strchr(k, '\r'))
				return pisb_err_set(e, PISB_EXIT_USAGE,
						    "OPEN_SANDBOX_API_KEY must not contain a line break");
			*key = xstrdup(k);
			*source = "OPEN_SANDBOX_API_KEY";
		}
	}
	return 0;
}

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void os_conn_init_key(struct os_conn *c, const struct pisb_os_config *os,
		      const char *sid, const char *key, const char *source)
{
	memset(c, 0, sizeof(*c));
	pisb_http_init();
	c->lc_base = xasprintf("%s://%s/v1", os->protocol ? os->protocol : "http", os->domain);
	c->what = xasprintf("the OpenSandbox server at %s://%s", os->protocol ? os->protocol : "http",
			    os->domain);
	c->sid = sid ? xstrdup(sid) : NULL;
	c->key_source = source;
	c->lc_hdrs = curl_slist_append(NULL, "Accept: application/json");
	c->lc_hdrs = curl_slist_append(c->lc_hdrs, "Content-Type: application/json");
	c->lc_hdrs = curl_slist_append(c->lc_hdrs, "Expect:");
	if (key) {
		_cleanup_free_ char *h = xasprintf("OPEN-SANDBOX-API-KEY: %s", key);
		c->lc_hdrs = curl_slist_append(c->lc_hdrs, h);
		explicit_bzero(h, strlen(h));
		c->have_key = true;
	}
	c->h = curl_easy_init();
}

int os_conn_init(struct os_conn *c, const struct pisb_os_config *os,
		 const char *sid, struct pisb_err *e)
{
	char *key = NULL;
	const char *source = NULL;

	memset(c, 0, sizeof(*c));
	if (os_load_key(os, &key, &source, e) < 0)
		return -1;
	os_conn_init_key(c, os, sid, key, source);
	wipe_free(key);
	if (!c->h) {
		os_conn_release(c);
		return pisb_err_set(e, PISB_EXIT_PISB, "curl_easy_init failed");
	}
	return 0;
}

void os_conn_release(struct os_conn *c)
{
	/* the key is in a header string inside lc_hdrs: wipe it */
	for (struct curl_slist *s = c->lc_hdrs; s; s = s->next)
		explicit_bzero(s->data, strlen(s->data));
	/* only what was made: any curl_* call dlopen()s libcurl and its 20
	 * libraries, and list releases a connection never made for each
	 * sandbox of another driver (3 ms of CPU per 'pisb list') */
	if (c->lc_hdrs)
		curl_slist_free_all(c->lc_hdrs);
	if (c->ex_hdrs)
		curl_slist_free_all(c->ex_hdrs);
	if (c->h)
		curl_easy_cleanup(c->h);
	free(c->lc_base);
	free(c->what);
	free(c->sid);
	free(c->execd);
	memset(c, 0, sizeof(*c));
}

/* ---- requests ---- */

int os_lc(struct os_conn *c, const char *method, const char *path,
	  const char *json, long timeout_ms, struct pisb_http_resp *r,
	  struct pisb_err *e)
{
	_cleanup_free_ char *url = xasprintf("%s%s", c->lc_base, path);
	struct pisb_http_call call = { 0 };

	call.method = method;
	call.url = url;
	call.headers = c->lc_hdrs;
	call.body = json;
	call.nbody = json ? strlen(json) : 0;
	call.timeout_ms = timeout_ms ? timeout_ms : OS_LC_TIMEOUT_MS;
	call.max_body = 16 << 20;
	pisb_http_resp_release(r);
	return pisb_http_run(c->h, &call, r, c->what, e);
}

int os_execd(struct os_conn *c, const char *method, const char *path,
	     const char *ctype, const void *body, size_t n, long timeout_ms,
	     struct pisb_http_resp *r, struct pisb_err *e)
{
	_cleanup_free_ char *url = xasprintf("%s%s", c->execd, path);
	_cleanup_free_ char *ct = NULL;
	struct curl_slist *h = NULL;
	struct pisb_http_call call = { 0 };
	int ret;

	for (struct curl_slist *s = c->ex_hdrs; s; s = s->next)
		h = curl_slist_append(h, s->data);
	h = curl_slist_append(h, "Expect:");
	if (ctype) {
		ct = xasprintf("Content-Type: %s", ctype);
		h = curl_slist_append(h, ct);
	}
	call.method = method;
	call.url = url;
	call.headers = h;
	call.body = body;
	call.nbody = n;
	call.timeout_ms = timeout_ms;
	call.stall_ms = timeout_ms ? 0 : 120000;
	pisb_http_resp_release(r);
	ret = pisb_http_run(c->h, &call, r, "the sandbox's execd", e);
	curl_slist_free_all(h);
	return ret;
}

/* Message of an error body: {code,message}, execd's {error}, FastAPI's
 * {detail:[{loc,msg}]} or {detail:"..."}, or plain text. */
static void error_text(const struct pisb_http_resp *r, struct pisb_buf *out)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;

	if (r->body.len && pisb_json_parse(&j, r->body.s, r->body.len, &ig) == 0) {
		_cleanup_free_ char *code = pisb_json_str(&j, pisb_json_get(&j, 0, "code"));
		_cleanup_free_ char *msg = pisb_json_str(&j, pisb_json_get(&j, 0, "message"));
		_cleanup_free_ char *err = pisb_json_str(&j, pisb_json_get(&j, 0, "error"));
		int d = pisb_json_get(&j, 0, "detail");

		if (code)
			pisb_buf_addf(out, "%s: ", code);
		if (msg)
			pisb_buf_adds(out, msg);
		else if (err)
			pisb_buf_adds(out, err);
		else if (d >= 0 && pisb_json_is_str(&j, d)) {
			_cleanup_free_ char *s = pisb_json_str(&j, d);
			pisb_buf_adds(out, s ? s : "");
		} else if (d >= 0 && j.tok[d].type == JSMN_ARRAY) {
			for (int i = 0; i < j.tok[d].size && i < 4; i++) {
				int it = pisb_json_at(&j, d, i);
				int loc = pisb_json_get(&j, it, "loc");
				_cleanup_free_ char *m = pisb_json_str(&j, pisb_json_get(&j, it, "msg"));
				if (i)
					pisb_buf_adds(out, "; ");
				if (loc >= 0 && j.tok[loc].type == JSMN_ARRAY) {
					for (int k = 0; k < j.tok[loc].size; k++) {
						size_t n;
						const char *s = pisb_json_raw(&j, pisb_json_at(&j, loc, k), &n);
						if (s)
							pisb_buf_addf(out, "%s%.*s", k ? "." : "", (int)n, s);
					}
					pisb_buf_adds(out, ": ");
				}
				pisb_buf_adds(out, m ? m : "invalid");
			}
		}
		pisb_json_release(&j);
	}
	if (!out->len && r->body.len) {
		size_t n = r->body.len < 300 ? r->body.len : 300;
		for (size_t i = 0; i < n; i++)
			pisb_buf_addc(out, (unsigned char)r->body.s[i] < 0x20 ? ' ' : r->body.s[i]);
	}
	while (out->len && (out->s[out->len - 1] == ' ' || out->s[out->len - 1] == ':'))
		out->s[--out->len] = '\0';
	if (!out->len)
		pisb_buf_adds(out, "no details");
}

int os_fail(const struct os_conn *c, const struct pisb_http_resp *r,
	    const char *action, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf t = PISB_BUF_INIT;

	error_text(r, &t);
	if (r->status == 401 || r->status == 403) {
		if (!c->have_key)
			return pisb_err_set(e, PISB_EXIT_BACKEND,
					    "%s: %s refused the request (%ld %s): no API key was given (set opensandbox.apiKeyFile or OPEN_SANDBOX_API_KEY)",
					    action, c->what, r->status, t.s);
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "%s: %s rejected the API key from %s (%ld %s)",
				    action, c->what, c->key_source ? c->key_source : "the environment",
				    r->status, t.s);
	}
	return pisb_err_set(e, r->status == 404 ? PISB_EXIT_NOTFOUND : PISB_EXIT_BACKEND,
			    "%s: %ld %s", action, r->status, t.s);
}

/* ---- lifecycle steps ---- */

int os_get(struct os_conn *c, char state[32], char expires[64], long timeout_ms,
	   struct pisb_err *e)
{
	struct pisb_http_resp r;
	struct pisb_json j;
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s", c->sid);
	char *s;
	int ret = -1;

	pisb_http_resp_init(&r);
	state[0] = '\0';
	expires[0] = '\0';
	if (os_lc(c, "GET", path, NULL, timeout_ms, &r, e) < 0)
		goto out;
	if (r.status == 404) {
		ret = 1;
		goto out;
	}
	if (r.status != 200) {
		os_fail(c, &r, "get sandbox", e);
		goto out;
	}
	if (pisb_json_parse(&j, r.body.s, r.body.len, e) < 0) {
		pisb_err_set(e, PISB_EXIT_BACKEND, "get sandbox: the server's answer is not JSON");
		goto out;
	}
	s = pisb_json_str(&j, pisb_json_get(&j, pisb_json_get(&j, 0, "status"), "state"));
	snprintf(state, 32, "%s", s ? s : "Unknown");
	free(s);
	s = pisb_json_str(&j, pisb_json_get(&j, 0, "expiresAt"));
	snprintf(expires, 64, "%s", s ? s : "");
	free(s);
	pisb_json_release(&j);
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}

static int post_empty(struct os_conn *c, const char *op, struct pisb_http_resp *r,
		      struct pisb_err *e)
{
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s/%s", c->sid, op);
	return os_lc(c, "POST", path, NULL, 0, r, e);
}

int os_ensure_running(struct os_conn *c, const char *name, bool *resumed,
		      struct pisb_err *e)
{
	int64_t deadline = pisb_mono_ms() + OS_READY_MS;
	bool sent = false;
	char state[32], exp[64];

	*resumed = false;
	for (;;) {
		int g;

		if (os_stop_check(e) < 0)
			return -1;
		g = os_get(c, state, exp, 0, e);
		if (g < 0)
			return -1;
		if (g == 1)
			return pisb_err_set(e, PISB_EXIT_BACKEND,
					    "sandbox '%s' (%s) no longer exists on the server: it expired or was deleted",
					    name, c->sid);
		if (!strcmp(state, "Running"))
			return 0;
		if (!strcmp(state, "Paused") && !sent) {
			struct pisb_http_resp r;
			pisb_http_resp_init(&r);
			if (post_empty(c, "resume", &r, e) < 0) {
				pisb_http_resp_release(&r);
				return -1;
			}
			/* 409: someone else resumed it meanwhile; look again */
			if (r.status != 202 && r.status != 200 && r.status != 204 && r.status != 409) {
				os_fail(c, &r, "resume", e);
				pisb_http_resp_release(&r);
				return pisb_err_prefix(e, "sandbox '%s'", name);
			}
			pisb_http_resp_release(&r);
			sent = true;
			*resumed = true;
			continue;
		}
		if (!strcmp(state, "Failed") || !strcmp(state, "Terminated") ||
		    !strcmp(state, "Stopping"))
			return pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s' (%s) is %s on the server",
					    name, c->sid, state);
		/* Pending, Allocated, Pausing, Resuming, Paused after our
		 * resume, Unknown: wait */
		if (pisb_mono_ms() > deadline)
			return pisb_err_set(e, PISB_EXIT_BACKEND,
					    "sandbox '%s' (%s) did not become Running within %d s (it is %s)",
					    name, c->sid, OS_READY_MS / 1000, state);
		nap_ms(100);
	}
}

int os_execd_resolve(struct os_conn *c, struct pisb_err *e)
{
	struct pisb_http_resp r;
	struct pisb_json j;
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s/endpoints/%d", c->sid, OS_EXECD_PORT);
	_cleanup_free_ char *ep = NULL;
	int hd, ret = -1;

	pisb_http_resp_init(&r);
	if (os_lc(c, "GET", path, NULL, 0, &r, e) < 0)
		goto out;
	if (r.status != 200) {
		os_fail(c, &r, "resolve the sandbox's execd endpoint", e);
		if (r.status == 404)
			e->code = PISB_EXIT_BACKEND;
		goto out;
	}
	if (pisb_json_parse(&j, r.body.s, r.body.len, e) < 0) {
		pisb_err_set(e, PISB_EXIT_BACKEND, "endpoint: the server's answer is not JSON");
		goto out;
	}
	ep = pisb_json_str(&j, pisb_json_get(&j, 0, "endpoint"));
	if (!ep || !*ep) {
		pisb_json_release(&j);
		pisb_err_set(e, PISB_EXIT_BACKEND, "endpoint: the server's answer has no endpoint");
		goto out;
	}
	free(c->execd);
	/* the endpoint has no scheme; prepend ours unless it already has one */
	if (pisb_str_starts(ep, "http://") || pisb_str_starts(ep, "https://"))
		c->execd = xstrdup(ep);
	else {
		const char *proto = strstr(c->lc_base, "https://") == c->lc_base ? "https" : "http";
		c->execd = xasprintf("%s://%s", proto, ep);
	}
	while (strlen(c->execd) > 8 && c->execd[strlen(c->execd) - 1] == '/')
		c->execd[strlen(c->execd) - 1] = '\0';
	curl_slist_free_all(c->ex_hdrs);
	c->ex_hdrs = NULL;
	hd = pisb_json_get(&j, 0, "headers");
	if (hd >= 0 && j.tok[hd].type == JSMN_OBJECT) {
		int i = hd + 1;
		for (int k = 0; k < j.tok[hd].size; k++) {
			_cleanup_free_ char *hk = pisb_json_str(&j, i);
			_cleanup_free_ char *hv = pisb_json_str(&j, i + 1);
			if (hk && hv && !strpbrk(hk, "\r\n:") && !strpbrk(hv, "\r\n")) {
				_cleanup_free_ char *line = xasprintf("%s: %s", hk, hv);
				c->ex_hdrs = curl_slist_append(c->ex_hdrs, line);
			}
			i = pisb_json_skip(&j, i + 1);
		}
	}
	pisb_json_release(&j);
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}

int os_execd_wait(struct os_conn *c, int timeout_ms, struct pisb_err *e)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	struct pisb_http_resp r;
	int ret = -1;

	pisb_http_resp_init(&r);
	for (;;) {
		struct pisb_err pe = PISB_ERR_INIT;
		if (os_stop_check(e) < 0)
			break;
		if (os_execd(c, "GET", "/ping", NULL, NULL, 0, 5000, &r, &pe) == 0 &&
		    r.status == 200) {
			ret = 0;
			break;
		}
		if (pisb_mono_ms() > deadline) {
			if (pe.msg[0])
				pisb_err_set(e, PISB_EXIT_BACKEND, "the sandbox's execd does not answer: %s", pe.msg);
			else
				os_fail(c, &r, "the sandbox's execd does not answer /ping", e);
			e->code = PISB_EXIT_BACKEND;
			break;
		}
		nap_ms(200);
	}
	pisb_http_resp_release(&r);
	return ret;
}

int64_t os_time_ms(const char *s)
{
	struct tm tm;
	const char *p;
	int64_t t, ms = 0;
	int digits = 0;

	if (!s || !*s)
		return 0;
	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return 0;
	t = (int64_t)timegm(&tm);
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			if (digits++ < 3)
				ms = ms * 10 + (*p - '0');
	while (digits > 0 && digits < 3) {
		ms *= 10;
		digits++;
	}
	if ((*p == '+' || *p == '-') && isdigit((unsigned char)p[1])) {
		int hh = 0, mm = 0;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) >= 1)
			t -= (*p == '+' ? 1 : -1) * (int64_t)(hh * 3600 + mm * 60);
	}
	return t * 1000 + ms;
}

void os_renew_body_at(int64_t ms, char out[96])
{
	char ts[32];

	pisb_time_rfc3339(ms / 1000, ts);
	ts[strlen(ts) - 1] = '\0';   /* drop the Z */
	snprintf(out, 96, "{\"expiresAt\":\"%s.%03dZ\"}", ts, (int)(ms % 1000));
}

int os_renew(struct os_conn *c, long long seconds, const char *current, char expires[64],
	     int *outcome, struct pisb_err *e)
{
	struct pisb_http_resp r;
	char body[96], state[32];
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s/renew-expiration", c->sid);
	/* milliseconds matter: with whole seconds a short TTL could be
	 * renewed to less than itself */
	int64_t want = pisb_now_ms() + seconds * 1000, cur = os_time_ms(current);
	int ret = -1, g;

	*outcome = OS_RENEWED;
	expires[0] = '\0';
	if (cur >= want) {
		/* never shorten: the current expiry is later than ours */
		snprintf(expires, 64, "%s", current);
		*outcome = OS_RENEW_KEPT;
		return 0;
	}
	os_renew_body_at(want, body);
	pisb_http_resp_init(&r);
	if (os_lc(c, "POST", path, body, 0, &r, e) < 0)
		goto out;
	if (r.status == 409 || r.status == 400) {
		/* 409 is any state conflict, 400 a time the server refuses:
		 * what the sandbox says now decides */
		struct pisb_err fe = PISB_ERR_INIT;
		os_fail(c, &r, "renew", &fe);
		g = os_get(c, state, expires, 0, e);
		if (g < 0)
			goto out;
		if (g == 1) {
			pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox %s no longer exists on the server", c->sid);
			goto out;
		}
		if (!expires[0]) {
			*outcome = OS_RENEW_NOEXP;
		} else if (os_time_ms(expires) >= want) {
			*outcome = OS_RENEW_KEPT;
		} else {
			pisb_err_set(e, PISB_EXIT_BACKEND, "%s (the sandbox still expires at %s)", fe.msg, expires);
			goto out;
		}
		ret = 0;
		goto out;
	}
	if (r.status != 200) {
		os_fail(c, &r, "renew", e);
		goto out;
	}
	{
		struct pisb_json j;
		struct pisb_err ig = PISB_ERR_INIT;
		if (pisb_json_parse(&j, r.body.s, r.body.len, &ig) == 0) {
			_cleanup_free_ char *s = pisb_json_str(&j, pisb_json_get(&j, 0, "expiresAt"));
			snprintf(expires, 64, "%s", s ? s : "");
			pisb_json_release(&j);
		}
	}
	ret = 0;
out:
	pisb_http_resp_release(&r);
	return ret;
}
