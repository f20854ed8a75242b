/* driver.c - the registry of drivers and the sandbox a verb opens; see
 * driver.h. */
#include "driver.h"
#include "config.h"
#include "err.h"
#include "json.h"
#include "state.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

/* Every driver of this build, in the order pisb drivers shows them. */
const struct pisb_driver *const pisb_drivers[] = {
	&pisb_driver_local,
	&pisb_driver_vm,
	&pisb_driver_opensandbox,
	&pisb_driver_sbx,
	NULL,
};

const char *const pisb_verb_names[PISB_V__COUNT] = {
	[PISB_V_CREATE] = "create", [PISB_V_PREPARE] = "prepare", [PISB_V_START] = "start",
	[PISB_V_STOP] = "stop", [PISB_V_DESTROY] = "destroy", [PISB_V_CONNECT] = "connect",
	[PISB_V_RELEASE] = "release", [PISB_V_INSPECT] = "inspect", [PISB_V_EXEC] = "exec",
	[PISB_V_EXEC_HANDLE] = "exec --timeout-ms", [PISB_V_EXEC_STATUS] = "exec-status",
	[PISB_V_EXEC_KILL] = "exec-kill", [PISB_V_SHELL] = "shell", [PISB_V_READ] = "read",
	[PISB_V_WRITE] = "write", [PISB_V_EDIT] = "edit", [PISB_V_LS] = "ls",
	[PISB_V_STAT] = "stat", [PISB_V_MKDIR] = "mkdir", [PISB_V_FIND] = "find",
	[PISB_V_GREP] = "grep", [PISB_V_LOGS] = "logs", [PISB_V_PUSH] = "push",
	[PISB_V_PULL] = "pull", [PISB_V_SVC] = "svc", [PISB_V_PREVIEW] = "preview",
	[PISB_V_DOCKER] = "docker", [PISB_V_VERIFY] = "verify", [PISB_V_GC] = "gc",
	[PISB_V_RENEW] = "renew", [PISB_V_DIFF] = "diff", [PISB_V_POOL] = "pool",
};

const struct pisb_driver *pisb_driver_find(const char *name)
{
	for (const struct pisb_driver *const *d = pisb_drivers; name && *d; d++)
		if (!strcmp((*d)->name, name))
			return *d;
	return NULL;
}

int pisb_driver_names_with(struct pisb_buf *b, unsigned caps)
{
	const struct pisb_driver *with[8];
	int n = 0;

	for (const struct pisb_driver *const *d = pisb_drivers; *d && n < 8; d++)
		if (((*d)->caps & caps) == caps)
			with[n++] = *d;
	pisb_buf_add(b, "the ", 4);
	for (int i = 0; i < n; i++)
		pisb_buf_addf(b, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", with[i]->name);
	pisb_buf_adds(b, n == 1 ? " driver" : " drivers");
	return n;
}

bool pisb_driver_can(const char *name, unsigned caps)
{
	const struct pisb_driver *d = pisb_driver_find(name);

	return d && (d->caps & caps) == caps;
}

void pisb_driver_names(struct pisb_buf *b, const char *sep)
{
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
		pisb_buf_addf(b, "%s%s", d == pisb_drivers ? "" : sep, (*d)->name);
}

bool pisb_driver_has(const struct pisb_driver *d, enum pisb_verb_id v)
{
	switch (v) {
	case PISB_V_CREATE: return d->create;
	case PISB_V_PREPARE: return d->prepare;
	case PISB_V_START: return d->start;
	case PISB_V_STOP: return d->stop;
	case PISB_V_DESTROY: return d->destroy;
	case PISB_V_CONNECT: return d->connect;
	case PISB_V_RELEASE: return d->release;
	case PISB_V_INSPECT: return d->status;
	case PISB_V_EXEC: return d->exec;
	case PISB_V_EXEC_HANDLE: return d->exec_handle;
	case PISB_V_EXEC_STATUS: return d->exec_status;
	case PISB_V_EXEC_KILL: return d->exec_kill;
	case PISB_V_SHELL: return d->shell;
	case PISB_V_READ: return d->read_text && d->read_raw;
	case PISB_V_WRITE: return d->write;
	case PISB_V_EDIT: return d->edit;
	case PISB_V_LS: return d->ls;
	case PISB_V_STAT: return d->stat;
	case PISB_V_MKDIR: return d->mkdir;
	case PISB_V_FIND: return d->find;
	case PISB_V_GREP: return d->grep;
	case PISB_V_LOGS: return d->logs;
	case PISB_V_PUSH: return d->push;
	case PISB_V_PULL: return d->pull;
	case PISB_V_SVC: return d->svc;
	case PISB_V_PREVIEW: return d->preview;
	case PISB_V_DOCKER: return d->docker;
	case PISB_V_VERIFY: return d->verify;
	case PISB_V_GC: return (d->caps & PISB_DRV_GC_SWEEP) || d->gc_sweep;
	case PISB_V_RENEW: return d->renew;
	case PISB_V_DIFF: return d->project_enter || d->project_archive;
	case PISB_V_POOL: return d->pool && d->pool_list;
	case PISB_V__COUNT: break;
	}
	return false;
}

const char *pisb_driver_why(const struct pisb_driver *d, enum pisb_verb_id v)
{
	for (const struct pisb_refusal *r = d->refusals; r && r->why; r++)
		if (r->verb == v)
			return r->why;
	return NULL;
}

int pisb_driver_refuse_name(const char *name, const struct pisb_driver *d,
			    enum pisb_verb_id v, struct pisb_err *e)
{
	const char *why = pisb_driver_why(d, v);

	return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' (driver %s) cannot '%s'%s%s; see pisb drivers",
			    name, d->name, pisb_verb_names[v], why ? ": " : "", why ? why : "");
}

