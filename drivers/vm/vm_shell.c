/* vm_shell.c - pisb shell on a vm sandbox: a login shell on a pty of the
 * guest's own (util-linux `script` in the guest makes it), its bytes
 * relayed through the agent's EXEC like any command.  The caller's
 * terminal never enters the guest: pisb puts it in raw mode here, on the
 * host, relays bytes, and restores it when the shell ends.  When that
 * terminal changes size (SIGWINCH), the new size goes to the guest's pty
 * (the agent's WINSZ). */
#include "vm_fs.h"
#include "vm.h"
#include "vm_internal.h"
#include "config.h"
#include "err.h"
#include "exec.h"
#include "instance.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* in the guest: size the pty, name it for the agent (which resizes it
 * when the caller's terminal changes size: $PPID is `script`, the
 * command), go to the workspace, a login shell (as $PISB_U when set) */
static const char shell_cmd[] =
	"[ -z \"$PISB_WS\" ] || stty rows \"${PISB_WS% *}\" cols \"${PISB_WS#* }\" 2>/dev/null; "
	"tty > /run/pisb/pty.$PPID 2>/dev/null; "
	"cd \"$PISB_CWD\" 2>/dev/null || cd; "
	"if [ -n \"$PISB_U\" ]; then exec su -l -- \"$PISB_U\"; fi; "
	"if [ -x /bin/bash ]; then exec /bin/bash -l; fi; exec /bin/sh -l";

int pisb_vm_shell(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT, dummy = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = NULL;
	const struct pisb_config *cfg;
	struct pisb_exec_req req;
	struct winsize ws;
	struct vm_run run;
	bool tty = isatty(0);
	int idir = vm_open_running(sb, &cfg, e), ret;

	if (idir < 0)
		return -1;
	memset(&req, 0, sizeof(req));
	req.name = sb->name;
	req.sh = "true";
	vm_build(cfg, &req, &env, &dummy, &cwd);
	pisb_strv_pushf(&env, "PISB_CWD=%s", cwd);
	if (user && strcmp(user, "root"))
		pisb_strv_pushf(&env, "PISB_U=%s", user);
	if (tty && ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
		pisb_strv_pushf(&env, "PISB_WS=%u %u", ws.ws_row, ws.ws_col);
	run = (struct vm_run){ (char *[]){ "script", "-qfec", (char *)shell_cmd, "/dev/null", NULL },
			       env.v, "/", 0, 1, 2, true, false, 0, tty, false, NULL };
	if (tty)
		pisb_tty_raw(0);
	ret = vm_run(idir, &run, code, e);
	pisb_tty_restore();
	if (ret < 0)
		pisb_err_prefix(e, "shell in sandbox '%s'", sb->name);
	return ret;
}
