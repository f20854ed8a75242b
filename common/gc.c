/* gc.c - `pisb gc` (see gc.h for what is swept and what never is). */
#include "gc.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STAGING_AGE_S 3600   /* a create or prepare older than this is dead */
#define IMAGE_AGE_S 3600     /* an image cache younger may be mid-import */
#define TRASH_AGE_MS (3600 * 1000LL)

struct gc {
	struct pisb_state *st;
	const struct pisb_gc_opts *o;
	struct pisb_gc_report *r;
	int64_t now;             /* unix seconds */
	/* image caches still referenced: caches[i] ("KEY-UID") by users[i]
	 * ("sandbox 'x'"); unknown says why none can be told apart (a record
	 * that uses a rootfs image without naming its cache), or is NULL */
	struct pisb_strv caches, users;
	char *unknown;
	struct pisb_strv known;      /* gc_name of every instance: its backend's name */
};

static void add(struct pisb_gc_list *l, const char *kind, const char *name,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(struct pisb_gc_list *l, const char *kind, const char *name,
		const char *fmt, ...)
{
	struct pisb_buf b = PISB_BUF_INIT;
	va_list ap;
	char tmp[2048];

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	pisb_buf_adds(&b, tmp);
	l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	l->v[l->n].kind = xstrdup(kind);
	l->v[l->n].name = xstrdup(name);
	l->v[l->n].reason = pisb_buf_detach(&b);
	l->n++;
}

void pisb_gc_report_add(struct pisb_gc_list *l, const char *kind, const char *name,
			const char *reason)
{
	add(l, kind, name, "%s", reason);
}

static void list_release(struct pisb_gc_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].kind);
		free(l->v[i].name);
		free(l->v[i].reason);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

void pisb_gc_report_release(struct pisb_gc_report *r)
{
	list_release(&r->removed);
	list_release(&r->cleaned);
	list_release(&r->kept);
	list_release(&r->failed);
	free(r->note);
	r->note = NULL;
}

static void list_json(struct pisb_jw *w, const char *key, const struct pisb_gc_list *l)
{
	pisb_jw_key(w, key);
	pisb_jw_arr(w);
	for (size_t i = 0; i < l->n; i++) {
		pisb_jw_obj(w);
		pisb_jw_kstr(w, "kind", l->v[i].kind);
		pisb_jw_kstr(w, "name", l->v[i].name);
		pisb_jw_kstr(w, "reason", l->v[i].reason);
		pisb_jw_obj_end(w);
	}
	pisb_jw_arr_end(w);
}

void pisb_gc_report_json(const struct pisb_gc_report *r, struct pisb_jw *w)
{
	pisb_jw_obj(w);
	list_json(w, "removed", &r->removed);
	list_json(w, "cleaned", &r->cleaned);
	list_json(w, "kept", &r->kept);
	list_json(w, "failed", &r->failed);
	pisb_jw_kbool(w, "dryRun", r->dry_run);
	pisb_jw_kbool(w, "busy", r->busy);
	pisb_jw_kstr(w, "note", r->note);
	pisb_jw_obj_end(w);
}

/* Names in dirfd/path (no dot entries), sorted; empty if it is missing. */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void read_names_with(int dirfd, const char *path, const char *prefix,
			    struct pisb_strv *out)
{
	DIR *d = pisb_opendirat(dirfd, path);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (prefix ? pisb_str_starts(de->d_name, prefix) : de->d_name[0] != '.')
			pisb_strv_push(out, de->d_name);
	closedir(d);
	if (out->n)
		qsort(out->v, out->n, sizeof(char *), cmp_str);
}

static void read_names(int dirfd, const char *path, struct pisb_strv *out)
{
	read_names_with(dirfd, path, NULL, out);
}

/* Does this record's config use a rootfs image (not `image: host`)? */
static bool uses_rootfs(const struct pisb_record *rec)
{
	struct pisb_config *cfg = NULL;
	struct pisb_err ig = PISB_ERR_INIT;
	bool r;

	if (pisb_record_config(rec, &cfg, &ig) < 0)
		return true; /* cannot tell: assume it does, keep the caches */
	r = strcmp(cfg->image, "host") != 0;
	pisb_config_free(cfg);
	return r;
}

