/* opensandbox.c - the opensandbox driver's lifecycle: create, connect,
 * start (resume), stop (pause or disconnect), destroy (kill or
 * disconnect), session release, and the instance files (see
 * opensandbox.h).
 *
 * Ordering that matters:
 * - create publishes the instance as soon as the server has given the
 *   sandbox an id, so that a pisb killed while it waits still leaves a
 *   record that destroy can use; every later failure kills the sandbox
 *   and removes the instance again.
 * - stop, destroy and release take renew.lock (blocking) before any
 *   request: a renewal in flight finishes first, and none starts while
 *   the sandbox is paused, killed or disconnected.
 * - a connected sandbox is renewed once before the instance exists, so
 *   the renewal timer (pisb renew) starts from a fresh expiry.
 */
#include "opensandbox.h"
#include "project.h"
#include "os_internal.h"
#include "config.h"
#include "err.h"
#include "events.h"
#include "lifecycle.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const policy_word[] = { "kill", "pause", "keep" };

/* ---- status.json "extra" ---- */

void os_extra_release(struct os_extra *x)
{
	free(x->sandbox_id);
	free(x->remote_state);
	free(x->expires_at);
	free(x->last_error);
	free(x->unreachable);
	memset(x, 0, sizeof(*x));
}

void os_extra_parse(const char *json, struct os_extra *x)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;
	long long v;

	memset(x, 0, sizeof(*x));
	if (!json || pisb_json_parse(&j, json, strlen(json), &ig) < 0)
		return;
	x->sandbox_id = pisb_json_str(&j, pisb_json_get(&j, 0, "sandboxId"));
	pisb_json_bool(&j, pisb_json_get(&j, 0, "createdByPisb"), &x->created);
	x->remote_state = pisb_json_str(&j, pisb_json_get(&j, 0, "state"));
	x->expires_at = pisb_json_str(&j, pisb_json_get(&j, 0, "expiresAt"));
	pisb_json_bool(&j, pisb_json_get(&j, 0, "noExpiration"), &x->no_expiry);
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "renewedAt"), &v) == 0)
		x->renewed_at = v;
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "nextRenewAt"), &v) == 0)
		x->next_renew_at = v;
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "checkedAt"), &v) == 0)
		x->checked_at = v;
	x->last_error = pisb_json_str(&j, pisb_json_get(&j, 0, "lastRenewError"));
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "lastRenewErrorAt"), &v) == 0)
		x->last_error_at = v;
	if (pisb_json_int(&j, pisb_json_get(&j, 0, "renewFailures"), &v) == 0)
		x->failures = (int)v;
	x->unreachable = pisb_json_str(&j, pisb_json_get(&j, 0, "unreachable"));
	pisb_json_release(&j);
}

char *os_extra_json(const struct os_extra *x)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "sandboxId", x->sandbox_id);
	pisb_jw_kbool(&w, "createdByPisb", x->created);
	pisb_jw_kstr(&w, "state", x->remote_state);
	pisb_jw_kstr(&w, "expiresAt", x->expires_at);
	pisb_jw_kbool(&w, "noExpiration", x->no_expiry);
	pisb_jw_kint(&w, "renewedAt", x->renewed_at);
	pisb_jw_kint(&w, "nextRenewAt", x->next_renew_at);
	pisb_jw_kint(&w, "checkedAt", x->checked_at);
	pisb_jw_kstr(&w, "lastRenewError", x->last_error);
	pisb_jw_kint(&w, "lastRenewErrorAt", x->last_error_at);
	pisb_jw_kint(&w, "renewFailures", x->failures);
	pisb_jw_kstr(&w, "unreachable", x->unreachable);
	pisb_jw_obj_end(&w);
	return pisb_buf_detach(&b);
}

/* status.json with "state" and "extra" replaced and every other member
 * kept as it is, renamed into place without fsync.  Only for the renewal
 * pass's bookkeeping: 1,000 sandboxes would otherwise cost 2,000 fsyncs
 * on the pass's one thread, and losing an update in a crash only makes
 * the next pass renew that sandbox again. */
static int save_nosync(int idir, const char *state, const char *extra, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf old = PISB_BUF_INIT, b = PISB_BUF_INIT;
	struct pisb_json j;
	struct pisb_jw w;
	char tmp[64];
	int fd;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	if (pisb_read_file_at(idir, "status.json", &old, 1 << 20) == 0 && old.len &&
	    pisb_json_parse(&j, old.s, old.len, e) == 0) {
		if (j.tok[0].type == JSMN_OBJECT) {
			int i = 1;
			for (int k = 0; k < j.tok[0].size && i > 0; k++) {
				_cleanup_free_ char *key = pisb_json_str(&j, i);
				size_t n;
				const char *raw = pisb_json_raw(&j, i + 1, &n);
				if (key && raw && strcmp(key, "state") && strcmp(key, "extra")) {
					pisb_jw_key(&w, key);
					pisb_jw_raw(&w, raw, n);
				}
				i = pisb_json_skip(&j, i + 1);
			}
		}
		pisb_json_release(&j);
	}
	pisb_jw_kstr(&w, "state", state);
	pisb_jw_key(&w, "extra");
	pisb_jw_raw(&w, extra, strlen(extra));
	pisb_jw_obj_end(&w);
	pisb_buf_addc(&b, '\n');
	snprintf(tmp, sizeof(tmp), ".status.json.renew.%d", (int)getpid());
	fd = openat(idir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "create '%s'", tmp);
	if (pisb_write_all(fd, b.s, b.len) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "write '%s'", tmp);
		close(fd);
		unlinkat(idir, tmp, 0);
		return -1;
	}
	close(fd);
	if (renameat(idir, tmp, idir, "status.json") < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "rename '%s'", tmp);
		unlinkat(idir, tmp, 0);
		return -1;
	}
	return 0;
}

int os_status_save(int idir, struct pisb_runtime *rt, const char *state,
		   const struct os_extra *x, bool sync, struct pisb_err *e)
{
	char st[sizeof(rt->state)];

	snprintf(st, sizeof(st), "%s", state);   /* state may be rt->state */
	memcpy(rt->state, st, sizeof(st));
	free(rt->extra_json);
	rt->extra_json = os_extra_json(x);
	if (!sync)
		return save_nosync(idir, rt->state, rt->extra_json, e);
	return pisb_runtime_save(idir, rt, e);
}

void os_log(int idir, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pisb_log_vappend(idir, "remote.log", fmt, ap);
	va_end(ap);
}

int64_t os_renew_interval(long long timeout_seconds)
{
	long long half = timeout_seconds / 2;

	if (half > 3600)
		half = 3600;
	return half < 1 ? 1 : half;
}

/* ---- record.json "remote" ---- */

static char *remote_json(const struct pisb_config *cfg, const char *sid, bool created,
			 const char *instance_id)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "sandboxId", sid);
	if (instance_id)
		pisb_jw_kstr(&w, "instanceId", instance_id);
	pisb_jw_kbool(&w, "createdByPisb", created);
	pisb_jw_kstr(&w, "domain", cfg->os.domain);
	pisb_jw_kstr(&w, "protocol", cfg->os.protocol);
	pisb_jw_kint(&w, "timeoutSeconds", cfg->os.timeout_seconds);
	pisb_jw_kstr(&w, "policy", policy_word[cfg->os.on_shutdown]);
	pisb_jw_obj_end(&w);
	return pisb_buf_detach(&b);
}

static void remote_parse(const char *json, char **sid, bool *created)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;

	*sid = NULL;
	*created = false;
	if (!json || pisb_json_parse(&j, json, strlen(json), &ig) < 0)
		return;
	*sid = pisb_json_str(&j, pisb_json_get(&j, 0, "sandboxId"));
	pisb_json_bool(&j, pisb_json_get(&j, 0, "createdByPisb"), created);
	pisb_json_release(&j);
}

