/* local_exec.c - the local driver's exec slots (local_exec.h). */
#include "local_exec.h"
#include "driver.h"
#include "cgroup.h"
#include "config.h"
#include "err.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "ns.h"
#include "proc.h"
#include "sbexec.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What every exec needs of a sandbox, borrowed from the sandbox the
 * command opened (its record and config read once): it must be running. */
struct target {
	const char *name;
	int idir;
	const struct pisb_runtime *rt;
	const struct pisb_config *cfg;
};

static int target_open(struct pisb_sandbox *sb, bool need_cfg, struct target *t,
		       struct pisb_err *e)
{
	memset(t, 0, sizeof(*t));
	t->name = sb->name;
	t->idir = sb->idir;
	if (!pisb_sandbox_record(sb, e) || !(t->rt = pisb_sandbox_runtime(sb, e)))
		return -1;
	if (!pisb_lock_is_held(t->idir, "controller.lock") || strcmp(t->rt->state, "running"))
		return pisb_err_set(e, PISB_EXIT_BACKEND, "sandbox '%s' is not running (start it with 'pisb start %s')",
				    sb->name, sb->name);
	if (need_cfg && !(t->cfg = pisb_sandbox_config(sb, e)))
		return -1;
	return 0;
}

/* ---------- the shell of --sh and --bash ----------
 *
 * A login shell at every call costs a profile's worth of work (Debian's runs
 * /etc/profile, the scripts of /etc/profile.d, ~/.profile, `mesg n`): ~15 ms.  So the
 * environment a login shell sets up is captured once per sandbox start (per
 * generation: shellenv/SHELL-GEN, NUL-separated, "shell=PATH" first) and
 * each call runs `SHELL -c STRING` with it.  If it cannot be captured (no
 * `env -0` in the sandbox, say), the calls run `SHELL -lc STRING`. */

#define LOGIN_ENV_MAX (256 * 1024)
#define LOGIN_ENV_TIMEOUT_MS 5000

/* Run `shell -lc 'exec env -0'` in the sandbox; its output in *out.
 * Returns the exec errno (ENOENT: no such shell), 0 when it ran, -1 when
 * it could not start or failed. */