/* No cache can be told unreferenced any more: keep them all, saying why. */
static void caches_unknown(struct gc *g, const char *who, const char *why)
{
	if (!g->unknown)
		g->unknown = xasprintf("%s %s: every cache is kept", who, why);
}

/* The cache a record references, if any (who: "sandbox 'x'"). */
static void note_record(struct gc *g, const struct pisb_record *rec, const char *who)
{
	if (rec->image_cache) {
		pisb_strv_push(&g->caches, rec->image_cache);
		pisb_strv_push(&g->users, who);
	} else if (uses_rootfs(rec)) {
		/* written before records named their cache */
		caches_unknown(g, who, "uses a rootfs image, but its record.json has no imageCache");
	}
}

/* The same for the record in dirfd; a directory without one (a create
 * that has not written it yet) references nothing: the create itself
 * holds the cache's lock. */
static void note_dir(struct gc *g, int dirfd, const char *who)
{
	struct pisb_record rec;
	struct pisb_err e = PISB_ERR_INIT;

	if (pisb_record_load(dirfd, &rec, &e) < 0) {
		if (e.code != PISB_EXIT_NOTFOUND)
			caches_unknown(g, who, "has an unreadable record.json");
		return;
	}
	note_record(g, &rec, who);
	pisb_record_release(&rec);
}

/* ---------- exec handles ---------- */

/* Remove handles in idir/exec that are orphaned: all of them when gen is
 * NULL (a stopped sandbox), else those of another generation.  A handle
 * whose runner still holds its lock is kept. */
/* A handle named after the run that made it (GEN-XXXXXXXX, the local
 * driver's), not after its driver (vm-XXXXXXXX) */
static bool generation_handle(const char *h)
{
	size_t n = strspn(h, "0123456789abcdef");

	return n >= 8 && h[n] == '-';
}

static void sweep_handles(struct gc *g, int idir, const char *name, const char *gen)
{
	_cleanup_strv_ struct pisb_strv hs = PISB_STRV_INIT;
	_cleanup_close_ int edir = openat(idir, "exec", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	size_t gl = gen ? strlen(gen) : 0;

	if (edir < 0)
		return;
	read_names(edir, ".", &hs);
	for (size_t i = 0; i < hs.n; i++) {
		const char *h = hs.v[i];
		_cleanup_free_ char *what = xasprintf("instances/%s/exec/%s", name, h);
		_cleanup_free_ char *lk = xasprintf("%s/lock", h);
		struct pisb_err e = PISB_ERR_INIT;

		if (gen && !strncmp(h, gen, gl) && h[gl] == '-')
			continue; /* the current run's: pisb exec-status serves it */
		if (gen && !generation_handle(h))
			continue; /* a driver's ("vm-…"): they live as long as the
				   * run, which prunes them itself */
		if (pisb_lock_is_held(edir, lk)) {
			add(&g->r->kept, "handle", what, "its runner still holds the handle's lock");
			continue;
		}
		if (g->o->dry_run) {
			add(&g->r->cleaned, "handle", what, gen ? "orphaned: from an earlier run of the sandbox"
							       : "orphaned: the sandbox is stopped");
			continue;
		}
		if (pisb_rm_rf_at(edir, h, &e) < 0)
			add(&g->r->failed, "handle", what, "%s", e.msg);
		else
			add(&g->r->cleaned, "handle", what, gen ? "orphaned: from an earlier run of the sandbox"
							       : "orphaned: the sandbox is stopped");
	}
}

/* ---------- sandboxes ---------- */

static int op_lock(int idir, const char *name, struct pisb_err *e)
{
	char what[96];
	snprintf(what, sizeof(what), "sandbox '%s'", name);
	return pisb_lock_acquire(idir, "op.lock", true, 0, what, e);
}

static void hours_ago(int64_t secs, char *out, size_t n)
{
	if (secs >= 2 * 3600)
		snprintf(out, n, "%lld hours", (long long)(secs / 3600));
	else
		snprintf(out, n, "%lld minutes", (long long)(secs / 60));
}

/* Stop (mark stopped what was interrupted) or destroy sandbox NAME through
 * its driver, as `pisb stop` and `pisb destroy` would, never waiting for a
 * busy lock (exit 4: kept for the next pass). */
static int end_sandbox(struct gc *g, const char *name, bool destroy, struct pisb_err *e)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_lc_opts o = { .name = name, .events_fd = -1 };

	if (pisb_sandbox_open(&sb, g->st, name, e) < 0)
		return -1;
	return destroy ? sb.drv->destroy(&sb, &o, e) : sb.drv->stop(&sb, &o, e);
}