/* ---- instances ---- */

void os_inst_release(struct os_inst *t)
{
	if (!t->borrowed) {
		if (t->idir >= 0)
			close(t->idir);
		pisb_record_release(&t->rec);
		if (t->cfg)
			pisb_config_free(t->cfg);
	}
	pisb_runtime_release(&t->rt);
	os_extra_release(&t->x);
	free(t->sid);
	free(t->name);
	os_conn_release(&t->c);
	memset(t, 0, sizeof(*t));
	t->idir = -1;
}

static int inst_finish(struct os_inst *t, struct pisb_err *e);

static int inst_load(struct pisb_state *st, const char *name, struct os_inst *t,
		     struct pisb_err *e)
{
	memset(t, 0, sizeof(*t));
	t->idir = pisb_instance_open(st, "instances", name, e);
	if (t->idir < 0)
		return -1;
	t->name = xstrdup(name);
	if (pisb_record_load(t->idir, &t->rec, e) < 0 ||
	    pisb_runtime_load(t->idir, &t->rt, e) < 0)
		goto fail;
	if (strcmp(t->rec.driver, "opensandbox")) {
		pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' uses driver '%s', not opensandbox",
			     name, t->rec.driver);
		goto fail;
	}
	if (pisb_record_config(&t->rec, &t->cfg, e) < 0)
		goto fail;
	if (inst_finish(t, e) < 0)
		goto fail;
	return 0;
fail:
	os_inst_release(t);
	return -1;
}

/* what both loads derive from the record, the config and status.json */
static int inst_finish(struct os_inst *t, struct pisb_err *e)
{
	const char *name = t->name;

	if (!t->cfg->os.present) {
		pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s': its record has no opensandbox settings", name);
		return -1;
	}
	remote_parse(t->rec.remote_json, &t->sid, &t->created);
	if (!t->sid) {
		pisb_err_set(e, PISB_EXIT_FAIL,
			     "sandbox '%s': creation never got a sandbox id from the server (destroy it with 'pisb destroy %s --confirm %s')",
			     name, name, name);
		return -1;
	}
	os_extra_parse(t->rt.extra_json, &t->x);
	if (!t->x.sandbox_id)
		t->x.sandbox_id = xstrdup(t->sid);
	t->x.created = t->created;
	return 0;
}

int os_inst_of(struct pisb_sandbox *sb, struct os_inst *t, struct pisb_err *e)
{
	memset(t, 0, sizeof(*t));
	t->borrowed = true;
	t->idir = sb->idir;
	t->name = xstrdup(sb->name);
	if (pisb_sandbox_borrow(sb, &t->rec, &t->cfg, &t->rt, e) < 0 || inst_finish(t, e) < 0) {
		os_inst_release(t);
		return -1;
	}
	if (os_conn_init(&t->c, &t->cfg->os, t->sid, e) < 0) {
		os_inst_release(t);
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	}
	return 0;
}

static int renew_lock(struct os_inst *t, struct pisb_err *e)
{
	char what[96];
	snprintf(what, sizeof(what), "sandbox '%s' (renewal)", t->name);
	return pisb_lock_acquire(t->idir, "renew.lock", true, -1, what, e);
}

static void mark_gone(struct os_inst *t)
{
	struct pisb_err ig = PISB_ERR_INIT;
	_cleanup_close_ int lk = -1;

	lk = pisb_lock_acquire(t->idir, "renew.lock", true, 5000, "renewal", &ig);
	free(t->x.remote_state);
	t->x.remote_state = NULL;
	t->x.checked_at = pisb_now_ms() / 1000;
	if (strcmp(t->rt.state, "gone"))
		os_log(t->idir, "sandbox %s no longer exists on the server", t->sid);
	os_status_save(t->idir, &t->rt, "gone", &t->x, true, &ig);
}

static int inst_ready(struct os_inst *t, bool resume, bool named, struct pisb_err *e);

int os_inst_ready(struct os_inst *t, struct pisb_err *e)
{
	return inst_ready(t, true, true, e);
}

/* for the project's reader (project_archive), whose caller names the
 * sandbox (driver.h): its messages do not */
int os_inst_running(struct os_inst *t, struct pisb_err *e)
{
	return inst_ready(t, false, false, e);
}

/* named: the messages start with the sandbox's name */
static int inst_ready(struct os_inst *t, bool resume, bool named, struct pisb_err *e)
{
	char state[32], exp[64];
	int g = os_get(&t->c, state, exp, 0, e);

	if (g < 0)
		return named ? pisb_err_prefix(e, "sandbox '%s'", t->name) : -1;
	if (g == 1) {
		mark_gone(t);
		return named ? pisb_err_set(e, PISB_EXIT_BACKEND,
					    "sandbox '%s' (%s) no longer exists on the server: it expired or was deleted",
					    t->name, t->sid)
			     : pisb_err_set(e, PISB_EXIT_BACKEND,
					    "%s no longer exists on the server: it expired or was deleted", t->sid);
	}
	if (strcmp(state, "Running") && !resume)
		return named ? pisb_err_set(e, PISB_EXIT_BACKEND,
					    "sandbox '%s' is not running (the server has it %s; start it with 'pisb start %s')",
					    t->name, state, t->name)
			     : pisb_err_set(e, PISB_EXIT_BACKEND,
					    "the server has it %s, not running (start it with 'pisb start %s')",
					    state, t->name);
	if (strcmp(state, "Running")) {
		/* paused (or on its way): resume before use, as one lifecycle
		 * change that no renewal overlaps */
		_cleanup_close_ int lk = renew_lock(t, e);
		bool resumed = false;
		struct pisb_err ig = PISB_ERR_INIT;

		if (lk < 0)
			return -1;
		if (os_ensure_running(&t->c, t->name, &resumed, e) < 0) {
			if (strstr(e->msg, "no longer exists"))
				mark_gone(t);
			return -1;
		}
		if (resumed)
			os_log(t->idir, "resumed sandbox %s before use", t->sid);
		free(t->x.remote_state);
		t->x.remote_state = xstrdup("Running");
		t->x.checked_at = pisb_now_ms() / 1000;
		pisb_runtime_release(&t->rt);
		if (pisb_runtime_load(t->idir, &t->rt, &ig) == 0) {
			struct os_extra cur;
			os_extra_parse(t->rt.extra_json, &cur);
			/* keep what a renewal wrote meanwhile */
			free(cur.remote_state);
			cur.remote_state = xstrdup("Running");
			cur.checked_at = t->x.checked_at;
			if (!cur.sandbox_id)
				cur.sandbox_id = xstrdup(t->sid);
			cur.created = t->created;
			os_status_save(t->idir, &t->rt, "running", &cur, true, &ig);
			os_extra_release(&cur);
		}
	} else if (strcmp(t->rt.state, "running")) {
		struct pisb_err ig = PISB_ERR_INIT;
		_cleanup_close_ int lk = renew_lock(t, &ig);
		free(t->x.remote_state);
		t->x.remote_state = xstrdup("Running");
		if (lk >= 0)
			os_status_save(t->idir, &t->rt, "running", &t->x, true, &ig);
	}
	if (os_execd_resolve(&t->c, e) < 0 || os_execd_wait(&t->c, 30000, e) < 0)
		return named ? pisb_err_prefix(e, "sandbox '%s'", t->name) : -1;
	return 0;
}

