/* sbx_exec.c - detached commands (exec handles) of sbx sandboxes, through
 * the one exec-handle protocol (handle.h).
 *
 * A handle "sbx-XXXXXXXX" runs `sbx exec` attached in the handle's runner.
 * Inside the sandbox the command records its pid in /tmp/.pisb-exec-HANDLE
 * so that exec-kill can signal it there: sbx does not promise to pass a
 * signal of its client on to the command.
 */
#include "sbx.h"
#include "sbx_internal.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "handle.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

struct sbx_handle {
	struct sbx_inst *t;
	const struct pisb_exec_req *r;
};

/* the runner: `sbx exec` with the command's pid kept for exec-kill */
static int run(void *arg, const char *handle, int out, int *code, struct pisb_err *e)
{
	struct sbx_handle *h = arg;
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_free_ char *pidfile = xasprintf("/tmp/.pisb-exec-%s", handle);
	struct sbx_run o = { .in_fd = -1, .out_fd = out, .err_fd = out, .forward = true };

	sbx_exec_argv(h->t, h->r, false, pidfile, &av);
	return sbx_run(h->t->bin, av.v, h->t->env.v, &o, code, e);
}

/* TERM the command inside (its group, else it), KILL after 2 s */
static void kill_inside(void *arg, const char *handle)
{
	struct sbx_handle *h = arg;
	static const char script[] =
		"p=$(cat \"$1\" 2>/dev/null) || exit 0; kill -TERM -- -\"$p\" 2>/dev/null || kill -TERM \"$p\" 2>/dev/null; "
		"i=0; while [ $i -lt 20 ] && kill -0 \"$p\" 2>/dev/null; do sleep 0.1; i=$((i+1)); done; "
		"kill -KILL -- -\"$p\" 2>/dev/null || kill -KILL \"$p\" 2>/dev/null; rm -f \"$1\"; exit 0";
	_cleanup_free_ char *pidfile = xasprintf("/tmp/.pisb-exec-%s", handle);
	char *av[] = { "sbx", "exec", h->t->sbx, "--", "/bin/sh", "-c", (char *)script, "sh", pidfile, NULL };
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	struct sbx_run o = { .in_fd = -1, .out_fd = -1, .merge = true, .out = &out,
			     .timeout_ms = SBX_LC_TIMEOUT_MS };
	struct pisb_err ie = PISB_ERR_INIT;
	int rc = 0;

	sbx_run(h->t->bin, av, h->t->env.v, &o, &rc, &ie);
}

static void handle_ops(struct pisb_handle_ops *ops, struct sbx_handle *h)
{
	*ops = (struct pisb_handle_ops){
		.prefix = "sbx", .run = run, .kill_inside = kill_inside,
		.lost = "exit status unknown", .keep_fd = -1, .arg = h,
	};
}

int pisb_sbx_exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			 struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	struct sbx_inst t;
	struct sbx_handle h = { &t, r };
	struct pisb_handle_ops ops;
	int ret = -1;

	if (sbx_inst_of(sb, &t, e) < 0)
		return -1;
	if (!strcmp(t.rt.state, "gone")) {
		pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s': its sbx sandbox '%s' no longer exists",
			     t.name, t.sbx);
		goto out;
	}
	handle_ops(&ops, &h);
	ret = pisb_handle_start(t.idir, t.name, &ops, r->timeout_ms, w, code, running, e);
	if (ret == 0 && !*running && strcmp(t.rt.state, "running"))
		sbx_mark(&t, "running", "running");
out:
	sbx_inst_release(&t);
	return ret;
}

int pisb_sbx_exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			 struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	struct pisb_handle_ops ops;

	handle_ops(&ops, NULL);
	return pisb_handle_status(sb->idir, sb->name, &ops, handle, timeout_ms, w, code, running, e);
}

int pisb_sbx_exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
		       int *code, struct pisb_err *e)
{
	struct sbx_inst t;
	struct sbx_handle h = { &t, NULL };
	struct pisb_handle_ops ops;
	int ret;

	if (sbx_inst_of(sb, &t, e) < 0)
		return -1;
	handle_ops(&ops, &h);
	ret = pisb_handle_kill(sb->idir, sb->name, &ops, handle, w, code, e);
	sbx_inst_release(&t);
	return ret;
}
