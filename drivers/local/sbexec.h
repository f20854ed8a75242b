/* sbexec.h - running commands inside a local sandbox.
 *
 * pisb_local_spawn() forks a process that joins the sandbox (cgroup,
 * namespaces, root), becomes root inside, gets the sandbox environment and
 * execs argv in cwd.  The returned pid is the host pid of that process (it
 * is pid N inside); it leads its own session or process group.  It is our
 * grandchild: the caller is made a child subreaper so that it can still
 * wait for it.
 */
#ifndef PISB_SBEXEC_H
#define PISB_SBEXEC_H

#include <stdbool.h>
#include <sys/types.h>

struct pisb_err;
struct pisb_config;
struct pisb_runtime;
struct pisb_strv;
struct winsize;

/* The environment inside: a small safe set, the config's env, then extra
 * ("K=V" each).  Nothing of the caller's environment unless in extra. */
void pisb_sandbox_env(const struct pisb_config *cfg, const char *term,
		      char *const *extra, size_t nextra, struct pisb_strv *out);

struct pisb_spawn {
	const struct pisb_runtime *rt;  /* init pid/start, cgroup */
	char *const *argv;
	char *const *envp;
	const char *cwd;                /* absolute inside */
	int stdin_fd, stdout_fd, stderr_fd;  /* -1: /dev/null */
	bool new_session;               /* setsid (else setpgid) */
	bool pdeathsig;                 /* die with the spawner */
	bool cg_limits_only;            /* pisb_cgroup_join's limits_only: the
					 * sandbox is not delegated (no docker: true) */
	/* pisb_local_spawn_direct only: fds (bit 0, 1, 2) that get the slave of
	 * a new pty of the sandbox's own devpts, its controlling terminal
	 * (new_session must be set); its master, O_CLOEXEC, in *pty_master,
	 * sized pty_size (NULL: the default) */
	unsigned pty_fds;
	const struct winsize *pty_size;
	int *pty_master;
};

/* Returns the pid, or -1.  Exec failures inside are reported through
 * *exec_errno (0 if the exec happened) once the child execs or fails:
 * the call waits for that. */
pid_t pisb_local_spawn(const struct pisb_spawn *s, int *exec_errno,
		     struct pisb_err *e);

/* The same, but the calling process itself joins the sandbox first (for
 * short-lived callers such as pisb exec: one fork less, and the command is
 * our own child). */
pid_t pisb_local_spawn_direct(const struct pisb_spawn *s, int *exec_errno,
			    struct pisb_err *e);

/* Resolve --cwd: absolute stays, relative is under the workspace. */
char *pisb_sandbox_cwd(const struct pisb_config *cfg, const char *cwd);

#endif