char *os_path(const struct os_inst *t, const char *p)
{
	const char *ws = t->cfg->os.workspace ? t->cfg->os.workspace : "/workspace";

	if (!p || !*p || !strcmp(p, "."))
		return xstrdup(ws);
	if (p[0] == '/')
		return xstrdup(p);
	if (p[0] == '.' && p[1] == '/')
		p += 2;
	return xasprintf("%s%s%s", ws, ws[strlen(ws) - 1] == '/' ? "" : "/", p);
}

/* ---- events ---- */

static int emit(const struct pisb_lc_opts *o, const char *event, const char *name,
		const char *sid, const char *workspace, bool created, bool resumed,
		const char *mode, struct pisb_err *e)
{
	struct pisb_event ev = { event, name, "opensandbox", sid, workspace, created, resumed, mode };

	return pisb_lifecycle_event(o, &ev, e);
}

/* ---- create ---- */

/* Metadata values are Kubernetes label values: keep a session id that is
 * one, else send a hash of it. */
void os_label_value(const char *s, char out[64])
{
	size_t n = strlen(s);
	bool ok = n > 0 && n <= 63 && isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; ok && i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			ok = false;
	if (ok) {
		snprintf(out, 64, "%s", s);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ULL;
	}
	snprintf(out, 64, "h%016llx", (unsigned long long)h);
}

static void jw_map(struct pisb_jw *w, const struct pisb_map *m)
{
	for (size_t i = 0; i < m->n; i++)
		pisb_jw_kstr(w, m->v[i].key, m->v[i].val);
}

/* User metadata without the keys pisb sets itself (no key twice). */
static void jw_user_metadata(struct pisb_jw *w, const struct pisb_map *m)
{
	static const char *const ours[] = { "pi-extension", "pi-session-id", OS_MD_STATE,
					    OS_MD_INSTANCE, OS_MD_POLICY, OS_MD_NAME };
	for (size_t i = 0; i < m->n; i++) {
		bool skip = false;
		for (size_t k = 0; k < sizeof(ours) / sizeof(ours[0]); k++)
			if (!strcmp(m->v[i].key, ours[k]))
				skip = true;
		if (!skip)
			pisb_jw_kstr(w, m->v[i].key, m->v[i].val);
	}
}

static void jw_strs(struct pisb_jw *w, const char *key, char **v, size_t n)
{
	pisb_jw_key(w, key);
	pisb_jw_arr(w);
	for (size_t i = 0; i < n; i++)
		pisb_jw_str(w, v[i]);
	pisb_jw_arr_end(w);
}

/* network.allowedHosts entries may carry ":port" and be IP literals;
 * OpenSandbox's NetworkRule.target takes an FQDN or "*.domain" only (no
 * port, no IP yet: reference/opensandbox/sandbox-lifecycle.yml).  The
 * target for entry h (caller frees), or NULL for an IP literal. */
static char *egress_target(const char *h)
{
	const char *c = strrchr(h, ':');
	unsigned char bin[16];
	_cleanup_free_ char *host = c ? xstrndup(h, (size_t)(c - h)) : xstrdup(h);

	if (host[0] == '[' || inet_pton(AF_INET, host, bin) == 1)
		return NULL;
	return PISB_STEAL(host);
}

/* Refuse what OpenSandbox's egress cannot express (an IP literal) before
 * anything is staged.  A port it cannot express either: "host:port"
 * allows every port of host there (pisb.yaml(5) says so). */
static int egress_check(const struct pisb_config *cfg, const char *name, struct pisb_err *e)
{
	if (cfg->os.has_network_allowlist)
		return 0;   /* hostnames and *.domain only, validated */
	for (size_t i = 0; i < cfg->nallowed_hosts; i++) {
		_cleanup_free_ char *t = egress_target(cfg->allowed_hosts[i]);
		if (!t)
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "create '%s': network.allowedHosts[%zu]: '%s': OpenSandbox's egress policy takes hostnames and *.domain only, not an IP address",
					    name, i, cfg->allowed_hosts[i]);
	}
	return 0;
}

static void create_body(const struct pisb_config *cfg, const struct pisb_lc_opts *o,
			struct pisb_buf *b)
{
	const struct pisb_os_config *os = &cfg->os;
	struct pisb_jw w;
	char label[64];

	pisb_jw_init(&w, b);
	pisb_jw_obj(&w);
	if (os->image) {
		pisb_jw_key(&w, "image");
		pisb_jw_obj(&w);
		pisb_jw_kstr(&w, "uri", os->image);
		pisb_jw_obj_end(&w);
	} else {
		pisb_jw_kstr(&w, "snapshotId", os->snapshot_id);
	}
	pisb_jw_kint(&w, "timeout", os->timeout_seconds);
	pisb_jw_key(&w, "resourceLimits");
	pisb_jw_obj(&w);
	if (os->resource_limits.n) {
		jw_map(&w, &os->resource_limits);
	} else {
		/* the common profile/resources, in Kubernetes quantities */
		char cpu[16], mem[24];
		snprintf(cpu, sizeof(cpu), "%d", cfg->cpus);
		snprintf(mem, sizeof(mem), "%dGi", cfg->memory_gib);
		pisb_jw_kstr(&w, "cpu", cpu);
		pisb_jw_kstr(&w, "memory", mem);
	}
	pisb_jw_obj_end(&w);
	if (os->nentrypoint) {
		jw_strs(&w, "entrypoint", os->entrypoint, os->nentrypoint);
	} else {
		char *dflt[] = { "tail", "-f", "/dev/null" };
		jw_strs(&w, "entrypoint", dflt, 3);
	}
	/* the common env first, the opensandbox one wins */
	pisb_jw_key(&w, "env");
	pisb_jw_obj(&w);
	for (size_t i = 0; i < cfg->env.n; i++)
		if (!pisb_map_get(&os->env, cfg->env.v[i].key))
			pisb_jw_kstr(&w, cfg->env.v[i].key, cfg->env.v[i].val);
	jw_map(&w, &os->env);
	pisb_jw_obj_end(&w);
	pisb_jw_key(&w, "metadata");
	pisb_jw_obj(&w);
	jw_user_metadata(&w, &os->metadata);
	pisb_jw_kstr(&w, "pi-extension", "pisb");
	/* what gc needs to find it if the create dies: whose (this state
	 * directory on this host), which intent, and what to do with it */
	if (o->instance_id) {
		char ident[64];
		os_state_label(o->state, ident);
		pisb_jw_kstr(&w, OS_MD_STATE, ident);
		pisb_jw_kstr(&w, OS_MD_INSTANCE, o->instance_id);
		pisb_jw_kstr(&w, OS_MD_POLICY, policy_word[cfg->os.on_shutdown]);
		os_label_value(o->name, label);
		pisb_jw_kstr(&w, OS_MD_NAME, label);
	}
	if (o->session_id && *o->session_id) {
		os_label_value(o->session_id, label);
		pisb_jw_kstr(&w, "pi-session-id", label);
	}
	pisb_jw_obj_end(&w);
	/* outbound traffic: denied unless allowed (DESIGN §10) */
	pisb_jw_key(&w, "networkPolicy");
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "defaultAction", "deny");
	pisb_jw_key(&w, "egress");
	pisb_jw_arr(&w);
	{
		char **hosts = os->has_network_allowlist ? os->network_allowlist : cfg->allowed_hosts;
		size_t n = os->has_network_allowlist ? os->nnetwork_allowlist : cfg->nallowed_hosts;
		_cleanup_strv_ struct pisb_strv sent = PISB_STRV_INIT;
		for (size_t i = 0; i < n; i++) {
			/* "host:port": the host (the policy has no ports, so
			 * every port of it is allowed), each target once */
			_cleanup_free_ char *t = egress_target(hosts[i]);
			bool dup = false;
			if (!t)
				continue;   /* refused by egress_check */
			for (size_t k = 0; k < sent.n; k++)
				dup |= !strcmp(sent.v[k], t);
			if (dup)
				continue;
			pisb_strv_push(&sent, t);
			pisb_jw_obj(&w);
			pisb_jw_kstr(&w, "action", "allow");
			pisb_jw_kstr(&w, "target", t);
			pisb_jw_obj_end(&w);
		}
	}
	pisb_jw_arr_end(&w);
	pisb_jw_obj_end(&w);
	if (os->nvolumes) {
		pisb_jw_key(&w, "volumes");
		pisb_jw_arr(&w);
		for (size_t i = 0; i < os->nvolumes; i++) {
			const struct pisb_os_volume *v = &os->volumes[i];
			pisb_jw_obj(&w);
			pisb_jw_kstr(&w, "name", v->name);
			pisb_jw_kstr(&w, "mountPath", v->mount_path);
			pisb_jw_kbool(&w, "readOnly", v->read_only);
			if (v->sub_path)
				pisb_jw_kstr(&w, "subPath", v->sub_path);
			if (v->is_pvc) {
				pisb_jw_key(&w, "pvc");
				pisb_jw_obj(&w);
				pisb_jw_kstr(&w, "claimName", v->claim_name);
				pisb_jw_kbool(&w, "createIfNotExists", v->create_if_not_exists);
				pisb_jw_kbool(&w, "deleteOnSandboxTermination", v->delete_on_termination);
				if (v->storage_class)
					pisb_jw_kstr(&w, "storageClass", v->storage_class);
				if (v->storage)
					pisb_jw_kstr(&w, "storage", v->storage);
				if (v->naccess_modes)
					jw_strs(&w, "accessModes", v->access_modes, v->naccess_modes);
				pisb_jw_obj_end(&w);
			} else {
				pisb_jw_key(&w, "ossfs");
				pisb_jw_obj(&w);
				pisb_jw_kstr(&w, "bucket", v->bucket);
				pisb_jw_kstr(&w, "endpoint", v->endpoint);
				if (v->version)
					pisb_jw_kstr(&w, "version", v->version);
				if (v->noptions)
					jw_strs(&w, "options", v->options, v->noptions);
				pisb_jw_kstr(&w, "accessKeyId", v->access_key_id);
				pisb_jw_kstr(&w, "accessKeySecret", v->access_key_secret);
				pisb_jw_obj_end(&w);
			}
			pisb_jw_obj_end(&w);
		}
		pisb_jw_arr_end(&w);
	}
	pisb_jw_obj_end(&w);
}

