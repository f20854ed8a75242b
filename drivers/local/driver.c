/* driver.c - the local driver's table (driver.h): namespaces, cgroups and
 * overlayfs on this host, one controller per sandbox. */
#include "driver.h"
#include "archive.h"
#include "config.h"
#include "doctor.h"
#include "err.h"
#include "events.h"
#include "local_exec.h"
#include "fs.h"
#include "fs_verbs.h"
#include "gc.h"
#include "cgroup.h"
#include "inspect.h"
#include "json.h"
#include "lock.h"
#include "lifecycle.h"
#include "local.h"
#include "docker_inside.h"
#include "ns.h"
#include "pool.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- lifecycle ---- */

static int make(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		struct pisb_lc_opts *o, bool prepare, struct pisb_err *e)
{
	struct pisb_create_opts co = {
		o->name, o->template_, o->config_text, o->config_len, o->owner_pid,
		o->session_id, o->wait_ms, prepare, o->project, NULL,
	};

	if (pisb_local_create(st, cfg, config_json, &co, &o->setup_error, e) < 0)
		return -1;
	if (o->ready)
		o->ready->workspace = xstrdup(cfg->workspace);
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

static int start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_local_start(sb, o->wait_ms, e);
}

static int end(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, bool destroy,
	       struct pisb_ready *ev, struct pisb_err *e)
{
	(void)ev;
	return pisb_local_end(sb, o->wait_ms, destroy, e);
}

static int stop(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_lifecycle_end(sb, o, false, end, e);
}

static int destroy(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_lifecycle_end(sb, o, true, end, e);
}

static int destroy_template(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_local_destroy_template(sb, o->wait_ms, e);
}

/* the session's end: remove, unless release --policy says otherwise */
static int release(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_lifecycle_release_as(sb, o, pisb_lc_policy(o, PISB_POLICY_KILL), e);
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
	struct pisb_ids ids;

	pisb_jw_kstr(w, "image", cfg->image);
	pisb_jw_kstr(w, "workspace", cfg->workspace);
	/* the driver's own object: the host ids of root inside; shared:
	 * made (as root) before every sandbox got a range of its own */
	pisb_ids_for_record(&sb->rec, &ids);
	pisb_jw_key(w, "local");
	pisb_jw_obj(w);
	pisb_jw_key(w, "idRange");
	pisb_jw_obj(w);
	pisb_jw_kint(w, "uidBase", ids.uid_base);
	pisb_jw_kint(w, "count", ids.count);
	pisb_jw_kbool(w, "shared", geteuid() == 0 && !sb->rec.uid_base);
	pisb_jw_obj_end(w);
	pisb_jw_obj_end(w);
}

/* ---- services, verify ---- */

static int svc(struct pisb_sandbox *sb, const char *req, struct pisb_buf *reply, int timeout_ms,
	       struct pisb_err *e)
{
	return pisb_control_call(sb->idir, req, reply, timeout_ms, e);
}

static int verify(struct pisb_sandbox *sb, bool json, struct pisb_buf *out, struct pisb_err *e)
{
	return pisb_local_verify(sb, json, out, e);
}

/* ---- the project: its files with the sandbox's rights, running or not ---- */

static int project_enter(struct pisb_sandbox *sb, int *root, char **ws, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r;

	if (pisb_fs_open(&fs, sb, &pisb_local_fs_how, false, e) < 0) {
		pisb_fs_release(&fs);
		return -1;
	}
	*ws = xstrdup(fs.workspace);
	if (pisb_lock_is_held(sb->idir, "controller.lock")) {
		/* running: its own namespaces, as every file verb */
		pisb_fs_release(&fs);
		fs = (struct pisb_fs)PISB_FS_INIT;
		r = pisb_fs_open(&fs, sb, &pisb_local_fs_how, true, e) < 0 || pisb_fs_enter(&fs, e) < 0 ? -1 : 0;
		*root = r == 0 ? pisb_steal_fd(&fs.root) : -1;
	} else {
		/* stopped: its disk, read-only, as its root */
		r = pisb_local_disk_enter(sb->idir, fs.workspace, root, e);
	}
	pisb_fs_release(&fs);
	return r;
}