/* A stale stopped sandbox.  Not the driver's destroy: that one stops a
 * sandbox that is running, and a user may start this one between our
 * look and the removal.  Holding op.lock shuts `start` out; under it we
 * check again that it is stopped, then do what destroy does. */
static bool destroy_stopped(struct gc *g, int idir, const char *name, const char *reason)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_close_ int lock = -1;
	
	if (g->o->dry_run) {
		add(&g->r->removed, "sandbox", name, "%s", reason);
		return true;
	}
	lock = op_lock(idir, name, &e);
	if (lock < 0) {
		if (e.code == PISB_EXIT_BUSY)
			add(&g->r->kept, "sandbox", name, "busy: another pisb command holds its lock");
		else
			add(&g->r->failed, "sandbox", name, "%s", e.msg);
		return false;
	}
	if (pisb_lock_is_held(idir, "controller.lock")) {
		add(&g->r->kept, "sandbox", name, "running (started while gc looked at it)");
		return false;
	}
	{
		_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
		if (pisb_sandbox_open(&sb, g->st, name, &e) == 0 && sb.drv->gc_drop)
			sb.drv->gc_drop(&sb);
	}
	if (pisb_state_trash(g->st, "instances", name, &e) < 0) {
		add(&g->r->failed, "sandbox", name, "%s", e.msg);
		return false;
	}
	add(&g->r->removed, "sandbox", name, "%s", reason);
	return true;
}

/* A sandbox whose record.json does not load (empty, truncated, mistyped,
 * huge): its driver is what the record still says (local if nothing).  A
 * local one is treated by liveness like any other: running ones are kept,
 * an interrupted one is marked stopped (its processes and cgroups gone),
 * and --hours removes it by the age of its record file. */
