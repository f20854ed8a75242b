/* pisb-exec - run commands in a sandbox; see man/pisb-exec.1 */
#include "front.h"
#include "../common/exec.h"
#include "../common/json.h"
#include "../common/opensandbox.h"
#include "../common/sbx.h"
#include "../common/vm.h"

#include <stdio.h>
#include <string.h>

/* Print a handle result: JSON, or the output and a note on stderr. */
static int report(struct pisb_ctx *c, struct pisb_buf *b, int code, bool running)
{
	struct pisb_json j;
	int t;
	/* a remote stream that dropped before the exit status: the result
	 * (exitCode null) is printed, and the status is unknown: exit 5 */
	bool unknown = !running && code == PISB_EXIT_BACKEND && c->err.msg[0];

	if (c->a.json) {
		pisb_front_out(b);
		return unknown ? -1 : 0;
	}
	if (pisb_json_parse(&j, b->s, b->len, &c->err) < 0)
		return -1;
	{
		_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
		_cleanup_free_ char *h = pisb_json_str(&j, pisb_json_get(&j, 0, "pid"));
		bool trunc = false;
		t = pisb_json_get(&j, 0, "output");
		pisb_json_str_buf(&j, t, &out);
		pisb_json_bool(&j, pisb_json_get(&j, 0, "truncated"), &trunc);
		pisb_write_all(1, out.s ? out.s : "", out.len);
		if (trunc)
			pisb_front_info(c, "[output truncated at 64 KiB: run 'pisb exec-status %s %s' for more]",
					c->a.pos[0], h ? h : "");
		if (running)
			pisb_front_info(c, "still running: handle %s", h ? h : "");
	}
	pisb_json_release(&j);
	if (unknown)
		return -1;
	return running ? 0 : code;
}

static int cmd_exec(struct pisb_ctx *c)
{
	struct pisb_exec_req r = { 0 };
	const char *envs[256];
	size_t nenv = pisb_args_all(&c->a, "env", envs, 256);
	long long tmo = -1;
	int code = 0, rem;

	if (nenv > 256)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "at most 256 --env");
	for (size_t i = 0; i < nenv; i++)
		if (!strchr(envs[i], '=') || envs[i][0] == '=')
			return pisb_err_set(&c->err, PISB_EXIT_USAGE, "--env '%s': expected K=V", envs[i]);
	r.name = c->a.pos[0];
	r.sh = pisb_args_get(&c->a, "sh");
	r.argv = c->a.cmd;
	r.argc = c->a.ncmd;
	r.cwd = pisb_args_get(&c->a, "cwd");
	r.env = (char *const *)envs;
	r.nenv = nenv;
	if ((r.sh != NULL) == (r.argc > 0))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "exec: give either --sh STRING or -- CMD [ARG]... (usage: pisb exec %s)",
				    c->a.verb->synopsis);
	if (pisb_args_int(&c->a, "timeout-ms", 0, 60000, -1, &tmo, &c->err) < 0)
		return -1;
	if ((rem = pisb_os_owns(&c->st, r.name, &c->err)) < 0)
		return -1;
	pisb_os_set_verbose(c->a.verbose);
	if (!rem && pisb_sbx_owns(&c->st, r.name, &c->err) == 1)
		rem = 2;
	if (!rem && pisb_vm_owns(&c->st, r.name, &c->err) == 1)
		rem = 3;
	if (tmo < 0) {
		if (c->a.json)
			return pisb_err_set(&c->err, PISB_EXIT_USAGE,
					    "exec --json needs --timeout-ms (streamed output is not JSON)");
		/* before the command runs, errors keep their own codes (3, 5...);
		 * after, the command's status is ours */
		if ((rem == 3 ? pisb_vm_exec_attached(&c->st, &r, &code, &c->err)
		     : rem == 2 ? pisb_sbx_exec_attached(&c->st, &r, &code, &c->err)
		     : rem ? pisb_os_exec_attached(&c->st, &r, &code, &c->err)
			   : pisb_exec_attached(&c->st, &r, &code, &c->err)) < 0)
			return -1;
		return code;
	}
	{
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		struct pisb_jw w;
		bool running = false;
		r.timeout_ms = (int)tmo;
		pisb_jw_init(&w, &b);
		if ((rem == 3 ? pisb_vm_exec_handle(&c->st, &r, &w, &code, &running, &c->err)
		     : rem == 2 ? pisb_sbx_exec_handle(&c->st, &r, &w, &code, &running, &c->err)
		     : rem ? pisb_os_exec_handle(&c->st, &r, &w, &code, &running, &c->err)
			   : pisb_exec_handle(&c->st, &r, &w, &code, &running, &c->err)) < 0)
			return -1;
		return report(c, &b, code, running);
	}
}

