/* vm_hooks.c - the hooks of a vm sandbox, run in the guest through the
 * agent: setup[] and .agents/setup on a new disk (create, prepare), the
 * resume hooks on every later boot (start, the first boot of a template's
 * copy), as the local driver runs them (drivers/local/controller.c).
 *
 * Their output goes to the instance's setup.log (what `pisb logs` shows),
 * bounded on the host: a write that would take it past VM_LOG_MAX renames
 * it to setup.log.1 first (never reading it), so the two hold at most
 * twice that, whatever the guest prints.
 */
#include "vm.h"
#include "vm_internal.h"
#include "config.h"
#include "err.h"
#include "instance.h"
#include "proc.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define VM_SETUP_DEADLINE_MS (20 * 60 * 1000)
#define VM_RESUME_WAIT_MS 10000
#define VM_LOG "setup.log"
#define VM_LOG_MAX (1024 * 1024)

/* ---- the hooks' log ---- */

struct vm_log {
	int idir, fd;
};

static int log_open(int idir)
{
	return openat(idir, VM_LOG, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* Append n bytes, rotating first when they would take the log past
 * VM_LOG_MAX.  Never fails the hook: a log that cannot be written loses
 * the bytes. */
static void log_write(struct vm_log *l, const void *p, size_t n)
{
	struct stat sb;

	if (n > VM_LOG_MAX)
		n = VM_LOG_MAX;
	if (l->fd >= 0 && fstat(l->fd, &sb) == 0 && sb.st_size + (off_t)n > VM_LOG_MAX) {
		renameat(l->idir, VM_LOG, l->idir, VM_LOG ".1");
		close(l->fd);
		l->fd = log_open(l->idir);
	}
	if (l->fd >= 0 && pisb_write_all(l->fd, p, n) < 0) {
	}
}

static void __attribute__((format(printf, 2, 3))) log_line(struct vm_log *l, const char *fmt, ...)
{
	_cleanup_free_ char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (s)
		log_write(l, s, strlen(s));
}

static int log_sink(void *arg, int type, const void *p, size_t n, struct pisb_err *e)
{
	(void)type;
	(void)e;
	log_write(arg, p, n);
	return 0;
}

/* The guest environment of the hooks: PATH, HOME, the egress proxy's,
 * the config's env. */
static void hook_env(const struct pisb_config *cfg, struct pisb_strv *env)
{
	pisb_strv_push(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	pisb_strv_push(env, "HOME=/root");
	pisb_config_proxy_env(cfg, env);
	for (size_t i = 0; i < cfg->env.n; i++)
		pisb_strv_pushf(env, "%s=%s", cfg->env.v[i].key, cfg->env.v[i].val);
}

/* ---- setup ---- */

void vm_run_setup(int idir, const struct pisb_config *cfg, bool look)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	struct vm_log log = { idir, log_open(idir) };
	/* a plain sh looks for .agents/setup; only a script that is there
	 * gets the login shell (under TCG a login shell's profile costs
	 * ~0.6 s, paid by every create otherwise) */
	_cleanup_free_ char *agents = xasprintf("f=%s/.agents/setup; if [ -x \"$f\" ]; then exec /bin/sh -lc 'exec \"$0\"' \"$f\"; fi",
						cfg->workspace);
	int64_t deadline = pisb_mono_ms() + pisb_env_ms("PISB_VM_SETUP_MS", VM_SETUP_DEADLINE_MS);
	char *failed = NULL;

	hook_env(cfg, &env);
	for (size_t i = 0; i < cfg->nsetup + look && !failed; i++) {
		const char *line = i < cfg->nsetup ? cfg->setup[i] : agents;
		char *argv[] = { "/bin/sh", i < cfg->nsetup ? "-lc" : "-c", (char *)line, NULL };
		struct vm_run r = { argv, env.v, cfg->workspace, -1, -1, -1, false, false, deadline, false, false, NULL };
		struct pisb_err e = PISB_ERR_INIT;
		int code = 0;
		_cleanup_free_ char *what = i < cfg->nsetup ? xasprintf("setup[%zu] '%s'", i, line)
							    : xstrdup(".agents/setup");
		if (pisb_mono_ms() >= deadline)
			failed = xasprintf("%s: the %d-minute setup deadline passed", what,
					   pisb_env_ms("PISB_VM_SETUP_MS", VM_SETUP_DEADLINE_MS) / 60000);
		else if (vm_run_sink(idir, &r, log_sink, &log, &code, &e) < 0)
			failed = e.code == PISB_EXIT_TIMEOUT
				 ? xasprintf("%s: the setup deadline (%d s) passed: killed", what,
					     pisb_env_ms("PISB_VM_SETUP_MS", VM_SETUP_DEADLINE_MS) / 1000)
				 : xasprintf("%s: %s", what, e.msg);
		else if (code)
			failed = xasprintf("%s exited with %d", what, code);
	}
	if (failed) {
		struct pisb_err ig = PISB_ERR_INIT;
		if (pisb_runtime_note_setup_error(idir, failed, &ig) < 0)
			log_line(&log, "pisb: setup: could not record its failure: %s\n", ig.msg);
	}
	if (log.fd >= 0)
		close(log.fd);
}

/* ---- resume ---- */

/* The local driver's script: each resume line through /bin/sh -lc (a
 * failing one is logged and the next runs), then .agents/resume when it
 * is executable. */
static char *resume_script(const struct pisb_config *cfg)
{
	struct pisb_buf s = PISB_BUF_INIT;

	for (size_t i = 0; i < cfg->nresume; i++) {
		pisb_buf_adds(&s, "/bin/sh -lc '");
		for (const char *p = cfg->resume[i]; *p; p++) {
			if (*p == '\'')
				pisb_buf_adds(&s, "'\\''");
			else
				pisb_buf_addc(&s, *p);
		}
		pisb_buf_addf(&s, "' || echo \"resume[%zu] exited with $?\" >&2\n", i);
	}
	pisb_buf_addf(&s, "f=%s/.agents/resume; if [ -x \"$f\" ]; then \"$f\" || echo \".agents/resume exited with $?\" >&2; fi\n",
		      cfg->workspace);
	return pisb_buf_detach(&s);
}

/* The runner: a detached process (its own session, no fds of the
 * caller's but idir and the pipe's end) that runs the script through
 * the agent and writes its output into the log.  It ends with the
 * script, or with the VM. */
static void __attribute__((noreturn)) resume_runner(int idir, int wr, const struct pisb_config *cfg)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	_cleanup_free_ char *script = resume_script(cfg);
	_cleanup_free_ char *agents = xasprintf("%s/.agents/resume", cfg->workspace);
	struct pisb_err e = PISB_ERR_INIT;
	struct vm_log log;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC), code = 0;
	pid_t me = getpid();
	/* The script runs in a session of its own (setsid -w waits for it
	 * and passes its status on): the agent ends the command's process
	 * group when the command ends, and what a resume hook leaves running
	 * in the background is meant to stay, as with the local driver.
	 * Without resume lines and .agents/resume, one sh and no login
	 * shell: every start runs this. */
	char *argv[] = { "/bin/sh", "-c",
			 "[ \"$2\" = lines ] || [ -x \"$3\" ] || exit 0; "
			 "if command -v setsid >/dev/null; then exec setsid -w /bin/sh -lc \"$1\"; fi; exec /bin/sh -lc \"$1\"",
			 "sh", script, cfg->nresume ? "lines" : "none", agents, NULL };
	struct vm_run r = { argv, NULL, cfg->workspace, -1, -1, -1, false, false, 0, false, false, NULL };

	/* no fds but these, renumbered (by way of high numbers: idir or wr
	 * may be 3 or 4 already) */
	idir = fcntl(idir, F_DUPFD_CLOEXEC, 200);
	wr = fcntl(wr, F_DUPFD_CLOEXEC, 200);
	dup2(null, 0);
	dup2(null, 1);
	dup2(null, 2);
	if (idir < 0 || wr < 0 || dup3(idir, 3, O_CLOEXEC) < 0 || dup3(wr, 4, O_CLOEXEC) < 0)
		_exit(1);
	pisb_close_from(5, -1);
	idir = 3;
	if (pisb_write_all(4, &me, sizeof(me)) < 0)
		_exit(1);
	log = (struct vm_log){ idir, log_open(idir) };
	hook_env(cfg, &env);
	r.env = env.v;
	log_line(&log, "pisb: resume hooks: running (pid %d)\n", (int)me);
	if (vm_run_sink(idir, &r, log_sink, &log, &code, &e) < 0)
		log_line(&log, "pisb: resume hooks: %s\n", e.msg);
	else
		log_line(&log, "pisb: resume hooks: ended (status %d)\n", code);
	_exit(0);
}

