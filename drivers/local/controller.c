/* controller.c - the per-sandbox supervisor (pisb-svc supervise NAME).
 *
 * It holds controller.lock for as long as it lives (that is what "running"
 * means), boots the sandbox, runs setup or resume hooks, then serves
 * requests on control.sock until asked to stop: stop services, end every
 * process, sync the disk, record the checkpoint, exit.  If the controller
 * dies, the sandbox's init dies with it (PDEATHSIG + its socket closing),
 * and `inspect` says interrupted until the next start.
 */
#include "local.h"
#include "cgroup.h"
#include "config.h"
#include "ctllog.h"
#include "err.h"
#include "fs.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "ns.h"
#include "pool.h"
#include "proc.h"
#include "project.h"
#include "sbexec.h"
#include "image.h"
#include "services.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SETUP_DEADLINE_MS (20 * 60 * 1000)
#define RESUME_WAIT_MS 10000
/* the idle trim (pisb_proc_idle_trim) this long after the last work */
#define TRIM_DELAY_MS 200
/* a spare claimed: its replacement this long after the sandbox runs */
#define REFILL_DELAY_MS 200

/* The controller's log is its stderr (controller.log): one line per event. */
#define logf_ pisb_svc_log

struct ctl {
	struct pisb_state *st;
	const char *name;
	int idir;
	struct pisb_record rec;
	struct pisb_config *cfg;
	struct pisb_runtime rt;
	struct pisb_cgroup cg;
	struct pisb_ids ids;
	pid_t watch;                /* the project's watcher (ns.h), or 0 */
	struct pisb_preboot pre;    /* namespaces made ahead of the boot */
	int initctl;
	int lsock;
	int sigfd;
	bool stopping;
	char stop_error[1024];      /* why the stop could not be recorded */
	struct stat idir_st;        /* what instances/NAME was when we started */
	int64_t idir_checked;       /* when idir_gone last looked (monotonic ms) */
	int watched;                /* instances/, watched (watch_idir), or -1 */
	struct pisb_services *svc;
	struct pisb_hooklog hooks;  /* the hooks' output, to our log (ctllog.h) */
	int notify;                 /* the starter's socket (--notify-fd), or -1 */
	char claimed[80];           /* a spare of the pool: the name it was claimed as */
	char pool_key[17];          /* ... and its pool (pool.h) */
	int stop_client;            /* the stop's client, answered last, or -1 */
};

/* The starter waits for this (then reads status.json), not for a turn of
 * polling.  Told once, the socket is not kept: no child forked meanwhile
 * holds it longer than needed. */
static void notify_starter(struct ctl *c, const char *state)
{
	if (c->notify < 0)
		return;
	if (send(c->notify, state, 1, MSG_NOSIGNAL) < 0) {
		/* a starter that gave up reads status.json anyway */
	}
	close(c->notify);
	c->notify = -1;
}

static int save_as(struct ctl *c, const char *state, bool sync, struct pisb_err *e)
{
	snprintf(c->rt.state, sizeof(c->rt.state), "%s", state);
	if (c->svc) {
		free(c->rt.services_json);
		free(c->rt.previews_json);
		c->rt.services_json = pisb_services_status_json(c->svc);
		c->rt.previews_json = pisb_services_previews_json(c->svc);
	}
	if (sync)
		return pisb_runtime_save(c->idir, &c->rt, e);
	return pisb_runtime_save_volatile(c->idir, &c->rt, e);
}

/* what runs now needs no fsync: a power loss ends it anyway, and the
 * next start recovers from any state; the end of a run does (do_stop
 * syncs "stopped" with the disk) */
static int save(struct ctl *c, const char *state, struct pisb_err *e)
{
	return save_as(c, state, !strcmp(state, "stopped") || !strcmp(state, "failed"), e);
}

/* the services' record, before they answer a client (pisb_services_on_change) */
static void save_running(void *arg)
{
	struct pisb_err ig = PISB_ERR_INIT;

	save(arg, "running", &ig);
}

/* Wait for a hook at most timeout_ms, moving its output into our log
 * meanwhile.  Returns as pisb_wait_timeout. */
static pid_t wait_hook(struct ctl *c, pid_t pid, int *status, int timeout_ms)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	_cleanup_close_ int pidfd = pisb_pidfd_open(pid);

	for (;;) {
		struct pollfd p[2];
		int n = 0, timeout;
		int64_t left;
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r < 0 && errno == EINTR)
			continue;
		if (r != 0) {
			pisb_hooklog_drain(&c->hooks);
			return r;
		}
		left = deadline - pisb_mono_ms();
		if (left <= 0)
			return 0;
		/* kernels without pidfd_open: look again every 10 ms */
		timeout = pidfd >= 0 ? (int)left : (left < 10 ? (int)left : 10);
		if (pidfd >= 0)
			p[n++] = (struct pollfd){ pidfd, POLLIN, 0 };
		n += pisb_hooklog_pollfd(&c->hooks, p + n, &timeout);
		if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR)
			return -1;
		pisb_hooklog_drain(&c->hooks);
	}
}

/* Run a shell script inside the sandbox, its output through the hooks'
 * pipe to our log (never a host fd: a process it leaves behind could
 * write to that forever); wait at most timeout_ms (then kill it).
 * Returns its exit code, or -1. */
static int run_script(struct ctl *c, const char *script, int timeout_ms,
		      bool wait, pid_t *pid_out, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	char *argv[] = { "/bin/sh", "-lc", (char *)script, NULL };
	struct pisb_spawn s;
	int err, status;
	pid_t pid, r;

	pisb_sandbox_env(c->cfg, NULL, NULL, 0, &env);
	memset(&s, 0, sizeof(s));
	s.rt = &c->rt;
	s.argv = argv;
	s.envp = env.v;
	s.cwd = c->cfg->workspace;
	s.stdin_fd = -1;
	s.stdout_fd = c->hooks.w;
	s.stderr_fd = c->hooks.w;
	s.new_session = true;
	pid = pisb_local_spawn(&s, &err, e);
	if (pid < 0)
		return -1;
	if (pid_out)
		*pid_out = pid;
	if (!wait)
		return 0;
	r = wait_hook(c, pid, &status, timeout_ms);
	if (r == 0) {
		kill(-pid, SIGKILL);
		waitpid(pid, &status, 0);
		return pisb_err_set(e, PISB_EXIT_TIMEOUT, "timed out after %d s", timeout_ms / 1000);
	}
	if (r < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "wait");
	return pisb_wait_code(status);
}

/* Is <workspace>/.agents/NAME on the disk?  (The workspace lives in the
 * overlay's upper layer, so a host-side look is enough to skip a shell.)
 * The path is the sandbox's: resolved inside the upper layer, so a guest
 * symlink on the way never makes us look at a host path. */