/* diff: the workspace as it is on the disk, read-only, whether the
 * sandbox runs or not.  The base was written into the disk's upper
 * directory at create and the sandbox's overlay writes there, so every
 * file of the base and every one the sandbox made since is in it (a file
 * it deleted: gone, or a whiteout, which diff takes for no file); only
 * the image's own files under the workspace are not, and they are not
 * the sandbox's changes.  No walk through the overlay (a third of diff's
 * time) and no entry into the sandbox's namespaces. */
static int project_view(struct pisb_sandbox *sb, int *root, char **ws, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r;

	if (pisb_fs_open(&fs, sb, &pisb_local_fs_how, false, e) < 0) {
		pisb_fs_release(&fs);
		return -1;
	}
	*ws = xstrdup(fs.workspace);
	r = pisb_local_disk_enter(sb->idir, fs.workspace, root, e);
	pisb_fs_release(&fs);
	return r;
}

/* pisb gc: cgroups of crashed creates and controllers, empty ones only
 * (a running sandbox, of any state dir, keeps its own). */
/* gc: a stopped sandbox's cgroups, before its directory goes */
static void gc_drop(struct pisb_sandbox *sb)
{
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_runtime rt;

	if (pisb_runtime_load(sb->idir, &rt, &ig) == 0) {
		pisb_cgroup_remove(rt.cgroup);
		pisb_runtime_release(&rt);
	}
}

static void gc_leftovers(struct pisb_state *st, const struct pisb_strv *known, bool dry_run,
			 struct pisb_gc_report *r)
{
	_cleanup_strv_ struct pisb_strv cgs = PISB_STRV_INIT, ranges = PISB_STRV_INIT;

	(void)known;
	pisb_ids_sweep(st, dry_run, &ranges);
	for (size_t i = 0; i < ranges.n; i++)
		pisb_gc_report_add(&r->cleaned, "idrange", ranges.v[i],
				   "stale: its create is gone and no record holds the range");
	if (dry_run)
		return;
	pisb_cgroup_sweep(NULL, NULL, 60, &cgs);
	for (size_t i = 0; i < cgs.n; i++)
		pisb_gc_report_add(&r->cleaned, "cgroup", cgs.v[i], "empty, left over from a sandbox that is gone");
}

static const struct pisb_refusal refusals[] = {
	{ PISB_V_CONNECT, "connect attaches a sandbox that already runs elsewhere (opensandbox.sandboxId)" },
	{ PISB_V_RENEW, "a local sandbox does not expire" },
	{ 0, NULL },
};

const struct pisb_driver pisb_driver_local = {
	.name = "local",
	.summary = "Linux namespaces, cgroups and overlayfs on this host (the default)",
	.caps = PISB_DRV_GC_SWEEP | PISB_DRV_TEMPLATES | PISB_DRV_EXEC_BASH | PISB_DRV_PROJECT_BIND |
		PISB_DRV_DOCKER_OPT | PISB_DRV_NO_LOADER,
	.refusals = refusals,
	.fs_how = &pisb_local_fs_how,
	.create = create,
	.prepare = prepare,
	.start = start,
	.stop = stop,
	.destroy = destroy,
	.destroy_template = destroy_template,
	.supervise = pisb_controller_run,
	.release = release,
	.status = status,
	.describe = describe,
	.limits = pisb_inspect_limits,
	.exec = pisb_local_exec,
	.exec_handle = pisb_local_exec_handle,
	.exec_status = pisb_local_exec_status,
	.exec_kill = pisb_local_exec_kill,
	.shell = pisb_local_shell,
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
	.project_enter = project_enter,
	.project_view = project_view,
	.svc = svc,
	.preview = svc,
	.docker = pisb_docker_inside,
	.doctor = pisb_local_doctor,
	.verify = verify,
	.pool = pisb_pool_set,
	.pool_list = pisb_pool_list,
	.pool_gc = pisb_pool_gc,
	.gc_leftovers = gc_leftovers,
	.gc_drop = gc_drop,
};