int vm_run_resume(int idir, const struct pisb_config *cfg, struct pisb_proc_id *bg,
		  struct pisb_err *e)
{
	int p[2];
	pid_t child, runner = 0;
	int64_t deadline;
	bool ended = false;

	memset(bg, 0, sizeof(*bg));
	if (pipe2(p, O_CLOEXEC) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "pipe");
	child = fork();
	if (child < 0) {
		close(p[0]);
		close(p[1]);
		return pisb_err_sys(e, PISB_EXIT_PISB, "fork");
	}
	if (child == 0) {
		close(p[0]);
		setsid();
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		if (fork() != 0)
			_exit(0);
		resume_runner(idir, p[1], cfg);
	}
	close(p[1]);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
	}
	/* the runner's pid, then its end: EOF when its end of the pipe
	 * closes (it alone holds it) */
	if (read(p[0], &runner, sizeof(runner)) != (ssize_t)sizeof(runner) || runner <= 0) {
		close(p[0]);
		return pisb_err_set(e, PISB_EXIT_PISB, "the resume hooks' runner did not start");
	}
	deadline = pisb_mono_ms() + VM_RESUME_WAIT_MS;
	while (!ended) {
		int64_t left = deadline - pisb_mono_ms();
		struct pollfd pf = { p[0], POLLIN, 0 };
		char c;
		int n;
		if (left <= 0)
			break;
		n = poll(&pf, 1, (int)left);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && read(p[0], &c, 1) <= 0)
			ended = true;
	}
	close(p[0]);
	if (!ended) {
		bg->pid = runner;
		bg->start = pisb_proc_start(runner);
	}
	return 0;
}