static int capture_login(struct target *t, const char *shell, struct pisb_buf *out)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	char *argv[] = { (char *)shell, "-lc", "exec env -0", NULL };
	int p[2], result[2] = { -1, 0 }, rp[2];
	int64_t deadline = pisb_mono_ms() + LOGIN_ENV_TIMEOUT_MS;
	pid_t helper;

	pisb_sandbox_env(t->cfg, "dumb", NULL, 0, &env);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(rp, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	helper = fork();
	if (helper == 0) {
		/* joining the sandbox is once per process: a helper does it */
		struct pisb_err ie = PISB_ERR_INIT;
		struct pisb_spawn s;
		int err = 0, status = 0;
		pid_t pid;

		prctl(PR_SET_DUMPABLE, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		close(rp[0]);
		memset(&s, 0, sizeof(s));
		s.rt = t->rt;
		s.argv = argv;
		s.envp = env.v;
		s.cwd = "/";
		s.stdin_fd = -1;
		s.stdout_fd = p[1];
		s.stderr_fd = -1;
		s.new_session = true;
		s.pdeathsig = true;
		s.cg_limits_only = t->cfg && !t->cfg->docker;
		pid = pisb_local_spawn_direct(&s, &err, &ie);
		close(p[1]);
		if (pid > 0)
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
		result[0] = pid < 0 ? -1 : err ? err : 0;
		result[1] = pid < 0 ? -1 : pisb_wait_code(status);
		pisb_write_all(rp[1], result, sizeof(result));
		_exit(0);
	}
	close(p[1]);
	close(rp[1]);
	if (helper < 0) {
		close(p[0]);
		close(rp[0]);
		return -1;
	}
	for (;;) {
		struct pollfd pf = { p[0], POLLIN, 0 };
		char buf[16384];
		int64_t left = deadline - pisb_mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			break;
		n = read(p[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || out->len + (size_t)n > LOGIN_ENV_MAX)
			break;
		pisb_buf_add(out, buf, (size_t)n);
	}
	close(p[0]);
	{
		struct pollfd pf = { rp[0], POLLIN, 0 };
		int64_t left = deadline - pisb_mono_ms();
		if (left < 1)
			left = 1;
		if (poll(&pf, 1, (int)left) <= 0 ||
		    pisb_read_all(rp[0], result, sizeof(result)) != sizeof(result))
			result[0] = -1;
	}
	kill(helper, SIGKILL);   /* a profile that never ends: its command goes too */
	close(rp[0]);
	while (waitpid(helper, NULL, 0) < 0 && errno == EINTR)
		;
	if (result[0] != 0)
		return result[0];
	return result[1] == 0 ? 0 : -1;
}

/* Not carried from the captured environment: the shell's own, and ours. */
static bool login_skip(const char *kv)
{
	static const char *const skip[] = { "PWD=", "OLDPWD=", "SHLVL=", "_=", "TERM=", NULL };
	const char *eq = strchr(kv, '=');

	if (!eq || eq == kv)
		return true;
	for (const char *c = kv; c < eq; c++)
		if (!(*c == '_' || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		      (c > kv && *c >= '0' && *c <= '9')))
			return true;
	for (int i = 0; skip[i]; i++)
		if (pisb_str_starts(kv, skip[i]))
			return true;
	return false;
}

/* Remove the captured environments of earlier runs. */
static void forget_other_runs(int idir, const char *gen)
{
	DIR *d = pisb_opendirat(idir, "shellenv");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		const char *dash = strchr(de->d_name, '-');
		if (de->d_name[0] != '.' && dash && strcmp(dash + 1, gen))
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

/* The shell (its path in *shell) and login environment (K=V in env) for a
 * --sh or --bash call; *login: no captured environment, run it with -l. */
static void login_env(struct target *t, bool bash, const char **shell, bool *login,
		      struct pisb_strv *env)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_free_ char *path = xasprintf("shellenv/%s-%s", bash ? "bash" : "sh", t->rt->generation);
	const char *p, *end;

	*shell = bash ? "/bin/bash" : "/bin/sh";
	*login = true;
	if (pisb_read_file_at(t->idir, path, &b, LOGIN_ENV_MAX + 64) < 0 || !b.len) {
		struct pisb_buf cap = PISB_BUF_INIT;
		struct pisb_err ie = PISB_ERR_INIT;
		int r = capture_login(t, *shell, &cap);

		if (r == ENOENT && bash) {
			/* no bash in the sandbox: sh, as --bash documents */
			pisb_buf_release(&cap);
			cap = (struct pisb_buf)PISB_BUF_INIT;
			*shell = "/bin/sh";
			r = capture_login(t, *shell, &cap);
		}
		pisb_buf_release(&b);
		b = (struct pisb_buf)PISB_BUF_INIT;
		pisb_buf_adds(&b, "shell=");
		pisb_buf_adds(&b, *shell);
		pisb_buf_add(&b, "", 1);
		if (r == 0 && cap.len) {
			pisb_buf_adds(&b, "login=0");
			pisb_buf_add(&b, "", 1);
			pisb_buf_add(&b, cap.s, cap.len);
		}
		pisb_buf_release(&cap);
		if (pisb_mkdirs_at(t->idir, "shellenv", 0700, &ie) == 0) {
			forget_other_runs(t->idir, t->rt->generation);
			pisb_atomic_write(t->idir, path, b.s, b.len, 0600, &ie);
		}
	}
	for (p = b.s, end = b.s + b.len; p < end; p += strlen(p) + 1) {
		if (p == b.s) {
			*shell = pisb_str_starts(p, "shell=/bin/bash") ? "/bin/bash" : "/bin/sh";
			continue;
		}
		if (!strcmp(p, "login=0")) {
			*login = false;
			continue;
		}
		if (!*login && !login_skip(p))
			pisb_strv_push(env, p);
	}
}

/* argv and environment of a request. */
static void prepare(struct target *t, const struct pisb_exec_req *r, const char *term,
		    struct pisb_strv *av, struct pisb_strv *env)
{
	_cleanup_strv_ struct pisb_strv extra = PISB_STRV_INIT;

	if (r->sh) {
		const char *shell;
		bool login;

		login_env(t, r->bash, &shell, &login, &extra);
		pisb_exec_shell_event(r, "local", shell);
		pisb_strv_push(av, shell);
		pisb_strv_push(av, login ? "-lc" : "-c");
		pisb_strv_push(av, r->sh);
	} else {
		for (size_t i = 0; i < r->argc; i++)
			pisb_strv_push(av, r->argv[i]);
	}
	/* the request's --env last: it wins over the profile's */
	for (size_t i = 0; i < r->nenv; i++)
		pisb_strv_push(&extra, r->env[i]);
	pisb_sandbox_env(t->cfg, term, extra.v, extra.n, env);
}

/* ---------- attached ---------- */

/* What an attached command gets and what we relay (pisb-exec(1), "The
 * terminal and background processes"):
 *  - each of our fds 0, 1, 2 that is a terminal becomes the slave of one pty
 *    of the sandbox's own devpts: the caller's terminal never enters the
 *    sandbox, and the pty is hung up (its master closed) when the command
 *    ends, so what it left running cannot read what the user types next;
 *  - stdout and stderr that are not terminals are pipes we relay;
 *  - stdin that is not a terminal is handed over as it is (a pipe or file:
 *    relaying it would consume input the command never reads).
 * We return when the command's own process ends, after delivering what is
 * already in the pipes; what it left running keeps its ends of them, drained
 * and discarded by a process of ours inside the sandbox until they close. */

#define DRAIN_AFTER_EXIT (1 << 20)  /* read after the command ended, at most */
#define PTY_IDLE_MS 20              /* its output settles within this */

static volatile sig_atomic_t pending_sig;
static volatile sig_atomic_t winch;
static void on_sig(int sig) { pending_sig = sig; }
static void on_winch(int sig) { (void)sig; winch = 1; }

struct relay {
	int src[3];        /* the command's stdout pipe, stderr pipe, pty master */
	int dst[3];        /* where each goes: our 1, our 2, our first terminal */
	int in;            /* our stdin when it is the terminal, else -1 */
	int master;        /* the pty master (also src[2] until it ends), or -1 */
	/* handles: src[0] goes to dst[0] until cap bytes, then is counted */
	long long cap, kept, dropped;
	const char *marker;
	int hdir;          /* handles: where `dropped` is kept up to date, or -1 */
	int64_t noted_at;
	long long noted;
};

/* Handles: how many bytes were dropped so far, for exec-status while the
 * command runs (status.json has the final count). */
static void note_dropped(struct relay *r)
{
	struct pisb_err ie = PISB_ERR_INIT;
	char num[32];

	if (r->hdir < 0 || r->dropped == r->noted)
		return;
	snprintf(num, sizeof(num), "%lld", r->dropped);
	pisb_atomic_write(r->hdir, "dropped", num, strlen(num), 0600, &ie);
	r->noted = r->dropped;
	r->noted_at = pisb_mono_ms();
}

static void relay_close(struct relay *r, int i)
{
	if (r->src[i] >= 0 && r->src[i] != r->master)
		close(r->src[i]);
	r->src[i] = -1;
}

/* Move what src[i] has to dst[i]; false at its end (EOF, error, or EAGAIN
 * when nonblocking). */
static bool relay_one(struct relay *r, int i, size_t *budget)
{
	char buf[65536];
	ssize_t n = read(r->src[i], buf, sizeof(buf));

	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0) {
		if (n == 0 || errno != EAGAIN)
			relay_close(r, i);
		return false;
	}
	if (budget)
		*budget = *budget > (size_t)n ? *budget - (size_t)n : 0;
	if (r->cap) {
		long long room = r->cap - r->kept;
		if (room > n)
			room = n;
		if (room > 0 && pisb_write_all(r->dst[i], buf, (size_t)room) == (ssize_t)room)
			r->kept += room;
		if (room < n) {
			if (!r->dropped && r->marker)
				pisb_write_all(r->dst[i], r->marker, strlen(r->marker));
			r->dropped += n - room;
			if (pisb_mono_ms() - r->noted_at >= 250)
				note_dropped(r);
		}
		return true;
	}
	if (pisb_write_all(r->dst[i], buf, (size_t)n) != n) {
		/* our reader is gone: so is the command's (it gets EPIPE next) */
		relay_close(r, i);
		return false;
	}
	return true;
}

/* Relay until pid ends; *status its wait status. */
static int relay_run(struct relay *r, pid_t pid, int *status, const sigset_t *mask,
		     pid_t caller, struct pisb_err *e)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int64_t kill_at = 0;

	for (;;) {
		struct pollfd p[5];
		int np = 0, idx[4] = { -1, -1, -1, -1 }, pidx = -1, tmo = -1;
		pid_t w;

		for (int i = 0; i < 3; i++)
			if (r->src[i] >= 0) {
				p[np] = (struct pollfd){ r->src[i], POLLIN, 0 };
				idx[i] = np++;
			}
		if (r->in >= 0 && r->master >= 0) {
			p[np] = (struct pollfd){ r->in, POLLIN, 0 };
			idx[3] = np++;
		}
		if (pidfd >= 0) {
			p[np] = (struct pollfd){ pidfd, POLLIN, 0 };
			pidx = np++;
		} else {
			tmo = 50;
		}
		if (kill_at)
			tmo = 10;
		if (ppoll(p, (nfds_t)np, tmo < 0 ? NULL : &(struct timespec){ 0, tmo * 1000000L },
			  mask) < 0 && errno != EINTR) {
			if (pidfd >= 0)
				close(pidfd);
			return pisb_err_sys(e, PISB_EXIT_PISB, "poll");
		}
		if (pending_sig) {
			int sig = pending_sig;
			pending_sig = 0;
			kill(-pid, sig);
			/* our caller is gone: make sure nothing stays behind */
			if ((sig == SIGTERM || sig == SIGHUP) && caller && getppid() != caller && !kill_at)
				kill_at = pisb_mono_ms() + 2000;
		}
		if (kill_at && pisb_mono_ms() >= kill_at) {
			kill(-pid, SIGKILL);
			kill_at = 0;
		}
		if (winch && r->master >= 0 && r->in >= 0) {
			struct winsize ws;
			winch = 0;
			if (ioctl(r->in, TIOCGWINSZ, &ws) == 0)
				ioctl(r->master, TIOCSWINSZ, &ws);
		}
		for (int i = 0; i < 3; i++)
			if (idx[i] >= 0 && r->src[i] >= 0 && (p[idx[i]].revents & (POLLIN | POLLHUP | POLLERR)))
				relay_one(r, i, NULL);
		if (idx[3] >= 0 && (p[idx[3]].revents & (POLLIN | POLLHUP | POLLERR))) {
			char buf[16384];
			ssize_t n = read(r->in, buf, sizeof(buf));
			if (n > 0)
				pisb_write_all(r->master, buf, (size_t)n);
			else if (n == 0 || (errno != EINTR && errno != EAGAIN))
				r->in = -1;   /* keep showing output */
		}
		if (pidx >= 0 && !(p[pidx].revents & POLLIN))
			continue;
		w = waitpid(pid, status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			if (pidfd >= 0)
				close(pidfd);
			return pisb_err_sys(e, PISB_EXIT_PISB, "wait");
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	return 0;
}

/* The command ended: deliver what it wrote before (a pipe has it already;
 * a pty's output may still be on its way: wait until it settles), then
 * hang the pty up. */
static void relay_finish(struct relay *r)
{
	size_t budget = DRAIN_AFTER_EXIT;

	for (int i = 0; i < 2; i++) {
		if (r->src[i] < 0)
			continue;
		fcntl(r->src[i], F_SETFL, fcntl(r->src[i], F_GETFL) | O_NONBLOCK);
		while (r->src[i] >= 0 && budget && relay_one(r, i, &budget))
			;
	}
	if (r->master >= 0) {
		fcntl(r->master, F_SETFL, fcntl(r->master, F_GETFL) | O_NONBLOCK);
		while (r->src[2] >= 0 && budget) {
			struct pollfd p = { r->master, POLLIN, 0 };
			if (poll(&p, 1, PTY_IDLE_MS) <= 0)
				break;
			while (r->src[2] >= 0 && budget && relay_one(r, 2, &budget))
				;
		}
		close(r->master);
		r->master = r->src[2] = -1;
	}
}

/* What the command left running keeps the pipes: a process inside the
 * sandbox (its pid namespace and cgroup: stopping the sandbox ends it) reads
 * and discards until they close, so that it never gets EPIPE.  It is a
 * grandchild whose parent, inside the sandbox, leaves at once: orphaned
 * there, it is the sandbox init's to reap.  A child of ours would pass to
 * the host's init when we exit, and the sandbox's stop would wait until
 * that one reaped it (pid 1 of a pid namespace exits only when every
 * process of the namespace is reaped). */
static void drain_in_sandbox(struct relay *r, bool privileged)
{
	int fds[2], n = 0;
	pid_t pid;

	for (int i = 0; i < 2; i++)
		if (r->src[i] >= 0)
			fds[n++] = r->src[i];
	if (!n)
		return;
	pid = fork();
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	if (pid == 0) {
		struct pisb_err ie = PISB_ERR_INIT;
		int keep[2] = { fds[0], n > 1 ? fds[1] : fds[0] };

		if (fork() != 0)
			_exit(0);
		setsid();
		prctl(PR_SET_DUMPABLE, 0);
		pisb_sandbox_become_root(privileged, &ie);
		for (int fd = 0; fd < 1024; fd++)
			if (fd != keep[0] && fd != keep[1])
				close(fd);
		for (int i = 0; i < n; i++)
			fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) & ~O_NONBLOCK);
		signal(SIGHUP, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
		sigprocmask(SIG_SETMASK, &(sigset_t){ 0 }, NULL);
		for (;;) {
			struct pollfd p[2] = { { fds[0], POLLIN, 0 }, { n > 1 ? fds[1] : -1, POLLIN, 0 } };
			char buf[65536];
			int open_ = 0;
			if (poll(p, 2, -1) < 0 && errno != EINTR)
				_exit(0);
			for (int i = 0; i < n; i++) {
				if (fds[i] < 0)
					continue;
				if (p[i].revents && read(fds[i], buf, sizeof(buf)) <= 0) {
					close(fds[i]);
					fds[i] = -1;
					p[i].fd = -1;
				}
				open_ += fds[i] >= 0;
			}
			if (!open_)
				_exit(0);
		}
	}
	for (int i = 0; i < 2; i++)
		relay_close(r, i);
}

/* Is the sandbox of idir still in the run of generation gen? */
static bool sandbox_still_running(int idir, const char *gen)
{
	struct pisb_runtime rt;
	struct pisb_err ig = PISB_ERR_INIT;
	bool yes;

	/* a stopping controller removes its socket before it kills */
	if (idir < 0 || !pisb_lock_is_held(idir, "controller.lock") ||
	    faccessat(idir, "control.sock", F_OK, AT_SYMLINK_NOFOLLOW) < 0 ||
	    pisb_runtime_load(idir, &rt, &ig) < 0)
		return false;
	yes = !strcmp(rt.state, "running") && !strcmp(rt.generation, gen);
	pisb_runtime_release(&rt);
	return yes;
}

int pisb_local_exec(struct pisb_sandbox *sb, const struct pisb_exec_req *r, int *code,
		    struct pisb_err *e)
{
	struct target t;
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT, env = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = NULL;
	struct pisb_spawn s;
	struct sigaction sa;
	struct winsize ws;
	struct relay rl = { .src = { -1, -1, -1 }, .dst = { 1, 2, -1 }, .in = -1, .master = -1,
			    .hdir = -1 };
	pid_t caller = getppid(), pid;
	int err = 0, status = 0, op[2] = { -1, -1 }, ep[2] = { -1, -1 }, tty = -1, rc;
	bool privileged;
	sigset_t block, orig;
	const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH };
	_cleanup_close_ int idir = -1;
	char gen[sizeof(t.rt->generation)];

	if (target_open(sb, true, &t, e) < 0)
		return -1;
	privileged = geteuid() == 0 || t.rt->uid_base == 0;
	prepare(&t, r, getenv("TERM"), &av, &env);
	cwd = pisb_sandbox_cwd(t.cfg, r->cwd);
	/* we sit in the sandbox's namespaces with the caller's fds: nothing
	 * there may trace us */
	prctl(PR_SET_DUMPABLE, 0);
	/* a caller that dies takes the command with it */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	signal(SIGPIPE, SIG_IGN);
	memset(&s, 0, sizeof(s));
	s.stdin_fd = 0;
	for (int i = 0; i < 3; i++) {
		if (!isatty(i))
			continue;
		s.pty_fds |= 1u << i;
		if (tty < 0)
			tty = i;
	}
	if ((!(s.pty_fds & 2) && pipe2(op, O_CLOEXEC) < 0) ||
	    (!(s.pty_fds & 4) && pipe2(ep, O_CLOEXEC) < 0))
		return pisb_err_sys(e, PISB_EXIT_PISB, "pipe");
	if (s.pty_fds && ioctl(tty, TIOCGWINSZ, &ws) == 0)
		s.pty_size = &ws;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sa.sa_handler = sigs[i] == SIGWINCH ? on_winch : on_sig;
		sigaction(sigs[i], &sa, NULL);
		sigaddset(&block, sigs[i]);
	}
	/* delivered only inside ppoll: none is missed between a check and it */
	sigprocmask(SIG_BLOCK, &block, &orig);
	s.rt = t.rt;
	s.argv = av.v;
	s.envp = env.v;
	s.cwd = cwd;
	s.stdout_fd = op[1];
	s.stderr_fd = ep[1];
	s.pty_master = &rl.master;
	/* its own session: no controlling terminal of ours (no TIOCSTI) */
	s.new_session = true;
	s.cg_limits_only = t.cfg && !t.cfg->docker;
	pid = pisb_local_spawn_direct(&s, &err, e);
	/* the instance dir stays open: whether the sandbox is still there
	 * when the command dies (this process's /proc is the sandbox's now) */
	idir = fcntl(t.idir, F_DUPFD_CLOEXEC, 3);
	snprintf(gen, sizeof(gen), "%s", t.rt->generation);
	if (op[1] >= 0)
		close(op[1]);
	if (ep[1] >= 0)
		close(ep[1]);
	if (pid < 0) {
		if (op[0] >= 0)
			close(op[0]);
		if (ep[0] >= 0)
			close(ep[0]);
		sigprocmask(SIG_SETMASK, &orig, NULL);
		return -1;
	}
	rl.src[0] = op[0];
	rl.src[1] = ep[0];
	if (rl.master >= 0) {
		rl.src[2] = rl.master;
		rl.dst[2] = (s.pty_fds & 2) ? 1 : (s.pty_fds & 4) ? 2 : 0;
		if (s.pty_fds & 1) {
			/* raw: ^C and friends reach the pty, whose line discipline
			 * signals the command */
			rl.in = 0;
			pisb_tty_raw(0);
		}
	}
	rc = relay_run(&rl, pid, &status, &orig, caller, e);
	if (rc < 0) {
		kill(-pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	relay_finish(&rl);
	pisb_tty_restore();
	drain_in_sandbox(&rl, privileged);
	sigprocmask(SIG_SETMASK, &orig, NULL);
	if (rc < 0)
		return -1;
	if (err) {
		*code = err == ENOENT ? PISB_EXIT_NOCMD : PISB_EXIT_NOEXEC;
		return pisb_err_set(e, *code, "cannot run '%s': %s", av.v[0], strerror(err));
	}
	*code = pisb_wait_code(status);
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !sandbox_still_running(idir, gen))
		/* not the command's doing: its sandbox went away under it */
		return pisb_err_set(e, *code, "sandbox '%s' stopped while the command ran (stopped, destroyed, "
				    "or its controller died): the command was killed with the sandbox's other processes",
				    r->name);
	return 0;
}