static int cmd_status_kill(struct pisb_ctx *c)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;
	long long tmo = 0;
	bool running = false;
	int code = 0, r;

	int rem = pisb_os_owns(&c->st, c->a.pos[0], &c->err);

	if (rem < 0)
		return -1;
	if (!rem && pisb_sbx_owns(&c->st, c->a.pos[0], &c->err) == 1)
		rem = 2;
	if (!rem && pisb_vm_owns(&c->st, c->a.pos[0], &c->err) == 1)
		rem = 3;
	pisb_os_set_verbose(c->a.verbose);
	pisb_jw_init(&w, &b);
	if (!strcmp(c->a.verb->name, "exec-kill")) {
		r = rem == 3 ? pisb_vm_exec_kill(&c->st, c->a.pos[0], c->a.pos[1], &w, &code, &c->err)
		    : rem == 2 ? pisb_sbx_exec_kill(&c->st, c->a.pos[0], c->a.pos[1], &w, &code, &c->err)
		    : rem ? pisb_os_exec_kill(&c->st, c->a.pos[0], c->a.pos[1], &w, &code, &c->err)
			  : pisb_exec_kill(&c->st, c->a.pos[0], c->a.pos[1], &w, &code, &c->err);
	} else {
		if (pisb_args_int(&c->a, "timeout-ms", 0, 60000, 0, &tmo, &c->err) < 0)
			return -1;
		r = rem == 3 ? pisb_vm_exec_status(&c->st, c->a.pos[0], c->a.pos[1], (int)tmo, &w,
						   &code, &running, &c->err)
		    : rem == 2 ? pisb_sbx_exec_status(&c->st, c->a.pos[0], c->a.pos[1], (int)tmo, &w,
						    &code, &running, &c->err)
		    : rem ? pisb_os_exec_status(&c->st, c->a.pos[0], c->a.pos[1], (int)tmo, &w, &code,
					      &running, &c->err)
			: pisb_exec_status(&c->st, c->a.pos[0], c->a.pos[1], (int)tmo, &w, &code,
					   &running, &c->err);
	}
	if (r < 0)
		return -1;
	return report(c, &b, code, running);
}

static int cmd_shell(struct pisb_ctx *c)
{
	int code = 0, rem = pisb_os_owns(&c->st, c->a.pos[0], &c->err);

	if (rem < 0)
		return -1;
	if (rem)
		return pisb_err_set(&c->err, PISB_EXIT_FAIL,
				    "shell: sandbox '%s' is an opensandbox sandbox, whose execd has no terminal; use 'pisb exec %s -- CMD'",
				    c->a.pos[0], c->a.pos[0]);
	if (pisb_vm_owns(&c->st, c->a.pos[0], &c->err) == 1)
		return pisb_err_set(&c->err, PISB_EXIT_FAIL,
				    "shell: sandbox '%s' uses driver vm, which has no terminal yet; use 'pisb exec %s -- CMD'",
				    c->a.pos[0], c->a.pos[0]);
	if (pisb_sbx_owns(&c->st, c->a.pos[0], &c->err) == 1) {
		if (pisb_sbx_shell(&c->st, c->a.pos[0], c->a.npos > 1 ? c->a.pos[1] : NULL, &code,
				   &c->err) < 0)
			return -1;
		return code;
	}
	if (pisb_exec_shell(&c->st, c->a.pos[0], c->a.npos > 1 ? c->a.pos[1] : NULL, &code,
			    &c->err) < 0)
		return -1;
	return code;
}

static const struct pisb_handler handlers[] = {
	{ "exec", cmd_exec, true },
	{ "exec-status", cmd_status_kill, true },
	{ "exec-kill", cmd_status_kill, true },
	{ "shell", cmd_shell, true },
	{ NULL, NULL, false },
};

int main(int argc, char **argv)
{
	return pisb_front_main("pisb-exec", handlers, argc, argv);
}
