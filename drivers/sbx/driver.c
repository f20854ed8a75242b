/* driver.c - the sbx driver's table (driver.h): a Docker Sandboxes
 * microVM driven through the sbx CLI. */
#include "driver.h"
#include "err.h"
#include "config.h"
#include "doctor.h"
#include "fs.h"
#include "exec.h"
#include "fs_verbs.h"
#include "inspect.h"
#include "json.h"
#include "lifecycle.h"
#include "docker_verbs.h"
#include "sbx.h"
#include "util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static int create(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		  struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_sbx_create(st, cfg, config_json, o, e);
}

static int start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_sbx_start(sb, o, e);
}

static int stop(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_lifecycle_end(sb, o, false, pisb_sbx_end, e);
}

static int destroy(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_lifecycle_end(sb, o, true, pisb_sbx_end, e);
}

/* the session's end: sbx.teardown (what the watchdog applies when the
 * owner dies), unless release --policy says otherwise */
static int release(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	static const enum pisb_policy of[] = {
		[PISB_TEARDOWN_REMOVE] = PISB_POLICY_KILL, [PISB_TEARDOWN_STOP] = PISB_POLICY_PAUSE,
		[PISB_TEARDOWN_NONE] = PISB_POLICY_KEEP,
	};
	const struct pisb_config *cfg = pisb_sandbox_config(sb, e);

	if (!cfg)
		return -1;
	return pisb_lifecycle_release_as(sb, o, pisb_lc_policy(o, of[cfg->sbx.teardown]), e);
}

static enum pisb_status status(struct pisb_sandbox *sb)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_runtime *rt = pisb_sandbox_runtime(sb, &ig);

	return rt ? pisb_recorded_status(sb->idir, rt) : PISB_ST_STOPPED;
}

static int refresh(struct pisb_sandbox *sb, int timeout_ms, struct pisb_err *e)
{
	(void)timeout_ms;
	return pisb_sbx_refresh(sb, e);
}

static void describe(struct pisb_sandbox *sb, const struct pisb_config *cfg, struct pisb_jw *w)
{
	_cleanup_free_ char *ws = pisb_sbx_workspace(&sb->rec);

	pisb_jw_kstr(w, "image", cfg->sbx.template_ ? cfg->sbx.template_ : "sbx shell");
	pisb_jw_kstr(w, "workspace", ws);
}

/* the microVM's size as passed to sbx create (null: sbx decided) */
static void limits(struct pisb_sandbox *sb, const struct pisb_config *cfg, bool running,
		   struct pisb_jw *w)
{
	const struct pisb_sbx_config *x = &cfg->sbx;
	bool sized = cfg->resources_explicit || cfg->profile_explicit;
	long long mem = 0;

	(void)sb;
	if (x->memory) {
		size_t n = strlen(x->memory);
		mem = atoll(x->memory);
		if (x->memory[n - 1] == 'm')
			mem /= 1024;
	} else if (sized) {
		mem = cfg->memory_gib;
	}
	pisb_jw_key(w, "limits");
	pisb_jw_obj(w);
	pisb_jw_key(w, "cpus");
	if (x->cpus || sized)
		pisb_jw_int(w, x->cpus ? x->cpus : cfg->cpus);
	else
		pisb_jw_null(w);
	pisb_jw_key(w, "memoryGiB");
	if (mem > 0)
		pisb_jw_int(w, mem);
	else
		pisb_jw_null(w);
	pisb_jw_key(w, "pids");
	pisb_jw_null(w);
	pisb_jw_key(w, "diskGiB");
	pisb_jw_null(w);
	pisb_jw_key(w, "enforced");
	pisb_jw_obj(w);
	pisb_jw_kbool(w, "cpus", running && (x->cpus || sized));
	pisb_jw_kbool(w, "memory", running && mem > 0);
	pisb_jw_kbool(w, "pids", false);
	pisb_jw_kbool(w, "disk", false);
	pisb_jw_obj_end(w);
	pisb_jw_kstr(w, "note", "the microVM's size as given to sbx create (null: sbx's default); pids and disk are sbx's own");
	pisb_jw_obj_end(w);
}

static int exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r, int *code,
			 struct pisb_err *e)
{
	return pisb_sbx_exec_attached(sb, r, code, e);
}