/* The config as stored in record.json: ossfs secrets replaced, so no
 * credential reaches the state directory. */
static char *stored_config(const struct pisb_config *cfg, const char *config_json)
{
	struct pisb_config *c = (struct pisb_config *)cfg;
	bool secret = false;
	char **saved;
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	for (size_t i = 0; i < cfg->os.nvolumes; i++)
		if (!cfg->os.volumes[i].is_pvc && cfg->os.volumes[i].access_key_secret)
			secret = true;
	if (!secret)
		return xstrdup(config_json);
	saved = xcalloc(cfg->os.nvolumes, sizeof(*saved));
	for (size_t i = 0; i < cfg->os.nvolumes; i++) {
		saved[i] = c->os.volumes[i].access_key_secret;
		if (saved[i])
			c->os.volumes[i].access_key_secret = "<redacted>";
	}
	pisb_jw_init(&w, &b);
	pisb_config_json(c, &w);
	for (size_t i = 0; i < cfg->os.nvolumes; i++)
		c->os.volumes[i].access_key_secret = saved[i];
	free(saved);
	return pisb_buf_detach(&b);
}

/* Stage instances/NAME: a staging dir with op.lock held, record.json and
 * a first status.json.  Returns the dir fd; *stage and *lock are set. */
static int stage(struct pisb_state *st, const struct pisb_config *cfg,
		 const char *config_json, const struct pisb_lc_opts *o, const char *sid,
		 bool created, char **stagep, int *lock, struct pisb_err *e)
{
	_cleanup_free_ char *dest = NULL, *stg = NULL, *cfgjson = NULL;
	_cleanup_close_ int sdir = -1;
	struct pisb_record rec;
	struct pisb_runtime rt;
	struct os_extra x;
	int r;

	*stagep = NULL;
	*lock = -1;
	dest = xasprintf("instances/%s", o->name);
	if (faccessat(st->fd, dest, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", o->name);
	sdir = pisb_instance_stage(st, o->name, &stg, lock, e);
	if (sdir < 0)
		return -1;
	cfgjson = stored_config(cfg, config_json);
	memset(&rec, 0, sizeof(rec));
	rec.name = (char *)o->name;
	rec.driver = "opensandbox";
	rec.created_at = pisb_now_ms() / 1000;
	rec.config_json = cfgjson;
	rec.owner.pid = o->owner_pid;
	rec.owner.start = o->owner_pid > 0 ? pisb_proc_start(o->owner_pid) : 0;
	rec.session_id = (char *)o->session_id;
	rec.remote_json = remote_json(cfg, sid, created, o->instance_id);
	r = pisb_record_save(sdir, &rec, e);
	free(rec.remote_json);
	if (r < 0)
		goto fail;
	memset(&rt, 0, sizeof(rt));
	memset(&x, 0, sizeof(x));
	x.sandbox_id = (char *)sid;
	x.created = created;
	rt.started_at = rec.created_at;
	r = os_status_save(sdir, &rt, "creating", &x, true, e);
	x.sandbox_id = NULL;
	pisb_runtime_release(&rt);
	if (r < 0)
		goto fail;
	*stagep = PISB_STEAL(stg);
	return pisb_steal_fd(&sdir);
fail:
	if (*lock >= 0)
		close(*lock);
	*lock = -1;
	{
		struct pisb_err ig = PISB_ERR_INIT;
		pisb_rm_rf_at(st->fd, stg, &ig);
	}
	return -1;
}

/* Record the sandbox id (create: known only now) and publish. */
static int publish(struct pisb_state *st, int sdir, const char *stg, const char *name,
		   const struct pisb_config *cfg, const char *sid, bool created,
		   const char *instance_id, struct pisb_err *e)
{
	_cleanup_free_ char *dest = xasprintf("instances/%s", name);
	struct pisb_record rec;
	int r;

	if (pisb_record_load(sdir, &rec, e) < 0)
		return -1;
	free(rec.remote_json);
	rec.remote_json = remote_json(cfg, sid, created, instance_id);
	r = pisb_record_save(sdir, &rec, e);
	pisb_record_release(&rec);
	if (r < 0)
		return -1;
	if (renameat2(st->fd, stg, st->fd, dest, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST)
			return pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", name);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "publish sandbox '%s'", name);
	}
	pisb_fsync_parent(st->fd, dest);
	return 0;
}

static int kill_remote(struct os_conn *c, struct pisb_err *e)
{
	struct pisb_http_resp r;
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s", c->sid);
	int ret = 0;

	pisb_http_resp_init(&r);
	if (os_lc(c, "DELETE", path, NULL, 0, &r, e) < 0)
		ret = -1;
	else if (r.status != 204 && r.status != 200 && r.status != 202 && r.status != 404)
		ret = os_fail(c, &r, "kill", e);
	pisb_http_resp_release(&r);
	return ret;
}

/* After create/connect's point of no return failed: kill (created) and
 * remove the instance, keeping the first error in e. */
static void undo(struct pisb_state *st, const char *name, int sdir, const char *stg,
		 bool published, struct os_conn *c, bool kill, struct pisb_err *e)
{
	struct pisb_err ke = PISB_ERR_INIT, ig = PISB_ERR_INIT;

	if (kill && c->sid) {
		if (kill_remote(c, &ke) < 0)
			pisb_err_set(e, e->code, "%s (and the sandbox %s could not be killed: %s)",
				     e->msg, c->sid, ke.msg);
		else if (sdir >= 0)
			os_log(sdir, "killed sandbox %s after a failed create", c->sid);
	}
	if (published)
		pisb_state_trash(st, "instances", name, &ig);
	else if (stg)
		pisb_rm_rf_at(st->fd, stg, &ig);
}

static int make_workspace(struct os_conn *c, const char *ws, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf body = PISB_BUF_INIT;
	struct pisb_http_resp r;
	struct pisb_jw w;
	int ret = 0;

	pisb_jw_init(&w, &body);
	pisb_jw_obj(&w);
	pisb_jw_key(&w, ws);
	pisb_jw_obj(&w);
	pisb_jw_kint(&w, "mode", 755);
	pisb_jw_obj_end(&w);
	pisb_jw_obj_end(&w);
	pisb_http_resp_init(&r);
	if (os_execd(c, "POST", "/directories", "application/json", body.s, body.len, 30000, &r, e) < 0)
		ret = -1;
	else if (r.status != 200)
		ret = os_fail(c, &r, "make the workspace", e);
	pisb_http_resp_release(&r);
	return ret;
}

/* Running + execd answering; then the status file says running. */
static int settle(int sdir, struct os_conn *c, const char *name, const char *expires,
		  bool created, bool *resumed, struct pisb_err *e)
{
	struct pisb_runtime rt;
	struct os_extra x;
	int64_t now;
	bool again = false;
	int r;

	if (os_ensure_running(c, name, &again, e) < 0 || os_execd_resolve(c, e) < 0 ||
	    os_execd_wait(c, OS_READY_MS, e) < 0)
		return -1;
	if (pisb_runtime_load(sdir, &rt, e) < 0)
		return -1;
	now = pisb_now_ms() / 1000;
	memset(&x, 0, sizeof(x));
	x.sandbox_id = xstrdup(c->sid);
	x.created = created;
	x.remote_state = xstrdup("Running");
	x.expires_at = expires && *expires ? xstrdup(expires) : NULL;
	x.renewed_at = now;
	x.checked_at = now;
	rt.started_at = now;
	r = os_status_save(sdir, &rt, "running", &x, true, e);
	os_extra_release(&x);
	pisb_runtime_release(&rt);
	if (again)
		*resumed = true;
	return r;
}

/* setup[] lines, then <workspace>/.agents/setup if executable, as the
 * local controller runs them: in the workspace, output to remote.log,
 * one 20-minute deadline.  A failure is recorded (inspect: setupError)
 * and the sandbox is kept, as locally. */
static void run_setup(int sdir, struct os_conn *c, const struct pisb_config *cfg)
{
	const char *ws = cfg->os.workspace ? cfg->os.workspace : "/workspace";
	int64_t deadline = pisb_mono_ms() + 20 * 60 * 1000;
	_cleanup_close_ int log = openat(sdir, "remote.log",
					 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	_cleanup_free_ char *agents = xasprintf("f=%s/.agents/setup; if [ -x \"$f\" ]; then exec \"$f\"; fi", ws);
	char *failed = NULL;

	for (size_t i = 0; i <= cfg->nsetup && !failed; i++) {
		const char *line = i < cfg->nsetup ? cfg->setup[i] : agents;
		int64_t left = deadline - pisb_mono_ms();
		struct os_run o = { .out_fd = log, .err_fd = log, .timeout_ms = left > 0 ? (int)left : 1 };
		struct pisb_err e = PISB_ERR_INIT;
		int code = 0;

		if (i < cfg->nsetup)
			os_log(sdir, "setup[%zu]: %s", i, line);
		if (left <= 0)
			failed = xasprintf("setup[%zu] '%s': the 20-minute setup deadline passed", i, line);
		else if (os_run_cmd(c, line, ws, NULL, 0, &o, &code, &e) < 0)
			failed = i < cfg->nsetup ? xasprintf("setup[%zu] '%s': %s", i, line, e.msg)
						 : xasprintf(".agents/setup: %s", e.msg);
		else if (code != 0)
			failed = i < cfg->nsetup ? xasprintf("setup[%zu] '%s' exited with %d", i, line, code)
						 : xasprintf(".agents/setup exited with %d", code);
	}
	if (failed) {
		struct pisb_err ig = PISB_ERR_INIT;
		os_log(sdir, "setup failed: %s (the sandbox runs anyway)", failed);
		if (pisb_runtime_note_setup_error(sdir, failed, &ig) < 0)
			os_log(sdir, "could not record the setup failure: %s", ig.msg);
	}
}

static void set_next(int sdir, long long timeout, bool noexp)
{
	struct pisb_runtime rt;
	struct os_extra x;
	struct pisb_err ig = PISB_ERR_INIT;

	if (pisb_runtime_load(sdir, &rt, &ig) < 0)
		return;
	os_extra_parse(rt.extra_json, &x);
	x.no_expiry = noexp;
	x.next_renew_at = noexp ? 0 : x.renewed_at + os_renew_interval(timeout);
	os_status_save(sdir, &rt, rt.state, &x, true, &ig);
	os_extra_release(&x);
	pisb_runtime_release(&rt);
}

static int create(struct pisb_state *st, const struct pisb_config *cfg,
		  const char *config_json, const struct pisb_lc_opts *o,
		  struct pisb_err *e);

int pisb_os_create(struct pisb_state *st, const struct pisb_config *cfg,
		   const char *config_json, const struct pisb_lc_opts *o,
		   struct pisb_err *e)
{
	struct pisb_lc_opts oo = *o;
	struct os_sigsave sv;
	char iid[33];
	int ret;

	/* the intent's id, recorded in the staged record before the POST
	 * and sent as metadata: whatever kills this create, gc finds the
	 * sandbox and the record by it */
	pisb_random_hex(iid, 16);
	oo.instance_id = iid;
	oo.state = st;
	if (cfg->os.present && cfg->os.domain && !cfg->os.sandbox_id)
		os_gc_name(st, &cfg->os, o->name);
	os_stop_catch(&sv);
	ret = create(st, cfg, config_json, &oo, e);
	os_stop_restore(&sv);
	return ret;
}

/* create --project: the copy pushed into the running sandbox before its
 * setup runs (project.h), its base kept in the instance */
static int seed_project(struct pisb_state *st, const char *name, const struct pisb_config *cfg,
			const char *dir, int sdir, struct pisb_err *e)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_project_stats s;

	if (pisb_sandbox_open(&sb, st, name, e) < 0 ||
	    pisb_project_seed_remote(&sb, dir, &cfg->project, &s, e) < 0)
		return pisb_err_prefix(e, "project '%s'", dir);
	os_log(sdir, "copied the project %s: %lld files, %lld bytes (%lld secrets left out)", dir,
	       s.files, s.bytes, s.secrets_hidden);
	return 0;
}

static int create(struct pisb_state *st, const struct pisb_config *cfg,
		  const char *config_json, const struct pisb_lc_opts *o,
		  struct pisb_err *e)
{
	struct os_conn c;
	_cleanup_free_ char *stg = NULL;
	_cleanup_close_ int sdir = -1, lock = -1;
	_cleanup_buf_ struct pisb_buf body = PISB_BUF_INIT;
	struct pisb_http_resp r;
	char expires[64] = "";
	bool resumed = false;
	int ret = -1;

	if (!pisb_name_valid(o->name))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "invalid name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)", o->name);
	if (!cfg->os.present)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "create '%s': driver opensandbox needs an opensandbox: section (domain, image or snapshotId)",
				    o->name);
	if (cfg->os.sandbox_id)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "create '%s': opensandbox.sandboxId names an existing sandbox: use 'pisb connect %s -f FILE'",
				    o->name, o->name);
	if (egress_check(cfg, o->name, e) < 0)
		return -1;
	pisb_http_resp_init(&r);
	if (os_conn_init(&c, &cfg->os, NULL, e) < 0)
		return pisb_err_prefix(e, "create '%s'", o->name);
	sdir = stage(st, cfg, config_json, o, NULL, true, &stg, &lock, e);
	if (sdir < 0)
		goto out;
	create_body(cfg, o, &body);
	if (os_stop_check(e) < 0 || os_lc(&c, "POST", "/sandboxes", body.s, 0, &r, e) < 0) {
		undo(st, o->name, sdir, stg, false, &c, false, e);
		goto out;
	}
	if (r.status != 202 && r.status != 200 && r.status != 201) {
		os_fail(&c, &r, "create sandbox", e);
		if (e->code == PISB_EXIT_NOTFOUND)
			e->code = PISB_EXIT_BACKEND;
		undo(st, o->name, sdir, stg, false, &c, false, e);
		goto out;
	}
	{
		struct pisb_json j;
		char *id = NULL, *ex = NULL;
		if (pisb_json_parse(&j, r.body.s, r.body.len, e) == 0) {
			id = pisb_json_str(&j, pisb_json_get(&j, 0, "id"));
			ex = pisb_json_str(&j, pisb_json_get(&j, 0, "expiresAt"));
			pisb_json_release(&j);
		}
		if (!id || !*id) {
			free(id);
			free(ex);
			pisb_err_set(e, PISB_EXIT_BACKEND, "create sandbox: the server's answer has no sandbox id");
			undo(st, o->name, sdir, stg, false, &c, false, e);
			goto out;
		}
		c.sid = id;
		snprintf(expires, sizeof(expires), "%s", ex ? ex : "");
		free(ex);
	}
	os_log(sdir, "created sandbox %s on %s", c.sid, c.what);
	if (os_stop_check(e) < 0) {
		/* a signal during the POST: the sandbox exists, kill it */
		undo(st, o->name, sdir, stg, false, &c, true, e);
		goto out;
	}
	if (publish(st, sdir, stg, o->name, cfg, c.sid, true, o->instance_id, e) < 0) {
		undo(st, o->name, sdir, stg, false, &c, true, e);
		goto out;
	}
	if (settle(sdir, &c, o->name, expires, true, &resumed, e) < 0 ||
	    make_workspace(&c, cfg->os.workspace, e) < 0) {
		undo(st, o->name, sdir, NULL, true, &c, true, e);
		goto out;
	}
	set_next(sdir, cfg->os.timeout_seconds, false);
	if (o->project && seed_project(st, o->name, cfg, o->project, sdir, e) < 0) {
		undo(st, o->name, sdir, NULL, true, &c, true, e);
		goto out;
	}
	run_setup(sdir, &c, cfg);
	if (os_stop_check(e) < 0) {
		undo(st, o->name, sdir, NULL, true, &c, true, e);
		goto out;
	}
	os_log(sdir, "sandbox %s is ready (expires %s)", c.sid, expires[0] ? expires : "never");
	/* the instance is complete: other commands may use it from here on */
	close(lock);
	lock = -1;
	if (o->ready) {
		o->ready->sandbox_id = xstrdup(c.sid);
		o->ready->workspace = cfg->os.workspace ? xstrdup(cfg->os.workspace) : NULL;
	}
	ret = 0;