/* ---------- handles ---------- */

static bool handle_valid(const char *h)
{
	size_t n = strlen(h);
	if (n < 3 || n > 40)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= 'a' && h[i] <= 'f') || (h[i] >= '0' && h[i] <= '9') || h[i] == '-'))
			return false;
	return strchr(h, '-') != NULL;
}

static void on_sigio(int sig)
{
	(void)sig;   /* a thread that does not block it: nothing to do */
}

static void drain(int sfd)
{
	struct signalfd_siginfo si;

	while (sfd >= 0 && read(sfd, &si, sizeof(si)) == sizeof(si))
		;
}

/* Wait until status.json appears in hdir, at most timeout_ms.  Woken by
 * pisb_dir_watch's SIGIO, read from a signalfd while it is blocked here
 * (an inotify instance's close cost every exec-status --timeout-ms and
 * exec-kill up to 20 ms on its way out, issue #21); nothing of it is set
 * up for a handle already done. */
static void wait_done(int hdir, int timeout_ms)
{
	struct sigaction sa = { .sa_handler = on_sigio }, old_sa;
	sigset_t io, old_mask;
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	int sfd, dfd;
	bool done;

	pisb_exec_status_code(hdir, &done);
	if (done || timeout_ms <= 0)
		return;
	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	pthread_sigmask(SIG_BLOCK, &io, &old_mask);
	sigaction(SIGIO, &sa, &old_sa);
	sfd = signalfd(-1, &io, SFD_NONBLOCK | SFD_CLOEXEC);
	dfd = sfd < 0 ? -1 : pisb_dir_watch(hdir, ".", DN_CREATE | DN_RENAME);
	for (;;) {
		struct pollfd p = { sfd, POLLIN, 0 };
		int64_t left;

		pisb_exec_status_code(hdir, &done);
		left = deadline - pisb_mono_ms();
		if (done || left <= 0)
			break;
		/* the watch wakes us at once; the 50 ms cap covers a missed event */
		poll(&p, dfd >= 0 ? 1 : 0, left > 50 ? 50 : (int)left);
		drain(sfd);
	}
	/* no SIGIO is made once the watch is closed: the ones pending are
	 * read, and the mask and handler put back */
	if (dfd >= 0)
		close(dfd);
	drain(sfd);
	if (sfd >= 0)
		close(sfd);
	sigaction(SIGIO, &old_sa, NULL);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
}