static bool agents_hook(struct ctl *c, const char *name)
{
	_cleanup_free_ char *p = xasprintf("%s/.agents/%s", c->cfg->workspace, name);
	_cleanup_close_ int up = openat(c->idir, "disk/upper", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = up < 0 ? -1 : pisb_fs_resolve(up, p, O_PATH | O_NOFOLLOW, 0);

	return fd >= 0;
}

/* setup lines, then <workspace>/.agents/setup if executable; one deadline.
 * *ran: whether anything ran. */
static char *run_setup(struct ctl *c, bool *ran)
{
	struct pisb_err e = PISB_ERR_INIT;
	int64_t deadline = pisb_mono_ms() + SETUP_DEADLINE_MS;
	_cleanup_free_ char *agents = NULL;

	*ran = c->cfg->nsetup > 0;
	for (size_t i = 0; i < c->cfg->nsetup; i++) {
		int64_t left = deadline - pisb_mono_ms();
		int code;

		logf_("setup[%zu]: %s", i, c->cfg->setup[i]);
		code = left > 0 ? run_script(c, c->cfg->setup[i], (int)left, true, NULL, &e) : -1;
		if (left <= 0)
			pisb_err_set(&e, PISB_EXIT_TIMEOUT, "the 20-minute setup deadline passed");
		if (code != 0)
			return code < 0 ? xasprintf("setup[%zu] '%s': %s", i, c->cfg->setup[i], e.msg)
					: xasprintf("setup[%zu] '%s' exited with %d", i, c->cfg->setup[i], code);
	}
	if (!agents_hook(c, "setup"))
		return NULL;
	*ran = true;
	agents = xasprintf("f=%s/.agents/setup; if [ -x \"$f\" ]; then exec \"$f\"; fi", c->cfg->workspace);
	{
		int64_t left = deadline - pisb_mono_ms();
		int code = left > 0 ? run_script(c, agents, (int)left, true, NULL, &e) : -1;
		if (code != 0)
			return code < 0 ? xasprintf(".agents/setup: %s", e.msg)
					: xasprintf(".agents/setup exited with %d", code);
	}
	return NULL;
}

/* resume lines and .agents/resume in one background script; wait 10 s */
/* true when hooks ran (they may have changed the guest's config) */
static bool run_resume(struct ctl *c)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_buf s = PISB_BUF_INIT;
	pid_t pid = 0;
	int status;

	if (!c->cfg->nresume && !agents_hook(c, "resume"))
		return false;
	for (size_t i = 0; i < c->cfg->nresume; i++) {
		pisb_buf_adds(&s, "/bin/sh -lc ");
		/* single-quote the line for the outer shell */
		pisb_buf_addc(&s, '\'');
		for (const char *p = c->cfg->resume[i]; *p; p++) {
			if (*p == '\'')
				pisb_buf_adds(&s, "'\\''");
			else
				pisb_buf_addc(&s, *p);
		}
		pisb_buf_addf(&s, "' || echo \"resume[%zu] exited with $?\" >&2\n", i);
	}
	pisb_buf_addf(&s, "f=%s/.agents/resume; if [ -x \"$f\" ]; then \"$f\"; fi\n", c->cfg->workspace);
	logf_("resume: running hooks");
	if (run_script(c, s.s, 0, false, &pid, &e) < 0) {
		logf_("resume: %s", e.msg);
		pisb_buf_release(&s);
		return true;
	}
	pisb_buf_release(&s);
	if (wait_hook(c, pid, &status, RESUME_WAIT_MS) == 0) {
		logf_("resume: still running after 10 s, continuing in the background (pid %d)", (int)pid);
		c->rt.resume.pid = pid;
		c->rt.resume.start = pisb_proc_start(pid);
	}
	return true;
}

static int bind_control(struct ctl *c, struct pisb_err *e)
{
	c->lsock = pisb_control_listen(c->idir, 64);
	if (c->lsock < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "bind control.sock");
	umask(077); /* what the controller makes from now on is private */
	return 0;
}

/* syncfs of the disk, and of the state directory's filesystem when the
 * disk has one of its own (diskGiB). */
