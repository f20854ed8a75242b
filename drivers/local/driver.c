/* driver.c - the local driver's table (driver.h): namespaces, cgroups and
 * overlayfs on this host, one controller per sandbox. */
#include "driver.h"
#include "archive.h"
#include "config.h"
#include "doctor.h"
#include "err.h"
#include "events.h"
#include "exec.h"
#include "fs_verbs.h"
#include "inspect.h"
#include "json.h"
#include "lifecycle.h"
#include "local.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* ---- lifecycle ---- */

static int make(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		struct pisb_lc_opts *o, bool prepare, struct pisb_err *e)
{
	struct pisb_create_opts co = {
		o->name, o->template_, o->config_text, o->config_len, o->owner_pid,
		o->session_id, o->wait_ms, prepare,
	};
	struct pisb_event ev = { "ready", o->name, "local", NULL, cfg->workspace, true, false, NULL };

	if (pisb_local_create(st, cfg, config_json, &co, &o->setup_error, e) < 0)
		return -1;
	if (prepare)
		return 0;
	if (pisb_lifecycle_event(o, &ev, e) < 0) {
		struct pisb_err ig = PISB_ERR_INIT;
		pisb_local_destroy(st, "instances", o->name, -1, &ig);
		return pisb_err_prefix(e, "create '%s' (removed again)", o->name);
	}
	return 0;
}

static int create(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		  struct pisb_lc_opts *o, struct pisb_err *e)
{
	return make(st, cfg, config_json, o, false, e);
}

static int prepare(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		   struct pisb_lc_opts *o, struct pisb_err *e)
{
	return make(st, cfg, config_json, o, true, e);
}

static int released(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, const char *mode,
		    struct pisb_err *e)
{
	struct pisb_event ev = { "released", sb->name, "local", NULL, NULL, true, false, mode };

	return pisb_lifecycle_event(o, &ev, e);
}

static int start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_local_start(sb->st, sb->name, o->wait_ms, e);
}

static int stop(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	if (pisb_local_stop(sb->st, sb->name, o->wait_ms, e) < 0)
		return -1;
	return released(sb, o, "stop", e);
}

static int destroy(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	if (pisb_local_destroy(sb->st, "instances", sb->name, o->wait_ms, e) < 0)
		return -1;
	return released(sb, o, "remove", e);
}

/* ---- inspect ---- */

static enum pisb_status status(struct pisb_sandbox *sb)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_runtime *rt = pisb_sandbox_runtime(sb, &ig);

	return rt ? pisb_instance_status(sb->idir, rt) : PISB_ST_STOPPED;
}

static void describe(struct pisb_sandbox *sb, const struct pisb_config *cfg, struct pisb_jw *w)
{
	(void)sb;
	pisb_jw_kstr(w, "image", cfg->image);
	pisb_jw_kstr(w, "workspace", cfg->workspace);
}

/* ---- exec ---- */

static int exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r, int *code,
			 struct pisb_err *e)
{
	return pisb_exec_attached(sb->st, r, code, e);
}

static int exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r, struct pisb_jw *w,
		       int *code, bool *running, struct pisb_err *e)
{
	return pisb_exec_handle(sb->st, r, w, code, running, e);
}

static int exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
		       struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	return pisb_exec_status(sb->st, sb->name, handle, timeout_ms, w, code, running, e);
}

static int exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w, int *code,
		     struct pisb_err *e)
{
	return pisb_exec_kill(sb->st, sb->name, handle, w, code, e);
}

static int shell(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e)
{
	return pisb_exec_shell(sb->st, sb->name, user, code, e);
}

/* ---- services, verify ---- */

static int svc(struct pisb_sandbox *sb, const char *req, struct pisb_buf *reply, int timeout_ms,
	       struct pisb_err *e)
{
	return pisb_control_call(sb->idir, req, reply, timeout_ms, e);
}

static int verify(struct pisb_sandbox *sb, bool json, struct pisb_buf *out, struct pisb_err *e)
{
	return pisb_verify(sb->st, sb->name, json, out, e);
}

static const struct pisb_refusal refusals[] = {
	{ PISB_V_CONNECT, "connect attaches a sandbox that already runs elsewhere (opensandbox.sandboxId)" },
	{ PISB_V_RELEASE, "a local sandbox has no session policy of its own: pisb gc removes it once its owner is gone" },
	{ PISB_V_DOCKER, "no docker daemon of its own; pisb docker needs a sbx sandbox (driver: sbx) and never falls back to the host's docker daemon" },
	{ PISB_V_RENEW, "a local sandbox does not expire" },
	{ 0, NULL },
};

const struct pisb_driver pisb_driver_local = {
	.name = "local",
	.summary = "Linux namespaces, cgroups and overlayfs on this host (the default)",
	.caps = PISB_DRV_GC_SWEEP | PISB_DRV_TEMPLATES | PISB_DRV_EXEC_BASH,
	.refusals = refusals,
	.create = create,
	.prepare = prepare,
	.start = start,
	.stop = stop,
	.destroy = destroy,
	.status = status,
	.describe = describe,
	.limits = pisb_inspect_limits,
	.exec = exec_attached,
	.exec_handle = exec_handle,
	.exec_status = exec_status,
	.exec_kill = exec_kill,
	.shell = shell,
	.read_text = pisb_fsv_read_text,
	.read_raw = pisb_fsv_read_raw,
	.write = pisb_fsv_write,
	.edit = pisb_fsv_edit,
	.ls = pisb_fsv_ls,
	.stat = pisb_fsv_stat,
	.mkdir = pisb_fsv_mkdir,
	.find = pisb_fsv_find,
	.grep = pisb_fsv_grep,
	.logs = pisb_fsv_logs,
	.push = pisb_fsv_push,
	.pull = pisb_fsv_pull,
	.svc = svc,
	.preview = svc,
	.verify = verify,
};
