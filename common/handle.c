/* handle.c - the exec-handle protocol of the sbx and vm drivers; see
 * handle.h. */
#include "handle.h"
#include "err.h"
#include "exec.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DROPPED_MARKER "\n[pisb: output past " PISB_EXEC_OUTPUT_MAX_TEXT " dropped]\n"

/* PREFIX-XXXXXXXX, 8 lowercase hex digits */
static bool handle_ok(const char *prefix, const char *h)
{
	size_t n = strlen(prefix);

	if (strncmp(h, prefix, n) || h[n] != '-' || strlen(h + n + 1) != 8)
		return false;
	for (const char *p = h + n + 1; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static const char *prune_prefix;
static bool prune_ok(const char *h) { return handle_ok(prune_prefix, h); }

static int handle_dir(int idir, const char *name, const char *prefix, const char *handle,
		      struct pisb_err *e)
{
	_cleanup_free_ char *p = xasprintf("exec/%s", handle);
	int fd = handle_ok(prefix, handle) ?
		openat(idir, p, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;

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

/* until the status is there, the supervisor is gone or timeout_ms passed */
static void wait_for(int hdir, int timeout_ms)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	bool done;

	for (;;) {
		final_code(hdir, &done);
		if (done || !pisb_lock_is_held(hdir, "lock") || pisb_mono_ms() >= deadline)
			return;
		pisb_sleep_ms(10);
	}
}

/* The new output and the state, as exec.h's JSON (pisb_exec_report). */
static int report(const char *name, const struct pisb_handle_ops *ops, int hdir,
		  const char *handle, struct pisb_jw *w, int *code, bool *running,
		  struct pisb_err *e)
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
			     "sandbox '%s': the supervisor of '%s' ended without an exit status (%s)",
			     name, handle, ops->lost);
	}
	return 0;
}

/* ---- the supervisor ---- */

static volatile sig_atomic_t runner_pid;

static void forward(int sig)
{
	if (runner_pid > 0)
		kill((pid_t)runner_pid, sig);
}

static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR2 };

/* The runner: the driver's run, its status as ours. */
static void __attribute__((noreturn)) runner(const struct pisb_handle_ops *ops,
					     const char *handle, int out, pid_t parent)
{
	struct pisb_err e = PISB_ERR_INIT;
	int code = 0;

	/* it dies with the supervisor: a killed supervisor leaves nothing
	 * running that writes into a handle nobody records */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(PISB_EXIT_BACKEND);
	if (ops->run(ops->arg, handle, out, &code, &e) < 0) {
		if (e.msg[0]) {
			pisb_write_all(out, e.msg, strlen(e.msg));
			pisb_write_all(out, "\n", 1);
		}
		code = PISB_EXIT_BACKEND;
	}
	_exit(code & 0xff);
}

/* Move what the pipe has into output, the first PISB_EXEC_OUTPUT_MAX
 * bytes kept, the rest counted into *dropped (and the file `dropped`,
 * at most 4 times a second); false at its end or, with nonblocking
 * reads, when it is empty. */
static bool copy_some(int hdir, int src, int out, long long *kept, long long *dropped,
		      int64_t *noted_at)
{
	char buf[65536];
	ssize_t n = read(src, buf, sizeof(buf));
	long long room;

	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0)
		return false;
	room = PISB_EXEC_OUTPUT_MAX - *kept;
	if (room > n)
		room = n;
	if (room > 0 && pisb_write_all(out, buf, (size_t)room) == (ssize_t)room)
		*kept += room;
	if (room < n) {
		if (!*dropped)
			pisb_write_all(out, DROPPED_MARKER, strlen(DROPPED_MARKER));
		*dropped += n - room;
		if (pisb_mono_ms() - *noted_at >= 250) {
			struct pisb_err ig = PISB_ERR_INIT;
			char num[32];
			snprintf(num, sizeof(num), "%lld", *dropped);
			pisb_atomic_write(hdir, "dropped", num, strlen(num), 0600, &ig);
			*noted_at = pisb_mono_ms();
		}
	}
	return true;
}

/* Runs the runner, copies its output, records its status.  Never returns. */
static void __attribute__((noreturn)) supervise(const struct pisb_handle_ops *ops,
						const char *handle, int hdir)
{
	struct pisb_err e = PISB_ERR_INIT;
	long long kept = 0, dropped = 0;
	int64_t noted_at = 0;
	int out, pfd, status = 0, op[2];
	sigset_t block, old;
	struct sigaction sa;
	char js[96];
	pid_t pid;

	out = openat(hdir, "output", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (out < 0 || pipe2(op, O_CLOEXEC) < 0) {
		status = PISB_EXIT_PISB << 8;
		goto done;
	}
	/* signals wait until the runner's pid is known, then go on to it */
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&block, forwarded[i]);
	sigprocmask(SIG_BLOCK, &block, &old);
	pid = fork();
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(op[0]);
		runner(ops, handle, op[1], getppid());
	}
	close(op[1]);
	if (pid < 0) {
		status = PISB_EXIT_PISB << 8;
		goto done;
	}
	runner_pid = pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaction(forwarded[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* until the runner ends; then what the pipe still holds (what the
	 * command left running may keep its end open: not waited for) */
	pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		struct pollfd p[2] = { { op[0], POLLIN, 0 }, { pfd, POLLIN, 0 } };
		int r = poll(p, pfd >= 0 ? 2 : 1, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (p[1].revents & POLLIN))
			break;
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    !copy_some(hdir, op[0], out, &kept, &dropped, &noted_at))
			break;
	}
	fcntl(op[0], F_SETFL, O_NONBLOCK);
	while (copy_some(hdir, op[0], out, &kept, &dropped, &noted_at))
		;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