int pisb_driver_refuse(const struct pisb_sandbox *sb, enum pisb_verb_id v, struct pisb_err *e)
{
	return pisb_driver_refuse_name(sb->name, sb->drv, v, e);
}

void pisb_drivers_json(struct pisb_jw *w)
{
	pisb_jw_obj(w);
	pisb_jw_key(w, "verbs");
	pisb_jw_arr(w);
	for (int v = 0; v < PISB_V__COUNT; v++)
		pisb_jw_str(w, pisb_verb_names[v]);
	pisb_jw_arr_end(w);
	pisb_jw_key(w, "drivers");
	pisb_jw_arr(w);
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++) {
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "name", (*d)->name);
		pisb_jw_kstr(w, "summary", (*d)->summary);
		pisb_jw_key(w, "verbs");
		pisb_jw_obj(w);
		for (int v = 0; v < PISB_V__COUNT; v++) {
			bool has = pisb_driver_has(*d, (enum pisb_verb_id)v);
			pisb_jw_key(w, pisb_verb_names[v]);
			pisb_jw_obj(w);
			pisb_jw_kbool(w, "supported", has);
			pisb_jw_kstr(w, "why", has ? NULL : pisb_driver_why(*d, (enum pisb_verb_id)v));
			pisb_jw_obj_end(w);
		}
		pisb_jw_obj_end(w);
		pisb_jw_obj_end(w);
	}
	pisb_jw_arr_end(w);
	pisb_jw_obj_end(w);
}

/* ---- the opened sandbox ---- */

const struct pisb_driver *pisb_driver_salvage(int idir)
{
	_cleanup_close_ int fd = openat(idir, "record.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	char buf[65536];
	ssize_t n = fd >= 0 ? pisb_read_all(fd, buf, sizeof(buf) - 1) : -1;
	const char *p;

	if (n <= 0)
		return &pisb_driver_local;
	buf[n] = '\0';
	for (p = buf; (p = memmem(p, (size_t)(buf + n - p), "\"driver\"", 8)); p += 8) {
		const char *q = p + 8;
		q += strspn(q, " \t\r\n");
		if (*q != ':')
			continue;
		q++;
		q += strspn(q, " \t\r\n");
		if (*q != '"')
			continue;
		q++;
		for (const struct pisb_driver *const *d = pisb_drivers; *d; d++) {
			size_t l = strlen((*d)->name);
			if (!strncmp(q, (*d)->name, l) && q[l] == '"')
				return *d;
		}
		break;
	}
	return &pisb_driver_local;
}

int pisb_sandbox_open(struct pisb_sandbox *sb, struct pisb_state *st, const char *name,
		      struct pisb_err *e)
{
	return pisb_sandbox_open_kind(sb, st, "instances", name, e);
}

int pisb_sandbox_open_kind(struct pisb_sandbox *sb, struct pisb_state *st, const char *kind,
			   const char *name, struct pisb_err *e)
{
	*sb = (struct pisb_sandbox)PISB_SANDBOX_INIT;
	sb->st = st;
	sb->name = xstrdup(name);
	sb->idir = pisb_instance_open(st, kind, name, e);
	if (sb->idir < 0)
		return -1;
	if (pisb_record_load(sb->idir, &sb->rec, &sb->rec_err) < 0) {
		/* a record gone missing or bad must not keep destroy (or stop)
		 * from its sandbox: the driver it still names gets the verb, and
		 * what needs the record reports it (pisb_sandbox_record) */
		if (sb->rec_err.code == PISB_EXIT_NOTFOUND && faccessat(sb->idir, ".", F_OK, 0) < 0) {
			*e = sb->rec_err;
			return -1;
		}
		memset(&sb->rec, 0, sizeof(sb->rec));
		sb->drv = pisb_driver_salvage(sb->idir);
		return 0;
	}
	sb->rec_loaded = true;
	sb->drv = pisb_driver_find(sb->rec.driver);
	if (!sb->drv)
		return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s': unknown driver '%s' in record.json",
				    name, sb->rec.driver);
	return 0;
}

