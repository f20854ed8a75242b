/* exec_verbs.c - the verbs of pisb-exec (run commands in a sandbox; see
 * man/pisb-exec.1).  cmd/pisb-exec.c names them in its table, and so does
 * the dispatcher, which serves exec, exec-status and exec-kill itself
 * (cmd/pisb_serve.c). */
#include "exec_cmd.h"
#include "docker_policy.h"
#include "driver.h"
#include "exec.h"
#include "json.h"

#include <fcntl.h>
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
		long long dropped = 0;
		t = pisb_json_get(&j, 0, "output");
		pisb_json_str_buf(&j, t, &out);
		pisb_json_bool(&j, pisb_json_get(&j, 0, "truncated"), &trunc);
		pisb_json_int(&j, pisb_json_get(&j, 0, "droppedBytes"), &dropped);
		pisb_write_all(1, out.s ? out.s : "", out.len);
		if (dropped > 0)
			pisb_front_info(c, "[%lld bytes of output past what a handle keeps were dropped]", dropped);
		else if (trunc)
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

int exec_cmd_exec(struct pisb_ctx *c)
{
	struct pisb_exec_req r = { 0 };
	char *av[6];
	long long efd = -1;
	const char *envs[256];
	size_t nenv = pisb_args_all(&c->a, "env", envs, 256);
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	long long tmo = -1;
	int code = 0;

	if (nenv > 256)
		return pisb_err_set(&c->err, PISB_EXIT_USAGE, "at most 256 --env");
	for (size_t i = 0; i < nenv; i++)
		if (!strchr(envs[i], '=') || envs[i][0] == '=')
			return pisb_err_set(&c->err, PISB_EXIT_USAGE, "--env '%s': expected K=V", envs[i]);
		else if (pisb_docker_env_refused(envs[i]))
			return pisb_err_set(&c->err, PISB_EXIT_USAGE,
					    "--env '%.*s': docker's and compose's own variables (DOCKER_*, COMPOSE_*) are refused",
					    (int)strcspn(envs[i], "="), envs[i]);
	r.name = c->a.pos[0];
	r.sh = pisb_args_get(&c->a, "sh");
	if (pisb_args_get(&c->a, "bash")) {
		if (r.sh)
			return pisb_err_set(&c->err, PISB_EXIT_USAGE, "exec: give --sh or --bash, not both");
		r.sh = pisb_args_get(&c->a, "bash");
		r.bash = true;
	}
	r.argv = c->a.cmd;
	r.argc = c->a.ncmd;
	r.cwd = pisb_args_get(&c->a, "cwd");
	r.env = (char *const *)envs;
	r.nenv = nenv;
	if ((r.sh != NULL) == (r.argc > 0))
		return pisb_err_set(&c->err, PISB_EXIT_USAGE,
				    "exec: give either --sh STRING, --bash STRING or -- CMD [ARG]... (usage: pisb exec %s)",
				    c->a.verb->synopsis);
	if (pisb_args_int(&c->a, "timeout-ms", 0, 60000, -1, &tmo, &c->err) < 0 ||
	    pisb_args_int(&c->a, "events-fd", 0, 65535, -1, &efd, &c->err) < 0)
		return -1;
	r.events = efd >= 0;
	r.events_fd = (int)efd;
	/* the command never inherits it: what it leaves running must not hold the caller's pipe */
	if (r.events && fcntl(r.events_fd, F_SETFD, FD_CLOEXEC) < 0)
		return pisb_err_sys(&c->err, PISB_EXIT_USAGE, "--events-fd %d", r.events_fd);
	if (pisb_sandbox_open(&sb, &c->st, r.name, &c->err) < 0)
		return -1;
	if (pisb_exec_shell(&sb, &r, av, &c->err) < 0)
		return -1;
	if (tmo < 0) {
		if (c->a.json)
			return pisb_err_set(&c->err, PISB_EXIT_USAGE,
					    "exec --json needs --timeout-ms (streamed output is not JSON)");
		/* before the command runs, errors keep their own codes (3, 5...);
		 * after, the command's status is ours */
		if (!sb.drv->exec)
			return pisb_driver_refuse(&sb, PISB_V_EXEC, &c->err);
		if (sb.drv->exec(&sb, &r, &code, &c->err) < 0)
			return -1;
		return code;
	}
	{
		_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
		struct pisb_jw w;
		bool running = false;
		r.timeout_ms = (int)tmo;
		if (!sb.drv->exec_handle)
			return pisb_driver_refuse(&sb, PISB_V_EXEC_HANDLE, &c->err);
		pisb_jw_init(&w, &b);
		if (sb.drv->exec_handle(&sb, &r, &w, &code, &running, &c->err) < 0)
			return -1;
		return report(c, &b, code, running);
	}
}

int exec_cmd_status_kill(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	bool kill = !strcmp(c->a.verb->name, "exec-kill");
	struct pisb_jw w;
	long long tmo = 0;
	bool running = false;
	int code = 0, r;

	if (!kill && pisb_args_int(&c->a, "timeout-ms", 0, 60000, 0, &tmo, &c->err) < 0)
		return -1;
	if (pisb_sandbox_open(&sb, &c->st, c->a.pos[0], &c->err) < 0)
		return -1;
	if (kill ? !sb.drv->exec_kill : !sb.drv->exec_status)
		return pisb_driver_refuse(&sb, kill ? PISB_V_EXEC_KILL : PISB_V_EXEC_STATUS, &c->err);
	pisb_jw_init(&w, &b);
	if (kill)
		r = sb.drv->exec_kill(&sb, c->a.pos[1], &w, &code, &c->err);
	else
		r = sb.drv->exec_status(&sb, c->a.pos[1], (int)tmo, &w, &code, &running, &c->err);
	if (r < 0)
		return -1;
	return report(c, &b, code, running);
}

int exec_cmd_shell(struct pisb_ctx *c)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	int code = 0;

	if (pisb_sandbox_open(&sb, &c->st, c->a.pos[0], &c->err) < 0)
		return -1;
	if (!sb.drv->shell)
		return pisb_driver_refuse(&sb, PISB_V_SHELL, &c->err);
	if (sb.drv->shell(&sb, c->a.npos > 1 ? c->a.pos[1] : NULL, &code, &c->err) < 0)
		return -1;
	return code;
}
