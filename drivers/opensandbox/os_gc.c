/* os_gc.c - nothing orphaned: the opensandbox part of `pisb gc`, and the
 * same sweep for one name at `pisb create` (see opensandbox.h).
 *
 * Every sandbox pisb creates carries metadata (os_internal.h OS_MD_*):
 * pi-extension=pisb, pisb-state (this state directory on this host),
 * pisb-instance (the create's intent id, written into the staged
 * record.json before the POST), pisb-policy, pisb-name.  So whatever
 * killed a create, one of these holds:
 *   - the staged record exists and its op.lock is free: the create died
 *     before it published; its sandbox, if the POST got through, is found
 *     on the server by pisb-instance and killed, then the staging entry
 *     is removed (kept while its server cannot be asked);
 *   - the instance is published but still "creating" with op.lock free:
 *     it died while the sandbox provisioned or ran setup; killed and
 *     removed (destroy);
 *   - nothing local names the sandbox (a record removed by hand, or a
 *     POST that the server finished after its creator died and after a gc
 *     cleaned the staging entry): pisb-policy is applied to it.
 * A create that never finished is undone whatever its policy: the policy
 * is for a sandbox a session was handed.  A published instance whose
 * owner (--owner-pid) is gone gets its recorded policy (pisb_os_release:
 * kill, pause, keep; a connected one is only disconnected).
 *
 * Order matters against a create running meanwhile: the server is listed
 * first, then staging/, then instances/ (a create moves from the one to
 * the other, never back), so a sandbox that a live create made is always
 * matched to a record whose op.lock is held, and never touched.  Only
 * sandboxes whose pisb-state is ours are listed: another pisb's (another
 * state directory or host) are never seen.
 */
#include "opensandbox.h"
#include "os_internal.h"
#include "driver.h"
#include "err.h"
#include "gc.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const policy_word[] = { "kill", "pause", "keep" };

struct local {
	char *dir;                 /* "staging/x.RND" or "instances/x" */
	char *name;
	char *iid;                 /* remote.instanceId, or NULL */
	bool staging, busy;
	struct pisb_config *cfg;
};

struct locals {
	struct local *v;
	size_t n;
};

static void locals_release(struct locals *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].dir);
		free(l->v[i].name);
		free(l->v[i].iid);
		if (l->v[i].cfg)
			pisb_config_free(l->v[i].cfg);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static char *instance_id_of(const struct pisb_record *rec)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;
	char *s = NULL;

	if (rec->remote_json && pisb_json_parse(&j, rec->remote_json, strlen(rec->remote_json), &ig) == 0) {
		s = pisb_json_str(&j, pisb_json_get(&j, 0, "instanceId"));
		pisb_json_release(&j);
	}
	return s;
}

/* The opensandbox records in DIR (staging or instances). */
static void scan_dir(struct pisb_state *st, const char *dir, struct locals *l)
{
	int fd = openat(st->fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		struct pisb_err e = PISB_ERR_INIT;
		struct pisb_record rec;
		struct local x;
		_cleanup_close_ int idir = -1;

		if (de->d_name[0] == '.')
			continue;
		idir = openat(fd, de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (idir < 0 || pisb_record_load(idir, &rec, &e) < 0)
			continue;
		if (strcmp(rec.driver, "opensandbox")) {
			pisb_record_release(&rec);
			continue;
		}
		memset(&x, 0, sizeof(x));
		x.dir = xasprintf("%s/%s", dir, de->d_name);
		x.name = xstrdup(rec.name ? rec.name : de->d_name);
		x.iid = instance_id_of(&rec);
		x.staging = !strcmp(dir, "staging");
		x.busy = pisb_lock_is_held(idir, "op.lock");
		if (pisb_record_config(&rec, &x.cfg, &e) < 0 || !x.cfg->os.present) {
			if (x.cfg)
				pisb_config_free(x.cfg);
			x.cfg = NULL;
		}
		pisb_record_release(&rec);
		l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
		l->v[l->n++] = x;
	}
	closedir(d);
}

static void scan(struct pisb_state *st, struct locals *l)
{
	scan_dir(st, "staging", l);
	scan_dir(st, "instances", l);
}

static const struct local *find_iid(const struct locals *l, const char *iid)
{
	for (size_t i = 0; iid && i < l->n; i++)
		if (l->v[i].iid && !strcmp(l->v[i].iid, iid))
			return &l->v[i];
	return NULL;
}

bool os_same_server(const struct pisb_os_config *a, const struct pisb_os_config *b)
{
	return !strcmp(a->domain, b->domain) && !strcmp(a->protocol, b->protocol) &&
	       !strcmp(a->api_key_file ? a->api_key_file : "", b->api_key_file ? b->api_key_file : "");
}

void os_remotes_free(struct os_remote *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].iid);
		free(v[i].policy);
		free(v[i].name);
		free(v[i].state);
		free(v[i].expires);
	}
	free(v);
}