void pisb_sandbox_release(struct pisb_sandbox *sb)
{
	if (sb->priv && sb->priv_free)
		sb->priv_free(sb->priv);
	if (sb->rt_loaded)
		pisb_runtime_release(&sb->rt);
	pisb_config_free(sb->cfg);
	pisb_record_release(&sb->rec);
	if (sb->idir >= 0)
		close(sb->idir);
	free(sb->name);
	*sb = (struct pisb_sandbox)PISB_SANDBOX_INIT;
}

const struct pisb_runtime *pisb_sandbox_runtime(struct pisb_sandbox *sb, struct pisb_err *e)
{
	if (!sb->rt_loaded) {
		if (pisb_runtime_load(sb->idir, &sb->rt, e) < 0)
			return NULL;
		sb->rt_loaded = true;
	}
	return &sb->rt;
}

const struct pisb_record *pisb_sandbox_record(struct pisb_sandbox *sb, struct pisb_err *e)
{
	if (!sb->rec_loaded) {
		*e = sb->rec_err;
		return NULL;
	}
	return &sb->rec;
}

const struct pisb_config *pisb_sandbox_config(struct pisb_sandbox *sb, struct pisb_err *e)
{
	if (!pisb_sandbox_record(sb, e))
		return NULL;
	if (!sb->cfg && pisb_record_config(&sb->rec, &sb->cfg, e) < 0)
		return NULL;
	return sb->cfg;
}

/* End the line in b without the padding of its last column. */
static void line_end(struct pisb_buf *b)
{
	while (b->len && b->s[b->len - 1] == ' ')
		b->s[--b->len] = '\0';
	pisb_buf_addc(b, '\n');
}

void pisb_drivers_text(struct pisb_buf *b, bool names_only)
{
	if (names_only) {
		pisb_driver_names(b, "\n");
		return;
	}
	pisb_buf_addf(b, "%-18s", "VERB");
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
		pisb_buf_addf(b, " %-12s", (*d)->name);
	line_end(b);
	for (int v = 0; v < PISB_V__COUNT; v++) {
		pisb_buf_addf(b, "%-18s", pisb_verb_names[v]);
		for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
			pisb_buf_addf(b, " %-12s", pisb_driver_has(*d, (enum pisb_verb_id)v) ? "yes" : "-");
		line_end(b);
	}
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++) {
		pisb_buf_addf(b, "\n%s: %s\n", (*d)->name, (*d)->summary);
		for (int v = 0; v < PISB_V__COUNT; v++) {
			const char *why = pisb_driver_why(*d, (enum pisb_verb_id)v);
			if (!pisb_driver_has(*d, (enum pisb_verb_id)v))
				pisb_buf_addf(b, "  cannot %-18s %s\n", pisb_verb_names[v], why ? why : "");
		}
	}
	/* pisb_front_out adds the last newline */
	if (b->len && b->s[b->len - 1] == '\n')
		b->s[--b->len] = '\0';
}

int pisb_verify_sandbox(struct pisb_state *st, const char *name, bool json, struct pisb_buf *out,
			struct pisb_err *e)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;

	if (pisb_sandbox_open(&sb, st, name, e) < 0)
		return -1;
	if (!sb.drv->verify)
		return pisb_driver_refuse(&sb, PISB_V_VERIFY, e);
	return sb.drv->verify(&sb, json, out, e);
}

int pisb_drivers_renew(struct pisb_state *st, const struct pisb_renew_opts *o,
		       struct pisb_jw *w, struct pisb_err *e)
{
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
		if ((*d)->renew)
			return (*d)->renew(st, o, w, e);
	pisb_jw_raw(w, "{\"renewed\":[],\"failed\":[],\"skipped\":[]}", 39);
	return 0;
}

int pisb_sandbox_borrow(struct pisb_sandbox *sb, struct pisb_record *rec,
			struct pisb_config **cfg, struct pisb_runtime *rt, struct pisb_err *e)
{
	const struct pisb_record *r = pisb_sandbox_record(sb, e);
	const struct pisb_config *c = r ? pisb_sandbox_config(sb, e) : NULL;

	if (!c)
		return -1;
	*rec = *r;
	*cfg = (struct pisb_config *)c;
	return pisb_runtime_load(sb->idir, rt, e);
}

int pisb_driver_supervise(struct pisb_state *st, const char *driver, const char *name,
			  int notify_fd, bool own_ns, struct pisb_err *e)
{
	const struct pisb_driver *d = pisb_driver_find(driver ? driver : "local");

	if (!d || !d->supervise)
		return pisb_err_set(e, PISB_EXIT_USAGE, "supervise: driver '%s' has no supervisor",
				    driver ? driver : "local");
	return d->supervise(st, name, notify_fd, own_ns, e);
}