static void sweep_broken(struct gc *g, int idir, const char *name, const char *why)
{
	struct pisb_err e = PISB_ERR_INIT;
	const struct pisb_driver *d = pisb_driver_salvage(idir);
	struct stat sb;

	if (!(d->caps & PISB_DRV_GC_SWEEP)) {
		add(&g->r->kept, "sandbox", name, "unreadable record (%s): left to its driver", why);
		return;
	}
	if (pisb_lock_is_held(idir, "controller.lock")) {
		add(&g->r->kept, "sandbox", name,
		    "running, with an unreadable record (%s): 'pisb destroy %s --confirm %s' stops and removes it",
		    why, name, name);
		return;
	}
	if (!g->o->dry_run && end_sandbox(g, name, false, &e) < 0) {
		add(e.code == PISB_EXIT_BUSY ? &g->r->kept : &g->r->failed, "sandbox", name,
		    "unreadable record: %s", e.msg);
		return;
	}
	if (g->o->hours >= 0 && fstatat(idir, "record.json", &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	    g->now - sb.st_mtime > (int64_t)g->o->hours * 3600) {
		char reason[2300], ago[64];
		hours_ago(g->now - sb.st_mtime, ago, sizeof(ago));
		snprintf(reason, sizeof(reason), "unreadable record (%s), unchanged for %s, more than --hours %d",
			 why, ago, g->o->hours);
		destroy_stopped(g, idir, name, reason);
		return;
	}
	add(&g->r->kept, "sandbox", name,
	    "stopped, with an unreadable record (%s): 'pisb destroy %s --confirm %s' removes it",
	    why, name, name);
}

static void sweep_instance(struct gc *g, const char *name)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_close_ int idir = pisb_instance_open(g->st, "instances", name, &e);
	struct pisb_record rec;
	struct pisb_runtime rt;
	const struct pisb_driver *drv;
	bool owner_dead, gone = false;
	_cleanup_free_ char *who = xasprintf("sandbox '%s'", name);

	if (idir < 0)
		return; /* gone meanwhile (destroyed by someone else) */
	if (pisb_record_load(idir, &rec, &e) < 0) {
		caches_unknown(g, who, "has an unreadable record.json");
		sweep_broken(g, idir, name, e.msg);
		return;
	}
	drv = pisb_driver_find(rec.driver);
	if (drv && drv->gc_sweep) {
		/* swept by the driver's own sweep */
		pisb_record_release(&rec);
		return;
	}
	owner_dead = rec.owner.pid > 0 && !pisb_proc_id_alive(&rec.owner);
	if (!drv || !(drv->caps & PISB_DRV_GC_SWEEP)) {
		if (owner_dead)
			add(&g->r->kept, "sandbox", name,
			    "owner pid %d is gone, but a %s sandbox is released by its own driver ('pisb destroy %s --confirm %s')",
			    (int)rec.owner.pid, rec.driver, name, name);
		else
			add(&g->r->kept, "sandbox", name, "driver %s: left to its driver", rec.driver);
		if (rec.image_cache)
			note_record(g, &rec, who);
		if (drv && drv->gc_name) {
			char *n = drv->gc_name(&rec);
			if (n)
				pisb_strv_push(&g->known, n);
			free(n);
		}
		pisb_record_release(&rec);
		return;
	}
	if (pisb_runtime_load(idir, &rt, &e) < 0) {
		/* status comes from liveness: no controller means stopped */
		if (pisb_lock_is_held(idir, "controller.lock"))
			add(&g->r->kept, "sandbox", name, "running, with an unreadable status.json (%s)", e.msg);
		else if (g->o->dry_run)
			add(&g->r->cleaned, "sandbox", name, "unreadable status.json (%s): would be marked stopped", e.msg);
		else {
			struct pisb_err se = PISB_ERR_INIT;
			if (end_sandbox(g, name, false, &se) < 0)
				add(se.code == PISB_EXIT_BUSY ? &g->r->kept : &g->r->failed, "sandbox", name,
				    "unreadable status.json: %s", se.msg);
			else
				add(&g->r->cleaned, "sandbox", name,
				    "unreadable status.json (%s): marked stopped, with a new status.json", e.msg);
		}
		note_record(g, &rec, who);
		pisb_record_release(&rec);
		return;
	}
	if (owner_dead) {
		char reason[128];
		snprintf(reason, sizeof(reason), "owner pid %d is gone", (int)rec.owner.pid);
		if (g->o->dry_run) {
			add(&g->r->removed, "sandbox", name, "%s", reason);
			gone = true;
		} else if (end_sandbox(g, name, true, &e) < 0) {
			if (e.code == PISB_EXIT_BUSY)
				add(&g->r->kept, "sandbox", name, "%s, but it is busy (another pisb command holds its lock)", reason);
			else
				add(&g->r->failed, "sandbox", name, "%s: %s", reason, e.msg);
		} else {
			add(&g->r->removed, "sandbox", name, "%s", reason);
			gone = true;
		}
		goto out;
	}
	if (pisb_lock_is_held(idir, "controller.lock")) {
		sweep_handles(g, idir, name, rt.generation);
		add(&g->r->kept, "sandbox", name, "running");
		goto out;
	}
	if (strcmp(rt.state, "stopped")) {
		/* the controller died before a clean stop: mark the disk stopped
		 * as it is and drop its cgroup (the driver's stop does both) */
		if (g->o->dry_run) {
			add(&g->r->cleaned, "sandbox", name,
			    "interrupted (last state '%s'): marked stopped, its cgroup removed", rt.state);
		} else if (end_sandbox(g, name, false, &e) < 0) {
			if (e.code == PISB_EXIT_BUSY)
				add(&g->r->kept, "sandbox", name, "interrupted, but busy (another pisb command holds its lock)");
			else
				add(&g->r->failed, "sandbox", name, "interrupted: %s", e.msg);
			goto out;
		} else {
			add(&g->r->cleaned, "sandbox", name,
			    "interrupted (last state '%s'): marked stopped, its cgroup removed", rt.state);
		}
		rt.stopped_at = g->now;
	}
	if (g->o->hours >= 0) {
		int64_t since = rt.stopped_at ? rt.stopped_at : rec.created_at;
		if (g->now - since > (int64_t)g->o->hours * 3600) {
			char reason[256], ago[64], ts[32];
			hours_ago(g->now - since, ago, sizeof(ago));
			pisb_time_rfc3339(since, ts);
			snprintf(reason, sizeof(reason), "stopped for %s (since %s), more than --hours %d",
				 ago, ts, g->o->hours);
			gone = destroy_stopped(g, idir, name, reason);
			goto out;
		}
	}
	/* a stopped sandbox's handles: under its lock, so no start races us */
	if (!g->o->dry_run) {
		_cleanup_close_ int lock = op_lock(idir, name, &e);
		if (lock < 0) {
			add(&g->r->kept, "sandbox", name, "busy: another pisb command holds its lock");
			goto out;
		}
		if (!pisb_lock_is_held(idir, "controller.lock"))
			sweep_handles(g, idir, name, NULL);
	} else {
		sweep_handles(g, idir, name, NULL);
	}
	add(&g->r->kept, "sandbox", name, "stopped");
out:
	/* a sandbox removed in this pass (or that a dry run would remove)
	 * no longer keeps its image cache */
	if (!gone)
		note_record(g, &rec, who);
	pisb_runtime_release(&rt);
	pisb_record_release(&rec);
}