static int sync_disk(struct ctl *c, struct pisb_err *e)
{
	_cleanup_close_ int d = openat(c->idir, "disk", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int i = openat(c->idir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat ds, is;

	if (i < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open the directory of '%s' to sync it", c->name);
	if (d >= 0 && syncfs(d) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "sync the disk of '%s'", c->name);
	if (d >= 0 && fstat(d, &ds) == 0 && fstat(i, &is) == 0 && ds.st_dev == is.st_dev)
		return 0;
	if (syncfs(i) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "sync the state of '%s'", c->name);
	return 0;
}

/* sync_disk on a thread of its own (do_stop) */
struct sync_job {
	struct ctl *c;
	struct pisb_err e;
	int rc;
};

static void *sync_job_run(void *arg)
{
	struct sync_job *j = arg;

	j->rc = sync_disk(j->c, &j->e);
	return NULL;
}

/* Stop: services, every process, sync, checkpoint mark. */
static void do_stop(struct ctl *c)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct sync_job sj = { c, PISB_ERR_INIT, 0 };
	pthread_t syncer;
	bool threaded = false;
	int status;
	pid_t init;

	if (c->stopping)
		return;
	c->stopping = true;
	/* what the stop runs of the code pisb_proc_idle_trim unmapped comes
	 * back by faults, a few pages each: mapping all of it back first
	 * (MADV_POPULATE_READ) took 0.2-0.4 ms of every stop here (issue #21) */
	pisb_trace("stop: asked");
	/* first: a command that a client runs attached learns from its
	 * absence that its sandbox stopped under it (not its own doing) when
	 * the kill reaches it (local_exec.c's sandbox_still_running) */
	unlinkat(c->idir, "control.sock", 0);
	logf_("stopping");
	/* "stopping" for as long as services take to end (2 s at most);
	 * with none, the next word is "stopped", a few ms later (a status
	 * write is 0.1 ms of a stop here, issue #21) */
	if (pisb_services_any_process(c->svc))
		save(c, "stopping", &e);
	if (c->svc)
		pisb_services_stop_all(c->svc);
	pisb_trace("stop: services stopped");
	if (c->initctl >= 0) {
		if (pisb_sandbox_killall(c->initctl, 5000, &e) < 0)
			logf_("stop: %s", e.msg);
		pisb_trace("stop: every process killed");
		close(c->initctl); /* init exits: the pid ns is torn down */
		c->initctl = -1;
	}
	/* Every process of the sandbox is gone but its init, which is ending
	 * now, its namespaces torn down on a CPU of its own: "stopped", and
	 * the flush for it and the disk (the checkpoint is what is on the
	 * disk now; a crash before the flush ends starts from the disk as
	 * last synced, as after any interrupted run) on a thread meanwhile,
	 * beside the reaping and the cgroup's removal, not after them (issue
	 * #21).  The record still names the cgroup, removed below. */
	init = c->rt.init.pid;
	c->rt.init.pid = 0;
	c->rt.resume.pid = 0;
	c->rt.stopped_at = pisb_now_ms() / 1000;
	if (save_as(c, "stopped", false, &sj.e) < 0)
		sj.rc = -1;
	else if (!(threaded = pthread_create(&syncer, NULL, sync_job_run, &sj) == 0))
		sj.rc = sync_disk(c, &sj.e);
	pisb_trace("stop: stopped recorded, disk sync begun");
	/* Reap until the init is gone.  Our other children (hooks, services:
	 * we are their subreaper) may be zombies of its pid namespace, and
	 * the init cannot finish exiting until they are reaped: reap them
	 * all, not only the init.  Between reaps, sleep on the signalfd until
	 * a SIGCHLD (blocked, so one that comes between the waitpid and the
	 * poll is pending there, not lost); other signals only ask for the
	 * stop we are doing. */
	if (init > 0) {
		int64_t deadline = pisb_mono_ms() + 5000;
		bool killed = false;
		for (;;) {
			pid_t w = waitpid(-1, &status, WNOHANG);
			if (w == init || (w < 0 && errno == ECHILD))
				break;
			if (w > 0) {
				if (w == c->watch)
					c->watch = 0;
				else if (c->svc)
					pisb_services_reaped(c->svc, w, status);
				continue;
			}
			if (!killed && pisb_mono_ms() > deadline) {
				logf_("stop: the init did not exit in 5 s; killing it");
				kill(init, SIGKILL);
				killed = true;
			} else if (killed && pisb_mono_ms() > deadline + 10000) {
				/* a process outside that joined the sandbox and does not
				 * reap its child keeps the pid namespace from ending;
				 * do not hang the stop on it */
				logf_("stop: the init still has not exited (a process that joined the sandbox is not reaping its child); stopping anyway");
				break;
			}
			{
				int64_t left = (killed ? deadline + 10000 : deadline) - pisb_mono_ms() + 1;
				struct pollfd p = { c->sigfd, POLLIN, 0 };
				struct signalfd_siginfo si;

				/* no signalfd (a stop before it was made): every 2 ms */
				if (c->sigfd < 0)
					left = 2;
				if (left > 0 && poll(&p, 1, (int)left) > 0)
					while (read(c->sigfd, &si, sizeof(si)) == sizeof(si))
						;
			}
		}
	}
	/* the project's watcher ends with the init (it waits on its pidfd);
	 * the stop's client must find it gone, not ending */
	if (c->watch > 0) {
		kill(c->watch, SIGKILL);
		waitpid(c->watch, &status, 0);
		c->watch = 0;
	}
	pisb_trace("stop: init reaped");
	pisb_cgroup_close(&c->cg);
	/* gone: "stopped" names no cgroup, and the stop's caller has none
	 * to remove again; one that could not be removed stays named, for
	 * the caller and the next start to try */
	if (c->rt.cgroup && pisb_cgroup_remove(c->rt.cgroup) == 0) {
		struct pisb_err ig = PISB_ERR_INIT;
		free(c->rt.cgroup);
		c->rt.cgroup = NULL;
		/* unsynced: a record that still names it after a crash makes
		 * the next start or stop remove it (gone: nothing to do) */
		save_as(c, "stopped", false, &ig);
	}
	pisb_trace("stop: cgroup removed");
	if (threaded)
		pthread_join(syncer, NULL);
	if (sj.rc < 0) {
		/* the client's stop must not say it stopped cleanly */
		logf_("stop: %s", sj.e.msg);
		snprintf(c->stop_error, sizeof(c->stop_error), "%s", sj.e.msg);
	}
	pisb_trace("stop: disk synced (syncfs: what outlasted the reaping)");
	logf_("stopped");
}

static void reply(int fd, const char *json)
{
	pisb_write_all(fd, json, strlen(json));
	pisb_write_all(fd, "\n", 1);
}

/* A stop's answer: ok, or why the stop could not be recorded. */
static void stop_reply(const struct ctl *c, int fd)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kbool(&w, "ok", !c->stop_error[0]);
	if (c->stop_error[0])
		pisb_jw_kstr(&w, "error", c->stop_error);
	pisb_jw_obj_end(&w);
	reply(fd, b.s);
}

static void handle_client(struct ctl *c, int fd)
{
	char buf[65536];
	size_t len = 0;
	struct pisb_json j;
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_free_ char *op = NULL;
	int64_t deadline = pisb_mono_ms() + 2000;

	/* one request line; short deadline so a stuck client cannot block us */
	while (len < sizeof(buf) - 1 && !memchr(buf, '\n', len)) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - pisb_mono_ms();
		ssize_t n;
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (pisb_json_parse(&j, buf, strcspn(buf, "\n"), &e) < 0) {
		reply(fd, "{\"ok\":false,\"error\":\"bad request\"}");
		return;
	}
	op = pisb_json_str(&j, pisb_json_get(&j, 0, "op"));
	if (!op) {
		reply(fd, "{\"ok\":false,\"error\":\"missing op\"}");
	} else if (!strcmp(op, "ping")) {
		reply(fd, "{\"ok\":true}");
	} else if (!strcmp(op, "stop")) {
		do_stop(c);
		/* answered once all is undone and controller.lock is let go of
		 * (pisb_controller_run's end): its client need not wait for our
		 * exit (issue #21); with no fd to keep, now */
		if (c->stop_client < 0 && (c->stop_client = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
			stop_reply(c, fd);
	} else if (c->svc) {
		/* the reply may come later (ensure waits for readiness) */
		pisb_services_request(c->svc, op, &j, fd);
		save(c, "running", &e);
	} else {
		reply(fd, "{\"ok\":false,\"error\":\"unknown op\"}");
	}
	pisb_json_release(&j);
}

static void on_sigchld(struct ctl *c)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == c->rt.init.pid) {
			logf_("the sandbox init exited unexpectedly");
			c->rt.init.pid = 0;
			if (!c->stopping)
				do_stop(c);
		} else if (pid == c->watch) {
			/* it ends with the init; before it, secrets made in the
			 * project from now on would show: end the sandbox too */
			c->watch = 0;
			if (!c->stopping) {
				logf_("the project's watcher ended (%s %d): stopping the sandbox",
				      WIFSIGNALED(status) ? "signal" : "status",
				      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
				do_stop(c);
			}
		} else if (c->svc) {
			pisb_services_reaped(c->svc, pid, status);
		}
	}
}

/* Is the instance directory we serve still the one in the state dir?  A
 * directory deleted or replaced under us (rm -rf, a second create of the
 * name) would leave this sandbox running where no pisb command finds it:
 * the controller then shuts it down. */
static PISB_IDLE_PATH bool idir_gone(struct ctl *c)
{
	struct stat now, here;
	_cleanup_free_ char *p = xasprintf("instances/%s", c->name);

	if (fstat(c->idir, &here) < 0 || here.st_nlink == 0)
		return true;
	if (c->idir_st.st_ino == 0)
		return false;       /* a template being prepared: no instances/ path */
	if (fstatat(c->st->fd, p, &now, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT;
	return now.st_ino != c->idir_st.st_ino || now.st_dev != c->idir_st.st_dev;
}

/* A watch of what idir_gone looks at: the entries of instances/ (our
 * name removed, or a directory renamed onto it), by dnotify (SIGIO, on
 * our signalfd): no inotify instance, of which a hundred idle sandboxes
 * would take most of the user's 128.  -1 for a template being prepared
 * (no instances/ path; short-lived) or a kernel without dnotify: the idle
 * loop looks once a second then.  With it, an idle sandbox's controller sleeps until it is
 * asked something: no wake-up a second, whose code came back into memory
 * after each idle trim (issue #21). */
static int watch_idir(const struct ctl *c)
{
	if (!c->idir_st.st_ino)
		return -1;
	return pisb_dir_watch(c->st->fd, "instances", DN_CREATE | DN_DELETE | DN_RENAME);
}

/* The path of the disk of the published directory (a template's:
 * staging/NAME.prep, named @prep/NAME; a spare's, until it is claimed:
 * pool/NAME, named @spare/NAME). */
static char *published_disk(const struct ctl *c, const char *name)
{
	if (pisb_str_starts(name, "@prep/"))
		return xasprintf("%s/staging/%s.prep/disk", c->st->path, c->name);
	if (pisb_str_starts(name, "@spare/") && !c->claimed[0])
		return xasprintf("%s/pool/%s/disk", c->st->path, c->name);
	return xasprintf("%s/instances/%s/disk", c->st->path, c->name);
}

/* The staged directory we were sent (c->idir): its name in staging/,
 * found by its inode, or NULL (the create renamed it meanwhile). */
static char *staged_name(const struct ctl *c)
{
	_cleanup_close_ int sfd = openat(c->st->fd, "staging", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat want, sb;
	struct dirent *de;
	char *name = NULL;
	DIR *d;

	if (sfd < 0 || fstat(c->idir, &want) < 0 || !(d = fdopendir(sfd)))
		return NULL;
	sfd = -1;
	while (!name && (de = readdir(d)))
		if (de->d_ino == want.st_ino && de->d_name[0] != '.' &&
		    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    sb.st_ino == want.st_ino && sb.st_dev == want.st_dev)
			name = xstrdup(de->d_name);
	closedir(d);
	return name;
}

/* pisb-init, beside the binary we run from (bin/, or the libexec dir) */
static char *init_program(void)
{
	char self[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	return xasprintf("%s/pisb-init", self);
}

static int open_target(struct pisb_state *st, const char *name, struct pisb_err *e)
{
	if (pisb_str_starts(name, "@prep/")) {
		_cleanup_free_ char *p = xasprintf("staging/%s.prep", name + 6);
		int fd = openat(st->fd, p, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return pisb_err_sys(e, PISB_EXIT_NOTFOUND, "open '%s'", p);
		return fd;
	}
	return pisb_instance_open(st, "instances", name, e);
}

/* The overlay's scratch directory of an earlier run (disk/work/work) is
 * moved aside before the boot: a mount that finds one empties it and
 * makes it again, 0.43 ms instead of 0.27 here (issue #21).  Only the
 * overlay (the kernel) writes there, never the sandbox: it is not in the
 * sandbox's view.  Whether there was one. */
static bool work_aside(const struct ctl *c, const char *gen)
{
	char old[64];

	snprintf(old, sizeof(old), "disk/work/old-%s", gen);
	return renameat2(c->idir, "disk/work/work", c->idir, old, RENAME_NOREPLACE) == 0;
}

/* ... and removed once the sandbox runs, with any an interrupted run
 * left (best effort: a leftover is an empty directory) */
static void work_aside_drop(const struct ctl *c)
{
	_cleanup_close_ int w = openat(c->idir, "disk/work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = w < 0 ? NULL : fdopendir(w);
	struct dirent *de;

	if (!d)
		return;
	w = -1;   /* closedir closes it */
	while ((de = readdir(d))) {
		struct pisb_err ig = PISB_ERR_INIT;
		if (pisb_str_starts(de->d_name, "old-"))
			pisb_rm_rf_at(dirfd(d), de->d_name, &ig);
	}
	closedir(d);
}

/* A spare of the pool (pool.h), booted: wait, idle, to be claimed.  The
 * claim comes on claim.sock: "c" + NAME + "\n" from the create that takes
 * us; the first such is answered "k" (the socket is gone from then on:
 * no second create can take us), and that create is our starter from
 * then on (c->notify): its "g" (read as a create's, by the caller) once
 * it has written our record and published us as instances/NAME, or its
 * socket's end.  "x" instead of a claim: the pool retires us (pisb pool).
 * Returns 1 when claimed (the hostname inside set), 0 when we were
 * retired, the init died or the name could not be set. */
static PISB_IDLE_PATH int spare_wait(struct ctl *c)
{
	_cleanup_close_ int ls = pisb_unix_listen_at(c->idir, "claim.sock", 8, SOCK_NONBLOCK);
	char msg[80];
	size_t len = 0;
	int fd = -1;

	if (ls < 0) {
		logf_("spare: bind claim.sock: %s", strerror(errno));
		return 0;
	}
	/* read now, not once claimed: its access time would change then, a
	 * second journal commit to the claimer's flush */
	{
		_cleanup_buf_ struct pisb_buf k = PISB_BUF_INIT;
		if (pisb_read_file_at(c->idir, "pool.key", &k, 64) == 0 && k.s && k.len == 16)
			memcpy(c->pool_key, k.s, 17);
	}
	if (save(c, "spare", &(struct pisb_err)PISB_ERR_INIT) < 0)
		return 0;
	notify_starter(c, "spare");
	logf_("spare: waiting to be claimed");
	pisb_proc_idle_trim();
	for (;;) {
		struct pollfd p[3] = { { ls, POLLIN, 0 }, { c->sigfd, POLLIN, 0 }, { c->initctl, POLLIN, 0 } };
		ssize_t n;

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			return 0;
		if (p[2].revents) {
			logf_("spare: the sandbox init went away");
			return 0;
		}
		if (p[1].revents) {
			struct signalfd_siginfo si;
			while (read(c->sigfd, &si, sizeof(si)) == sizeof(si))
				if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
					return 0;
		}
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		/* one line, promptly: a client that says nothing loses its turn */
		len = 0;
		while (len < sizeof(msg) - 1 && !memchr(msg, '\n', len)) {
			struct pollfd q = { fd, POLLIN, 0 };
			if (poll(&q, 1, 2000) <= 0 || (n = read(fd, msg + len, sizeof(msg) - 1 - len)) <= 0)
				break;
			len += (size_t)n;
		}
		msg[len] = '\0';
		if (len && msg[0] == 'x') {
			close(fd);
			logf_("spare: retired by the pool");
			return 0;
		}
		if (len >= 3 && msg[0] == 'c' && msg[len - 1] == '\n') {
			msg[len - 1] = '\0';
			if (pisb_name_valid(msg + 1))
				break;
		}
		close(fd);
	}
	/* ours: no one else can connect from now on (a create connected
	 * meanwhile hears the socket's end, not "k") */
	close(ls);
	ls = -1;
	if (send(fd, "k", 1, MSG_NOSIGNAL) != 1) {
		close(fd);
		return 0;
	}
	unlinkat(c->idir, "claim.sock", 0);
	snprintf(c->claimed, sizeof(c->claimed), "%s", msg + 1);
	c->notify = fd;
	/* the name inside, while the create writes our record: nothing of
	 * the guest runs before its "g" */
	{
		struct pisb_err he = PISB_ERR_INIT;
		if (pisb_sandbox_sethostname(c->rt.init.pid, c->rt.init.start, c->claimed, &he) < 0) {
			logf_("spare: claimed as '%s': %s", c->claimed, he.msg);
			return 0;
		}
	}
	return 1;
}

void pisb_controller_title(const char *state_path, const char *name, bool own_ns)
{
	char bin[4096];
	ssize_t k = readlink("/proc/self/exe", bin, sizeof(bin) - 1);
	const char *args[] = { bin, "supervise", name, "--state-dir", state_path, "--notify-fd", "3",
			       own_ns ? "--own-namespaces" : NULL, NULL };

	if (k <= 0)
		snprintf(bin, sizeof(bin), "pisb");
	else
		bin[k] = '\0';
	if (pisb_proc_cmdline_set(args) == 0)
		return;
	args[3] = NULL;
	if (pisb_proc_cmdline_set(args) == 0)
		return;
	args[0] = "pisb";
	if (pisb_proc_cmdline_set(args) < 0)
		logf_("its command line could not be set (it names the sandbox '%s')", name);
}

/* Claimed (spare_wait, which set the hostname inside): the create has
 * written our record (the name, its owner, its time) and published us as
 * instances/NAME: that is who we are from now on. */
static int spare_claimed(struct ctl *c, struct pisb_err *e)
{
	struct pisb_record rec;

	if (pisb_record_load(c->idir, &rec, e) < 0)
		return -1;
	if (!rec.name || strcmp(rec.name, c->claimed)) {
		pisb_record_release(&rec);
		return pisb_err_set(e, PISB_EXIT_FAIL, "spare: claimed as '%s', but the record names another", c->claimed);
	}
	pisb_record_release(&c->rec);
	c->rec = rec;
	c->name = c->claimed;
	if (fstat(c->idir, &c->idir_st) < 0)
		memset(&c->idir_st, 0, sizeof(c->idir_st));
	c->rt.started_at = pisb_now_ms() / 1000;
	/* ps and pgrep -f "supervise NAME" find us as any controller, not
	 * as the pool's "@spare/spare-HEX" */
	pisb_controller_title(c->st->path, c->name, false);
	logf_("spare: claimed as '%s'", c->name);
	return 0;
}

/* A while after a claimed spare runs (not beside the create's first
 * command): its host id range's entry names it (until then the record
 * claims it: pisb_ids_adopt), and a replacement is started. */
static void spare_settle(struct ctl *c)
{
	struct pisb_err ie = PISB_ERR_INIT;

	if (c->rec.uid_base && pisb_ids_adopt(c->st, c->rec.uid_base, c->name, &ie) < 0)
		logf_("spare: %s", ie.msg);
	pisb_pool_refill(c->st, c->pool_key);
}

PISB_IDLE_PATH int pisb_controller_run(struct pisb_state *st, const char *name, int notify_fd,
					bool own_ns, struct pisb_err *e)
{
	struct ctl c;
	_cleanup_close_ int lock = -1;
	_cleanup_free_ char *lower = NULL, *disk = NULL, *pbound = NULL, *initp = init_program(), *etcmask = NULL;
	_cleanup_free_ char *disk_staged = NULL, *disk_published = NULL;
	bool disk_mounted = false;
	_cleanup_buf_ struct pisb_buf intent = PISB_BUF_INIT;
	bool fresh = false, prepare = false, setup_ran = false, resume_ran = false, staged = false;
	bool work_moved = false;
	int64_t trim_at = 0, refill_at = 0;
	bool look;
	_cleanup_buf_ struct pisb_buf guest = PISB_BUF_INIT;
	_cleanup_free_ char *guest_path = NULL;
	int guest_err = 0;
	struct pisb_boot b;
	sigset_t mask;
	char gen[17];
	int ret = -1;

	pisb_trace("controller: start");
	memset(&c, 0, sizeof(c));
	c.notify = notify_fd;
	c.stop_client = -1;
	c.idir = -1;
	c.name = pisb_str_starts(name, "@prep/") ? name + 6 : pisb_str_starts(name, "@spare/") ? name + 7 : name;
	/* the namespaces, made while we wait for the word, take the lock,
	 * read the record and make the cgroup (ns.h); not for a boot that
	 * our starter knows will make its own (own_ns) */
	c.pre.pid = c.pre.sock = -1;
	if (!own_ns) {
		/* named as the boot names it (b.hostname) */
		c.pre.hostname = c.name;
		c.pre.init_path = initp;
		pisb_preboot_start(&c.pre);
	}
	if (c.notify >= 0) {
		/* spawned while the sandbox was being staged: begin when it is
		 * published ('g'), or not at all (EOF).  A create sends the
		 * staged directory first ('s'): the lock, the record, the
		 * cgroup and the boot are done in it meanwhile, and nothing of
		 * the guest runs before the 'g' (below, after the boot) */
		char go;
		int fd;
		fcntl(c.notify, F_SETFD, FD_CLOEXEC);
		if (pisb_recv_byte_fd(c.notify, &go, &fd) != 1) {
			close(c.notify);
			pisb_preboot_drop(&c.pre);
			return 0;
		}
		if (go == 's' && fd >= 0) {
			/* spawned before there was a directory: its log is there */
			int log = openat(fd, "controller.log", O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
					 O_CLOEXEC | O_NOCTTY, 0600);
			if (log >= 0) {
				dup2(log, 1);
				dup2(log, 2);
				close(log);
			}
			c.idir = fd;
			staged = true;
			pisb_trace("controller: staged");
		} else {
			if (fd >= 0)
				close(fd);
			pisb_trace("controller: told to begin");
		}
	}
	c.st = st;
	c.initctl = c.lsock = c.sigfd = c.watched = -1;
	c.hooks.r = c.hooks.w = -1;
	if (c.idir < 0)
		c.idir = open_target(st, name, e);
	if (c.idir < 0) {
		pisb_preboot_drop(&c.pre);
		return -1;
	}
	pisb_ctllog_init(c.idir);
	/* (a spare's, once it is claimed: spare_claimed) */
	if (!pisb_str_starts(name, "@prep/") && !pisb_str_starts(name, "@spare/") && fstat(c.idir, &c.idir_st) < 0)
		memset(&c.idir_st, 0, sizeof(c.idir_st));
	/* a moment's patience: a client may be probing the lock right now */
	lock = pisb_lock_acquire(c.idir, "controller.lock", true, 2000, "the sandbox controller", e);
	if (lock < 0)
		goto out;
	pisb_trace("controller: lock");
	if (pisb_record_load(c.idir, &c.rec, e) < 0 || pisb_record_config(&c.rec, &c.cfg, e) < 0)
		goto out_failed;
	pisb_trace("controller: record and config parsed");
	if (pisb_read_file_at(c.idir, "intent.json", &intent, 4096) == 0) {
		fresh = strstr(intent.s, "\"setup\":true") != NULL;
		prepare = strstr(intent.s, "\"prepare\":true") != NULL;
	}
	/* read into 64 KiB and more, for a few bytes: not kept while we run */
	pisb_buf_release(&intent);
	/* a staged directory is new: no earlier run in it */
	if (!staged) {
		struct pisb_err ig = PISB_ERR_INIT;
		struct pisb_runtime old;
		if (pisb_runtime_load(c.idir, &old, &ig) == 0) {
			if (strcmp(old.state, "stopped"))
				logf_("recovering from an interrupted run (last state '%s'): starting from the disk as last synced", old.state);
			pisb_cgroup_remove(old.cgroup);
			pisb_runtime_release(&old);
		}
		/* handles of earlier runs are gone with their processes */
		pisb_rm_rf_at(c.idir, "exec", &ig);
	}
	pisb_ids_for_record(&c.rec, &c.ids);
	pisb_random_hex(gen, 8);
	snprintf(c.rt.generation, sizeof(c.rt.generation), "%s", gen);
	c.rt.controller.pid = getpid();
	c.rt.controller.start = pisb_proc_start(getpid());
	c.rt.started_at = pisb_now_ms() / 1000;
	c.rt.uid_base = c.ids.uid_base;
	c.rt.gid_base = c.ids.gid_base;
	pisb_trace("controller: old run cleared");
	if (save(&c, "starting", e) < 0)
		goto out_failed;
	pisb_trace("controller: status written (starting)");

	/* signals through a signalfd, so the loop below sees them in order */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGIO);    /* watch_idir's */
	sigprocmask(SIG_BLOCK, &mask, NULL);
	c.sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	/* a client that gave up before our reply must not kill us: EPIPE, not
	 * SIGPIPE (blocked, not ignored: children reset the mask, and an
	 * ignored SIGPIPE would be inherited by what runs in the sandbox) */
	{
		sigset_t pipe;
		sigemptyset(&pipe);
		sigaddset(&pipe, SIGPIPE);
		sigprocmask(SIG_BLOCK, &pipe, NULL);
	}

	/* limits (here, not on a thread beside the image layers below: that
	 * took 0.4-0.5 ms off a create or start, but a thread leaves the
	 * process multi-threaded for life, and an idle controller with
	 * 68 KiB more PSS, issue #21) */
	{
		char rel[128];
		bool required = c.cfg->profile_explicit || c.cfg->resources_explicit;
		snprintf(rel, sizeof(rel), "pisb/%s.%s", c.name, gen);
		if (pisb_cgroup_create(&c.cg, rel, c.cfg->cpus,
				       (long long)c.cfg->memory_gib << 30, c.cfg->pids,
				       required, e) < 0)
			goto out_failed;
		if (c.cfg->docker && c.ids.count >= 65536) {
			/* the sandbox's daemon makes its containers' cgroups
			 * below its own; else it runs rootless, without them */
			struct pisb_err de = PISB_ERR_INIT;
			if (pisb_cgroup_delegate(&c.cg, (unsigned)c.ids.uid_base, (unsigned)c.ids.gid_base, &de) < 0)
				logf_("docker: cgroups not delegated (the daemon runs rootless): %s", de.msg);
		}
		if (c.cg.dirfds[0] >= 0)
			c.rt.cgroup = xstrdup(rel);
		c.rt.mem_enforced = c.cg.mem;
		c.rt.cpu_enforced = c.cg.cpu;
		c.rt.pids_enforced = c.cg.pids;
		c.rt.disk_enforced = false;
		if (c.cg.note[0])
			c.rt.limits_note = xstrdup(c.cg.note);
	}

	pisb_trace("controller: cgroup created");
	/* the root filesystem layers */
	if (!strcmp(c.cfg->image, "host")) {
		_cleanup_free_ char *skel = xasprintf("images/host-%u", (unsigned)c.ids.uid_base);
		if (pisb_mkdirs_at(st->fd, "images", 0700, e) < 0 ||
		    pisb_host_skeleton(st->fd, skel, &c.ids, e) < 0)
			goto out_failed;
		lower = xasprintf("%s/%s", st->path, skel);
	} else {
		/* the image the sandbox was created from, not what the path
		 * holds now; a record from before imageCache, or a cache that
		 * was deleted by hand, resolves the path again */
		struct pisb_err ce = PISB_ERR_INIT;
		if (c.rec.image_cache && !(lower = pisb_image_cached(st, c.rec.image_cache, &ce)))
			pisb_svc_log("image: %s; importing '%s' again", ce.msg, c.cfg->image);
		if (!lower)
			lower = pisb_image_path(st, c.cfg->image, &c.ids, e);
		if (!lower)
			goto out_failed;
	}
	/* the disk's path: the published directory's; while the create has
	 * not published it (staged), ours through our descriptor of the
	 * staged one, and for the boot (which looks it up in a mount
	 * namespace of its own) the staged path, or the published one */
	disk = published_disk(&c, name);
	if (staged) {
		_cleanup_free_ char *sname = staged_name(&c);
		disk_published = disk;
		disk = xasprintf("/proc/self/fd/%d/disk", c.idir);
		if (sname)
			disk_staged = xasprintf("%s/staging/%s/disk", st->path, sname);
	}
	/* diskGiB: the disk's own filesystem image, when it has one */
	{
		_cleanup_free_ char *dir = xstrndup(disk, strlen(disk) - strlen("/disk"));
		int m = pisb_disk_image_mount(c.idir, dir, disk, e);
		if (m < 0)
			goto out_failed;
		c.rt.disk_enforced = m == 1;
		disk_mounted = m == 1;
	}
	work_moved = work_aside(&c, gen);
	if (c.cfg->docker && c.ids.count < 65536) {
		/* runc mounts /dev/pts with gid 5 and images hold files of many
		 * owners: one id mapped is not enough */
		pisb_err_set(e, PISB_EXIT_FAIL,
			     "docker: true needs pisb to run as root (a sandbox of uid %u maps %u id, its docker daemon's containers need the 65536 of root's sandboxes)",
			     (unsigned)geteuid(), c.ids.count);
		goto out_failed;
	}
	if (c.cfg->docker) {
		/* the daemon's data root: the instance disk, beside the overlay
		 * (overlay2 cannot stack on the overlay root), root's inside */
		_cleanup_free_ char *dd = xasprintf("%s/docker", disk);
		if (mkdir(dd, 0710) < 0 && errno != EEXIST) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "docker: mkdir '%s'", dd);
			goto out_failed;
		}
		if (geteuid() == 0 && chown(dd, c.ids.uid_base, c.ids.gid_base) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "docker: chown '%s' to the sandbox's root", dd);
			goto out_failed;
		}
	}
	memset(&b, 0, sizeof(b));
	b.hostname = c.name;
	b.docker = c.cfg->docker;
	b.lower_path = lower;
	b.host_image = !strcmp(c.cfg->image, "host");
	if (b.host_image) {
		struct pisb_err me = PISB_ERR_INIT;
		b.etc_mask = etcmask = pisb_etc_mask_prepare(st, &me);
		if (!etcmask)
			logf_("warning: %s; /etc is a view of per-entry binds instead", me.msg);
	}
	b.disk_path = disk_staged ? disk_staged : disk_published ? disk_published : disk;
	b.disk_path_published = disk_published;
	b.workspace = c.cfg->workspace;
	b.tmp_mib = (unsigned)c.cfg->memory_gib * 512;
	b.ids = c.ids;
	b.log_fd = 2;
	b.init_path = initp;
	for (int i = 0; i < 16; i++)
		b.cgroup_dirfds[i] = i <= PISB_CG_MAX ? c.cg.dirfds[i] : -1;
	pisb_trace("controller: image layers");
	if (!fresh) {
		/* read by the init before anything of the sandbox runs: the
		 * services need not fork into it for it (issue #21) */
		b.guest_config = guest_path = xasprintf("%s/.sandbox.yaml", c.cfg->workspace);
		b.guest_config_out = &guest;
		b.guest_config_err = &guest_err;
	}
	if (pisb_project_bound(c.idir, &pbound, &b.project_ro) > 0) {
		b.project = pbound;   /* mounted anew (secrets hidden anew) each start */
		b.project_cfg = &c.cfg->project;
		b.watch_pid = &c.watch;
	}
	/* the namespaces made ahead hold a copy of our mounts from before the
	 * disk image's; a bound project's mount namespaces are made in an
	 * order of their own (ns.c): those boots make theirs */
	if (!disk_mounted && !b.project)
		b.pre = &c.pre;
	else
		pisb_preboot_drop(&c.pre);
	{
		int rc = pisb_sandbox_boot(&b, &c.rt.init.pid, &c.initctl, e);
		/* reaped before the loop's SIGCHLD handling sees it */
		pisb_preboot_drop(&c.pre);
		if (rc < 0)
			goto out_failed;
	}
	c.rt.init.start = pisb_proc_start(c.rt.init.pid);
	logf_("booted: init pid %d, generation %s", (int)c.rt.init.pid, gen);
	pisb_trace("controller: booted");
	/* the init's "r" (ns.h): it bears its name before anything of the
	 * guest runs and before we say "spare" or "running"; its exec ran
	 * beside the end of the boot (a median 5 us of waiting here) */
	if (pisb_sandbox_init_named(c.initctl, 5000) < 0)
		logf_("warning: the sandbox init did not say it was named");
	if (staged) {
		/* booted beside the create's flush: nothing of the guest runs
		 * (setup, services) before the create published the sandbox */
		char go;
		int fd;
		int n = pisb_recv_byte_fd(c.notify, &go, &fd);
		if (fd >= 0)
			close(fd);
		/* a spare of the pool ("p"): booted, it waits to be claimed; its
		 * claimer is our starter from then on, and says "g" as a create */
		if (n == 1 && go == 'p' && spare_wait(&c) == 1) {
			n = pisb_recv_byte_fd(c.notify, &go, &fd);
			if (fd >= 0)
				close(fd);
			if (n == 1 && go == 'g' && spare_claimed(&c, e) < 0)
				goto out_failed;
		}
		if (n != 1 || go != 'g') {
			/* the create failed: undone, and it removes the directory
			 * once we are gone */
			close(c.notify);
			c.notify = -1;
			do_stop(&c);
			ret = 0;
			goto out;
		}
		pisb_trace("controller: told to begin");
		if (c.claimed[0]) {
			free(disk_published);
			disk_published = published_disk(&c, c.name);
		}
		free(disk);
		disk = PISB_STEAL(disk_published);
	}

	if (pisb_hooklog_open(&c.hooks) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "pipe for the hooks' output");
		goto out_failed;
	}
	/* the init on record before hooks run (minutes, at most); with none
	 * to run, "running" is the next word, a fraction of a millisecond
	 * later, and the start writes one status less (0.1 ms, issue #21).
	 * A controller that dies before either: its init ends with it (its
	 * socket closes), and the "starting" above names the cgroup */
	if ((fresh ? c.cfg->nsetup || agents_hook(&c, "setup") : c.cfg->nresume || agents_hook(&c, "resume"))) {
		if (save(&c, "starting", e) < 0)
			goto out_failed;
		pisb_trace("controller: status written (booted)");
	}
	if (fresh) {
		struct pisb_err ig = PISB_ERR_INIT;
		char *err = run_setup(&c, &setup_ran);
		if (err) {
			logf_("setup failed: %s", err);
			c.rt.setup_error = err;
		}
		/* nothing setup started may outlive it, detached or not */
		if (setup_ran)
			pisb_sandbox_killall(c.initctl, 5000, &ig);
		/* a template's is dropped with its runtime files */
		if (prepare)
			unlinkat(c.idir, "intent.json", 0);
	} else {
		resume_ran = run_resume(&c);
	}
	if (prepare) {
		do_stop(&c);
		ret = 0;
		goto out;
	}
	pisb_trace("controller: setup or resume hooks");
	c.svc = pisb_services_new(c.st, c.idir, c.name, c.cfg, &c.rt);
	pisb_services_on_change(c.svc, save_running, &c);
	/* a fresh disk of the host image, no template, no project, no setup
	 * run: nothing but create wrote the guest's config, from the text
	 * the creation config was parsed from, so that one's services are
	 * its (as for no file); else what the init read, if no resume hook
	 * ran since */
	if (fresh && !setup_ran && !c.rec.template_ && !strcmp(c.cfg->image, "host") &&
	    faccessat(c.idir, "project", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		pisb_services_guest_config(c.svc, &guest, ENOENT);
	else if (b.guest_config && !resume_ran)
		pisb_services_guest_config(c.svc, &guest, guest_err);
	if (c.svc) {
		struct pisb_err se = PISB_ERR_INIT;
		if (pisb_services_start_all(c.svc, &se) < 0)
			logf_("services: %s", se.msg);
	}
	pisb_trace("controller: services");
	if (bind_control(&c, e) < 0)
		goto out_failed;
	pisb_trace("controller: control socket");
	if (save(&c, "running", e) < 0)
		goto out_failed;
	notify_starter(&c, "running");
	pisb_trace("controller: status written (running)");
	/* setup is done: not at the next start.  After the word to the
	 * starter: the unlink waits for the journal, which the create's
	 * last fsync holds now (0.2-0.3 ms here, issue #21).  A controller
	 * killed in between leaves it, and setup runs again, as after a
	 * crash before the unlink reached the disk */
	if (fresh)
		unlinkat(c.idir, "intent.json", 0);
	if (work_moved)
		work_aside_drop(&c);
	logf_("running");
	/* idle from here on: what the start freed, and the mappings of code
	 * that only the start ran, go back to the system once nothing has
	 * asked anything of us for TRIM_DELAY_MS (not at once: the caller of
	 * a create or start runs its first command at once, and on two CPUs
	 * the trim took its time; nor between the requests of a burst) */
	trim_at = pisb_mono_ms() + TRIM_DELAY_MS;
	refill_at = c.pool_key[0] ? pisb_mono_ms() + REFILL_DELAY_MS : 0;

	c.watched = watch_idir(&c);
	look = true;   /* once now: a change from before the watch began */
	while (!c.stopping) {
		struct pollfd p[4 + PISB_SVC_MAX_FDS];
		/* nothing to do, nothing due: sleep until something happens */
		int n = 0, timeout = c.watched >= 0 ? -1 : 1000;
		bool served = false;

		p[n++] = (struct pollfd){ c.lsock, POLLIN, 0 };
		p[n++] = (struct pollfd){ c.sigfd, POLLIN, 0 };
		p[n++] = (struct pollfd){ c.initctl, POLLIN, 0 };
		/* slot 3: the hooks' pipe, or a no-op while it pauses */
		if (!pisb_hooklog_pollfd(&c.hooks, p + n, &timeout))
			p[n] = (struct pollfd){ -1, 0, 0 };
		n++;
		if (c.svc)
			n += pisb_services_pollfds(c.svc, p + n, PISB_SVC_MAX_FDS, &timeout);
		if (trim_at || refill_at) {
			int64_t due = trim_at && (!refill_at || trim_at < refill_at) ? trim_at : refill_at;
			int64_t left = due - pisb_mono_ms();
			if (timeout < 0 || left < timeout)
				timeout = left > 0 ? (int)left : 0;
		}
		if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			struct signalfd_siginfo si;
			while (read(c.sigfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					on_sigchld(&c);
				else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
					do_stop(&c);
				else if (si.ssi_signo == SIGIO)
					look = true;   /* instances/ changed */
				/* SIGHUP: the terminal that started us is gone; ignore */
			}
		}
		/* when the watch said something changed there (SIGIO, above);
		 * without one, at most once a second (the idle turn's pace): a
		 * relay busy with a download wakes us thousands of times a
		 * second, and this is two lookups and an allocation each time */
		if (c.watched < 0 && pisb_mono_ms() - c.idir_checked >= 1000)
			look = true;
		if (!c.stopping && look && (look = false, c.idir_checked = pisb_mono_ms(), idir_gone(&c))) {
			logf_("the instance directory of '%s' was deleted or replaced: stopping the sandbox", c.name);
			do_stop(&c);
			break;
		}
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			logf_("the sandbox init went away");
			close(c.initctl);
			c.initctl = -1;
			do_stop(&c);
		}
		if (!c.stopping && (p[0].revents & POLLIN)) {
			int cfd = accept4(c.lsock, NULL, NULL, SOCK_CLOEXEC);
			if (cfd >= 0) {
				handle_client(&c, cfd);
				close(cfd);
				served = true;
			}
		}
		/* what poll saw, or a pause that ended (the pipe not polled);
		 * else, at every turn, the note of what was dropped when due:
		 * no read of the empty pipe (a system call per turn, three per
		 * request a preview relays) */
		if (p[3].fd < 0 || p[3].revents)
			pisb_hooklog_drain(&c.hooks);
		else
			pisb_hooklog_note(&c.hooks);
		if (c.svc && !c.stopping) {
			pisb_services_poll(c.svc, p + 4, (size_t)(n - 4));
			if (pisb_services_changed(c.svc)) {
				struct pisb_err ig = PISB_ERR_INIT;
				save(&c, "running", &ig);
			}
		}
		/* a request answered: idle again soon (its code's mappings go
		 * back) */
		if (served)
			trim_at = pisb_mono_ms() + TRIM_DELAY_MS;
		if (refill_at && !c.stopping && pisb_mono_ms() >= refill_at) {
			spare_settle(&c);
			refill_at = 0;
		}
		if (trim_at && !c.stopping && pisb_mono_ms() >= trim_at) {
			pisb_proc_idle_trim();
			trim_at = 0;
		}
	}
	/* a sandbox stopped that soon still has its spare replaced */
	if (refill_at)
		spare_settle(&c);
	ret = 0;
	goto out;

out_failed:
	logf_("fatal: %s", e->msg);
	{
		struct pisb_err ig = PISB_ERR_INIT;
		if (c.initctl >= 0) {
			close(c.initctl);
			c.initctl = -1;
		}
		pisb_cgroup_close(&c.cg);
		if (c.rt.cgroup)
			pisb_cgroup_remove(c.rt.cgroup);
		save(&c, "failed", &ig);
		notify_starter(&c, "failed");
	}
out:
	pisb_preboot_drop(&c.pre);
	if (disk_mounted)
		pisb_disk_image_umount(disk);
	if (c.svc)
		pisb_services_free(c.svc);
	if (c.lsock >= 0)
		close(c.lsock);
	if (c.sigfd >= 0)
		close(c.sigfd);
	pisb_hooklog_drain(&c.hooks);
	pisb_hooklog_close(&c.hooks);
	pisb_runtime_release(&c.rt);
	pisb_record_release(&c.rec);
	if (c.cfg)
		pisb_config_free(c.cfg);
	close(c.idir);
	/* a template's starter (stopped) hears the end of the socket, once
	 * the lock is free */
	close(lock);
	lock = -1;
	if (c.notify >= 0)
		close(c.notify);
	if (c.stop_client >= 0) {
		stop_reply(&c, c.stop_client);
		close(c.stop_client);
	}
	if (c.watched >= 0)
		close(c.watched);
	return ret;
}
