/* sbx_exec.c - detached commands (exec handles) of sbx sandboxes.
 *
 * A handle "sbx-XXXXXXXX" is a host-side supervisor (detached, its own
 * session) that runs `sbx exec` attached and writes what it prints into
 * instances/NAME/exec/HANDLE/: output (stdout and stderr merged), pid (the
 * supervisor), lock (held by the supervisor while it lives), offset (how
 * far exec-status has read) and status.json ({"exitCode": N}, at the end).
 * Inside the sandbox the command records its pid in /tmp/.pisb-exec-HANDLE
 * so that exec-kill can signal it there: sbx does not promise to pass a
 * signal of its client on to the command.
 */
#include "sbx.h"
#include "sbx_internal.h"
#include "err.h"
#include "exec.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static bool handle_valid(const char *h)
{
	if (strlen(h) != 12 || !pisb_str_starts(h, "sbx-"))
		return false;
	for (const char *p = h + 4; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static int open_handle(struct sbx_inst *t, const char *handle, struct pisb_err *e)
{
	_cleanup_free_ char *p = xasprintf("exec/%s", handle);
	int fd;

	if (!handle_valid(handle))
		return pisb_err_set(e, PISB_EXIT_NOTFOUND, "sandbox '%s': no exec handle '%s'", t->name, handle);
	fd = openat(t->idir, p, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return pisb_err_set(e, PISB_EXIT_NOTFOUND, "sandbox '%s': no exec handle '%s'", t->name, handle);
	return fd;
}

static int exit_code(int hdir, bool *done)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	const char *p;

	*done = false;
	if (pisb_read_file_at(hdir, "status.json", &b, 256) < 0 || !b.s)
		return 0;
	*done = true;
	p = strstr(b.s, "\"exitCode\":");
	return p ? atoi(p + 11) : PISB_EXIT_PISB;
}

static void wait_done(int hdir, int timeout_ms)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	bool done = false;

	for (;;) {
		exit_code(hdir, &done);
		if (done || !pisb_lock_is_held(hdir, "lock") || pisb_mono_ms() >= deadline)
			return;
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* New output since the last call (64 KiB at most) and the state. */
static int collect(struct sbx_inst *t, int hdir, const char *handle, struct pisb_jw *w,
		   int *code, bool *running, struct pisb_err *e)
{
	bool done;
	int ec = exit_code(hdir, &done);
	/* no status and nobody running it: the supervisor died */
	bool lost = !done && !pisb_lock_is_held(hdir, "lock");

	*running = !done && !lost;
	*code = done ? ec : 0;
	if (pisb_exec_report(hdir, handle, done, ec, *running, w, e) < 0)
		return -1;
	if (lost) {
		*code = PISB_EXIT_BACKEND;
		pisb_err_set(e, PISB_EXIT_BACKEND,
			     "sandbox '%s': the supervisor of '%s' ended without an exit status (exit status unknown)",
			     t->name, handle);
	}
	return 0;
}

/* The detached supervisor: run av with output into hdir/output, then
 * status.json.  Never returns. */
static void __attribute__((noreturn)) supervise(struct sbx_inst *t, int hdir, int lockfd,
						char *const *av)
{
	_cleanup_close_ int out = openat(hdir, "output", O_WRONLY | O_APPEND | O_CLOEXEC);
	struct sbx_run o = { .in_fd = -1, .out_fd = out, .err_fd = out, .forward = true };
	struct pisb_err e = PISB_ERR_INIT;
	char st[64];
	int code = 0;

	(void)lockfd;
	if (out < 0 || sbx_run(t->bin, av, t->env.v, &o, &code, &e) < 0) {
		if (out >= 0)
			pisb_write_all(out, e.msg, strlen(e.msg));
		code = PISB_EXIT_BACKEND;
	}
	snprintf(st, sizeof(st), "{\"exitCode\":%d}\n", code);
	pisb_atomic_write(hdir, "status.json", st, strlen(st), 0600, &e);
	_exit(0);
}


int pisb_sbx_exec_handle(struct pisb_state *st, const struct pisb_exec_req *r,
			 struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	struct sbx_inst t;
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	_cleanup_free_ char *hpath = NULL, *pidfile = NULL;
	_cleanup_close_ int hdir = -1, lk = -1;
	char rnd[9], handle[16], num[32];
	pid_t pid;
	int ret = -1, ready[2] = { -1, -1 };

	if (sbx_inst_open(st, r->name, &t, e) < 0)
		return -1;
	if (!strcmp(t.rt.state, "gone")) {
		pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s': its sbx sandbox '%s' no longer exists",
			     t.name, t.sbx);
		goto out;
	}
	{
		_cleanup_close_ int edir = openat(t.idir, "exec", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (edir >= 0)
			pisb_exec_prune(edir, handle_valid);
	}
	pisb_random_hex(rnd, 8);
	snprintf(handle, sizeof(handle), "sbx-%s", rnd);
	hpath = xasprintf("exec/%s", handle);
	pidfile = xasprintf("/tmp/.pisb-exec-%s", handle);
	if (pisb_mkdirs_at(t.idir, hpath, 0700, e) < 0)
		goto out;
	hdir = openat(t.idir, hpath, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (hdir < 0 || pisb_atomic_write(hdir, "output", "", 0, 0600, e) < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "make handle '%s'", handle);
		goto out;
	}
	/* the command's pid inside goes to pidfile, for exec-kill */
	sbx_exec_argv(&t, r, false, pidfile, &av);
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
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		struct pisb_err le = PISB_ERR_INIT;
		pid_t p2;
		setsid();
		p2 = fork();
		if (p2 != 0)
			_exit(p2 < 0);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		prctl(PR_SET_PDEATHSIG, 0);
		lk = pisb_lock_acquire(hdir, "lock", true, 0, "exec handle", &le);
		snprintf(num, sizeof(num), "%d", (int)getpid());
		pisb_atomic_write(hdir, "pid", num, strlen(num), 0600, &le);
		/* nothing of the caller's stays open here (its pipes would never
		 * see EOF) but the handle, its lock and the ready pipe */
		for (int fd = 3; fd < 4096; fd++)
			if (fd != hdir && fd != lk && fd != ready[1])
				close(fd);
		/* the caller may look once the lock is held */
		close(ready[0]);
		pisb_write_all(ready[1], "1", 1);
		close(ready[1]);
		supervise(&t, hdir, lk, av.v);
	}
	close(ready[1]);
	ready[1] = -1;
	waitpid(pid, NULL, 0);
	{
		char c;
		if (read(ready[0], &c, 1) != 1) {
			pisb_err_set(e, PISB_EXIT_PISB, "sandbox '%s': the supervisor of '%s' did not start",
				     t.name, handle);
			goto out;
		}
	}
	wait_done(hdir, r->timeout_ms);
	ret = collect(&t, hdir, handle, w, code, running, e);
	if (ret == 0 && !*running && strcmp(t.rt.state, "running"))
		sbx_mark(&t, "running", "running");
out:
	if (ready[0] >= 0)
		close(ready[0]);
	if (ready[1] >= 0)
		close(ready[1]);
	sbx_inst_release(&t);
	return ret;
}

int pisb_sbx_exec_status(struct pisb_state *st, const char *name, const char *handle,
			 int timeout_ms, struct pisb_jw *w, int *code, bool *running,
			 struct pisb_err *e)
{
	struct sbx_inst t;
	int hdir, ret;

	if (sbx_inst_open(st, name, &t, e) < 0)
		return -1;
	hdir = open_handle(&t, handle, e);
	if (hdir < 0) {
		sbx_inst_release(&t);
		return -1;
	}
	wait_done(hdir, timeout_ms);
	ret = collect(&t, hdir, handle, w, code, running, e);
	close(hdir);
	sbx_inst_release(&t);
	return ret;
}

int pisb_sbx_exec_kill(struct pisb_state *st, const char *name, const char *handle,
		       struct pisb_jw *w, int *code, struct pisb_err *e)
{
	struct sbx_inst t;
	_cleanup_buf_ struct pisb_buf pidb = PISB_BUF_INIT;
	_cleanup_free_ char *pidfile = NULL;
	bool running = false;
	int hdir, ret;

	if (sbx_inst_open(st, name, &t, e) < 0)
		return -1;
	hdir = open_handle(&t, handle, e);
	if (hdir < 0) {
		sbx_inst_release(&t);
		return -1;
	}
	if (pisb_lock_is_held(hdir, "lock")) {
		/* TERM inside (its group, else it), KILL after 2 s */
		static const char script[] =
			"p=$(cat \"$1\" 2>/dev/null) || exit 0; kill -TERM -- -\"$p\" 2>/dev/null || kill -TERM \"$p\" 2>/dev/null; "
			"i=0; while [ $i -lt 20 ] && kill -0 \"$p\" 2>/dev/null; do sleep 0.1; i=$((i+1)); done; "
			"kill -KILL -- -\"$p\" 2>/dev/null || kill -KILL \"$p\" 2>/dev/null; rm -f \"$1\"; exit 0";
		char *av[] = { "sbx", "exec", t.sbx, "--", "/bin/sh", "-c", (char *)script, "sh", NULL, NULL };
		_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
		struct sbx_run o = { .in_fd = -1, .out_fd = -1, .merge = true, .out = &out,
				     .timeout_ms = SBX_LC_TIMEOUT_MS };
		struct pisb_err ie = PISB_ERR_INIT;
		int rc = 0;

		pidfile = xasprintf("/tmp/.pisb-exec-%s", handle);
		av[8] = pidfile;
		sbx_run(t.bin, av, t.env.v, &o, &rc, &ie);
		/* and the supervisor's sbx client */
		if (pisb_read_file_at(hdir, "pid", &pidb, 32) == 0 && pidb.s && atoi(pidb.s) > 0) {
			pid_t sp = (pid_t)atoi(pidb.s);
			int64_t deadline = pisb_mono_ms() + 2000;
			kill(sp, SIGTERM);
			while (pisb_lock_is_held(hdir, "lock") && pisb_mono_ms() < deadline) {
				struct timespec ts = { 0, 10 * 1000 * 1000 };
				nanosleep(&ts, NULL);
			}
			if (pisb_lock_is_held(hdir, "lock"))
				kill(sp, SIGKILL);
		}
		wait_done(hdir, 1000);
	}
	ret = collect(&t, hdir, handle, w, code, &running, e);
	close(hdir);
	sbx_inst_release(&t);
	return ret;
}