/* The new output and the state of local handle hdir. */
static int collect(int hdir, const char *handle, struct pisb_jw *w, int *code,
		   bool *running, struct pisb_err *e)
{
	bool done;
	/* the status first: output written before it is all there */
	int ec = pisb_exec_status_code(hdir, &done);

	*running = !done;
	*code = done ? ec : 0;
	return pisb_exec_report(hdir, handle, done, ec, !done, w, e);
}

/* The runner: a detached process that runs the command, then records its
 * status.  It holds the handle's lock for as long as the command lives.
 * The command writes into a pipe; the runner keeps the first
 * PISB_EXEC_OUTPUT_MAX bytes in `output` and counts the rest in `dropped`. */
static void __attribute__((noreturn)) runner(struct target *t, int hdir, char **argv,
					     char **envp, const char *cwd, int sync_fd)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_spawn s;
	struct relay rl = { .src = { -1, -1, -1 }, .dst = { -1, -1, -1 }, .in = -1, .master = -1,
			    .cap = PISB_EXEC_OUTPUT_MAX, .hdir = -1,
			    .marker = "\n[pisb: output past " PISB_EXEC_OUTPUT_MAX_TEXT " dropped]\n" };
	int lock, out, err = 0, status, op[2];
	pid_t pid;
	char num[32], js[96];
	sigset_t none;

	setsid();
	prctl(PR_SET_DUMPABLE, 0);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&none);
	lock = pisb_lock_acquire(hdir, "lock", true, 0, "handle", &e);
	out = openat(hdir, "output", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (lock < 0 || out < 0 || pipe2(op, O_CLOEXEC) < 0)
		_exit(1);
	memset(&s, 0, sizeof(s));
	s.rt = t->rt;
	s.argv = argv;
	s.envp = envp;
	s.cwd = cwd;
	s.stdin_fd = -1;
	s.stdout_fd = op[1];
	s.stderr_fd = op[1];
	s.new_session = true;
	s.cg_limits_only = t->cfg && !t->cfg->docker;
	pid = pisb_local_spawn_direct(&s, &err, &e);
	close(op[1]);
	if (pid < 0) {
		dprintf(out, "pisb: %s\n", e.msg);
		status = (e.code ? e.code : PISB_EXIT_PISB) << 8;
	} else {
		snprintf(num, sizeof(num), "%d", (int)pid);
		pisb_atomic_write(hdir, "pid", num, strlen(num), 0600, &e);
		pisb_write_all(sync_fd, "s", 1);
		close(sync_fd);
		sync_fd = -1;
		rl.src[0] = op[0];
		rl.dst[0] = out;
		rl.hdir = hdir;
		if (relay_run(&rl, pid, &status, &none, 0, &e) < 0) {
			kill(-pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
		}
		relay_finish(&rl);
		if (err)
			status = (err == ENOENT ? PISB_EXIT_NOCMD : PISB_EXIT_NOEXEC) << 8;
	}
	snprintf(js, sizeof(js), "{\"exitCode\":%d,\"droppedBytes\":%lld}\n", pisb_wait_code(status),
		 rl.dropped);
	note_dropped(&rl);
	pisb_atomic_write(hdir, "status.json", js, strlen(js), 0600, &e);
	if (sync_fd >= 0)
		pisb_write_all(sync_fd, "s", 1);
	/* what it left running may write on: not into the handle */
	drain_in_sandbox(&rl, geteuid() == 0 || t->rt->uid_base == 0);
	_exit(0);
}

int pisb_local_exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			   struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	struct target t;
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT, env = PISB_STRV_INIT;
	_cleanup_free_ char *cwd = NULL;
	_cleanup_close_ int edir = -1, hdir = -1;
	char handle[64], rnd[9];
	int sp[2], ret = -1;
	pid_t pid;

	if (target_open(sb, true, &t, e) < 0)
		return -1;
	prepare(&t, r, "dumb", &av, &env);
	cwd = pisb_sandbox_cwd(t.cfg, r->cwd);
	if (pisb_mkdirs_at(t.idir, "exec", 0700, e) < 0)
		goto out;
	edir = openat(t.idir, "exec", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (edir < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "open exec dir");
		goto out;
	}
	pisb_exec_prune(edir, NULL);
	pisb_random_hex(rnd, 8);
	snprintf(handle, sizeof(handle), "%s-%s", t.rt->generation, rnd);
	if (mkdirat(edir, handle, 0700) < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "create handle");
		goto out;
	}
	hdir = openat(edir, handle, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (hdir < 0 || pipe2(sp, O_CLOEXEC) < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "open handle");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "fork");
		close(sp[0]);
		close(sp[1]);
		goto out;
	}
	if (pid == 0) {
		/* detach twice so the runner outlives us and our caller */
		pid_t g;
		int null;

		close(sp[0]);
		g = fork();
		if (g != 0)
			_exit(g < 0);
		null = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		runner(&t, hdir, av.v, env.v, cwd, sp[1]);
	}
	close(sp[1]);
	waitpid(pid, NULL, 0);
	{
		/* "started" (or done) from the runner, or EOF if it failed */
		char c;
		struct pollfd p = { sp[0], POLLIN, 0 };
		if (poll(&p, 1, 10000) > 0 && read(sp[0], &c, 1) < 0)
			c = 0;
		close(sp[0]);
	}
	wait_done(hdir, r->timeout_ms);
	ret = collect(hdir, handle, w, code, running, e);