int os_list_ours(struct os_conn *c, const struct pisb_state *st, const char *name,
		 int timeout_ms, struct os_remote **out, size_t *n, struct pisb_err *e)
{
	char ident[64], label[64];
	int page = 1;
	bool more = true;

	*out = NULL;
	*n = 0;
	os_state_label(st, ident);
	while (more) {
		_cleanup_buf_ struct pisb_buf q = PISB_BUF_INIT, path = PISB_BUF_INIT;
		struct pisb_http_resp r;
		struct pisb_json j;
		int items, pg;

		pisb_buf_addf(&q, "pi-extension=pisb&%s=%s", OS_MD_STATE, ident);
		if (name) {
			os_label_value(name, label);
			pisb_buf_addf(&q, "&%s=%s", OS_MD_NAME, label);
		}
		pisb_buf_adds(&path, "/sandboxes?metadata=");
		pisb_http_escape(&path, q.s);
		pisb_buf_addf(&path, "&pageSize=200&page=%d", page);
		pisb_http_resp_init(&r);
		if (os_lc(c, "GET", path.s, NULL, timeout_ms, &r, e) < 0) {
			pisb_http_resp_release(&r);
			return -1;
		}
		if (r.status != 200) {
			os_fail(c, &r, "list sandboxes", e);
			pisb_http_resp_release(&r);
			return -1;
		}
		if (pisb_json_parse(&j, r.body.s, r.body.len, e) < 0) {
			pisb_http_resp_release(&r);
			return pisb_err_set(e, PISB_EXIT_BACKEND, "list sandboxes: the server's answer is not JSON");
		}
		items = pisb_json_get(&j, 0, "items");
		for (int k = 0; items >= 0 && k < j.tok[items].size; k++) {
			int it = pisb_json_at(&j, items, k);
			int md = pisb_json_get(&j, it, "metadata");
			struct os_remote x;

			x.id = pisb_json_str(&j, pisb_json_get(&j, it, "id"));
			x.state = pisb_json_str(&j, pisb_json_get(&j, pisb_json_get(&j, it, "status"), "state"));
			x.expires = pisb_json_str(&j, pisb_json_get(&j, it, "expiresAt"));
			x.iid = md >= 0 ? pisb_json_str(&j, pisb_json_get(&j, md, OS_MD_INSTANCE)) : NULL;
			x.policy = md >= 0 ? pisb_json_str(&j, pisb_json_get(&j, md, OS_MD_POLICY)) : NULL;
			x.name = md >= 0 ? pisb_json_str(&j, pisb_json_get(&j, md, OS_MD_NAME)) : NULL;
			if (!x.id) {
				free(x.iid);
				free(x.policy);
				free(x.name);
				free(x.state);
				free(x.expires);
				continue;
			}
			*out = xrealloc(*out, (*n + 1) * sizeof(**out));
			(*out)[(*n)++] = x;
		}
		pg = pisb_json_get(&j, 0, "pagination");
		more = false;
		if (pg >= 0)
			pisb_json_bool(&j, pisb_json_get(&j, pg, "hasNextPage"), &more);
		pisb_json_release(&j);
		pisb_http_resp_release(&r);
		if (++page > 1000)
			break;
	}
	return 0;
}

static int remote_op(struct os_conn *c, const char *sid, const char *method, const char *what,
		     struct pisb_err *e)
{
	struct pisb_http_resp r;
	_cleanup_free_ char *path = !strcmp(method, "DELETE") ? xasprintf("/sandboxes/%s", sid)
							       : xasprintf("/sandboxes/%s/pause", sid);
	int ret = 0;

	pisb_http_resp_init(&r);
	if (os_lc(c, method, path, NULL, 0, &r, e) < 0)
		ret = -1;
	else if (r.status != 204 && r.status != 200 && r.status != 202 && r.status != 404 &&
		 !(r.status == 409 && strcmp(method, "DELETE")))
		ret = os_fail(c, &r, what, e);
	pisb_http_resp_release(&r);
	return ret;
}

static int policy_of(const char *w)
{
	for (int i = 0; i < 3; i++)
		if (w && !strcmp(w, policy_word[i]))
			return i;
	return PISB_POLICY_KILL;
}

