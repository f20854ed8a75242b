/* driver.c - the opensandbox driver's table (driver.h): sandboxes on a
 * remote OpenSandbox server, over its lifecycle API and execd. */
#include "driver.h"
#include "config.h"
#include "doctor.h"
#include "err.h"
#include "exec.h"
#include "fs_verbs.h"
#include "inspect.h"
#include "json.h"
#include "opensandbox.h"
#include "rx.h"
#include "util.h"

static int create(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		  struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_os_create(st, cfg, config_json, o, e);
}

static int connect_(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		    struct pisb_lc_opts *o, struct pisb_err *e)
{
	if (!cfg->os.sandbox_id)
		return pisb_err_set(e, PISB_EXIT_USAGE, "connect needs opensandbox.sandboxId");
	return pisb_os_connect(st, cfg, config_json, o, e);
}

static int start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_os_start(sb, o, e);
}

static int stop(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_os_stop(sb, o, e);
}

static int destroy(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_os_destroy(sb, o, e);
}

static int release(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	return pisb_os_release(sb, o, e);
}

static enum pisb_status status(struct pisb_sandbox *sb)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_runtime *rt = pisb_sandbox_runtime(sb, &ig);

	_cleanup_free_ char *unreachable = NULL;

	if (!rt)
		return PISB_ST_STOPPED;
	if ((unreachable = pisb_os_unreachable(rt->extra_json)))
		return PISB_ST_UNREACHABLE;
	return pisb_recorded_status(sb->idir, rt);
}

static int refresh(struct pisb_sandbox *sb, int timeout_ms, struct pisb_err *e)
{
	return pisb_os_refresh(sb, timeout_ms, e);
}

static void describe(struct pisb_sandbox *sb, const struct pisb_config *cfg, struct pisb_jw *w)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_runtime *rt = pisb_sandbox_runtime(sb, &ig);
	_cleanup_free_ char *unreachable = rt ? pisb_os_unreachable(rt->extra_json) : NULL;

	/* why the status says unreachable: the server's error */
	if (unreachable)
		pisb_jw_kstr(w, "error", unreachable);
	pisb_jw_kstr(w, "image", cfg->os.image ? cfg->os.image :
			       cfg->os.snapshot_id ? cfg->os.snapshot_id : cfg->os.sandbox_id);
	pisb_jw_kstr(w, "workspace", cfg->os.workspace ? cfg->os.workspace : cfg->workspace);
}

/* the remote sandbox's own limits (resourceLimits), never the local driver's */
static void limits(struct pisb_sandbox *sb, const struct pisb_config *cfg, bool running,
		   struct pisb_jw *w)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_runtime *rt = pisb_sandbox_runtime(sb, &ig);

	(void)running;
	pisb_os_inspect(w, cfg, rt ? rt->extra_json : NULL);
}

static void config_out(struct pisb_sandbox *sb, struct pisb_jw *w)
{
	pisb_os_config_json(w, sb->rec.config_json);
}

static int read_text(struct pisb_sandbox *sb, const char *path, long long offset,
		     long long limit, size_t cap, char **abs, struct pisb_fs_text *t,
		     struct pisb_err *e)
{
	return pisb_os_read_text(sb, path, offset, limit, cap, abs, t, e);
}

static int read_raw(struct pisb_sandbox *sb, const char *path, int outfd, long long *bytes,
		    struct pisb_err *e)
{
	return pisb_os_read_raw(sb, path, outfd, bytes, e);
}

static int write_(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_src *src,
		  int mode, bool mkdirs, char **abs, long long *bytes, struct pisb_err *e)
{
	return pisb_os_write(sb, path, src, mode, mkdirs, abs, bytes, e);
}

static int edit(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_edit *ed,
		size_t n, char **abs, long long *bytes, struct pisb_err *e)
{
	return pisb_os_edit(sb, path, ed, n, abs, bytes, e);
}

static int ls(struct pisb_sandbox *sb, const char *path, char **abs, struct pisb_fs_info **out,
	      size_t *n, struct pisb_err *e)
{
	return pisb_os_ls(sb, path, abs, out, n, e);
}

static int stat_(struct pisb_sandbox *sb, const char *path, char **abs, struct pisb_fs_info *out,
		 struct pisb_err *e)
{
	return pisb_os_stat(sb, path, abs, out, e);
}

static int mkdir_(struct pisb_sandbox *sb, const char *path, char **abs, bool *created,
		  struct pisb_err *e)
{
	return pisb_os_mkdir(sb, path, abs, created, e);
}

static int find(struct pisb_sandbox *sb, const struct pisb_fs_find *o, char **abs,
		pisb_fs_find_fn fn, void *arg, bool *truncated, struct pisb_err *e)
{
	return pisb_os_find(sb, o, abs, fn, arg, truncated, e);
}

