/* local.c - the local driver's lifecycle and its controller. */
#include "local.h"
#include "cgroup.h"
#include "config.h"
#include "err.h"
#include "image.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "ns.h"
#include "proc.h"
#include "sbexec.h"
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
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SETUP_DEADLINE_MS (20 * 60 * 1000)
#define RESUME_WAIT_MS 10000
#define BOOT_WAIT_MS (25 * 60 * 1000)

static const char *kind_of(bool tmpl) { return tmpl ? "templates" : "instances"; }

/* ---------- disk and staging ---------- */

static int chown_base(int dirfd, const char *path, const struct pisb_ids *ids)
{
	if (geteuid() != 0)
		return 0;
	return fchownat(dirfd, path, ids->uid_base, ids->gid_base, AT_SYMLINK_NOFOLLOW);
}

/* Put the guest copy of the config at <workspace>/.sandbox.yaml in upper. */
static int write_guest_config(int idir, const struct pisb_config *cfg,
			      const char *text, size_t len,
			      const struct pisb_ids *ids, struct pisb_err *e)
{
	_cleanup_free_ char *dir = xasprintf("disk/upper%s", cfg->workspace);
	_cleanup_free_ char *file = xasprintf("%s/.sandbox.yaml", dir);
	char *p;

	if (pisb_mkdirs_at(idir, dir, 0755, e) < 0)
		return -1;
	/* every directory we made must belong to root inside */
	for (p = dir + strlen("disk/upper"); p && *p; p = strchr(p + 1, '/')) {
		char save = p[0];
		if (p != dir + strlen("disk/upper")) {
			*p = '\0';
			chown_base(idir, dir, ids);
			*p = save;
		}
	}
	chown_base(idir, dir, ids);
	if (pisb_atomic_write(idir, file, text, len, 0644, e) < 0)
		return -1;
	chown_base(idir, file, ids);
	return 0;
}

static int make_disk(int idir, const struct pisb_ids *ids, struct pisb_err *e)
{
	if (pisb_mkdirs_at(idir, "disk/upper", 0755, e) < 0 ||
	    pisb_mkdirs_at(idir, "disk/work", 0700, e) < 0)
		return -1;
	if (chown_base(idir, "disk/upper", ids) < 0 || chown_base(idir, "disk/work", ids) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "chown the disk to the sandbox's root (see 'pisb doctor')");
	return 0;
}

/* Copy a template's disk with cp -a (keeps owners, modes, xattrs and
 * overlay whiteouts; reflinks where the filesystem can). */