struct sweep {
	struct pisb_state *st;
	bool dry_run;
	struct pisb_gc_report *r;     /* NULL: create's sweep, nothing reported */
};

static void report(struct sweep *s, struct pisb_gc_list *l, const char *kind, const char *name,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void report(struct sweep *s, struct pisb_gc_list *l, const char *kind, const char *name,
		   const char *fmt, ...)
{
	char tmp[2048];
	va_list ap;

	if (!s->r)
		return;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	pisb_gc_report_add(l, kind, name, tmp);
}

#define R(list) (s->r ? &s->r->list : NULL)

/* One server: its sandboxes of ours matched against the local records
 * (read after the list), and the staging entries of that server. */
static void sweep_server(struct sweep *s, const struct pisb_os_config *os, const char *name)
{
	struct os_conn c;
	struct pisb_err e = PISB_ERR_INIT;
	struct os_remote *rv = NULL;
	size_t rn = 0;
	_cleanup_free_ bool *fail = NULL;
	struct locals l = { 0 };
	_cleanup_free_ char *srv = xasprintf("%s://%s", os->protocol, os->domain);

	if (os_conn_init(&c, os, NULL, &e) < 0) {
		report(s, R(failed), "opensandbox", srv, "%s: staged creates kept", e.msg);
		return;
	}
	if (os_list_ours(&c, s->st, name, 30000, &rv, &rn, &e) < 0) {
		report(s, R(failed), "opensandbox", srv, "%s: its staged creates are kept until it answers",
		       e.msg);
		os_conn_release(&c);
		return;
	}
	scan(s->st, &l);
	fail = xcalloc(rn + 1, sizeof(*fail));
	for (size_t i = 0; i < rn; i++) {
		const struct local *x = find_iid(&l, rv[i].iid);
		struct pisb_err ke = PISB_ERR_INIT;
		int policy;
		const char *why;

		if (x && (!x->staging || x->busy))
			continue;   /* an instance (its own sweep), or a live create */
		if (x) {
			policy = PISB_POLICY_KILL;
			why = "its create was interrupted before it finished";
		} else {
			policy = policy_of(rv[i].policy);
			why = "no local record names it";
		}
		if (policy == PISB_POLICY_KEEP) {
			report(s, R(kept), "opensandbox", rv[i].id, "%s; policy keep", why);
			continue;
		}
		if (!s->dry_run &&
		    remote_op(&c, rv[i].id, policy == PISB_POLICY_KILL ? "DELETE" : "POST",
			      policy == PISB_POLICY_KILL ? "kill" : "pause", &ke) < 0) {
			report(s, R(failed), "opensandbox", rv[i].id, "%s: %s", why, ke.msg);
			fail[i] = true;
			continue;
		}
		report(s, policy == PISB_POLICY_KILL ? R(removed) : R(cleaned), "opensandbox", rv[i].id,
		       "%s (on %s, instance %s): %s", why, srv, rv[i].iid ? rv[i].iid : "?",
		       policy == PISB_POLICY_KILL ? "killed" : "paused");
	}
	/* the staging entries of this server: nothing of theirs is left on it */
	for (size_t i = 0; i < l.n; i++) {
		struct local *x = &l.v[i];
		struct pisb_err re = PISB_ERR_INIT;
		bool failed = false;

		if (!x->staging || x->busy || !x->cfg || !os_same_server(&x->cfg->os, os))
			continue;
		if (name && strcmp(x->name, name))
			continue;
		for (size_t k = 0; k < rn; k++)
			if (fail[k] && x->iid && rv[k].iid && !strcmp(x->iid, rv[k].iid))
				failed = true;
		if (failed)
			continue;
		if (!s->dry_run && pisb_rm_rf_at(s->st->fd, x->dir, &re) < 0)
			report(s, R(failed), "staging", x->dir, "%s", re.msg);
		else
			report(s, R(cleaned), "staging", x->dir,
			       "left over from an interrupted create of '%s' (nothing of it is left on %s)",
			       x->name, srv);
	}
	locals_release(&l);
	os_remotes_free(rv, rn);
	os_conn_release(&c);
}

/* The published instances: interrupted creates undone, dead owners'
 * policy applied. */
static void sweep_instances(struct sweep *s, const struct locals *l)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct local *x = &l->v[i];
		struct pisb_err e = PISB_ERR_INIT;
		_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
		const struct pisb_record *rec;
		struct pisb_runtime rt;
		struct pisb_lc_opts o = { .events_fd = -1 };
		bool dead, creating;
		int policy;

		if (x->staging)
			continue;
		if (pisb_sandbox_open(&sb, s->st, x->name, &e) < 0)
			continue;
		if (x->busy) {
			report(s, R(kept), "sandbox", x->name, "busy: another pisb command holds its lock");
			continue;
		}
		if (!x->cfg) {
			report(s, R(kept), "sandbox", x->name,
			       "its record has no usable opensandbox settings: not touched");
			continue;
		}
		if (!(rec = pisb_sandbox_record(&sb, &e)) || pisb_runtime_load(sb.idir, &rt, &e) < 0) {
			report(s, R(kept), "sandbox", x->name, "unreadable state (%s): not touched", e.msg);
			continue;
		}
		dead = rec->owner.pid > 0 && !pisb_proc_id_alive(&rec->owner);
		creating = !strcmp(rt.state, "creating");
		policy = (int)x->cfg->os.on_shutdown;
		if (creating) {
			if (!s->dry_run && pisb_os_destroy(&sb, &o, &e) < 0)
				report(s, R(failed), "sandbox", x->name, "interrupted create: %s", e.msg);
			else
				report(s, R(removed), "sandbox", x->name,
				       "its create was interrupted before it finished: the remote sandbox killed");
		} else if (dead && !strcmp(rt.state, "gone")) {
			if (!s->dry_run && pisb_state_trash(s->st, "instances", x->name, &e) < 0)
				report(s, R(failed), "sandbox", x->name, "%s", e.msg);
			else
				report(s, R(removed), "sandbox", x->name,
				       "owner pid %d is gone and the server no longer has the sandbox",
				       (int)rec->owner.pid);
		} else if (dead && policy == PISB_POLICY_KEEP) {
			report(s, R(kept), "sandbox", x->name, "owner pid %d is gone; policy keep",
			       (int)rec->owner.pid);
		} else if (dead && policy == PISB_POLICY_PAUSE && !strcmp(rt.state, "paused")) {
			report(s, R(kept), "sandbox", x->name, "owner pid %d is gone; paused (policy pause)",
			       (int)rec->owner.pid);
		} else if (dead) {
			if (!s->dry_run && pisb_os_release(&sb, &o, &e) < 0)
				report(s, e.code == PISB_EXIT_BUSY ? R(kept) : R(failed), "sandbox", x->name,
				       "owner pid %d is gone: %s", (int)rec->owner.pid, e.msg);
			else
				report(s, policy == PISB_POLICY_KILL ? R(removed) : R(cleaned), "sandbox", x->name,
				       "owner pid %d is gone: policy %s applied", (int)rec->owner.pid,
				       policy_word[policy]);
		} else {
			report(s, R(kept), "sandbox", x->name, "opensandbox: %s", rt.state);
		}
		pisb_runtime_release(&rt);
	}
}