out:
	if (ret < 0)
		pisb_err_prefix(e, "create '%s'%s", o->name,
				c.sid ? " (the sandbox was killed and the instance removed)" : "");
	pisb_http_resp_release(&r);
	os_conn_release(&c);
	return ret;
}

/* ---- connect ---- */

int pisb_os_connect(struct pisb_state *st, const struct pisb_config *cfg,
		    const char *config_json, const struct pisb_lc_opts *o,
		    struct pisb_err *e)
{
	struct os_conn c;
	_cleanup_free_ char *stg = NULL;
	_cleanup_close_ int sdir = -1, lock = -1;
	char state[32], exp[64], expires[64];
	bool resumed = false, noexp = false;
	int g, outcome, ret = -1;

	if (!pisb_name_valid(o->name))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "invalid name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)", o->name);
	if (!cfg->os.present || !cfg->os.sandbox_id)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "connect '%s': the config needs opensandbox.sandboxId (the sandbox to attach)",
				    o->name);
	if (os_conn_init(&c, &cfg->os, cfg->os.sandbox_id, e) < 0)
		return pisb_err_prefix(e, "connect '%s'", o->name);
	sdir = stage(st, cfg, config_json, o, cfg->os.sandbox_id, false, &stg, &lock, e);
	if (sdir < 0)
		goto out;
	g = os_get(&c, state, exp, 0, e);
	if (g != 0) {
		if (g == 1)
			pisb_err_set(e, PISB_EXIT_NOTFOUND, "no sandbox '%s' on %s", c.sid, c.what);
		undo(st, o->name, sdir, stg, false, &c, false, e);
		goto out;
	}
	/* a paused sandbox is resumed before use */
	if (os_ensure_running(&c, o->name, &resumed, e) < 0) {
		undo(st, o->name, sdir, stg, false, &c, false, e);
		goto out;
	}
	if (resumed)
		os_log(sdir, "resumed sandbox %s (it was %s)", c.sid, state);
	/* renewed once now, never to less than it has left; pisb renew
	 * takes over from this expiry */
	if (os_renew(&c, cfg->os.timeout_seconds, exp, expires, &outcome, e) < 0) {
		undo(st, o->name, sdir, stg, false, &c, false, e);
		goto out;
	}
	noexp = outcome == OS_RENEW_NOEXP;
	os_log(sdir, "connected to sandbox %s on %s; %s", c.sid, c.what,
	       noexp ? "it has no automatic expiration" :
	       outcome == OS_RENEW_KEPT ? "its expiry is later than a renewal would set: kept" : "renewed");
	if (settle(sdir, &c, o->name, noexp ? exp : expires, false, &resumed, e) < 0) {
		undo(st, o->name, sdir, stg, false, &c, false, e);
		goto out;
	}
	set_next(sdir, cfg->os.timeout_seconds, noexp);
	if (publish(st, sdir, stg, o->name, cfg, c.sid, false, NULL, e) < 0) {
		undo(st, o->name, sdir, stg, false, &c, false, e);
		goto out;
	}
	close(lock);
	lock = -1;
	if (o->ready) {
		o->ready->sandbox_id = xstrdup(c.sid);
		o->ready->workspace = cfg->os.workspace ? xstrdup(cfg->os.workspace) : NULL;
		o->ready->resumed = resumed;
	}
	ret = 0;