out:
	return ret;
}

static int open_handle(struct pisb_sandbox *sb, const char *handle,
		       struct target *t, struct pisb_err *e)
{
	_cleanup_free_ char *p = NULL;
	size_t gl;
	int hdir;

	if (!handle_valid(handle))
		return pisb_err_set(e, PISB_EXIT_USAGE, "'%s' is not an exec handle", handle);
	if (target_open(sb, false, t, e) < 0)
		return -1;
	gl = strlen(t->rt->generation);
	if (strncmp(handle, t->rt->generation, gl) || handle[gl] != '-') {
		return pisb_err_set(e, PISB_EXIT_NOTFOUND,
				    "handle '%s' belongs to an earlier run of sandbox '%s' (it was stopped or restarted since); its command is gone",
				    handle, sb->name);
	}
	p = xasprintf("exec/%s", handle);
	hdir = openat(t->idir, p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (hdir < 0) {
		return pisb_err_set(e, PISB_EXIT_NOTFOUND,
				    "no handle '%s' in sandbox '%s' (completed handles past the last %d expire)",
				    handle, sb->name, PISB_EXEC_KEEP);
	}
	return hdir;
}

/* collect() for exec-status and exec-kill: under the handle's read.lock,
 * so that of callers on one handle at once, each byte of output goes to
 * exactly one (the offset is read and moved under the lock). */
static int collect_locked(int hdir, const char *handle, struct pisb_jw *w, int *code,
			  bool *running, struct pisb_err *e)
{
	_cleanup_close_ int lock = pisb_lock_acquire(hdir, "read.lock", true, -1, "handle", e);

	if (lock < 0)
		return pisb_err_prefix(e, "handle '%s'", handle);
	return collect(hdir, handle, w, code, running, e);
}

int pisb_local_exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			   struct pisb_jw *w, int *code, bool *running, struct pisb_err *e)
{
	struct target t;
	_cleanup_close_ int hdir = open_handle(sb, handle, &t, e);
	int ret;

	if (hdir < 0)
		return -1;
	wait_done(hdir, timeout_ms);
	ret = collect_locked(hdir, handle, w, code, running, e);
	return ret;
}