done:
	snprintf(js, sizeof(js), "{\"exitCode\":%d,\"droppedBytes\":%lld}\n", pisb_wait_code(status),
		 dropped);
	pisb_atomic_write(hdir, "status.json", js, strlen(js), 0600, &e);
	_exit(0);
}

int pisb_handle_start(int idir, const char *name, const struct pisb_handle_ops *ops,
		      int timeout_ms, struct pisb_jw *w, int *code, bool *running,
		      struct pisb_err *e)
{
	_cleanup_free_ char *hpath = NULL;
	_cleanup_close_ int hdir = -1;
	char rnd[9], handle[32];
	int ready[2] = { -1, -1 }, ret = -1;
	pid_t pid;

	{
		_cleanup_close_ int edir = openat(idir, "exec", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		prune_prefix = ops->prefix;
		if (edir >= 0)
			pisb_exec_prune(edir, prune_ok);
	}
	pisb_random_hex(rnd, 8);
	snprintf(handle, sizeof(handle), "%s-%s", ops->prefix, rnd);
	hpath = xasprintf("exec/%s", handle);
	if (pisb_mkdirs_at(idir, hpath, 0700, e) < 0)
		return -1;
	hdir = openat(idir, hpath, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (hdir < 0 || pisb_atomic_write(hdir, "output", "", 0, 0600, e) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "make handle '%s'", handle);
	if (pipe2(ready, O_CLOEXEC) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "pipe");
	pid = fork();
	if (pid < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "fork");
		goto out;
	}
	if (pid == 0) {
		/* the supervisor: detached, no fds of the caller's (its pipes
		 * would never see EOF) but the handle, its lock, keep_fd and
		 * the ready pipe */
		struct pisb_err le = PISB_ERR_INIT;
		char num[32];
		int lk;
		pisb_detach_here();
		lk = pisb_lock_acquire(hdir, "lock", true, 0, "exec handle", &le);
		snprintf(num, sizeof(num), "%d", (int)getpid());
		pisb_atomic_write(hdir, "pid", num, strlen(num), 0600, &le);
		for (int fd = 3; fd < 4096; fd++)
			if (fd != hdir && fd != lk && fd != ops->keep_fd && fd != ready[1])
				close(fd);
		if (lk < 0)
			_exit(1);
		/* the caller may look once the lock is held */
		pisb_write_all(ready[1], "1", 1);
		close(ready[1]);
		supervise(ops, handle, hdir);
	}
	close(ready[1]);
	ready[1] = -1;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	{
		char c;
		ssize_t n;
		while ((n = read(ready[0], &c, 1)) < 0 && errno == EINTR)
			;
		if (n != 1) {
			pisb_err_set(e, PISB_EXIT_PISB, "sandbox '%s': the supervisor of '%s' did not start",
				     name, handle);
			goto out;
		}
	}
	wait_for(hdir, timeout_ms);
	ret = report(name, ops, hdir, handle, w, code, running, e);
out:
	if (ready[0] >= 0)
		close(ready[0]);
	if (ready[1] >= 0)
		close(ready[1]);
	return ret;
}

int pisb_handle_status(int idir, const char *name, const struct pisb_handle_ops *ops,
		       const char *handle, int timeout_ms, struct pisb_jw *w, int *code,
		       bool *running, struct pisb_err *e)
{
	_cleanup_close_ int hdir = handle_dir(idir, name, ops->prefix, handle, e);

	if (hdir < 0)
		return -1;
	wait_for(hdir, timeout_ms);
	return report(name, ops, hdir, handle, w, code, running, e);
}

int pisb_handle_kill(int idir, const char *name, const struct pisb_handle_ops *ops,
		     const char *handle, struct pisb_jw *w, int *code, struct pisb_err *e)
{
	_cleanup_close_ int hdir = handle_dir(idir, name, ops->prefix, handle, e);
	_cleanup_buf_ struct pisb_buf pb = PISB_BUF_INIT;
	bool running = false;

	if (hdir < 0)
		return -1;
	if (pisb_lock_is_held(hdir, "lock")) {
		if (ops->kill_inside) {
			ops->kill_inside(ops->arg, handle);
			/* the command is gone inside: its supervisor records
			 * how it ended before anything signals the supervisor
			 * (a TERM in between was recorded instead, under load) */
			wait_for(hdir, 2000);
		}
		if (pisb_lock_is_held(hdir, "lock") &&
		    pisb_read_file_at(hdir, "pid", &pb, 32) == 0 && pb.s && atoi(pb.s) > 1) {
			pid_t sp = (pid_t)atoi(pb.s);
			/* TERM (the supervisor sends it on), the hard signal
			 * after 2 s, then SIGKILL */
			kill(sp, SIGTERM);
			wait_for(hdir, 2000);
			if (ops->hard_signal && pisb_lock_is_held(hdir, "lock")) {
				kill(sp, ops->hard_signal);
				wait_for(hdir, 3000);
			}
			if (pisb_lock_is_held(hdir, "lock"))
				kill(sp, SIGKILL);
		}
		wait_for(hdir, 1000);
	}
	return report(name, ops, hdir, handle, w, code, &running, e);
}