/* ---------- staging, trash, images ---------- */

/* A staged create that a driver's own sweep decides about? */
static bool staged_by_driver(int dirfd)
{
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
		if ((*d)->gc_staged && (*d)->gc_staged(dirfd))
			return true;
	return false;
}

/* Detach the mounts of ms, the deepest first. */
static int detach_all(const struct pisb_strv *ms, struct pisb_err *e)
{
	for (size_t i = ms->n; i-- > 0;)
		if (umount2(ms->v[i], MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "unmount '%s'", ms->v[i]);
	return 0;
}

/* A staging entry with a mount at or under it that nobody holds: a create
 * (or prepare) killed while its disk image was mounted.  Detach the mounts
 * (the deepest first) and remove the entry, whatever its age.  Returns 1
 * when the entry was such a leftover (cleaned, or failed into e), 0 when
 * it is not one. */
static int reap_mounted(int sdir, const char *name, const char *staging_real,
			bool dry_run, struct pisb_err *e)
{
	_cleanup_close_ int d = openat(sdir, name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_strv_ struct pisb_strv ms = PISB_STRV_INIT;
	_cleanup_free_ char *path = xasprintf("%s/%s", staging_real, name);

	if (d < 0 || pisb_lock_is_held(d, "op.lock") || pisb_lock_is_held(d, "controller.lock"))
		return 0;
	pisb_mounts_under(path, &ms);
	if (!ms.n)
		return 0;
	if (dry_run)
		return 1;
	if (detach_all(&ms, e) == 0)
		pisb_rm_rf_at(sdir, name, e);
	return 1;
}

void pisb_gc_staging_mounted(struct pisb_state *st)
{
	_cleanup_strv_ struct pisb_strv ns = PISB_STRV_INIT;
	_cleanup_close_ int sdir = openat(st->fd, "staging", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *rel = xasprintf("%s/staging", st->path);
	char real[PATH_MAX];

	if (sdir < 0 || !realpath(rel, real))
		return;
	read_names(sdir, ".", &ns);
	for (size_t i = 0; i < ns.n; i++) {
		struct pisb_err ig = PISB_ERR_INIT;
		reap_mounted(sdir, ns.v[i], real, false, &ig);
	}
}

static void sweep_staging(struct gc *g)
{
	_cleanup_strv_ struct pisb_strv ns = PISB_STRV_INIT;
	_cleanup_close_ int sdir = openat(g->st->fd, "staging", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *rel = xasprintf("%s/staging", g->st->path);
	char real[PATH_MAX];

	if (sdir < 0 || !realpath(rel, real))
		return;
	read_names(sdir, ".", &ns);
	for (size_t i = 0; i < ns.n; i++) {
		_cleanup_free_ char *what = xasprintf("staging/%s", ns.v[i]);
		_cleanup_free_ char *who = xasprintf("the staged create '%s'", what);
		_cleanup_close_ int d = openat(sdir, ns.v[i], O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		struct pisb_err e = PISB_ERR_INIT;
		struct stat sb;
		char ago[64];

		if (fstatat(sdir, ns.v[i], &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (d >= 0 && staged_by_driver(d))
			continue;   /* the driver's sweep decided */
		if (reap_mounted(sdir, ns.v[i], real, g->o->dry_run, &e)) {
			if (e.msg[0])
				add(&g->r->failed, "staging", what, "%s", e.msg);
			else
				add(&g->r->cleaned, "staging", what,
				    "left mounted by an interrupted create or prepare (its disk image unmounted)");
			continue;
		}
		if (d >= 0 && (pisb_lock_is_held(d, "op.lock") || pisb_lock_is_held(d, "controller.lock"))) {
			add(&g->r->kept, "staging", what, "a create or prepare is using it");
			note_dir(g, d, who);
			continue;
		}
		if (g->now - sb.st_mtime < STAGING_AGE_S) {
			add(&g->r->kept, "staging", what, "younger than 1 hour");
			if (d >= 0)
				note_dir(g, d, who);
			continue;
		}
		hours_ago(g->now - sb.st_mtime, ago, sizeof(ago));
		if (!g->o->dry_run && pisb_rm_rf_at(sdir, ns.v[i], &e) < 0)
			add(&g->r->failed, "staging", what, "%s", e.msg);
		else
			add(&g->r->cleaned, "staging", what,
			    "left over from an interrupted create or prepare (%s old)", ago);
	}
}

/* trash/<dir>-<name>-<pid>-<ms>: pisb_state_trash's names. */
static bool trash_in_use(const char *n, int64_t now_ms)
{
	const char *ms = strrchr(n, '-'), *p;
	long long pid, t;
	char buf[32];

	if (!ms || pisb_parse_ll(ms + 1, 0, 1LL << 62, &t) < 0)
		return false;
	for (p = ms - 1; p > n && *p != '-'; p--)
		;
	if (p <= n || ms - p - 1 <= 0 || ms - p - 1 >= (long)sizeof(buf))
		return false;
	snprintf(buf, sizeof(buf), "%.*s", (int)(ms - p - 1), p + 1);
	if (pisb_parse_ll(buf, 1, 1LL << 31, &pid) < 0)
		return false;
	/* the destroying process may still be removing it; past an hour its
	 * pid may well belong to someone else */
	return now_ms - t < TRASH_AGE_MS && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* What a trashed sandbox still holds outside its directory (local: the
 * cgroups its status names, when its controller was killed), dropped
 * through its driver's gc_drop as for a sandbox gc removes.  False when
 * its controller still runs: then nothing of it is touched. */
static bool drop_trashed(struct gc *g, int tdir, const char *entry)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;

	sb.idir = openat(tdir, entry, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (sb.idir < 0)
		return true;
	if (pisb_lock_is_held(sb.idir, "controller.lock"))
		return false;
	sb.st = g->st;
	sb.name = xstrdup(entry);
	sb.drv = pisb_driver_salvage(sb.idir);
	if (sb.drv->gc_drop)
		sb.drv->gc_drop(&sb);
	return true;
}

static void sweep_trash(struct gc *g)
{
	_cleanup_strv_ struct pisb_strv ns = PISB_STRV_INIT;
	_cleanup_close_ int tdir = openat(g->st->fd, "trash", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *rel = xasprintf("%s/trash", g->st->path);
	char real[PATH_MAX];

	if (tdir < 0 || !realpath(rel, real))
		return;
	read_names(tdir, ".", &ns);
	for (size_t i = 0; i < ns.n; i++) {
		_cleanup_free_ char *what = xasprintf("trash/%s", ns.v[i]);
		_cleanup_free_ char *path = xasprintf("%s/%s", real, ns.v[i]);
		_cleanup_strv_ struct pisb_strv ms = PISB_STRV_INIT;
		struct pisb_err e = PISB_ERR_INIT;

		if (trash_in_use(ns.v[i], pisb_now_ms())) {
			add(&g->r->kept, "trash", what, "its destroy is still running");
			continue;
		}
		if (!g->o->dry_run && !drop_trashed(g, tdir, ns.v[i])) {
			add(&g->r->kept, "trash", what, "its sandbox's controller still runs");
			continue;
		}
		/* a disk image still mounted in it (a destroy that ran into a
		 * mount a killed controller left) */
		if (!g->o->dry_run)
			pisb_mounts_under(path, &ms);
		if (!g->o->dry_run && (detach_all(&ms, &e) < 0 || pisb_rm_rf_at(tdir, ns.v[i], &e) < 0))
			add(&g->r->failed, "trash", what, "%s", e.msg);
		else
			add(&g->r->cleaned, "trash", what, "left over from an interrupted destroy");
	}
}

/* Take the lock of cache images/NAME exclusively, without waiting: a
 * process that uses the cache holds it shared, an import exclusively (see
 * image.h).  A dry run only probes, and creates no lock file.  Returns the
 * fd (-2 for a dry run's free lock), -1 when busy or on error (e). */
static int cache_lock(struct gc *g, const char *name, struct pisb_err *e)
{
	_cleanup_free_ char *lk = pisb_image_lock_path(name);
	_cleanup_close_ int fd = -1;

	if (!g->o->dry_run)
		return pisb_lock_acquire(g->st->fd, lk, true, 0, "the image cache", e);
	fd = openat(g->st->fd, lk, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -2; /* no lock file: nobody holds it */
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK)
			return pisb_err_set(e, PISB_EXIT_BUSY, "busy");
		return pisb_err_sys(e, PISB_EXIT_FAIL, "lock '%s'", lk);
	}
	return -2; /* closing fd lets go of the probe */
}

static const char *cache_user(const struct gc *g, const char *name)
{
	for (size_t i = 0; i < g->caches.n; i++)
		if (!strcmp(g->caches.v[i], name))
			return g->users.v[i];
	return NULL;
}

/* images/.import-KEY-PID (image.c's names, PID in hex): an import
 * whose process died before it published the cache. */
static void sweep_imports(struct gc *g, int idir)
{
	_cleanup_strv_ struct pisb_strv ns = PISB_STRV_INIT;

	read_names_with(idir, ".", ".import-", &ns);
	for (size_t i = 0; i < ns.n; i++) {
		_cleanup_free_ char *what = xasprintf("images/%s", ns.v[i]);
		const char *dash = strrchr(ns.v[i], '-');
		struct pisb_err e = PISB_ERR_INIT;
		unsigned long pid = 0;
		struct stat sb;
		char *end;

		if (dash && dash[1]) {
			errno = 0;
			pid = strtoul(dash + 1, &end, 16);
			if (errno || *end || pid > 1UL << 31)
				pid = 0;
		}
		if (fstatat(idir, ns.v[i], &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!pid) {
			add(&g->r->kept, "image", what, "not an import pisb started (no pid in its name)");
			continue;
		}
		if (kill((pid_t)pid, 0) == 0 || errno == EPERM) {
			add(&g->r->kept, "image", what, "an import is under way (pid %lu)", pid);
			continue;
		}
		if (g->now - sb.st_mtime < IMAGE_AGE_S) {
			add(&g->r->kept, "image", what, "younger than 1 hour");
			continue;
		}
		if (!g->o->dry_run && pisb_rm_rf_at(idir, ns.v[i], &e) < 0)
			add(&g->r->failed, "image", what, "%s", e.msg);
		else
			add(&g->r->cleaned, "image", what,
			    "left over from an interrupted import (pid %lu is gone)", pid);
	}
}

/* images/KEY-UID caches that no sandbox, template or staged create
 * references, that no process uses and that no import is building. */
static void sweep_images(struct gc *g)
{
	_cleanup_strv_ struct pisb_strv ns = PISB_STRV_INIT;
	_cleanup_close_ int idir = openat(g->st->fd, "images", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	static const char why[] = "unreferenced: no sandbox or template uses it";

	if (idir < 0)
		return;
	read_names(idir, ".", &ns);
	for (size_t i = 0; i < ns.n; i++) {
		_cleanup_free_ char *what = xasprintf("images/%s", ns.v[i]);
		_cleanup_free_ char *marker = xasprintf("%s/complete", ns.v[i]);
		_cleanup_close_ int lock = -1;
		struct pisb_err e = PISB_ERR_INIT;
		const char *user;
		struct stat sb;

		if (pisb_str_ends(ns.v[i], ".lock"))
			continue; /* a cache's lock: never unlinked (lock.h) */
		if (pisb_str_starts(ns.v[i], "host-")) {
			add(&g->r->kept, "image", what, "host-image skeleton (a few empty directories)");
			continue;
		}
		if (pisb_str_starts(ns.v[i], "etc-mask-")) {
			/* a running sandbox's /etc stands on it: never removed */
			add(&g->r->kept, "image", what, "the masks of the host image's /etc (a few empty entries)");
			continue;
		}
		if ((user = cache_user(g, ns.v[i]))) {
			add(&g->r->kept, "image", what, "used by %s", user);
			continue;
		}
		if (g->unknown) {
			add(&g->r->kept, "image", what, "%s", g->unknown);
			continue;
		}
		if (fstatat(idir, ns.v[i], &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (g->now - sb.st_mtime < IMAGE_AGE_S) {
			add(&g->r->kept, "image", what, "younger than 1 hour (an import may be under way)");
			continue;
		}
		lock = cache_lock(g, ns.v[i], &e);
		if (lock == -1) {
			if (e.code == PISB_EXIT_BUSY)
				add(&g->r->kept, "image", what, "in use or being imported (its lock is held)");
			else
				add(&g->r->failed, "image", what, "%s", e.msg);
			continue;
		}
		if (g->o->dry_run) {
			add(&g->r->cleaned, "image", what, "%s", why);
			continue;
		}
		/* the marker first: a removal that stops half-way leaves an
		 * incomplete cache, which the next user imports again */
		if (unlinkat(idir, marker, 0) < 0 && errno != ENOENT)
			pisb_err_sys(&e, PISB_EXIT_FAIL, "remove '%s'", marker);
		else if (pisb_rm_rf_at(idir, ns.v[i], &e) == 0) {
			add(&g->r->cleaned, "image", what, "%s", why);
			continue;
		}
		add(&g->r->failed, "image", what, "%s", e.msg);
	}
	sweep_imports(g, idir);
}

/* ---------- the pass ---------- */

int pisb_gc_run(struct pisb_state *st, const struct pisb_gc_opts *o,
		struct pisb_gc_report *r, struct pisb_err *e)
{
	_cleanup_close_ int lock = -1;
	_cleanup_strv_ struct pisb_strv names = PISB_STRV_INIT;
	_cleanup_strv_ struct pisb_strv tmpls = PISB_STRV_INIT;
	struct pisb_err le = PISB_ERR_INIT;
	struct gc g;

	memset(r, 0, sizeof(*r));
	r->dry_run = o->dry_run;
	if (pisb_mkdirs_at(st->fd, "locks", 0700, e) < 0)
		return -1;
	lock = pisb_lock_acquire(st->fd, "locks/gc.lock", true, 0, "pisb gc", &le);
	if (lock < 0) {
		if (le.code != PISB_EXIT_BUSY) {
			*e = le;
			return -1;
		}
		r->busy = true;
		return 0;
	}
	memset(&g, 0, sizeof(g));
	g.st = st;
	g.o = o;
	g.r = r;
	g.now = pisb_now_ms() / 1000;

	/* templates keep their image in use, whatever their age */
	read_names(st->fd, "templates", &tmpls);
	for (size_t i = 0; i < tmpls.n; i++) {
		_cleanup_close_ int t = pisb_instance_open(st, "templates", tmpls.v[i], &le);
		_cleanup_free_ char *who = xasprintf("template '%s'", tmpls.v[i]);
		if (t >= 0)
			note_dir(&g, t, who);
	}
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
		if ((*d)->gc_sweep)
			(*d)->gc_sweep(st, o->dry_run, r, &le);
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
		if ((*d)->pool_gc)
			(*d)->pool_gc(st, o->dry_run, r);
	sweep_staging(&g);
	sweep_trash(&g);
	read_names(st->fd, "instances", &names);
	for (size_t i = 0; i < names.n; i++)
		if (pisb_name_valid(names.v[i]))
			sweep_instance(&g, names.v[i]);
	sweep_images(&g);
	for (const struct pisb_driver *const *d = pisb_drivers; *d; d++)
		if ((*d)->gc_leftovers)
			(*d)->gc_leftovers(st, &g.known, o->dry_run, r);
	pisb_strv_release(&g.known);
	pisb_strv_release(&g.caches);
	pisb_strv_release(&g.users);
	free(g.unknown);
	return 0;
}