static int grep(struct pisb_sandbox *sb, const struct pisb_fs_grep *o, char **abs,
		pisb_fs_grep_fn fn, void *arg, struct pisb_fs_grep_result *r, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf ere = PISB_BUF_INIT;
	struct pisb_fs_grep g = *o;

	if (!g.literal) {
		/* execd's side runs grep -E: ripgrep's syntax (Pi's grep tool
		 * writes for it) as an ERE; the local search takes it as it is */
		bool icase;
		if (pisb_rx_to_ere(g.pattern, &ere, &icase, e) < 0)
			return -1;
		g.pattern = ere.s ? ere.s : "";
		g.icase |= icase;
	}
	return pisb_os_grep(sb, &g, abs, fn, arg, r, e);
}

static int push(struct pisb_sandbox *sb, const char *hostdir, const char *to, bool all,
		struct pisb_xfer *x, struct pisb_err *e)
{
	return pisb_os_push(sb, hostdir, to, all, x, e);
}

static int pull(struct pisb_sandbox *sb, const char *path, const char *hostdir,
		const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e)
{
	return pisb_os_pull(sb, path, hostdir, o, x, e);
}

/* no controller: logs shows pisb's remote log (lifecycle steps, renewals,
 * setup output) */
/* doctor: the docker an OpenSandbox server here would run sandboxes on */
static void doctor(struct pisb_doctor *d)
{
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT, srv = PISB_BUF_INIT;
	char *ver[] = { "docker", "--version", NULL };
	char *info[] = { "docker", "version", "--format", "{{.Server.Version}}", NULL };
	const char *what = "OpenSandbox servers run sandboxes on Docker; the local driver never uses it";
	int r = pisb_doctor_run(ver, &out, 10000), s;

	if (r != 0) {
		pisb_doctor_add(d, "docker", PISB_DOC_WARN, "install Docker Engine (https://docs.docker.com/engine/install/) if you run an OpenSandbox server here",
		     r == -1 ? "'docker' not found on PATH (optional: %s)" : "'docker --version' failed (optional: %s)", what);
		return;
	}
	s = pisb_doctor_run(info, &srv, 10000);
	if (s == 0)
		pisb_doctor_add(d, "docker", PISB_DOC_PASS, NULL, "%s; daemon %s answers (%s)", pisb_doctor_first_line(out.s),
		     pisb_doctor_first_line(srv.s), what);
	else
		pisb_doctor_add(d, "docker", PISB_DOC_WARN, "start the daemon: sudo systemctl start docker (or dockerd &)",
		     "%s, but no daemon answers: %s (optional: %s)", pisb_doctor_first_line(out.s),
		     s == -2 ? "timed out after 10 s" : pisb_doctor_first_line(srv.s), what);
}

static const struct pisb_fs_how fs_how = { "remote.log", false, NULL, NULL };

static const struct pisb_refusal refusals[] = {
	{ PISB_V_PREPARE, "pisb templates are local disks; an OpenSandbox sandbox starts from opensandbox.image or snapshotId" },
	{ PISB_V_SHELL, "OpenSandbox's execd has no terminal; use 'pisb exec NAME -- CMD'" },
	{ PISB_V_SVC, "services run under the local driver's controller" },
	{ PISB_V_PREVIEW, "previews run under the local driver's controller" },
	{ PISB_V_DOCKER, "no docker daemon of its own; pisb docker needs a sbx sandbox (driver: sbx) and never falls back to the host's docker daemon" },
	{ PISB_V_VERIFY, "the isolation audit knows the local and sbx drivers only" },
	{ PISB_V_POOL, "not built: a spare would hold a sandbox on the server before any create asks for one" },
	{ 0, NULL },
};

const struct pisb_driver pisb_driver_opensandbox = {
	.name = "opensandbox",
	.summary = "a sandbox on a remote OpenSandbox server (Docker or Kubernetes), over HTTP",
	.caps = PISB_DRV_REMOTE | PISB_DRV_CONFIG_SECTION | PISB_DRV_OWN_KERNEL,
	.refusals = refusals,
	.create = create,
	.connect = connect_,
	.start = start,
	.stop = stop,
	.destroy = destroy,
	.release = release,
	.status = status,
	.refresh = refresh,
	.refresh_all = pisb_os_refresh_all,
	.describe = describe,
	.limits = limits,
	.extra_key = "remote",
	.config_out = config_out,
	.exec = pisb_os_exec_attached,
	.exec_handle = pisb_os_exec_handle,
	.exec_status = pisb_os_exec_status,
	.exec_kill = pisb_os_exec_kill,
	.read_text = read_text,
	.read_raw = read_raw,
	.write = write_,
	.edit = edit,
	.ls = ls,
	.stat = stat_,
	.mkdir = mkdir_,
	.find = find,
	.grep = grep,
	.logs = pisb_fsv_logs,
	.fs_how = &fs_how,
	.doctor = doctor,
	.push = push,
	.pull = pull,
	.project_archive = pisb_os_project_archive,
	.renew = pisb_os_renew_pass,
	.gc_sweep = pisb_os_gc,
	.gc_staged = pisb_os_gc_staged,
};