/* Whether process group pgid has no process left, waiting at most
 * timeout_ms.  Its id is not handed out again while a member lives. */
static bool group_gone(pid_t pgid, int timeout_ms)
{
	for (int64_t end = pisb_mono_ms() + timeout_ms;; pisb_sleep_ms(2)) {
		if (kill(-pgid, 0) < 0 && errno == ESRCH)
			return true;
		if (pisb_mono_ms() >= end)
			return false;
	}
}

int pisb_local_exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
			 int *code, struct pisb_err *e)
{
	struct target t;
	_cleanup_close_ int hdir = open_handle(sb, handle, &t, e);
	_cleanup_buf_ struct pisb_buf pidb = PISB_BUF_INIT;
	bool done, running;

	if (hdir < 0)
		return -1;
	pisb_exec_status_code(hdir, &done);
	/* the runner holds the lock until it has reaped the command, so the
	 * pid (and its group) cannot have been reused while it is held */
	if (!done && pisb_lock_is_held(hdir, "lock") &&
	    pisb_read_file_at(hdir, "pid", &pidb, 32) == 0 && pidb.s) {
		pid_t pid = atoi(pidb.s);
		if (pid > 1) {
			/* the group, not only its leader: what the command started
			 * in it is gone too when we answer (a child that ignores
			 * TERM outlived a leader that did not; on a busy machine a
			 * child killed with the leader was still listed after the
			 * leader's status was recorded) */
			int64_t term_at = pisb_mono_ms();
			kill(-pid, SIGTERM);
			wait_done(hdir, 2000);
			if (!group_gone(pid, (int)(term_at + 2000 - pisb_mono_ms()))) {
				kill(-pid, SIGKILL);
				wait_done(hdir, 2000);
				group_gone(pid, 2000);
			}
		}
	}
	return collect_locked(hdir, handle, w, code, &running, e);
}

