/* vm_handle.c - exec handles of vm sandboxes (exec --timeout-ms,
 * exec-status, exec-kill), through the one exec-handle protocol
 * (handle.h).
 *
 * A handle "vm-XXXXXXXX" runs the command through the guest agent like an
 * attached exec, with stdin empty.  exec-kill's SIGTERM goes on to the
 * command's process group in the guest; its hard signal, SIGUSR2 after
 * 2 s, goes on as SIGKILL.  Handles die with the VM (status 5 afterwards).
 */
#include "vm.h"
#include "vm_internal.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "handle.h"
#include "state.h"
#include "util.h"

#include <signal.h>
#include <unistd.h>

struct vm_handle {
	int idir;
	char *const *argv, *const *env;
	const char *cwd;
};

static int run(void *arg, const char *handle, int out, int *code, struct pisb_err *e)
{
	struct vm_handle *h = arg;
	struct vm_run r = { h->argv, h->env, h->cwd, -1, out, out, true, true, 0, false, false, NULL };

	(void)handle;
	return vm_run(h->idir, &r, code, e);
}

static const struct pisb_handle_ops ops_of = {
	.prefix = "vm", .run = run, .hard_signal = SIGUSR2, .lost = "the VM stopped?", .keep_fd = -1,
};

int pisb_vm_exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT, argv = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = NULL;
	const struct pisb_config *cfg;
	struct pisb_handle_ops ops = ops_of;
	struct vm_handle h;
	int idir = vm_open_running(sb, &cfg, e);

	if (idir < 0)
		return -1;
	vm_build(cfg, r, &env, &argv, &cwd);
	h = (struct vm_handle){ idir, argv.v, env.v, cwd };
	ops.keep_fd = idir;
	ops.arg = &h;
	return pisb_handle_start(idir, r->name, &ops, r->timeout_ms, w, code, running, e);
}

int pisb_vm_exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	return pisb_handle_status(sb->idir, sb->name, &ops_of, handle, timeout_ms, w, code, running, e);
}

int pisb_vm_exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
		      int *code, struct pisb_err *e)
{
	return pisb_handle_kill(sb->idir, sb->name, &ops_of, handle, w, code, e);
}