static int copy_tree(const char *from, const char *to, struct pisb_err *e)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
	if (pid == 0) {
		execlp("cp", "cp", "-a", "--reflink=auto", from, to, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return pisb_err_set(e, PISB_EXIT_FAIL, "copy '%s' to '%s' failed", from, to);
	return 0;
}

/* ---------- talking to / waiting for the controller ---------- */

static pid_t spawn_controller(struct pisb_state *st, int idir, const char *name,
			      struct pisb_err *e)
{
	char bin[4096];
	_cleanup_close_ int log = openat(idir, "controller.log",
					 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	char *argv[] = { bin, "supervise", (char *)name, "--state-dir", st->path, NULL };

	if (log < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open controller.log");
	if (pisb_find_binary("pisb-svc", bin, sizeof(bin), e) < 0)
		return -1;
	return pisb_spawn_detached(argv, log, e);
}

/* Last line of controller.log that says "fatal:", for error messages. */
static void last_fatal(int idir, char *out, size_t n)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *p, *last = NULL;

	out[0] = '\0';
	if (pisb_read_file_at(idir, "controller.log", &b, 64 << 20) < 0 || !b.s)
		return;
	for (p = b.s; (p = strstr(p, "fatal: ")); p++)
		last = p;
	if (!last)
		return;
	last += 7;
	p = strchr(last, '\n');
	snprintf(out, n, "%.*s", p ? (int)(p - last) : (int)strlen(last), last);
}

/* Wait until the controller says running (or stopped, for prepare), or
 * dies.  Returns 0, or -1 with the controller's own fatal message. */
static int wait_controller(int idir, const char *name, const char *want,
			   pid_t ctl, struct pisb_err *e)
{
	int64_t deadline = pisb_mono_ms() + BOOT_WAIT_MS;
	bool seen_alive = false;
	int64_t spawned = pisb_mono_ms();

	for (;;) {
		struct pisb_runtime rt;
		struct pisb_err le = PISB_ERR_INIT;
		bool held = pisb_lock_is_held(idir, "controller.lock");

		if (held)
			seen_alive = true;
		/* only what this controller wrote counts, not an old file */
		if (faccessat(idir, "status.json", F_OK, 0) == 0 &&
		    pisb_runtime_load(idir, &rt, &le) == 0) {
			bool match = !strcmp(rt.state, want) && rt.controller.pid == ctl;
			bool failed = !strcmp(rt.state, "failed");
			pisb_runtime_release(&rt);
			if (match && (!strcmp(want, "stopped") ? !held : held))
				return 0;
			if (failed && !held && rt.controller.pid == ctl) {
				char msg[1024];
				last_fatal(idir, msg, sizeof(msg));
				return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' failed to start: %s",
						    name, msg[0] ? msg : "see 'pisb logs'");
			}
		}
		if (!held && (seen_alive || pisb_mono_ms() - spawned > 5000)) {
			char msg[1024];
			/* re-check: it may have finished between the two reads */
			if (pisb_runtime_load(idir, &rt, &le) == 0) {
				bool match = !strcmp(rt.state, want) && rt.controller.pid == ctl;
				pisb_runtime_release(&rt);
				if (match && !strcmp(want, "stopped"))
					return 0;
			}
			last_fatal(idir, msg, sizeof(msg));
			return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' failed to start: %s",
					    name, msg[0] ? msg : "its controller exited (see 'pisb logs')");
		}
		if (pisb_mono_ms() > deadline)
			return pisb_err_set(e, PISB_EXIT_TIMEOUT, "sandbox '%s' did not become ready in time", name);
		struct timespec ts = { 0, 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static int op_lock(int idir, const char *name, int wait_ms, struct pisb_err *e)
{
	char what[96];
	snprintf(what, sizeof(what), "sandbox '%s'", name);
	return pisb_lock_acquire(idir, "op.lock", true, wait_ms, what, e);
}

/* ---------- create / prepare ---------- */

int pisb_local_create(struct pisb_state *st, const struct pisb_config *cfg,
		      const char *config_json, const struct pisb_create_opts *o,
		      char **setup_error, struct pisb_err *e)
{
	struct pisb_ids ids;
	struct pisb_record rec;
	_cleanup_free_ char *stage = NULL, *dest = NULL, *cache = NULL;
	_cleanup_close_ int sdir = -1, lock = -1, tdir = -1;
	bool tmpl = o->prepare;
	int ret = -1;

	*setup_error = NULL;
	pisb_ids_for_caller(&ids);
	if (pisb_mkdirs_at(st->fd, "instances", 0700, e) < 0 ||
	    pisb_mkdirs_at(st->fd, "templates", 0700, e) < 0 ||
	    pisb_mkdirs_at(st->fd, "staging", 0700, e) < 0)
		return -1;
	dest = xasprintf("%s/%s", kind_of(tmpl), o->name);
	if (faccessat(st->fd, dest, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return pisb_err_set(e, PISB_EXIT_BUSY, "%s '%s' already exists",
				    tmpl ? "template" : "sandbox", o->name);
	if (o->template_) {
		tdir = pisb_instance_open(st, "templates", o->template_, e);
		if (tdir < 0)
			return -1;
	}
	if (strcmp(cfg->image, "host")) {
		/* import here, where a terminal can show progress; the controller
		 * then finds it in the cache, and the record names the cache */
		char *p = pisb_image_get(st, cfg->image, &ids, &cache, e);
		if (!p)
			return -1;
		free(p);
	}
	/* stage everything, then publish with one rename */
	sdir = pisb_instance_stage(st, o->name, &stage, &lock, e);
	if (sdir < 0)
		return -1;
	if (o->template_) {
		_cleanup_free_ char *from = xasprintf("%s/templates/%s/disk", st->path, o->template_);
		_cleanup_free_ char *to = xasprintf("%s/%s/disk", st->path, stage);
		if (copy_tree(from, to, e) < 0)
			goto fail;
	} else if (make_disk(sdir, &ids, e) < 0) {
		goto fail;
	}
	if (o->config_text && write_guest_config(sdir, cfg, o->config_text, o->config_len, &ids, e) < 0)
		goto fail;
	memset(&rec, 0, sizeof(rec));
	rec.name = (char *)o->name;
	rec.driver = "local";
	rec.created_at = pisb_now_ms() / 1000;
	rec.template_ = (char *)o->template_;
	rec.config_json = (char *)config_json;
	rec.owner.pid = o->owner_pid;
	rec.owner.start = o->owner_pid > 0 ? pisb_proc_start(o->owner_pid) : 0;
	rec.session_id = (char *)o->session_id;
	rec.image_cache = cache;
	if (pisb_record_save(sdir, &rec, e) < 0)
		goto fail;
	/* setup runs on the first boot of a fresh disk, never on a template copy */
	if (!o->template_) {
		const char *intent = tmpl ? "{\"setup\":true,\"prepare\":true}\n" : "{\"setup\":true}\n";
		if (pisb_atomic_write(sdir, "intent.json", intent, strlen(intent), 0600, e) < 0)
			goto fail;
	}
	if (tmpl) {
		/* a template is prepared under a hidden instance name and only
		 * published once its setup succeeded */
		_cleanup_free_ char *work = xasprintf("staging/%s.prep", o->name);
		if (renameat2(st->fd, stage, st->fd, work, RENAME_NOREPLACE) < 0) {
			pisb_err_sys(e, errno == EEXIST ? PISB_EXIT_BUSY : PISB_EXIT_FAIL,
				     "template '%s' is being prepared", o->name);
			goto fail;
		}
		free(stage);
		stage = PISB_STEAL(work);
	} else if (renameat2(st->fd, stage, st->fd, dest, RENAME_NOREPLACE) < 0) {
		pisb_err_sys(e, errno == EEXIST ? PISB_EXIT_BUSY : PISB_EXIT_FAIL,
			     "sandbox '%s' already exists", o->name);
		if (errno == EEXIST)
			pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", o->name);
		goto fail;
	} else {
		free(stage);
		stage = NULL;
	}
	pisb_fsync_dir(st->fd);
	{
		/* the controller is started on the published (or .prep) dir */
		const char *where = tmpl ? stage : dest;
		_cleanup_close_ int idir = openat(st->fd, where, O_PATH | O_DIRECTORY | O_CLOEXEC);
		_cleanup_free_ char *cname = tmpl ? xasprintf("@prep/%s", o->name) : xstrdup(o->name);
		struct pisb_runtime rt;

		if (idir < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", where);
			goto fail_published;
		}
		pid_t ctl = spawn_controller(st, idir, cname, e);
		if (ctl < 0 || wait_controller(idir, o->name, tmpl ? "stopped" : "running", ctl, e) < 0)
			goto fail_published;
		if (pisb_runtime_load(idir, &rt, e) < 0)
			goto fail_published;
		if (rt.setup_error)
			*setup_error = xstrdup(rt.setup_error);
		pisb_runtime_release(&rt);
		if (tmpl) {
			if (*setup_error) {
				pisb_err_set(e, PISB_EXIT_FAIL,
					     "prepare '%s': setup failed, no template was saved: %s",
					     o->name, *setup_error);
				goto fail_published;
			}
			if (renameat2(st->fd, stage, st->fd, dest, RENAME_NOREPLACE) < 0) {
				pisb_err_sys(e, errno == EEXIST ? PISB_EXIT_BUSY : PISB_EXIT_FAIL,
					     "publish template '%s'", o->name);
				goto fail_published;
			}
			/* a template never boots by itself: drop runtime files */
			{
				_cleanup_close_ int t = openat(st->fd, dest, O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (t >= 0) {
					unlinkat(t, "status.json", 0);
					unlinkat(t, "intent.json", 0);
					unlinkat(t, "control.sock", 0);
				}
			}
			free(stage);
			stage = NULL;
		}
	}
	return 0;

fail_published:
	{
		/* creation failed after publishing: leave nothing behind */
		struct pisb_err ig = PISB_ERR_INIT;
		const char *where = tmpl ? stage : dest;
		_cleanup_close_ int idir = openat(st->fd, where, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (idir >= 0 && pisb_lock_is_held(idir, "controller.lock")) {
			_cleanup_buf_ struct pisb_buf r = PISB_BUF_INIT;
			pisb_control_call(idir, "{\"op\":\"stop\"}", &r, 30000, &ig);
		}
		close(lock);
		lock = -1;
		if (tmpl)
			pisb_rm_rf_at(st->fd, stage, &ig);
		else
			pisb_state_trash(st, "instances", o->name, &ig);
		free(stage);
		stage = NULL;
		return -1;
	}
fail:
	if (stage) {
		struct pisb_err ig = PISB_ERR_INIT;
		pisb_rm_rf_at(st->fd, stage, &ig);
	}
	return ret;
}

/* ---------- start / stop / destroy ---------- */

int pisb_local_start(struct pisb_state *st, const char *name, int wait_ms,
		     struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, e);
	_cleanup_close_ int lock = -1;

	if (idir < 0)
		return -1;
	lock = op_lock(idir, name, wait_ms, e);
	if (lock < 0)
		return -1;
	if (pisb_lock_is_held(idir, "controller.lock"))
		return pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' is already running", name);
	pid_t ctl = spawn_controller(st, idir, name, e);
	if (ctl < 0)
		return -1;
	return wait_controller(idir, name, "running", ctl, e);
}

/* Record that sandbox NAME (no controller) is stopped: state stopped, its
 * cgroup gone.  A status.json that does not load is replaced by a fresh
 * one (the next start writes everything again).  -1 with e when the
 * record cannot be written: a stop that did not record its result fails. */
static int mark_stopped(int idir, const char *name, struct pisb_err *e)
{
	struct pisb_runtime rt;
	struct pisb_err le = PISB_ERR_INIT;

	if (pisb_runtime_load(idir, &rt, &le) < 0)
		memset(&rt, 0, sizeof(rt));
	pisb_cgroup_remove(rt.cgroup);
	pisb_cgroup_sweep(name, NULL, 10, NULL);
	if (!strcmp(rt.state, "stopped") && !le.msg[0]) {
		pisb_runtime_release(&rt);
		return 0;
	}
	snprintf(rt.state, sizeof(rt.state), "stopped");
	rt.controller.pid = rt.init.pid = rt.resume.pid = 0;
	rt.stopped_at = pisb_now_ms() / 1000;
	free(rt.cgroup);
	rt.cgroup = NULL;
	if (pisb_runtime_save(idir, &rt, e) < 0) {
		pisb_runtime_release(&rt);
		return pisb_err_prefix(e, "sandbox '%s' stopped, but recording it failed", name);
	}
	pisb_runtime_release(&rt);
	return 0;
}

/* Signal every process that holds controller.lock (the controller named
 * by status.json, and whatever /proc/locks says holds the lock: a
 * status.json may be stale or corrupt); wait up to wait_ms for the lock
 * to be free.  Returns the lock fd (held), or -1. */
static int end_controller(int idir, int sig, int wait_ms, struct pisb_err *e)
{
	struct pisb_runtime rt;
	struct pisb_err ig = PISB_ERR_INIT;
	pid_t pids[16];
	int n = pisb_instance_lock_holders(idir, "controller.lock", pids, 16);

	if (pisb_runtime_load(idir, &rt, &ig) == 0) {
		if (pisb_proc_id_alive(&rt.controller))
			kill(rt.controller.pid, sig);
		pisb_runtime_release(&rt);
	}
	for (int i = 0; i < n; i++)
		if (pids[i] != getpid())
			kill(pids[i], sig);
	return pisb_lock_acquire(idir, "controller.lock", true, wait_ms, "the sandbox controller", e);
}

/* Stop sandbox NAME under its op.lock (held by the caller): ask the
 * controller, then TERM, then KILL what holds its lock; then make sure
 * status.json says stopped.  record: fail when that cannot be written
 * (stop); destroy passes false, it removes the files anyway. */
static int stop_locked(int idir, const char *name, bool record, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf reply = PISB_BUF_INIT;
	_cleanup_close_ int cl = -1;
	struct pisb_err ce = PISB_ERR_INIT, le = PISB_ERR_INIT;
	_cleanup_free_ char *why = NULL;

	if (pisb_lock_is_held(idir, "controller.lock")) {
		if (pisb_control_call(idir, "{\"op\":\"stop\"}", &reply, 120000, &ce) == 0) {
			struct pisb_json j;
			if (pisb_json_parse(&j, reply.s, strcspn(reply.s, "\n"), &le) == 0) {
				bool ok = true;
				pisb_json_bool(&j, pisb_json_get(&j, 0, "ok"), &ok);
				if (!ok)
					why = pisb_json_str(&j, pisb_json_get(&j, 0, "error"));
				pisb_json_release(&j);
			}
			cl = pisb_lock_acquire(idir, "controller.lock", true, 30000, "the sandbox controller", &le);
		}
		/* no answer, or it did not exit: TERM, then KILL, what holds the lock */
		if (cl < 0)
			cl = end_controller(idir, SIGTERM, 10000, &le);
		if (cl < 0)
			cl = end_controller(idir, SIGKILL, 5000, &le);
		if (cl < 0)
			return pisb_err_set(e, PISB_EXIT_FAIL, "stop '%s': its controller did not exit: %s",
					    name, le.msg);
	}
	if (mark_stopped(idir, name, e) < 0) {
		if (record)
			return -1;
		*e = (struct pisb_err)PISB_ERR_INIT;
	}
	if (why && record)
		return pisb_err_set(e, PISB_EXIT_FAIL, "stop '%s': %s", name, why);
	return 0;
}

int pisb_local_stop(struct pisb_state *st, const char *name, int wait_ms,
		    struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, e);
	_cleanup_close_ int lock = -1;

	if (idir < 0)
		return -1;
	lock = op_lock(idir, name, wait_ms, e);
	if (lock < 0)
		return -1;
	return stop_locked(idir, name, true, e);
}

int pisb_local_destroy(struct pisb_state *st, const char *kind, const char *name,
		       int wait_ms, struct pisb_err *e)
{
	_cleanup_close_ int idir = pisb_instance_open(st, kind, name, e);
	_cleanup_close_ int lock = -1;

	if (idir < 0)
		return -1;
	/* one op.lock from the stop to the rename: no start slips in between */
	lock = op_lock(idir, name, wait_ms, e);
	if (lock < 0)
		return -1;
	if (!strcmp(kind, "instances") && stop_locked(idir, name, false, e) < 0)
		return -1;
	/* the lock fd keeps others out until the rename into the trash */
	return pisb_state_trash(st, kind, name, e);
}