out:
	if (ret < 0)
		pisb_err_prefix(e, "connect '%s'", o->name);
	os_conn_release(&c);
	return ret;
}

/* ---- start / stop / destroy / release ---- */

static int op_lock(struct os_inst *t, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	char what[96];
	snprintf(what, sizeof(what), "sandbox '%s'", t->name);
	return pisb_lock_acquire(t->idir, "op.lock", true, o ? o->wait_ms : 0, what, e);
}

int pisb_os_start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	struct pisb_state *st = sb->st;
	const char *name = sb->name;
	struct os_inst t;
	_cleanup_close_ int lk = -1;
	struct pisb_lc_opts quiet = { .events_fd = -1 };
	bool was_paused, interrupted;
	int ret = -1;

	if (os_inst_of(sb, &t, e) < 0)
		return -1;
	lk = op_lock(&t, o, e);
	if (lk < 0)
		goto out;
	was_paused = !strcmp(t.rt.state, "paused");
	interrupted = !strcmp(t.rt.state, "creating");
	/* leftovers of earlier creates of this name go first */
	os_gc_name(st, &t.cfg->os, name);
	if (os_inst_ready(&t, e) < 0)
		goto out;
	if (interrupted) {
		/* we hold op.lock: the create that held it died after the
		 * sandbox existed; finish what it left undone */
		os_log(t.idir, "finishing an interrupted create of sandbox %s", t.sid);
		if (make_workspace(&t.c, t.cfg->os.workspace, e) < 0)
			goto out;
		set_next(t.idir, t.cfg->os.timeout_seconds, false);
		run_setup(t.idir, &t.c, t.cfg);
		os_log(t.idir, "sandbox %s is ready", t.sid);
	}
	if (o && emit(o->events_fd >= 0 ? o : &quiet, "ready", name, t.sid, t.cfg->os.workspace,
		      t.created, was_paused, NULL, e) < 0)
		goto out;
	ret = 0;