int pisb_os_gc(struct pisb_state *st, bool dry_run, struct pisb_gc_report *r,
	       struct pisb_err *e)
{
	struct sweep s = { st, dry_run, r };
	struct locals l = { 0 };
	const struct pisb_os_config **servers = NULL;
	size_t ns = 0;

	(void)e;
	scan(st, &l);
	sweep_instances(&s, &l);
	for (size_t i = 0; i < l.n; i++) {
		bool seen = false;
		if (!l.v[i].cfg || !l.v[i].cfg->os.domain)
			continue;
		for (size_t k = 0; k < ns; k++)
			if (os_same_server(servers[k], &l.v[i].cfg->os))
				seen = true;
		if (!seen) {
			servers = xrealloc(servers, (ns + 1) * sizeof(*servers));
			servers[ns++] = &l.v[i].cfg->os;
		}
	}
	for (size_t k = 0; k < ns; k++)
		sweep_server(&s, servers[k], NULL);
	free(servers);
	locals_release(&l);
	return 0;
}

void os_gc_name(struct pisb_state *st, const struct pisb_os_config *os, const char *name)
{
	struct sweep s = { st, false, NULL };

	sweep_server(&s, os, name);
}

bool pisb_os_gc_staged(int dirfd)
{
	struct pisb_record rec;
	struct pisb_err e = PISB_ERR_INIT;
	bool ours;

	if (pisb_record_load(dirfd, &rec, &e) < 0)
		return false;
	ours = rec.driver && !strcmp(rec.driver, "opensandbox") && rec.remote_json &&
	       strstr(rec.remote_json, "\"instanceId\"");
	pisb_record_release(&rec);
	return ours;
}