static int shell(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e)
{
	return pisb_sbx_shell(sb, user, code, e);
}

static int docker(struct pisb_sandbox *sb, const char *verb, char *const *args, size_t nargs,
		  struct pisb_jw *w, bool *json_out, int *code, struct pisb_strv *notes,
		  struct pisb_err *e)
{
	return pisb_sbx_docker(sb, verb, args, nargs, w, json_out, code, notes, e);
}

/* the audit of pisb docker NAME verify */
static int verify(struct pisb_sandbox *sb, bool json, struct pisb_buf *out, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_strv_ struct pisb_strv notes = PISB_STRV_INIT;
	struct pisb_jw w;
	bool is_json = false;
	int code = 0;

	pisb_jw_init(&w, &b);
	if (pisb_sbx_docker(sb, "verify", NULL, 0, &w, &is_json, &code, &notes, e) < 0)
		return -1;
	if (json) {
		pisb_buf_add(out, b.s ? b.s : "", b.len);
		pisb_buf_addc(out, '\n');
	} else {
		pisb_docker_verify_text(b.s, b.len, out);
	}
	return code;
}

/* the project (project.h): the workspace is a host directory sbx shares
 * with the VM, seen as the file verbs see it (pisb_sbx_fs_enter: a user
 * and mount namespace holding that directory only), running or not */
static int project_enter(struct pisb_sandbox *sb, int *root, char **ws, struct pisb_err *e)
{
	_cleanup_free_ char *w = pisb_sbx_fs_workspace(sb->idir, e);

	if (!w || pisb_sbx_fs_enter(w, e) < 0)
		return -1;
	*root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*root < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "open the workspace's root");
	*ws = PISB_STEAL(w);
	return 0;
}

/* the workspace sbx shares with the VM, on this host */
/* doctor: the sbx CLI this driver drives */
static void doctor(struct pisb_doctor *d)
{
	char *sbx[] = { "sbx", "version", NULL };

	pisb_doctor_tool(d, "sbx", sbx, "the sbx driver", "install Docker Sandboxes (https://docs.docker.com/ai/sandboxes/)");
}

static int fs_enter(const struct pisb_fs *fs, struct pisb_err *e)
{
	return pisb_sbx_fs_enter(fs->workspace, e);
}

static const struct pisb_fs_how fs_how = { "sbx.log", false, pisb_sbx_fs_workspace, fs_enter };

static const struct pisb_refusal refusals[] = {
	{ PISB_V_PREPARE, "pisb templates are local disks; a sbx sandbox starts from sbx.template" },
	{ PISB_V_CONNECT, "connect attaches an OpenSandbox sandbox (opensandbox.sandboxId)" },
	{ PISB_V_SVC, "sbx has its own network policy; publish a container's ports with 'pisb docker NAME run -p'" },
	{ PISB_V_PREVIEW, "sbx has its own network policy; publish a container's ports with 'pisb docker NAME run -p'" },
	{ PISB_V_GC, "left to its driver; pisb gc removes only pi-sbx-* leftovers that no instance names" },
	{ PISB_V_RENEW, "a sbx sandbox does not expire" },
	{ PISB_V_POOL, "not built: the sbx CLI makes and names its sandboxes; a spare would be one of them kept running before any create asks" },
	{ 0, NULL },
};

const struct pisb_driver pisb_driver_sbx = {
	.name = "sbx",
	.summary = "a Docker Sandboxes microVM with its own docker daemon, through the sbx CLI",
	.caps = PISB_DRV_DOCKER_ALWAYS | PISB_DRV_OWN_KERNEL,
	.refusals = refusals,
	.fs_how = &fs_how,
	.doctor = doctor,
	.create = create,
	.start = start,
	.stop = stop,
	.destroy = destroy,
	.release = release,
	.status = status,
	.refresh = refresh,
	.describe = describe,
	.limits = limits,
	.extra_key = "remote",
	.exec = exec_attached,
	.exec_handle = pisb_sbx_exec_handle,
	.exec_status = pisb_sbx_exec_status,
	.exec_kill = pisb_sbx_exec_kill,
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
	.project_enter = project_enter,
	.docker = docker,
	.verify = verify,
	.gc_name = pisb_sbx_name,
	.gc_leftovers = pisb_sbx_gc_leftovers,
};
