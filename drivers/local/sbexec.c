#include "sbexec.h"
#include "local.h"
#include "cgroup.h"
#include "config.h"
#include "err.h"
#include "instance.h"
#include "ns.h"
#include "proc.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

void pisb_sandbox_env(const struct pisb_config *cfg, const char *term,
		      char *const *extra, size_t nextra, struct pisb_strv *out)
{
	pisb_strv_push(out, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	pisb_strv_push(out, "HOME=/root");
	pisb_strv_push(out, "LANG=C.UTF-8");
	pisb_strv_pushf(out, "TERM=%s", term && *term ? term : "dumb");
	pisb_strv_push(out, "USER=root");
	pisb_strv_push(out, "LOGNAME=root");
	pisb_strv_push(out, "SHELL=/bin/sh");
	pisb_strv_push(out, "TMPDIR=/tmp");
	pisb_strv_pushf(out, "PISB_WORKSPACE=%s", cfg->workspace);
	pisb_config_proxy_env(cfg, out);
	for (size_t i = 0; i < cfg->env.n; i++)
		pisb_strv_pushf(out, "%s=%s", cfg->env.v[i].key, cfg->env.v[i].val);
	for (size_t i = 0; i < nextra; i++) {
		/* a later K=V replaces an earlier one */
		const char *eq = strchr(extra[i], '=');
		size_t kl = eq ? (size_t)(eq - extra[i]) + 1 : strlen(extra[i]);
		for (size_t k = 0; k < out->n; k++) {
			if (!strncmp(out->v[k], extra[i], kl)) {
				free(out->v[k]);
				memmove(out->v + k, out->v + k + 1, (out->n - k) * sizeof(char *));
				out->n--;
				break;
			}
		}
		pisb_strv_push(out, extra[i]);
	}
}

char *pisb_sandbox_cwd(const struct pisb_config *cfg, const char *cwd)
{
	if (!cwd || !*cwd)
		return xstrdup(cfg->workspace);
	if (cwd[0] == '/')
		return xstrdup(cwd);
	return xasprintf("%s/%s", cfg->workspace, cwd);
}

/* In the command's process, inside the sandbox: become root, set up stdio
 * and the environment, exec.  Never returns.  An exec that fails is
 * reported through the pipe pfd (a forked child), or in *shared (a child
 * that shares our memory, pfd -1).  It may share our memory (CLONE_VM,
 * see pisb_local_spawn_direct): it writes nothing of ours but *shared and
 * environ (which its parent puts back), and allocates nothing. */
static void __attribute__((noreturn)) exec_child(const struct pisb_spawn *s, int pfd,
						 const char *slave, int *shared)
{
	struct pisb_err ce = PISB_ERR_INIT;
	int en, tty = -1;

	if (s->pdeathsig)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (s->new_session)
		setsid();
	else
		setpgid(0, 0);
	if (slave) {
		/* opened while we are the pty's owner; a new session: it becomes
		 * its controlling terminal */
		tty = open(slave, O_RDWR | O_CLOEXEC);
		if (tty < 0 || ioctl(tty, TIOCSCTTY, 0) < 0) {
			en = errno;
			dprintf(2, "pisb: cannot open the terminal '%s': %s\n", slave, strerror(en));
			_exit(PISB_EXIT_PISB);
		}
	}
	if (pisb_sandbox_become_root(geteuid() == 0 || s->rt->uid_base == 0, &ce) < 0)
		_exit(PISB_EXIT_PISB);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	{
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(s->stdin_fd >= 0 ? s->stdin_fd : null, 0);
		dup2(s->stdout_fd >= 0 ? s->stdout_fd : null, 1);
		dup2(s->stderr_fd >= 0 ? s->stderr_fd : null, 2);
	}
	for (int i = 0; i < 3 && tty >= 0; i++)
		if (s->pty_fds & (1u << i))
			dup2(tty, i);
	/* a handler of ours must never run here (our memory) */
	pisb_signals_reset();
	/* nothing else of the caller's enters the sandbox */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	if (s->cwd && chdir(s->cwd) < 0) {
		en = errno;
		dprintf(2, "pisb: cannot enter directory '%s': %s\n", s->cwd, strerror(en));
		_exit(PISB_EXIT_NOEXEC);
	}
	/* a bare name is looked up in the command's PATH (its environment,
	 * inside the sandbox), not in ours: execvpe searches the one of
	 * environ (no PATH there: the default path, as before) */
	environ = (char **)s->envp;
	execvpe(s->argv[0], s->argv, s->envp);
	en = errno;
	if (shared) {
		*shared = en;
	} else {
		/* the pipe is CLOEXEC: it is still open only if exec failed */
		pisb_write_all(pfd, &(int){ 1 }, sizeof(int));
		pisb_write_all(pfd, &en, sizeof(en));
	}
	_exit(en == ENOENT ? PISB_EXIT_NOCMD : PISB_EXIT_NOEXEC);
}

static int enter(const struct pisb_spawn *s, struct pisb_err *e)
{
	pisb_trace("exec: sandbox looked up");
	if (pisb_cgroup_join(s->rt->cgroup, s->cg_limits_only, e) < 0)
		return -1;
	/* the last mark: inside, PISB_TRACE would name a sandbox path */
	pisb_trace("exec: cgroups joined");
	if (pisb_sandbox_enter(s->rt->init.pid, s->rt->init.start, e) < 0)
		return -1;
	return 0;
}

/* Read what the command's side reported: its pid (double fork only), then
 * EOF on exec or the exec errno. */
static int read_exec_result(int fd, int *err)
{
	int code = 0;

	*err = 0;
	if (pisb_read_all(fd, &code, sizeof(code)) == sizeof(code) && code == 1 &&
	    pisb_read_all(fd, err, sizeof(*err)) == sizeof(*err))
		return 0;
	*err = 0;
	return 0;
}

/* pisb_local_spawn_direct's child: its own stack, in its parent's frame
 * (the parent waits until it has exec'd) */
struct child_arg {
	const struct pisb_spawn *s;
	const char *slave;
	int err;
	char stack[64 * 1024] __attribute__((aligned(16)));
};

static int child_main(void *arg)
{
	struct child_arg *a = arg;

	exec_child(a->s, -1, a->slave, &a->err);
}

pid_t pisb_local_spawn_direct(const struct pisb_spawn *s, int *exec_errno,
			    struct pisb_err *e)
{
	int err, master = -1;
	char slave[64] = "";
	pid_t cmd;

	if (enter(s, e) < 0)
		return -1;
	if (s->pty_fds) {
		/* opened now that we are in the sandbox: its own devpts */
		master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
		    ptsname_r(master, slave, sizeof(slave)) != 0) {
			pisb_err_sys(e, PISB_EXIT_PISB, "open a terminal in the sandbox");
			if (master >= 0)
				close(master);
			return -1;
		}
		if (s->pty_size)
			ioctl(master, TIOCSWINSZ, s->pty_size);
	}
	/* The command's process shares our memory until it execs, and we
	 * wait meanwhile (vfork, as posix_spawn): no copy of our page tables
	 * and no copy-on-write faults on either side, and no pipe for the
	 * exec's result (pisb_clone_vfork); the environ it points at the
	 * command's goes back. */
	{
		struct child_arg a;   /* not zeroed: 64 KiB */
		char **env = environ;
		int en;

		a.s = s;
		a.slave = master >= 0 ? slave : NULL;
		a.err = 0;
		cmd = pisb_clone_vfork(child_main, &a, a.stack + sizeof(a.stack));
		en = errno;
		environ = env;
		if (cmd < 0) {
			if (master >= 0)
				close(master);
			errno = en;
			return pisb_err_sys(e, PISB_EXIT_PISB, "fork");
		}
		err = a.err;
	}
	if (s->pty_master)
		*s->pty_master = master;
	else if (master >= 0)
		close(master);
	if (exec_errno)
		*exec_errno = err;
	return cmd;
}

