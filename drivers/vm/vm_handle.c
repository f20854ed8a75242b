/* vm_handle.c - exec handles of vm sandboxes (exec --timeout-ms,
 * exec-status, exec-kill).
 *
 * A handle "vm-XXXXXXXX" is a host-side supervisor (detached, its own
 * session) that runs the command through the guest agent like an
 * attached exec, with stdin empty and stdout and stderr merged into
 * instances/NAME/exec/HANDLE/output.  Beside it: pid (the supervisor),
 * lock (held by the supervisor while it lives), offset (how far
 * exec-status has read) and status.json ({"exitCode": N}, at the end).
 * exec-kill signals the supervisor: SIGTERM, which it sends on to the
 * command's process group in the guest, then SIGUSR2 after 2 s, which it
 * sends on as SIGKILL.  Handles die with the VM (status 5 afterwards).
 */
#include "vm.h"
#include "vm_internal.h"
#include "config.h"
#include "err.h"
#include "exec.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static bool handle_ok(const char *h)
{
	if (strlen(h) != 11 || !pisb_str_starts(h, "vm-"))
		return false;
	for (const char *p = h + 3; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static int handle_dir(int idir, const char *name, const char *handle, struct pisb_err *e)
{
	_cleanup_free_ char *p = xasprintf("exec/%s", handle);
	int fd = handle_ok(handle) ? openat(idir, p, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;

	if (fd < 0)
		return pisb_err_set(e, PISB_EXIT_NOTFOUND, "sandbox '%s': no exec handle '%s'", name, handle);
	return fd;
}

/* status.json's exit code; *done false while there is none */
static int final_code(int hdir, bool *done)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	const char *p;

	*done = pisb_read_file_at(hdir, "status.json", &b, 256) == 0 && b.s;
	if (!*done)
		return 0;
	p = strstr(b.s, "\"exitCode\":");
	return p ? atoi(p + 11) : PISB_EXIT_PISB;
}

static void wait_for(int hdir, int timeout_ms)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	bool done;

	for (;;) {
		final_code(hdir, &done);
		if (done || !pisb_lock_is_held(hdir, "lock") || pisb_mono_ms() >= deadline)
			return;
		nap(10);
	}
}

/* The new output and the state, as exec.h's JSON (pisb_exec_report). */
static int report(const char *name, int hdir, const char *handle, struct pisb_jw *w, int *code,
		  bool *running, struct pisb_err *e)
{
	bool done, lost;
	int ec = final_code(hdir, &done);

	/* no status and nobody running it: the supervisor died */
	lost = !done && !pisb_lock_is_held(hdir, "lock");
	*running = !done && !lost;
	*code = done ? ec : 0;
	if (pisb_exec_report(hdir, handle, done, ec, *running, w, e) < 0)
		return -1;
	if (lost) {
		*code = PISB_EXIT_BACKEND;
		pisb_err_set(e, PISB_EXIT_BACKEND,
			     "sandbox '%s': the supervisor of '%s' ended without an exit status (the VM stopped?)",
			     name, handle);
	}
	return 0;
}

int pisb_vm_exec_handle(struct pisb_state *st, const struct pisb_exec_req *r,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT, argv = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = NULL, *hpath = NULL;
	struct pisb_config *cfg = NULL;
	char rnd[9], handle[16];
	int idir, hdir = -1, ready[2] = { -1, -1 }, ret = -1;
	pid_t pid;

	if (vm_open_running(st, r->name, &idir, &cfg, e) < 0)
		return -1;
	vm_build(cfg, r, &env, &argv, &cwd);
	{
		_cleanup_close_ int edir = openat(idir, "exec", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (edir >= 0)
			pisb_exec_prune(edir, handle_ok);
	}
	pisb_random_hex(rnd, 8);
	snprintf(handle, sizeof(handle), "vm-%s", rnd);
	hpath = xasprintf("exec/%s", handle);
	if (pisb_mkdirs_at(idir, hpath, 0700, e) < 0)
		goto out;
	hdir = openat(idir, hpath, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (hdir < 0 || pisb_atomic_write(hdir, "output", "", 0, 0600, e) < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "make handle '%s'", handle);
		goto out;
	}
	if (pipe2(ready, O_CLOEXEC) < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "pipe");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "fork");
		goto out;
	}
	if (pid == 0) {
		/* the supervisor: detached, no fds of the caller's */
		struct pisb_err le = PISB_ERR_INIT;
		int null = open("/dev/null", O_RDWR | O_CLOEXEC), lk, out, c = 0;
		char num[32], st_json[64];
		setsid();
		if (fork() != 0)
			_exit(0);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		lk = pisb_lock_acquire(hdir, "lock", true, 0, "exec handle", &le);
		out = openat(hdir, "output", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
		snprintf(num, sizeof(num), "%d", (int)getpid());
		pisb_atomic_write(hdir, "pid", num, strlen(num), 0600, &le);
		for (int fd = 3; fd < 4096; fd++)
			if (fd != hdir && fd != idir && fd != lk && fd != out && fd != ready[1])
				close(fd);
		pisb_write_all(ready[1], "1", 1);
		close(ready[1]);
		{
			struct vm_run run = { argv.v, env.v, cwd, -1, out, out, true, true };
			if (lk < 0 || out < 0 || vm_run(idir, &run, &c, &le) < 0) {
				if (out >= 0 && le.msg[0]) {
					pisb_write_all(out, le.msg, strlen(le.msg));
					pisb_write_all(out, "\n", 1);
				}
				c = PISB_EXIT_BACKEND;
			}
		}
		snprintf(st_json, sizeof(st_json), "{\"exitCode\":%d}\n", c);
		pisb_atomic_write(hdir, "status.json", st_json, strlen(st_json), 0600, &le);
		_exit(0);
	}
	close(ready[1]);
	ready[1] = -1;
	waitpid(pid, NULL, 0);
	{
		char ch;
		if (read(ready[0], &ch, 1) != 1) {
			pisb_err_set(e, PISB_EXIT_PISB, "sandbox '%s': the supervisor of '%s' did not start",
				     r->name, handle);
			goto out;
		}
	}
	wait_for(hdir, r->timeout_ms);
	ret = report(r->name, hdir, handle, w, code, running, e);
out:
	if (ready[0] >= 0)
		close(ready[0]);
	if (ready[1] >= 0)
		close(ready[1]);
	if (hdir >= 0)
		close(hdir);
	pisb_config_free(cfg);
	close(idir);
	return ret;
}

int pisb_vm_exec_status(struct pisb_state *st, const char *name, const char *handle,
			int timeout_ms, struct pisb_jw *w, int *code, bool *running,
			struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, e);
	_cleanup_close_ int hdir = -1;

	if (idir < 0 || (hdir = handle_dir(idir, name, handle, e)) < 0)
		return -1;
	wait_for(hdir, timeout_ms);
	return report(name, hdir, handle, w, code, running, e);
}

int pisb_vm_exec_kill(struct pisb_state *st, const char *name, const char *handle,
		      struct pisb_jw *w, int *code, struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, e);
	_cleanup_close_ int hdir = -1;
	_cleanup_buf_ struct pisb_buf pb = PISB_BUF_INIT;
	bool running = false;

	if (idir < 0 || (hdir = handle_dir(idir, name, handle, e)) < 0)
		return -1;
	if (pisb_lock_is_held(hdir, "lock") && pisb_read_file_at(hdir, "pid", &pb, 32) == 0 && pb.s &&
	    atoi(pb.s) > 1) {
		pid_t sp = (pid_t)atoi(pb.s);
		/* TERM to the command's group in the guest, KILL after 2 s */
		kill(sp, SIGTERM);
		wait_for(hdir, 2000);
		if (pisb_lock_is_held(hdir, "lock")) {
			kill(sp, SIGUSR2);
			wait_for(hdir, 3000);
		}
		if (pisb_lock_is_held(hdir, "lock"))
			kill(sp, SIGKILL);
		wait_for(hdir, 1000);
	}
	return report(name, hdir, handle, w, code, &running, e);
}