/* ---------- shell ---------- */

int pisb_local_shell(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e)
{
	struct target t;
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	int master, status;
	pid_t pid;
	bool tty = isatty(0);
	struct winsize ws;

	if (target_open(sb, true, &t, e) < 0)
		return -1;
	pisb_sandbox_env(t.cfg, getenv("TERM") ? getenv("TERM") : "xterm", NULL, 0, &env);
	if (pisb_cgroup_join(t.rt->cgroup, !t.cfg->docker, e) < 0 ||
	    pisb_sandbox_enter(t.rt->init.pid, t.rt->init.start, e) < 0)
		return -1;
	/* the pty comes from the sandbox's own devpts */
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "open a terminal in the sandbox");
	if (tty && ioctl(0, TIOCGWINSZ, &ws) == 0)
		ioctl(master, TIOCSWINSZ, &ws);
	pid = fork();
	if (pid < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "fork");
	if (pid == 0) {
		struct pisb_err ce = PISB_ERR_INIT;
		const char *home = "/root", *sh = "/bin/sh";
		char *slave = ptsname(master);
		int fd;

		setsid();
		fd = slave ? open(slave, O_RDWR) : -1;
		if (fd < 0)
			_exit(PISB_EXIT_PISB);
		ioctl(fd, TIOCSCTTY, 0);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (pisb_sandbox_become_root(geteuid() == 0 || t.rt->uid_base == 0, &ce) < 0)
			_exit(PISB_EXIT_PISB);
		if (access("/bin/bash", X_OK) == 0)
			sh = "/bin/bash";
		if (user && strcmp(user, "root")) {
			struct passwd *pw = getpwnam(user);
			if (!pw) {
				dprintf(2, "pisb: no user '%s' in the sandbox\n", user);
				_exit(PISB_EXIT_NOTFOUND);
			}
			if (setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
				dprintf(2, "pisb: cannot become '%s' (this sandbox maps only root)\n", user);
				_exit(PISB_EXIT_NOEXEC);
			}
			home = pw->pw_dir;
			for (size_t i = 0; i < env.n; i++) {
				if (pisb_str_starts(env.v[i], "HOME=")) {
					free(env.v[i]);
					env.v[i] = xasprintf("HOME=%s", home);
				} else if (pisb_str_starts(env.v[i], "USER=") || pisb_str_starts(env.v[i], "LOGNAME=")) {
					char *k = xstrndup(env.v[i], (size_t)(strchr(env.v[i], '=') - env.v[i]));
					free(env.v[i]);
					env.v[i] = xasprintf("%s=%s", k, user);
					free(k);
				}
			}
		}
		if (chdir(t.cfg->workspace) < 0 && chdir(home) < 0)
			chdir("/");
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		execle(sh, sh, "-l", (char *)NULL, env.v);
		_exit(PISB_EXIT_NOCMD);
	}
	if (tty) {
		struct sigaction sa;
		pisb_tty_raw(0);
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_winch;
		sigaction(SIGWINCH, &sa, NULL);
	}
	for (bool in_open = true;;) {
		struct pollfd p[2] = { { master, POLLIN, 0 }, { 0, in_open ? POLLIN : 0, 0 } };
		char buf[16384];
		ssize_t n;

		if (winch) {
			winch = 0;
			if (ioctl(0, TIOCGWINSZ, &ws) == 0)
				ioctl(master, TIOCSWINSZ, &ws);
		}
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(master, buf, sizeof(buf));
			if (n <= 0)
				break; /* the shell and everything on its terminal ended */
			pisb_write_all(1, buf, (size_t)n);
		}
		if (p[1].revents & (POLLIN | POLLHUP)) {
			n = read(0, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue; /* a non-blocking terminal: nothing after all */
			if (n <= 0)
				in_open = false; /* keep showing output */
			else
				pisb_write_all(master, buf, (size_t)n);
		}
	}
	pisb_tty_restore();
	waitpid(pid, &status, 0);
	*code = pisb_wait_code(status);
	close(master);
	return 0;
}