pid_t pisb_local_spawn(const struct pisb_spawn *s, int *exec_errno,
		     struct pisb_err *e)
{
	int p[2], err = 0, code = 0;
	pid_t outer, inner = -1;
	struct pisb_spawn copy = *s;

	/* The command's parent is the short-lived process that joins the
	 * namespaces: a parent-death signal would kill it at once. */
	copy.pdeathsig = false;
	s = &copy;
	/* the command will be our grandchild: be its reaper */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (pipe2(p, O_CLOEXEC) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "pipe");
	outer = fork();
	if (outer < 0) {
		close(p[0]);
		close(p[1]);
		return pisb_err_sys(e, PISB_EXIT_PISB, "fork");
	}
	if (outer == 0) {
		/* joins the namespaces (only a single-threaded process may, and a
		 * pid ns applies to children only), forks the command, leaves */
		struct pisb_err ce = PISB_ERR_INIT;
		pid_t cmd;

		close(p[0]);
		if (enter(s, &ce) < 0) {
			int c = -ce.code;
			pisb_write_all(p[1], &c, sizeof(c));
			pisb_write_all(p[1], ce.msg, strlen(ce.msg));
			_exit(1);
		}
		cmd = fork();
		if (cmd < 0)
			_exit(1);
		if (cmd == 0)
			exec_child(s, p[1], NULL, NULL);
		pisb_write_all(p[1], &(int){ 0 }, sizeof(int));
		pisb_write_all(p[1], &cmd, sizeof(cmd));
		_exit(0);
	}
	close(p[1]);
	waitpid(outer, NULL, 0);
	if (pisb_read_all(p[0], &code, sizeof(code)) != sizeof(code)) {
		close(p[0]);
		return pisb_err_set(e, PISB_EXIT_PISB, "could not start the command in the sandbox");
	}
	if (code < 0) {
		char msg[1024];
		ssize_t n = pisb_read_all(p[0], msg, sizeof(msg) - 1);
		msg[n > 0 ? n : 0] = '\0';
		close(p[0]);
		return pisb_err_set(e, -code, "%s", msg);
	}
	if (pisb_read_all(p[0], &inner, sizeof(inner)) != sizeof(inner)) {
		close(p[0]);
		return pisb_err_set(e, PISB_EXIT_PISB, "could not start the command in the sandbox");
	}
	read_exec_result(p[0], &err);
	close(p[0]);
	if (exec_errno)
		*exec_errno = err;
	return inner;
}