out:
	if (ret < 0)
		pisb_err_prefix(e, "start '%s'", name);
	os_inst_release(&t);
	return ret;
}

/* Pause and wait until the server says Paused. */
static int pause_remote(struct os_inst *t, struct pisb_err *e)
{
	struct pisb_http_resp r;
	_cleanup_free_ char *path = xasprintf("/sandboxes/%s/pause", t->sid);
	int64_t deadline = pisb_mono_ms() + OS_READY_MS;
	char state[32], exp[64];
	int g;

	pisb_http_resp_init(&r);
	for (;;) {
		g = os_get(&t->c, state, exp, 0, e);
		if (g < 0)
			goto fail;
		if (g == 1) {
			pisb_http_resp_release(&r);
			mark_gone(t);
			return 1;
		}
		if (!strcmp(state, "Paused"))
			break;
		if (!strcmp(state, "Running")) {
			if (os_lc(&t->c, "POST", path, NULL, 0, &r, e) < 0)
				goto fail;
			if (r.status != 202 && r.status != 200 && r.status != 204 && r.status != 409) {
				os_fail(&t->c, &r, "pause", e);
				goto fail;
			}
		} else if (strcmp(state, "Pausing") && strcmp(state, "Resuming") &&
			   strcmp(state, "Pending") && strcmp(state, "Allocated")) {
			pisb_err_set(e, PISB_EXIT_BACKEND, "cannot pause: the sandbox is %s", state);
			goto fail;
		}
		if (pisb_mono_ms() > deadline) {
			pisb_err_set(e, PISB_EXIT_BACKEND, "the sandbox did not pause within %d s (it is %s)",
				     OS_READY_MS / 1000, state);
			goto fail;
		}
		{
			struct timespec ts = { 0, 100 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	pisb_http_resp_release(&r);
	return 0;
fail:
	pisb_http_resp_release(&r);
	return -1;
}

static int do_pause(struct os_inst *t, struct pisb_err *e)
{
	struct pisb_err ig = PISB_ERR_INIT;
	int p = pause_remote(t, e);

	if (p < 0)
		return -1;
	if (p == 1)
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "sandbox %s no longer exists on the server: it expired or was deleted",
				    t->sid);
	os_log(t->idir, "paused sandbox %s", t->sid);
	/* reload: a renewal may have updated the file before we got the lock */
	pisb_runtime_release(&t->rt);
	if (pisb_runtime_load(t->idir, &t->rt, &ig) == 0) {
		os_extra_release(&t->x);
		os_extra_parse(t->rt.extra_json, &t->x);
		if (!t->x.sandbox_id)
			t->x.sandbox_id = xstrdup(t->sid);
		t->x.created = t->created;
	}
	free(t->x.remote_state);
	t->x.remote_state = xstrdup("Paused");
	t->x.checked_at = pisb_now_ms() / 1000;
	t->rt.stopped_at = t->x.checked_at;
	return os_status_save(t->idir, &t->rt, "paused", &t->x, true, e);
}

static int disconnect(struct pisb_state *st, struct os_inst *t, struct pisb_err *e)
{
	os_log(t->idir, "disconnected from sandbox %s (left as it is)", t->sid);
	return pisb_state_trash(st, "instances", t->name, e);
}

static int do_kill(struct pisb_state *st, struct os_inst *t, struct pisb_err *e)
{
	if (kill_remote(&t->c, e) < 0)
		return -1;
	os_log(t->idir, "killed sandbox %s", t->sid);
	return pisb_state_trash(st, "instances", t->name, e);
}

/* Open, take op.lock then renew.lock (waiting for a renewal in flight). */
static int open_locked(struct pisb_sandbox *sb, const struct pisb_lc_opts *o,
		       struct os_inst *t, int *oplk, int *rlk, struct pisb_err *e)
{
	*oplk = *rlk = -1;
	if (os_inst_of(sb, t, e) < 0)
		return -1;
	*oplk = op_lock(t, o, e);
	if (*oplk < 0)
		goto fail;
	*rlk = renew_lock(t, e);
	if (*rlk < 0)
		goto fail;
	return 0;
fail:
	if (*oplk >= 0)
		close(*oplk);
	*oplk = -1;
	os_inst_release(t);
	return -1;
}

static int finish(const struct pisb_lc_opts *o, struct os_inst *t, const char *mode,
		  struct pisb_err *e)
{
	struct pisb_lc_opts none = { .events_fd = -1 };
	return emit(o ? o : &none, "released", t->name, t->sid, t->cfg->os.workspace, t->created,
		    false, mode, e);
}

/* stop, destroy and session shutdown: one shape.  A sandbox pisb created
 * gets the policy (stop: pause, destroy: kill, release: the configured
 * onSessionShutdown); one it only connected to is only disconnected.  The
 * renewal lock is held throughout, so no renewal is in flight meanwhile. */
static int end_use(struct pisb_sandbox *sb, const struct pisb_lc_opts *o,
		   int policy, const char *verb, struct pisb_err *e)
{
	struct pisb_state *st = sb->st;
	const char *name = sb->name;
	struct os_inst t;
	int oplk, rlk, ret = 0;
	const char *mode;

	/* a record without a usable client (no key, broken record) cannot
	 * kill: that is an error, rather than an orphaned sandbox */
	if (open_locked(sb, o, &t, &oplk, &rlk, e) < 0)
		return -1;
	if (policy < 0)
		policy = (int)t.cfg->os.on_shutdown;
	if (!t.created) {
		mode = "disconnect";
		ret = disconnect(st, &t, e);
	} else {
		mode = policy_word[policy];
		switch ((enum pisb_policy)policy) {
		case PISB_POLICY_KILL:
			ret = do_kill(st, &t, e);
			break;
		case PISB_POLICY_PAUSE:
			ret = do_pause(&t, e);
			break;
		case PISB_POLICY_KEEP:
			os_log(t.idir, "session ended: sandbox %s kept running", t.sid);
			break;
		}
	}
	close(rlk);
	close(oplk);
	if (ret == 0)
		ret = finish(o, &t, mode, e);
	if (ret < 0)
		pisb_err_prefix(e, "%s '%s'", verb, name);
	os_inst_release(&t);
	return ret;
}

int pisb_os_stop(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return end_use(sb, o, PISB_POLICY_PAUSE, "stop", e);
}

int pisb_os_destroy(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return end_use(sb, o, PISB_POLICY_KILL, "destroy", e);
}

int pisb_os_release(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	/* --policy, else the config's onSessionShutdown */
	return end_use(sb, o, o && o->policy ? (int)pisb_lc_policy(o, PISB_POLICY_KILL) : -1,
		       "release", e);
}

/* ---- list / inspect ---- */

static int refresh_apply(struct os_inst *t, int g, const char *state, const char *exp,
			 bool sync, struct pisb_err *e);

void pisb_os_refresh_all(struct pisb_state *st, int timeout_ms)
{
	int fd = openat(st->fd, "instances", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct os_inst *v = NULL;
	size_t n = 0;
	bool *done;
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
		struct os_inst t;

		if (!pisb_name_valid(de->d_name) || inst_load(st, de->d_name, &t, &e) < 0)
			continue;   /* another driver's, or broken: list says so */
		v = xrealloc(v, (n + 1) * sizeof(*v));
		v[n++] = t;
	}
	closedir(d);
	done = xcalloc(n + 1, sizeof(*done));
	/* one server at a time: one list request per 200 of pisb's own
	 * sandboxes, a GET for the others (connected ones); a server that
	 * cannot be asked costs one timeout, not one per sandbox */
	for (size_t i = 0; i < n; i++) {
		struct os_conn c;
		struct pisb_err le = PISB_ERR_INIT;
		struct os_remote *rv = NULL;
		size_t rn = 0;
		int lr;

		if (done[i])
			continue;
		if (os_conn_init(&c, &v[i].cfg->os, NULL, &le) < 0) {
			done[i] = true;
			refresh_apply(&v[i], -1, NULL, NULL, false, &le);
			continue;
		}
		lr = os_list_ours(&c, st, NULL, timeout_ms, &rv, &rn, &le);
		for (size_t k = i; k < n; k++) {
			struct pisb_err e = PISB_ERR_INIT;
			const struct os_remote *hit = NULL;

			if (done[k] || !os_same_server(&v[k].cfg->os, &v[i].cfg->os))
				continue;
			done[k] = true;
			if (lr < 0) {
				refresh_apply(&v[k], -1, NULL, NULL, false, &le);
				continue;
			}
			for (size_t r = 0; r < rn; r++)
				if (!strcmp(rv[r].id, v[k].sid))
					hit = &rv[r];
			if (hit) {
				refresh_apply(&v[k], 0, hit->state ? hit->state : "Unknown", hit->expires, false, &e);
			} else {
				char state[32], exp[64];
				int g;
				free(c.sid);
				c.sid = xstrdup(v[k].sid);
				g = os_get(&c, state, exp, timeout_ms, &e);
				refresh_apply(&v[k], g, state, exp, false, &e);
			}
		}
		os_remotes_free(rv, rn);
		os_conn_release(&c);
	}
	for (size_t i = 0; i < n; i++)
		os_inst_release(&v[i]);
	free(v);
	free(done);
}

void pisb_os_inspect(struct pisb_jw *w, const struct pisb_config *cfg, const char *extra_json)
{
	struct os_extra x;

	os_extra_parse(extra_json, &x);
	/* the limits are the remote sandbox's own, as create sent them */
	pisb_jw_key(w, "limits");
	pisb_jw_obj(w);
	pisb_jw_key(w, "resourceLimits");
	pisb_jw_obj(w);
	if (cfg->os.resource_limits.n) {
		for (size_t i = 0; i < cfg->os.resource_limits.n; i++)
			pisb_jw_kstr(w, cfg->os.resource_limits.v[i].key, cfg->os.resource_limits.v[i].val);
	} else {
		char cpu[16], mem[24];
		snprintf(cpu, sizeof(cpu), "%d", cfg->cpus);
		snprintf(mem, sizeof(mem), "%dGi", cfg->memory_gib);
		pisb_jw_kstr(w, "cpu", cpu);
		pisb_jw_kstr(w, "memory", mem);
	}
	pisb_jw_obj_end(w);
	pisb_jw_kstr(w, "note", "enforced by the OpenSandbox server, not by pisb");
	pisb_jw_obj_end(w);
	pisb_jw_kstr(w, "remoteState", x.remote_state);
	os_extra_release(&x);
}

void pisb_os_config_json(struct pisb_jw *w, const char *config_json)
{
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;

	if (pisb_json_parse(&j, config_json, strlen(config_json), &ig) < 0 ||
	    j.tok[0].type != JSMN_OBJECT) {
		pisb_jw_raw(w, config_json, strlen(config_json));
		return;
	}
	pisb_jw_obj(w);
	for (int k = 0, i = 1; k < j.tok[0].size && i > 0; k++) {
		_cleanup_free_ char *key = pisb_json_str(&j, i);
		size_t n;
		const char *raw = pisb_json_raw(&j, i + 1, &n);
		/* the local driver's image and disk mean nothing remotely */
		if (key && raw && strcmp(key, "image") && strcmp(key, "diskGiB")) {
			pisb_jw_key(w, key);
			pisb_jw_raw(w, raw, n);
		}
		i = pisb_json_skip(&j, i + 1);
	}
	pisb_jw_obj_end(w);
	pisb_json_release(&j);
}

char *pisb_os_unreachable(const char *extra_json)
{
	struct os_extra x;
	char *u;

	os_extra_parse(extra_json, &x);
	u = PISB_STEAL(x.unreachable);
	os_extra_release(&x);
	return u;
}

/* Record what one ask said: g as os_get returns it (-1: e->msg is why
 * the server could not be asked).  sync false: no fsync (list's many
 * small updates; a lost one is only a stale hint). */
static int refresh_apply(struct os_inst *t, int g, const char *state, const char *exp,
			 bool sync, struct pisb_err *e)
{
	_cleanup_close_ int lk = -1;
	struct pisb_err ig = PISB_ERR_INIT;
	const char *s;

	/* never wait behind a renewal for a status hint */
	lk = pisb_lock_acquire(t->idir, "renew.lock", true, 0, "renewal", &ig);
	if (lk < 0)
		return g < 0 ? -1 : 0;
	pisb_runtime_release(&t->rt);
	os_extra_release(&t->x);
	if (pisb_runtime_load(t->idir, &t->rt, g < 0 ? &ig : e) < 0)
		return -1;
	os_extra_parse(t->rt.extra_json, &t->x);
	if (!t->x.sandbox_id)
		t->x.sandbox_id = xstrdup(t->sid);
	t->x.created = t->created;
	t->x.checked_at = pisb_now_ms() / 1000;
	free(t->x.unreachable);
	t->x.unreachable = NULL;
	if (g < 0) {
		/* inspect and list say so, with the server's error, instead
		 * of the last state seen */
		t->x.unreachable = xstrdup(e->msg);
		os_status_save(t->idir, &t->rt, t->rt.state, &t->x, sync, &ig);
		return -1;
	}
	if (g == 1) {
		free(t->x.remote_state);
		t->x.remote_state = NULL;
		if (strcmp(t->rt.state, "gone"))
			os_log(t->idir, "sandbox %s no longer exists on the server", t->sid);
		return os_status_save(t->idir, &t->rt, "gone", &t->x, sync, e);
	}
	free(t->x.remote_state);
	t->x.remote_state = xstrdup(state);
	if (exp && exp[0]) {
		free(t->x.expires_at);
		t->x.expires_at = xstrdup(exp);
	}
	s = t->rt.state;
	if (!strcmp(state, "Running"))
		s = "running";
	else if (!strcmp(state, "Paused") || !strcmp(state, "Pausing"))
		s = "paused";
	return os_status_save(t->idir, &t->rt, s, &t->x, sync, e);
}

int pisb_os_refresh(struct pisb_sandbox *sb, int timeout_ms, struct pisb_err *e)
{
	struct os_inst t;
	char state[32], exp[64];
	int g, ret;

	if (os_inst_of(sb, &t, e) < 0)
		return -1;
	g = os_get(&t.c, state, exp, timeout_ms, e);
	ret = refresh_apply(&t, g, state, exp, true, e);
	os_inst_release(&t);
	return ret;
}
