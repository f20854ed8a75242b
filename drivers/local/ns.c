#include "ns.h"
#include "cgroup.h"
#include "config.h"
#include "hostmask.h"
#include "local.h"
#include "err.h"
#include "instance.h"
#include "lock.h"
#include "proc.h"
#include "project.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/loop.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>


void pisb_ids_for_caller(struct pisb_ids *ids)
{
	const char *env = getenv("PISB_UID_BASE");
	long long v;

	if (geteuid() != 0) {
		/* One id: the caller is root inside, nobody else exists. */
		ids->uid_base = geteuid();
		ids->gid_base = getegid();
		ids->count = 1;
		return;
	}
	/* Root maps a whole range to an unprivileged one, so that root inside
	 * owns nothing outside. */
	ids->uid_base = 1000000000u;
	if (env && pisb_parse_ll(env, 1, 4000000000LL, &v) == 0)
		ids->uid_base = (uid_t)v;
	ids->gid_base = ids->uid_base;
	ids->count = 65536;
}

/* ---- per-sandbox id ranges (ns.h) ---- */

#define IDS_SPAN 65536u

void pisb_ids_for_record(const struct pisb_record *rec, struct pisb_ids *ids)
{
	pisb_ids_for_caller(ids);
	if (geteuid() == 0 && rec && rec->uid_base) {
		ids->uid_base = rec->uid_base;
		ids->gid_base = (gid_t)rec->uid_base;
	}
}

/* Whether a record at DIR/NAME[.prep] of the state dir sfd claims range base. */
static bool range_claimed(int sfd, const char *name, uid_t base)
{
	static const char *const fmt[] = { "instances/%s", "templates/%s", "staging/%s.prep", "pool/%s", NULL };

	for (int i = 0; fmt[i]; i++) {
		_cleanup_free_ char *d = xasprintf(fmt[i], name);
		_cleanup_close_ int fd = openat(sfd, d, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		struct pisb_record r;
		struct pisb_err ig = PISB_ERR_INIT;
		bool mine;

		if (fd < 0)
			continue;
		if (pisb_record_load(fd, &r, &ig) < 0)
			return true;   /* being written, or damaged: keep it */
		mine = r.uid_base == base;
		pisb_record_release(&r);
		if (mine)
			return true;
	}
	/* a spare of the pool, claimed: its range is the sandbox's now, whose
	 * controller names it so a moment later (pisb_ids_adopt); one killed
	 * before that leaves it to the record of whatever instance holds it */
	if (pisb_str_starts(name, "spare-")) {
		_cleanup_close_ int ifd = openat(sfd, "instances", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		DIR *d = ifd < 0 ? NULL : fdopendir(ifd);
		struct dirent *de;
		bool mine = false;

		if (!d)
			return false;
		ifd = -1;
		while (!mine && (de = readdir(d))) {
			_cleanup_close_ int fd = -1;
			struct pisb_record r;
			struct pisb_err ig = PISB_ERR_INIT;

			if (de->d_name[0] == '.' ||
			    (fd = openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
				continue;
			if (pisb_record_load(fd, &r, &ig) < 0)
				continue;
			mine = r.uid_base == base;
			pisb_record_release(&r);
		}
		closedir(d);
		return mine;
	}
	return false;
}

/* An entry (its text in t) is stale: its allocator is gone and no record
 * claims it.  "NAME PID START STATEDIR" (the host-wide registry: the
 * state dir whose record would claim it), or "NAME PID START" (a state
 * dir's own registry, st's).  owner: an entry that names owner (a name
 * only its own create takes) is judged by the records alone, its
 * allocator alive or not. */
static bool range_stale(struct pisb_state *st, const char *t, uid_t base, const char *owner)
{
	char name[64];
	struct pisb_proc_id p = { 0 };
	unsigned long long start = 0;
	int pid = 0, n = 0;
	const char *path;
	_cleanup_close_ int sfd = -1;

	if (sscanf(t, "%63s %d %llu%n", name, &pid, &start, &n) != 3 || !pisb_name_valid(name))
		return false;   /* not ours to judge: keep it */
	p.pid = pid;
	p.start = start;
	if ((!owner || strcmp(name, owner)) && pid > 0 && pisb_proc_id_alive(&p))
		return false;
	path = t + n;
	if (*path != ' ')
		return !range_claimed(st->fd, name, base);
	path++;
	{
		_cleanup_free_ char *dir = xstrndup(path, strcspn(path, "\n"));
		if (dir[0] != '/')
			return false;
		sfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (sfd < 0)
			return errno == ENOENT || errno == ENOTDIR;   /* the state dir is gone */
	}
	return !range_claimed(sfd, name, base);
}

/* The host-wide registry, $PISB_ID_REGISTRY or /var/lib/pisb: an fd of
 * the directory holding idranges/ and idranges.lock, made 0700 if
 * missing; -1 when it cannot be had (a read-only /var/lib): then each
 * state dir keeps its own, as before. */
static int registry_open(char *path, size_t n)
{
	const char *env = getenv("PISB_ID_REGISTRY");
	struct pisb_err ig = PISB_ERR_INIT;
	struct stat sb;
	int fd;

	snprintf(path, n, "%s", env && env[0] == '/' ? env : "/var/lib/pisb");
	if (pisb_mkdirs_at(AT_FDCWD, path, 0700, &ig) < 0)
		return -1;
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	/* root's own, or not used: another user could hand out ranges */
	if (fstat(fd, &sb) < 0 || sb.st_uid != 0 || (sb.st_mode & 022) ||
	    pisb_mkdirs_at(fd, "idranges", 0700, &ig) < 0 || faccessat(fd, "idranges", W_OK, AT_EACCESS) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

struct range_ent {
	unsigned long long base;
	int rdir;       /* its registry's directory (borrowed) */
	int stale;      /* -1 not judged yet */
};

/* Both registries locked, the host-wide one's lock first (when there is
 * one), and their entries (names only: what an entry holds is read only
 * to judge it stale, range_ent_stale) sorted by base.  path: the
 * host-wide registry's, or st's when there is none. */
struct ranges {
	int reg, lock, llock;   /* -1: none */
	char path[4096];
	struct range_ent *v;
	size_t n, cap;
};

/* Every entry of rdir/idranges into r. */
static void ranges_load(struct ranges *r, int rdir)
{
	_cleanup_close_ int dfd = openat(rdir, "idranges", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d;
	struct dirent *de;

	if (dfd < 0 || !(d = fdopendir(dfd)))
		return;
	dfd = -1;   /* closedir closes it */
	while ((de = readdir(d))) {
		long long b;

		if (de->d_name[0] == '.' || pisb_parse_ll(de->d_name, 1, 4294967295LL, &b) < 0)
			continue;
		if (r->n == r->cap) {
			r->cap = r->cap ? r->cap * 2 : 16;
			r->v = xrealloc(r->v, r->cap * sizeof(*r->v));
		}
		r->v[r->n++] = (struct range_ent){ (unsigned long long)b, rdir, -1 };
	}
	closedir(d);
}

static int range_ent_cmp(const void *a, const void *b)
{
	const struct range_ent *x = a, *y = b;

	return x->base < y->base ? -1 : x->base > y->base;
}

static void ranges_close(struct ranges *r)
{
	if (r->llock >= 0)
		close(r->llock);
	if (r->lock >= 0)
		close(r->lock);
	if (r->reg >= 0)
		close(r->reg);
	free(r->v);
}

static int ranges_open(struct pisb_state *st, struct ranges *r, struct pisb_err *e)
{
	memset(r, 0, sizeof(*r));
	r->lock = r->llock = -1;
	r->reg = registry_open(r->path, sizeof(r->path));
	if (r->reg >= 0 &&
	    (r->lock = pisb_lock_acquire(r->reg, "idranges.lock", true, 30000, "the host's id ranges", e)) < 0)
		return -1;
	if ((r->llock = pisb_lock_acquire(st->fd, "idranges.lock", true, 30000, "the id ranges", e)) < 0)
		return -1;
	if (r->reg < 0)
		snprintf(r->path, sizeof(r->path), "%s", st->path);
	else
		ranges_load(r, r->reg);
	ranges_load(r, st->fd);
	if (r->n)
		qsort(r->v, r->n, sizeof(*r->v), range_ent_cmp);
	return 0;
}

/* Entry x is stale (range_stale), judged once. */
static bool range_ent_stale(struct pisb_state *st, struct range_ent *x)
{
	if (x->stale < 0) {
		_cleanup_buf_ struct pisb_buf t = PISB_BUF_INIT;
		char fn[32];
		snprintf(fn, sizeof(fn), "idranges/%llu", x->base);
		/* unreadable: never judged stale */
		x->stale = pisb_read_file_at(x->rdir, fn, &t, 4096) == 0 && t.s &&
			   range_stale(st, t.s, (uid_t)x->base, NULL);
	}
	return x->stale;
}

/* The lowest range from first on that the entries of r leave free, 0 if
 * none: with no entry overlapping it at all, or (stale) with only stale
 * ones. */
static unsigned long long range_pick(struct pisb_state *st, struct ranges *r,
				     unsigned long long first, bool stale)
{
	size_t lo = 0;

	for (unsigned long long b = first; b + IDS_SPAN <= 4294967295ULL; b += IDS_SPAN) {
		bool taken = false;
		/* those that overlap [b, b + IDS_SPAN): from lo on, the first
		 * ones that end after b, while they begin before its end */
		while (lo < r->n && r->v[lo].base + IDS_SPAN <= b)
			lo++;
		for (size_t i = lo; i < r->n && r->v[i].base < b + IDS_SPAN && !taken; i++)
			taken = !stale || !range_ent_stale(st, &r->v[i]);
		if (!taken)
			return b;
	}
	return 0;
}

int pisb_ids_alloc(struct pisb_state *st, const char *owner, struct pisb_ids *ids,
		   struct pisb_err *e)
{
	_cleanup_close_ int dir = -1;
	_cleanup_free_ char *line = NULL;
	struct pisb_err ig = PISB_ERR_INIT;
	struct ranges r;
	char fn[24];
	unsigned long long first, b;
	int ret = -1;

	pisb_ids_for_caller(ids);
	if (geteuid() != 0)
		return 0;
	/* the state dir's own registry: the only one when the host-wide one
	 * cannot be had, and read (its ranges are taken) when it can, for
	 * the ranges it handed out before there was one */
	if (pisb_mkdirs_at(st->fd, "idranges", 0700, e) < 0)
		return -1;
	first = (unsigned long long)ids->uid_base + IDS_SPAN;
	if (ranges_open(st, &r, e) < 0)
		goto out;
	dir = openat(r.reg >= 0 ? r.reg : st->fd, "idranges", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dir < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s/idranges'", r.path);
		goto out;
	}
	/* The lowest range no entry overlaps (PISB_UID_BASE may differ
	 * between callers: the entries' bases need not be ours); only when
	 * every range has one, the lowest whose entries are all stale.  To
	 * judge an entry stale reads it and the record that would claim it:
	 * done for every sandbox at each create, that was 20 us an entry here
	 * (2 ms a create beside 100 sandboxes, issue #21).  pisb gc removes
	 * stale entries (pisb_ids_sweep). */
	b = range_pick(st, &r, first, false);
	if (!b)
		b = range_pick(st, &r, first, true);
	if (!b) {
		pisb_err_set(e, PISB_EXIT_FAIL, "no host id range is free (see '%s/idranges')", r.path);
		goto out;
	}
	for (size_t i = 0; i < r.n; i++) {
		char old[32];
		if (r.v[i].base + IDS_SPAN <= b || b + IDS_SPAN <= r.v[i].base)
			continue;
		/* stale entries it overlaps go (a host-wide one only under
		 * the host-wide lock, which we hold if it exists) */
		snprintf(old, sizeof(old), "idranges/%llu", r.v[i].base);
		unlinkat(r.v[i].rdir, old, 0);
	}
	snprintf(fn, sizeof(fn), "%llu", b);
	line = r.reg >= 0 ? xasprintf("%s %d %llu %s\n", owner, (int)getpid(), pisb_proc_start(getpid()), st->path)
			  : xasprintf("%s %d %llu\n", owner, (int)getpid(), pisb_proc_start(getpid()));
	if (pisb_atomic_write(dir, fn, line, strlen(line), 0600, &ig) < 0) {
		pisb_err_set(e, ig.code ? ig.code : PISB_EXIT_FAIL, "allocate a host id range: %s", ig.msg);
		goto out;
	}
	ids->uid_base = (uid_t)b;
	ids->gid_base = (gid_t)b;
	ids->count = IDS_SPAN;
	ret = 0;
out:
	ranges_close(&r);
	return ret;
}

void pisb_ids_sweep(struct pisb_state *st, bool dry_run, struct pisb_strv *out)
{
	struct pisb_err ig = PISB_ERR_INIT;
	struct ranges r;

	if (geteuid() != 0)
		return;
	if (ranges_open(st, &r, &ig) == 0)
		for (size_t i = 0; i < r.n; i++) {
			char fn[32];
			if (!range_ent_stale(st, &r.v[i]))
				continue;
			snprintf(fn, sizeof(fn), "idranges/%llu", r.v[i].base);
			if (dry_run || unlinkat(r.v[i].rdir, fn, 0) == 0)
				pisb_strv_pushf(out, "%s/%s", r.v[i].rdir == st->fd ? st->path : r.path, fn);
		}
	ranges_close(&r);
}

int pisb_ids_adopt(struct pisb_state *st, uid_t base, const char *owner, struct pisb_err *e)
{
	_cleanup_close_ int reg = -1, lock = -1, dir = -1;
	_cleanup_free_ char *line = NULL;
	struct pisb_err ig = PISB_ERR_INIT;
	char rpath[4096], fn[16];

	if (geteuid() != 0 || !base)
		return 0;
	reg = registry_open(rpath, sizeof(rpath));
	if (reg < 0) {
		reg = dup(st->fd);
		snprintf(rpath, sizeof(rpath), "%s", st->path);
	}
	lock = pisb_lock_acquire(reg, "idranges.lock", true, 30000, "the id ranges", e);
	if (lock < 0)
		return -1;
	dir = openat(reg, "idranges", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	snprintf(fn, sizeof(fn), "%u", (unsigned)base);
	if (dir < 0 || faccessat(dir, fn, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "host id range %u: no entry in '%s/idranges'", (unsigned)base, rpath);
	/* no process holds it (pid 0): the record of owner claims it, as a
	 * finished create's once its process is gone */
	line = strcmp(rpath, st->path) ? xasprintf("%s 0 0 %s\n", owner, st->path) : xasprintf("%s 0 0\n", owner);
	if (pisb_atomic_write(dir, fn, line, strlen(line), 0600, &ig) < 0)
		return pisb_err_set(e, ig.code ? ig.code : PISB_EXIT_FAIL, "host id range %u: %s", (unsigned)base, ig.msg);
	return 0;
}

/* Remove rdir/idranges/BASE if it is ours (a failed create) or stale:
 * between a destroy's trash and this, another create may have found it
 * stale and taken it.  owner: it names owner, a name no other create
 * takes (a spare's), and no record claims it: its allocator may still be
 * alive (a pool's refill that has made the spare and not yet exited). */
static void range_drop(struct pisb_state *st, int rdir, uid_t base, const char *owner)
{
	_cleanup_close_ int lock = -1;
	_cleanup_buf_ struct pisb_buf t = PISB_BUF_INIT;
	_cleanup_free_ char *me = xasprintf(" %d %llu", (int)getpid(), pisb_proc_start(getpid()));
	struct pisb_err ig = PISB_ERR_INIT;
	char fn[32];
	const char *sp;

	snprintf(fn, sizeof(fn), "idranges/%u", (unsigned)base);
	if (faccessat(rdir, fn, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	lock = pisb_lock_acquire(rdir, "idranges.lock", true, 30000, "the id ranges", &ig);
	if (lock < 0)
		return;   /* left for the next allocation to find stale */
	if (pisb_read_file_at(rdir, fn, &t, 4096) < 0 || !t.s)
		return;
	sp = strchr(t.s, ' ');
	if ((sp && pisb_str_starts(sp, me) && (sp[strlen(me)] == ' ' || sp[strlen(me)] == '\n')) ||
	    range_stale(st, t.s, base, owner))
		unlinkat(rdir, fn, 0);
}

void pisb_ids_free_owned(struct pisb_state *st, uid_t base, const char *owner)
{
	struct pisb_ids shared;
	char rpath[4096];
	_cleanup_close_ int reg = -1;

	pisb_ids_for_caller(&shared);
	if (geteuid() != 0 || !base || base == shared.uid_base)
		return;
	reg = registry_open(rpath, sizeof(rpath));
	if (reg >= 0)
		range_drop(st, reg, base, owner);
	range_drop(st, st->fd, base, owner);
}

void pisb_ids_free(struct pisb_state *st, uid_t base)
{
	pisb_ids_free_owned(st, base, NULL);
}

/* ---- diskGiB: a filesystem image per sandbox (ns.h) ---- */

int pisb_disk_image_make(int dirfd, const char *dir, int gib, struct pisb_err *e)
{
	_cleanup_close_ int fd = openat(dirfd, "disk.img", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	_cleanup_free_ char *img = xasprintf("%s/disk.img", dir), *mkfs = NULL;
	pid_t pid;
	int st;

	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "create '%s'", img);
	if (ftruncate(fd, (off_t)gib << 30) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "size '%s' to %d GiB", img, gib);
	/* in /usr/sbin: not in cron's PATH */
	mkfs = pisb_find_tool("mkfs.ext4");
	if (!mkfs)
		return pisb_err_set(e, PISB_EXIT_FAIL,
				    "diskGiB: no mkfs.ext4 in PATH, /usr/sbin or /sbin to format '%s' (install e2fsprogs)", img);
	pid = fork();
	if (pid < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			dup2(null, 1);
		/* no reserved blocks (root inside gets the whole size); the
		 * inode tables and journal are initialised lazily by the
		 * kernel, so formatting costs little whatever the size */
		execl(mkfs, "mkfs.ext4", "-q", "-F", "-m", "0", "-E",
		      "lazy_itable_init=1,lazy_journal_init=1,nodiscard", img, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "wait for mkfs.ext4");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return pisb_err_set(e, PISB_EXIT_FAIL, "mkfs.ext4 '%s' failed (status %d; is e2fsprogs installed?)",
				    img, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}

/* Attach the image open on img to a free loop device and mount it on at. */
static int loop_mount(int img, const char *what, const char *at, bool ro, struct pisb_err *e)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

	if (ctl < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open '/dev/loop-control' for the disk image");
	for (int tries = 0; tries < 16; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		char dev[32];
		_cleanup_close_ int lo = -1;
		/* autoclear: the device is released when its last user (the
		 * mount) goes */
		struct loop_config lc = { .fd = (unsigned)img,
			.info = { .lo_flags = LO_FLAGS_AUTOCLEAR | (ro ? LO_FLAGS_READ_ONLY : 0) } };

		if (n < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "get a free loop device");
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		lo = open(dev, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (lo < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", dev);
		if (ioctl(lo, LOOP_CONFIGURE, &lc) < 0) {
			if (errno == EBUSY)
				continue;   /* taken between GET_FREE and now */
			return pisb_err_sys(e, PISB_EXIT_FAIL, "attach '%s' to '%s'", what, dev);
		}
		/* read-only: noload, no journal replay, nothing written */
		if (mount(dev, at, "ext4", MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY | MS_NOEXEC : 0),
			  ro ? "noload" : NULL) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "mount '%s' on '%s'", what, at);
		return 1;
	}
	return pisb_err_set(e, PISB_EXIT_BUSY, "no loop device stayed free for '%s'", what);
}

int pisb_disk_image_mount(int dirfd, const char *dir, const char *disk_path, struct pisb_err *e)
{
	_cleanup_close_ int img = openat(dirfd, "disk.img", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *what = xasprintf("%s/disk.img", dir);
	struct stat a, b;

	if (img < 0) {
		if (errno == ENOENT)
			return 0;
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", what);
	}
	if (mkdir(disk_path, 0755) < 0 && errno != EEXIST)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s'", disk_path);
	/* mounted already (a controller that died without unmounting) */
	if (stat(disk_path, &a) == 0 && fstatat(dirfd, ".", &b, 0) == 0 && a.st_dev != b.st_dev)
		return 1;
	return loop_mount(img, what, disk_path, false, e);
}

int pisb_disk_image_mount_ro(int dirfd, const char *dir, const char *at, struct pisb_err *e)
{
	_cleanup_close_ int img = openat(dirfd, "disk.img", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_free_ char *what = xasprintf("%s/disk.img", dir);

	if (img < 0)
		return errno == ENOENT ? 0 : pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", what);
	if (mkdir(at, 0700) < 0 && errno != EEXIST)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s'", at);
	return loop_mount(img, what, at, true, e);
}

void pisb_disk_image_umount(const char *disk_path)
{
	umount2(disk_path, MNT_DETACH);
}

/* ---- child side: runs inside the new namespaces ---- */

static void child_fail(int sock, const char *what)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "E%s: %s", what, strerror(errno));
	if (n > 0)
		pisb_write_all(sock, msg, (size_t)n);
	_exit(1);
}

/* The same for a library error (its message says errno already). */
static void child_fail_err(int sock, const struct pisb_err *e)
{
	char msg[2100];
	int n = snprintf(msg, sizeof(msg), "E%s", e->msg);
	if (n > 0)
		pisb_write_all(sock, msg, (size_t)n);
	_exit(1);
}

static int mkdir_p(const char *path, mode_t mode)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(tmp, mode) < 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* Read-only bind, keeping the flags the kernel locked on the source. */
static int bind_ro(const char *src, const char *dst)
{
	struct statvfs sv;
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_RDONLY;

	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	if (statvfs(src, &sv) == 0) {
		if (sv.f_flag & ST_NOSUID) fl |= MS_NOSUID;
		if (sv.f_flag & ST_NODEV) fl |= MS_NODEV;
		if (sv.f_flag & ST_NOEXEC) fl |= MS_NOEXEC;
		if (sv.f_flag & ST_NOATIME) fl |= MS_NOATIME;
		if (sv.f_flag & ST_RELATIME) fl |= MS_RELATIME;
	}
	return mount(NULL, dst, NULL, fl, NULL);
}

static int touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -1;
	close(fd);
	return 0;
}

/* Host files that never show inside, even read-only (hostmask.h). */
#define masked_files pisb_host_masked_files
#define masked_dirs pisb_host_masked_dirs

/* What host path p is to the view: 1 a masked file, 2 a masked directory
 * or a path under one, 3 a directory holding a masked path, 0 none of
 * these. */
static int mask_kind(const char *p)
{
	size_t n = strlen(p);

	for (int i = 0; masked_files[i]; i++)
		if (!strcmp(p, masked_files[i]))
			return 1;
	for (int i = 0; masked_dirs[i]; i++) {
		size_t m = strlen(masked_dirs[i]);
		if (!strncmp(p, masked_dirs[i], m) && (p[m] == '\0' || p[m] == '/'))
			return 2;
	}
	for (int k = 0; k < 2; k++)
		for (int i = 0; (k ? masked_dirs : masked_files)[i]; i++) {
			const char *m = (k ? masked_dirs : masked_files)[i];
			if (!strncmp(m, p, n) && m[n] == '/')
				return 3;
		}
	return 0;
}

/* The host directory src at dst (relative to the cwd, dst exists on a
 * file system of the sandbox's own): each entry a read-only bind of the
 * host's, a symlink copied, masked files as empty files and masked
 * directories as empty directories, a directory that holds a masked path
 * rebuilt the same way.  The masks are not mounts over host files (root
 * inside could unmount those, its user namespace owns them): what they
 * hide is simply not in the view, so no unmount, move or remount inside
 * can show it.  A directory below the top that cannot be listed stays
 * empty. */
static bool view_setattr;   /* the view goes read-only at once, with mount_setattr */

/* A bind of the host's src at dst, read-only now or (view_setattr) at the
 * end, all at once. */
static int view_bind(const char *src, const char *dst)
{
	if (!view_setattr)
		return bind_ro(src, dst);
	return mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
}

/* A bind that failed: an entry the host removed since it was listed is
 * left out; anything else fails the boot. */
static void view_gone(int sock, const char *sp, const char *dp)
{
	if (errno != ENOENT)
		child_fail(sock, sp);
	if (remove(dp) < 0)
		child_fail(sock, dp);
}

static void view_dir(const char *src, const char *dst, bool top, int sock)
{
	DIR *d = opendir(src);
	struct dirent *de;

	if (!d && !top)
		return;
	if (!d)
		child_fail(sock, src);
	/* ~150 entries in a host's /etc, at each boot: two system calls for
	 * most (a mountpoint and its bind), the type from the directory
	 * itself (issue #21) */
	while ((de = readdir(d))) {
		char sp[4096], dp[4096], link[4096];
		unsigned type = de->d_type;
		mode_t mode = 0755;   /* a bind's mountpoint: its own never shows */
		ssize_t n;
		int kind;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sp, sizeof(sp), "%s/%s", src, de->d_name);
		snprintf(dp, sizeof(dp), "%s/%s", dst, de->d_name);
		kind = mask_kind(sp);
		if (type == DT_UNKNOWN || kind >= 2) {
			/* a masked or rebuilt directory keeps the host's mode */
			struct stat sb;
			if (lstat(sp, &sb) < 0)
				continue;
			type = IFTODT(sb.st_mode);
			mode = sb.st_mode & 07777;
		}
		if (kind == 1 || (kind == 0 && type == DT_REG)) {
			if (mknod(dp, S_IFREG | (kind ? 0640 : 0644), 0) < 0)
				child_fail(sock, sp);
			if (!kind && view_bind(sp, dp) < 0)
				view_gone(sock, sp, dp);
		} else if (type == DT_DIR) {
			if (mkdir(dp, mode) < 0)
				child_fail(sock, sp);
			if (kind == 3)
				view_dir(sp, dp, false, sock);
			else if (kind == 0 && view_bind(sp, dp) < 0)
				view_gone(sock, sp, dp);
		} else if (type == DT_LNK && !kind) {
			n = readlink(sp, link, sizeof(link) - 1);
			if (n < 0)
				continue;
			link[n] = '\0';
			if (symlink(link, dp) < 0)
				child_fail(sock, sp);
		}
		/* sockets, fifos and devices of the host's /etc stay out */
	}
	closedir(d);
}

/* An overlay at target, in the boot child: as asked, or with userxattr
 * for kernels that want it spelled out inside a user namespace (tried
 * first from then on: the root's mount tells for /etc's). */
static int overlay_mount(const char *target, unsigned long flags, const char *opts)
{
	static bool userxattr;
	char with[600];

	snprintf(with, sizeof(with), "%s,userxattr", opts);
	if (!userxattr && mount("overlay", target, "overlay", flags, opts) == 0)
		return 0;
	if (mount("overlay", target, "overlay", flags, with) < 0)
		return -1;
	userxattr = true;
	return 0;
}

/* ---------- the mask layers of /etc (host side) ---------- */

/* What the mask layers are made for: the masked paths (their stamp) */
static const char *etc_mask_stamp(void)
{
	static char stamp[2048];

	if (!stamp[0]) {
		size_t n = (size_t)snprintf(stamp, sizeof(stamp), "pisb etc-mask 1\n");
		for (int k = 0; k < 2; k++)
			for (int i = 0; (k ? masked_dirs : masked_files)[i] && n < sizeof(stamp); i++)
				n += (size_t)snprintf(stamp + n, sizeof(stamp) - n, "%s %s\n", k ? "dir" : "file",
						      (k ? masked_dirs : masked_files)[i]);
	}
	return stamp;
}

/* rel's parent directories (under /etc) in layer dir, each with the
 * host's mode (an upper layer's directory gives the merged one its mode) */
static int mask_parents(int dir, const char *rel)
{
	char p[4096], host[4200];

	snprintf(p, sizeof(p), "%s", rel);
	for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
		struct stat sb;
		*s = '\0';
		snprintf(host, sizeof(host), "/etc/%s", p);
		if (mkdirat(dir, p, stat(host, &sb) == 0 ? sb.st_mode & 07777 : 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return 0;
}

static int whiteout(int dir, const char *rel)
{
	if (mknodat(dir, rel, S_IFCHR, makedev(0, 0)) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int etc_mask_build(int at, const char *tmp)
{
	_cleanup_close_ int d = -1, top = -1, wh = -1;
	struct stat sb;

	if (mkdirat(at, tmp, 0755) < 0 ||
	    (d = openat(at, tmp, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    mkdirat(d, "top", stat("/etc", &sb) == 0 ? sb.st_mode & 07777 : 0755) < 0 ||
	    mkdirat(d, "wh", 0755) < 0 ||
	    (top = openat(d, "top", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (wh = openat(d, "wh", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	for (int i = 0; masked_files[i]; i++) {
		const char *rel = masked_files[i] + strlen("/etc/");
		if (mask_parents(top, rel) < 0 || mknodat(top, rel, S_IFREG | 0644, 0) < 0)
			return -1;
	}
	for (int i = 0; masked_dirs[i]; i++) {
		const char *rel = masked_dirs[i] + strlen("/etc/");
		if (mask_parents(top, rel) < 0 || mkdirat(top, rel, 0755) < 0 ||
		    mask_parents(wh, rel) < 0 || whiteout(wh, rel) < 0)
			return -1;
	}
	/* what it was made for, to read (its name says it by a hash) */
	{
		struct pisb_err ig = PISB_ERR_INIT;
		return pisb_atomic_write_volatile(d, "stamp", etc_mask_stamp(), strlen(etc_mask_stamp()), 0644, &ig);
	}
}

/* images/etc-mask-HASH of the state directory st: HASH names the masked
 * paths it was made for, so a layer that running sandboxes use is never
 * changed but for whiteouts added; made once, in a directory of its own
 * then renamed (a second controller making it at the same time uses the
 * first one's). */
char *pisb_etc_mask_prepare(struct pisb_state *st, struct pisb_err *e)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const char *stamp = etc_mask_stamp();
	unsigned long long h = 1469598103934665603ULL;
	_cleanup_close_ int wh = -1;
	char name[64], tmp[96];
	DIR *d;
	struct dirent *de;

	for (const char *p = stamp; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	snprintf(name, sizeof(name), "images/etc-mask-%016llx", h);
	if (faccessat(st->fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", name, (int)getpid());
		pisb_rm_rf_at(st->fd, tmp, &ig);
		if (pisb_mkdirs_at(st->fd, "images", 0700, e) < 0)
			return NULL;
		if (etc_mask_build(st->fd, tmp) < 0 ||
		    (renameat(st->fd, tmp, st->fd, name) < 0 && errno != EEXIST && errno != ENOTEMPTY)) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "make the mask layers of /etc ('%s')", name);
			pisb_rm_rf_at(st->fd, tmp, &ig);
			return NULL;
		}
		pisb_rm_rf_at(st->fd, tmp, &ig);
	}
	/* the host's sockets, fifos and devices stay out, as they come */
	snprintf(tmp, sizeof(tmp), "%s/wh", name);
	wh = openat(st->fd, tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	d = opendir("/etc");
	if (wh < 0 || !d) {
		if (d)
			closedir(d);
		pisb_err_sys(e, PISB_EXIT_FAIL, "the mask layers of /etc ('%s')", name);
		return NULL;
	}
	while ((de = readdir(d))) {
		unsigned t = de->d_type;
		if (t == DT_UNKNOWN) {
			struct stat sb;
			if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			t = IFTODT(sb.st_mode);
		}
		if ((t == DT_SOCK || t == DT_FIFO || t == DT_CHR || t == DT_BLK) && whiteout(wh, de->d_name) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "mask '/etc/%s'", de->d_name);
			closedir(d);
			return NULL;
		}
	}
	closedir(d);
	return xasprintf("%s/%s", st->path, name);
}

/* /etc as a read-only overlay: the mask layers (pisb_etc_mask_prepare)
 * above the host's /etc.  One mount, where the per-entry view (view_dir)
 * made ~150 at each boot and the kernel undid them one by one at each
 * stop (together 2 ms of a create and 1 ms of a stop here, issue #21).
 * The masks are names in a lower layer, not mounts: nothing to unmount,
 * and what the host later puts at a masked name is masked too. */
static int etc_overlay(int mask)
{
	char opts[256];

	snprintf(opts, sizeof(opts), "lowerdir=/proc/self/fd/%d/top:/proc/self/fd/%d/wh:/etc", mask, mask);
	return overlay_mount("etc", MS_RDONLY | MS_NOSUID | MS_NODEV, opts);
}

/* What is mounted under the host's /etc (a container's /etc/hosts and
 * resolv.conf, say) does not show through an overlay of it: each such
 * mount, bound read-only over its place, unless it is masked or holds a
 * masked path (left out: the view shows what lies under it). */
static void etc_submounts(int sock)
{
	_cleanup_strv_ struct pisb_strv ms = PISB_STRV_INIT;

	pisb_mounts_under("/etc", &ms);
	for (size_t i = 0; i < ms.n; i++)
		if (strcmp(ms.v[i], "/etc") && !mask_kind(ms.v[i]) &&
		    bind_ro(ms.v[i], ms.v[i] + 1) < 0 && errno != ENOENT)
			child_fail(sock, ms.v[i]);
}

/* The host's system directories, read-only, into the new root (cwd).
 * /etc, where the masked paths are, is the overlay of etc_overlay (with
 * etc_mask, the layers' directory) or else a read-only tmpfs of its own
 * holding the view of view_dir. */
static void host_binds(int etc_mask, int sock)
{
	static const char *const sys[] = {
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL,
	};
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	struct mount_attr none = { 0 };
	struct stat sb;

	for (int i = 0; sys[i]; i++) {
		if (lstat(sys[i], &sb) < 0 || !S_ISDIR(sb.st_mode))
			continue; /* a merged-usr symlink is in the skeleton */
		if (mkdir_p(sys[i] + 1, 0755) < 0 || bind_ro(sys[i], sys[i] + 1) < 0)
			child_fail(sock, sys[i]);
	}
	if (mkdir_p("etc", 0755) < 0)
		child_fail(sock, "mkdir /etc");
	if (etc_mask >= 0) {
		if (etc_overlay(etc_mask) == 0) {
			etc_submounts(sock);
			return;
		}
		fprintf(stderr, "warning: /etc as an overlay of the host's: %s; a view of per-entry binds instead\n",
			strerror(errno));
	}
	if (mount("tmpfs", "etc", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
		child_fail(sock, "mount /etc");
	/* one mount_setattr for the ~150 binds instead of a remount each
	 * (Linux 5.12 and later; else each bind is remounted) */
	view_setattr = syscall(SYS_mount_setattr, AT_FDCWD, "etc", 0, &none, sizeof(none)) == 0;
	view_dir("/etc", "etc", true, sock);
	if (view_setattr ? syscall(SYS_mount_setattr, AT_FDCWD, "etc", AT_RECURSIVE, &ro, sizeof(ro)) < 0
			 : mount(NULL, "etc", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		child_fail(sock, "make /etc read-only");
}

/* /dev of its own, relative to the new root (cwd). */
static void make_dev(const struct pisb_boot *b, int sock)
{
	char shm[64];
	static const char *const nodes[] = {
		"null", "zero", "full", "random", "urandom", "tty", NULL,
	};
	char p[256];

	mkdir("dev", 0755);
	if (mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		child_fail(sock, "mount /dev");
	for (int i = 0; nodes[i]; i++) {
		char src[64];
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		snprintf(p, sizeof(p), "dev/%s", nodes[i]);
		if (touch(p) < 0 || mount(src, p, NULL, MS_BIND, NULL) < 0)
			child_fail(sock, src);
	}
	mkdir("dev/pts", 0755);
	if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		child_fail(sock, "mount /dev/pts");
	if (symlink("pts/ptmx", "dev/ptmx") < 0)
		child_fail(sock, "/dev/ptmx");
	mkdir("dev/shm", 01777);
	snprintf(shm, sizeof(shm), b->tmp_mib ? "mode=1777,size=%um" : "mode=1777", b->tmp_mib);
	if (mount("tmpfs", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, shm) < 0)
		child_fail(sock, "mount /dev/shm");
	symlink("/proc/self/fd", "dev/fd");
	symlink("/proc/self/fd/0", "dev/stdin");
	symlink("/proc/self/fd/1", "dev/stdout");
	symlink("/proc/self/fd/2", "dev/stderr");
}

/* The network namespace's loopback up; -1 with errno if not. */
static int loopback_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = -1, saved;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		r = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	saved = errno;
	close(fd);
	errno = saved;
	return r;
}

static int write_file(const char *path, const char *s);
/* ---- project.mode bind / bind-ro ---- */

/* The secrets and .git of the project mounted at top covered
 * (project.h's pisb_project_mask), the covers' sources on the disk. */
static void hide_walk(int top, int disk, const struct pisb_project_config *pc, int sock)
{
	struct pisb_err e = PISB_ERR_INIT;

	if (pisb_project_mask(top, disk, pc, &e) < 0)
		child_fail_err(sock, &e);
}

/* The empty file and directory the secrets are hidden under, on the disk. */
static void hidden_sources(int disk, int sock)
{
	struct pisb_err e = PISB_ERR_INIT;

	if (pisb_project_mask_sources(disk, &e) < 0)
		child_fail_err(sock, &e);
	if (mkdirat(disk, "project", 0755) < 0 && errno != EEXIST)
		child_fail(sock, "mkdir project");
}

/* A user namespace for the project's idmapped mount: the project owner's
 * uid and gid on disk are the sandbox's root (uid_base, gid_base), and no
 * other id is mapped.  What the sandbox's root writes is the owner's,
 * a setuid or setgid bit it sets is the owner's, a chown to any other id
 * fails; files of other users show as the overflow id, with "other"'s
 * rights only.  Its fd, or -1 with errno. */
static int owner_userns(const char *project, bool ro, const struct pisb_ids *ids)
{
	struct pisb_err e = PISB_ERR_INIT;
	unsigned u, g;
	char um[64], gm[64];

	/* checked at create; again here: the owner may have changed since */
	if (pisb_project_bind_owner(project, ro, &u, &g, &e) < 0) {
		errno = EPERM;
		return -1;
	}
	snprintf(um, sizeof(um), "%u %u 1\n", u, (unsigned)ids->uid_base);
	snprintf(gm, sizeof(gm), "%u %u 1\n", g, (unsigned)ids->gid_base);
	return pisb_idmap_userns(um, gm);
}

/* The disk (O_PATH), looked up in the mount namespace we are in (the
 * overlay clones its layers' mounts from there): at its staged path, or
 * where the create's rename put it meanwhile; -1 */
static int open_disk(const struct pisb_boot *b)
{
	int disk = open(b->disk_path, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (disk < 0 && errno == ENOENT && b->disk_path_published)
		disk = open(b->disk_path_published, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return disk;
}

/* The project's own private mount namespace and the disk it is bound into,
 * with the mask sources made; returns the disk's O_PATH fd. */
static int project_disk(const struct pisb_boot *b, int sock)
{
	int disk;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(sock, "a mount namespace for the project");
	disk = open_disk(b);
	if (disk < 0)
		child_fail(sock, "open the disk");
	hidden_sources(disk, sock);
	return disk;
}

/* ---- the project's watcher (project.h, pisb_project_watch_*) ---- */

/* The fd that came with one message on sock (SCM_RIGHTS), or -1. */
static int recv_fd(int sock)
{
	char c;
	int fd;

	return pisb_recv_byte_fd(sock, &c, &fd) == 1 ? fd : -1;
}

/* The watcher: in the project's mount namespace (it outlives the boot
 * child, which leaves it), with the rights of the caller's walk (fsuid:
 * the sandbox's), until the init ends.  ctl: its socket to the boot
 * child, which sends the init's pidfd once there is an init, or closes
 * it (the boot failed).  It is in the sandbox's cgroup (removed at stop)
 * and, as root, out of the OOM killer's reach (the sandbox fills its
 * memory limit, never ends the watcher).  A cover it cannot make ends
 * the sandbox: fail closed. */
static void __attribute__((noreturn)) watch_main(const struct pisb_boot *b, int disk, int top, int ctl)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_project_watch *w;
	int init = -1;

	prctl(PR_SET_NAME, "pisb-watch");
	{
		sigset_t none;   /* the controller's mask: its signals were blocked */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
	}
	if (geteuid() == 0) {
		uid_t fs = (uid_t)setfsuid((uid_t)-1);
		setfsuid(0);
		write_file("/proc/self/oom_score_adj", "-1000");
		setfsuid(fs);
	}
	/* only what it needs: never the controller's socket (the init's
	 * death would not close it) */
	pisb_close_except((const int[]){ disk, top, ctl }, 3);
	/* until the boot child sends the init's pidfd (or fails), then
	 * until the init ends */
	w = pisb_project_watch_new(top, disk, b->project_cfg, &e);
	if (w && pisb_project_watch_serve(w, ctl, &e) == 0) {
		if ((init = recv_fd(ctl)) < 0)
			_exit(0);   /* the boot failed */
		if (pisb_project_watch_serve(w, init, &e) == 0)
			_exit(0);
	}
	fprintf(stderr, "fatal: the project's watcher: %s; the sandbox is ended (its new secrets would show)\n",
		e.msg);
	if (init < 0)
		init = recv_fd(ctl);
	if (init >= 0)
		syscall(SYS_pidfd_send_signal, init, SIGKILL, NULL, 0);
	_exit(1);
}

/* The watcher forked, after the first walk, the project's mount shared
 * (project_share).  Its socket (for watch_init), or -1 when this kernel
 * cannot make locked covers live (the covers of the start stay the only
 * ones: logged). */
static int watch_start(const struct pisb_boot *b, int disk, int sock, pid_t *wpid)
{
	int sp[2], top;
	pid_t pid;

	if (!pisb_project_watch_supported(disk)) {
		fprintf(stderr, "warning: project: this kernel cannot cover secrets made while the sandbox runs (Linux 6.15 or later); they are covered at the next start\n");
		return -1;
	}
	top = openat(disk, "project", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0)
		child_fail(sock, "open the project");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		child_fail(sock, "socketpair");
	pid = fork();
	if (pid < 0)
		child_fail(sock, "fork the project's watcher");
	if (pid == 0) {
		close(sp[0]);
		watch_main(b, disk, top, sp[1]);
	}
	close(sp[1]);
	close(top);
	*wpid = pid;
	return sp[0];
}

/* The project's mount at <disk>/project shared, so that the watcher's
 * covers reach the sandbox's copy of it (a slave: made by a less
 * privileged user namespace).  Before the first covers: they are then
 * shared too, and their copies slaves, not private. */
static void project_share(int disk, int sock)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/self/fd/%d/project", disk);
	if (mount(NULL, p, NULL, MS_SHARED, NULL) < 0)
		child_fail(sock, "share the project's mount");
}

/* The init's pidfd to the watcher (ws from watch_start, wpid its pid),
 * which ends with it; its pid to the controller ("W" + pid, before the
 * "P" + the init's), which ends the sandbox if it ends first. */
static void watch_init(int ws, pid_t wpid, pid_t init, int sock)
{
	char msg[1 + sizeof(wpid)];
	int fd;

	if (ws < 0)
		return;
	msg[0] = 'W';
	memcpy(msg + 1, &wpid, sizeof(wpid));
	pisb_write_all(sock, msg, sizeof(msg));
	fd = (int)syscall(SYS_pidfd_open, init, 0);
	if (fd >= 0) {
		pisb_send_byte_fd(ws, 'p', fd);
		close(fd);
	}
	close(ws);
}

/* Privileged (pisb as root), before the sandbox's user namespace: in a
 * mount namespace of our own, still the host's user namespace, the
 * project idmapped with its owner as the sandbox's root (owner_userns: its
 * new files are the owner's on the host, never host root's) at
 * <disk>/project, read-only for bind-ro, its secrets hidden and its .git
 * read-only.  The sandbox's
 * mount namespace, made from this one by a less privileged user namespace,
 * gets all of these locked: root inside can neither remount them writable
 * nor unmount a mask. */
static int project_prepare(const struct pisb_boot *b, int sock, pid_t *wpid)
{
	struct mount_attr a = { 0 };
	int disk, tree, uns, top, ws;

	disk = project_disk(b, sock);
	if ((uns = owner_userns(b->project, b->project_ro, &b->ids)) < 0)
		child_fail(sock, errno == EPERM
			   ? "project.mode bind: the project is owned by root now (chown it to a user, or use bind-ro or copy)"
			   : "a user namespace for the project's id mapping");
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, b->project, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		child_fail(sock, b->project);
	a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
		     (b->project_ro ? MOUNT_ATTR_RDONLY : 0);
	a.userns_fd = (unsigned)uns;
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
		child_fail(sock, "map the project's ids (idmapped mount)");
	if (syscall(SYS_move_mount, tree, "", disk, "project", MOVE_MOUNT_F_EMPTY_PATH) < 0)
		child_fail(sock, "mount the project");
	close(tree);
	close(uns);
	project_share(disk, sock);
	/* the walk with the sandbox's rights over the files, not root's */
	setgroups(0, NULL);
	setfsgid(b->ids.gid_base);
	setfsuid(b->ids.uid_base);
	top = openat(disk, "project", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0)
		child_fail(sock, "open the project");
	hide_walk(top, disk, b->project_cfg, sock);
	close(top);
	ws = watch_start(b, disk, sock, wpid);   /* it keeps the sandbox's rights */
	setfsuid(0);
	setfsgid(0);
	close(disk);
	return ws;
}

/* Unprivileged (one id: root inside is the user), right after the id maps:
 * in a mount namespace of the sandbox's first user namespace, the project
 * bound at <disk>/project (read-only for bind-ro), its secrets hidden and
 * its .git read-only; then a user namespace below it, mapped the same, for
 * the sandbox: its mount namespace, made from this one, gets these mounts
 * locked as project_prepare's are. */
static int project_nest(const struct pisb_boot *b, int sock, pid_t *wpid)
{
	char dst[64];
	int disk, top, ws;

	disk = project_disk(b, sock);
	snprintf(dst, sizeof(dst), "/proc/self/fd/%d/project", disk);
	if (mount(b->project, dst, NULL, MS_BIND, NULL) < 0)
		child_fail(sock, "bind the project");
	if (b->project_ro) {
		int m = openat(disk, "project", O_PATH | O_NOFOLLOW | O_CLOEXEC);
		snprintf(dst, sizeof(dst), "/proc/self/fd/%d", m);
		if (m < 0 || mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
			child_fail(sock, "bind the project read-only");
		close(m);
	}
	project_share(disk, sock);
	top = openat(disk, "project", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0)
		child_fail(sock, "open the project");
	hide_walk(top, disk, b->project_cfg, sock);
	close(top);
	ws = watch_start(b, disk, sock, wpid);   /* before the user namespace below */
	close(disk);
	if (unshare(CLONE_NEWUSER) < 0 || write_file("/proc/self/setgroups", "deny") < 0 ||
	    write_file("/proc/self/uid_map", "0 0 1\n") < 0 || write_file("/proc/self/gid_map", "0 0 1\n") < 0)
		child_fail(sock, "a user namespace below the project's");
	return ws;
}

/* The overlay root at <disk>/merged.  Called as root inside the user ns;
 * lower and disk are fds opened earlier, in this mount ns, while we still
 * had the caller's uid (which can walk the state directory). */
static void mount_root(const struct pisb_boot *b, int lower, int disk, int etc_mask, int sock)
{
	char opts[512], merged[64];

	snprintf(opts, sizeof(opts),
		 "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d/upper,workdir=/proc/self/fd/%d/work",
		 lower, disk, disk);
	snprintf(merged, sizeof(merged), "/proc/self/fd/%d/merged", disk);
	if (overlay_mount(merged, MS_NOSUID, opts) < 0)
		child_fail(sock, "mount overlay root");
	/* step into the mount (an fd of the mountpoint would be under it) */
	if (fchdir(disk) < 0 || chdir("merged") < 0)
		child_fail(sock, "enter the new root");
	if (b->host_image)
		host_binds(etc_mask, sock);
	if (b->docker) {
		char src[64];
		snprintf(src, sizeof(src), "/proc/self/fd/%d/docker", disk);
		if (mkdir_p("var/lib/docker", 0710) < 0 ||
		    mount(src, "var/lib/docker", NULL, MS_BIND, NULL) < 0)
			child_fail(sock, "bind the docker data root");
		/* dockerd as root keeps its key in /etc/docker: a directory of
		 * the disk over the (empty, masked) one of the view */
		if ((mkdir("var/lib/docker/pisb-etc", 0700) < 0 && errno != EEXIST) ||
		    mount("var/lib/docker/pisb-etc", "etc/docker", NULL, MS_BIND, NULL) < 0)
			child_fail(sock, "bind /etc/docker");
		/* docker's clients look for /var/run/docker.sock */
		if (symlink("/run", "var/run") < 0 && errno != EEXIST)
			child_fail(sock, "symlink /var/run");
	}
	if (b->project) {
		char ws[4096], src[64];
		snprintf(ws, sizeof(ws), ".%s", b->workspace);
		snprintf(src, sizeof(src), "/proc/self/fd/%d/project", disk);
		if (mkdir_p(ws, 0755) < 0)
			child_fail(sock, "mkdir workspace");
		if (mount(src, ws, NULL, MS_BIND | MS_REC, NULL) < 0)
			child_fail(sock, "bind the project at the workspace");
	}
}

/* For the docker daemon (docker: true): the cgroup hierarchies this
 * sandbox is in, mounted in its own cgroup namespace under sys/fs/cgroup
 * (relative to the new root, the cwd) as the host has them: cgroup v1
 * controllers each at its name (name=systemd at systemd), the unified
 * hierarchy at unified (hybrid) or at sys/fs/cgroup itself (v2 only).
 * Best effort: a hierarchy that does not mount is left out (the daemon
 * then runs without it). */
static void docker_cgroups(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[512];
	bool v1 = false, v2 = false;

	if (!f)
		return;
	if (mkdir_p("sys/fs/cgroup", 0755) < 0)
		goto out;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		if (c1[1])
			v1 = true;
		else
			v2 = true;
	}
	if (!v1) {
		if (v2)
			mount("cgroup2", "sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
		goto out;
	}
	if (mount("tmpfs", "sys/fs/cgroup", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") < 0)
		goto out;
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		char dir[300], opts[300];
		const char *ctl;
		if (!c2)
			continue;
		*c2 = '\0';
		ctl = c1 + 1;
		if (!*ctl) {
			snprintf(dir, sizeof(dir), "sys/fs/cgroup/unified");
			if (mkdir(dir, 0755) == 0 || errno == EEXIST)
				mount("cgroup2", dir, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
			continue;
		}
		snprintf(dir, sizeof(dir), "sys/fs/cgroup/%s",
			 pisb_str_starts(ctl, "name=") ? ctl + 5 : ctl);
		snprintf(opts, sizeof(opts), "%s%s", pisb_str_starts(ctl, "name=") ? "none," : "", ctl);
		if (mkdir(dir, 0755) == 0 || errno == EEXIST)
			mount("cgroup", dir, "cgroup", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts);
	}
out:
	fclose(f);
}

static void blank_cmdline(void);
static volatile sig_atomic_t init_got_chld;
static void on_chld(int s) { (void)s; init_got_chld = 1; }

/* pid 1: reap, and obey the controller. */
static void init_loop(int sock)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;) {
		struct pollfd p = { sock, POLLIN, 0 };
		char c;
		int r = poll(&p, 1, 1000);

		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (r < 0 && errno != EINTR)
			_exit(1);
		if (r <= 0)
			continue;
		ssize_t n = read(sock, &c, 1);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			_exit(0); /* controller gone: the sandbox goes with it */
		if (n == 1 && c == 'K') {
			/* from pid 1, -1 means every other process in this pid ns */
			kill(-1, SIGKILL);
			for (int i = 0; i < 100000; i++) {
				pid_t w = waitpid(-1, NULL, 0);
				if (w < 0 && errno == ECHILD)
					break;
			}
			pisb_write_all(sock, "k", 1);
		}
	}
}

/* The init program as a sealed memfd copy of path, to exec from.  Not
 * the file itself: the sandbox sees its pid 1's binary at /proc/1/exe,
 * and where the caller owns bin/ (an unprivileged user's own build), root
 * inside maps to that owner and could chmod the host file through that
 * link (a write is refused while it runs: ETXTBSY).  The copy is the
 * sandbox's own, sealed, and names no host path. */
static int init_copy(const char *path)
{
	_cleanup_close_ int in = open(path, O_RDONLY | O_CLOEXEC);
	int fd, saved;
	struct stat st;
	off_t off = 0;

	if (in < 0 || fstat(in, &st) < 0)
		return -1;
	fd = memfd_create("pisb-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	while (off < st.st_size) {
		ssize_t n = sendfile(fd, in, &off, (size_t)(st.st_size - off));
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			goto fail;
		}
	}
	if (fchmod(fd, 0555) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		goto fail;
	return fd;
fail:
	saved = errno ? errno : EIO;
	close(fd);
	errno = saved;
	return -1;
}

/* Become the init program exe (pisb-init), the controller's socket at fd 3,
 * with an empty environment (the controller's is the host's).  Returns
 * only if it could not; the socket is at fd 3 then too. */
static void exec_init(int sock, int exe)
{
	char *argv[] = { "pisb-init", NULL }, *envp[] = { NULL };
	int x = fcntl(exe, F_DUPFD_CLOEXEC, 4);

	if (x < 0)
		return;
	if (sock == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(sock, 3) < 0) {
		close(x);
		return;
	}
	pisb_close_from(4, x);
	if (pisb_write_all(3, "R", 1) < 0)
		_exit(1);
	/* the binary's fd closes on the exec: nothing of the host stays */
	syscall(SYS_execveat, x, "", argv, envp, AT_EMPTY_PATH);
	close(x);
	prctl(PR_SET_NAME, "pisb-init");
	blank_cmdline();
	if (pisb_write_all(3, "r", 1) < 0)
		_exit(1);
	init_loop(3);
	_exit(0);
}

/* The init is a fork of the controller: blank the inherited command line
 * (it names host paths) so the sandbox sees only "pisb-init". */
static void blank_cmdline(void)
{
	static const char *const init[] = { "pisb-init", NULL };

	pisb_proc_cmdline_set(init);
}

/* In the init, pivoted into the sandbox: "G", the errno of reading the
 * guest's config (4 bytes, 0 read), its length (4 bytes), its bytes.
 * Nothing of the sandbox has run yet; symlinks resolve inside its root. */
static void guest_config_send(int sock, const char *abs)
{
	_cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int err = root < 0 ? errno : pisb_local_guest_read_in(root, abs, PISB_CONFIG_MAX, &b);
	uint32_t len = err ? 0 : (uint32_t)b.len;

	if (pisb_write_all(sock, "G", 1) < 0 || pisb_write_all(sock, &err, sizeof(err)) < 0 ||
	    pisb_write_all(sock, &len, sizeof(len)) < 0 || (len && pisb_write_all(sock, b.s, len) < 0))
		_exit(1);
}

/* The init, pid 1 of the new pid ns, cwd = the new root. */
static void __attribute__((noreturn)) init_main(const struct pisb_boot *b, int sock, int exe,
						bool named)
{
	char ws[4096];

	/* no PDEATHSIG here: our parent leaves at once (the controller adopts
	 * us); the controller's death closes sock, and init_loop exits then */
	mkdir("proc", 0555);
	if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		child_fail(sock, "mount /proc");
	make_dev(b, sock);
	mkdir("tmp", 01777);
	/* memory-backed: bounded, so filling it is an error inside, not a host problem */
	snprintf(ws, sizeof(ws), b->tmp_mib ? "mode=1777,size=%um" : "mode=1777", b->tmp_mib);
	if (mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, ws) < 0)
		child_fail(sock, "mount /tmp");
	mkdir("run", 0755);
	mount("tmpfs", "run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	mkdir("sys", 0555);
	/* sysfs needs the net ns we own; without it /sys just stays empty */
	mount("sysfs", "sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL);
	if (b->docker)
		docker_cgroups();
	mkdir("root", 0700);
	snprintf(ws, sizeof(ws), ".%s", b->workspace);
	if (mkdir_p(ws, 0755) < 0)
		child_fail(sock, "mkdir workspace");
	/* pivot onto the cwd and drop the host's tree */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		child_fail(sock, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		child_fail(sock, "detach the host root");
	if (chdir("/") < 0)
		child_fail(sock, "chdir /");
	/* (named: the child that made the namespaces ahead did both) */
	if (!named && sethostname(b->hostname, strlen(b->hostname)) < 0)
		child_fail(sock, "sethostname");
	if (!named && loopback_up() < 0)
		child_fail(sock, "bring the loopback up");
	if (b->guest_config)
		guest_config_send(sock, b->guest_config);
	/* stdio of /dev/null: the stderr we were given is the controller's
	 * log, a host file that root inside could reopen through
	 * /proc/1/fd/2 and grow without bound */
	{
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null < 0)
			child_fail(sock, "open /dev/null");
		for (int fd = 0; fd < 3; fd++)
			if (dup2(null, fd) < 0)
				child_fail(sock, "stdio of /dev/null");
	}
	if (exe >= 0)
		exec_init(sock, exe);
	pisb_close_from(3, sock);
	prctl(PR_SET_NAME, "pisb-init");
	blank_cmdline();
	if (pisb_write_all(sock, "Rr", 2) < 0)
		_exit(1);
	init_loop(sock);
	_exit(0);
}

/* Tell the controller we are ready for our id maps, and wait for them. */
static void want_maps(int sock)
{
	char c;
	if (pisb_write_all(sock, "U", 1) < 0 || read(sock, &c, 1) != 1 || c != 'M')
		_exit(1);
}

/* ---------- namespaces made ahead (ns.h) ---------- */

#define PREBOOT_NS 5
static const struct { const char *name; int type; } preboot_ns[PREBOOT_NS] = {
	{ "user", CLONE_NEWUSER }, { "mnt", CLONE_NEWNS }, { "net", CLONE_NEWNET },
	{ "ipc", CLONE_NEWIPC }, { "uts", CLONE_NEWUTS },
};

void pisb_preboot_start(struct pisb_preboot *p)
{
	int sp[2];

	p->pid = -1;
	p->sock = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return;
	p->pid = fork();
	if (p->pid == 0) {
		/* "N" once they are made, the hostname set and the loopback
		 * up; "U" once only made; "E" if not; with the init program's
		 * copy (or none).  Then wait for the end of the socket (the
		 * controller's close, or its exit) */
		char c = 'N';
		int rest = 0, exe;
		for (int i = 1; i < PREBOOT_NS; i++)
			rest |= preboot_ns[i].type;
		/* nothing of the controller's: not the create's socket, whose
		 * end it waits for */
		pisb_close_from(3, sp[1]);
		/* with the caller's ids and the host's tree still */
		exe = p->init_path ? init_copy(p->init_path) : -1;
		/* the user namespace first: the others are its, and so ours
		 * to name and to bring up */
		if (unshare(CLONE_NEWUSER) < 0 || unshare(rest) < 0)
			c = 'E';
		else if (!p->hostname || sethostname(p->hostname, strlen(p->hostname)) < 0 ||
			 loopback_up() < 0)
			c = 'U';   /* the init does them, and says why if it fails too */
		if (pisb_send_byte_fd(sp[1], c, exe) == 0) {
			/* the copy is the controller's now */
			if (exe >= 0)
				close(exe);
			while (read(sp[1], &c, 1) < 0 && errno == EINTR)
				;
		}
		_exit(0);
	}
	close(sp[1]);
	if (p->pid < 0) {
		close(sp[0]);
		return;
	}
	p->sock = sp[0];
}

void pisb_preboot_drop(struct pisb_preboot *p)
{
	if (p->sock >= 0)
		close(p->sock);
	/* it would leave on the socket's end; sure and as quick */
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	p->pid = -1;
	p->sock = -1;
}

/* The namespaces the child made, in ns (-1s: none, the boot makes its
 * own: the child failed, or they cannot be opened); *named when it also
 * set their hostname and loopback; *exe its copy of the init program, or
 * -1. */
static void preboot_take(struct pisb_preboot *p, int ns[PREBOOT_NS], bool *named, int *exe)
{
	struct pollfd pf = { p ? p->sock : -1, POLLIN, 0 };
	char c = 0, path[64];

	*named = false;
	*exe = -1;
	for (int i = 0; i < PREBOOT_NS; i++)
		ns[i] = -1;
	if (!p || p->pid <= 0 || poll(&pf, 1, 5000) != 1 || pisb_recv_byte_fd(p->sock, &c, exe) != 1 ||
	    (c != 'U' && c != 'N'))
		return;
	for (int i = 0; i < PREBOOT_NS; i++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)p->pid, preboot_ns[i].name);
		if ((ns[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			while (i-- > 0) {
				close(ns[i]);
				ns[i] = -1;
			}
			return;
		}
	}
	*named = c == 'N';
}

/* The first child.  It enters a new user ns (the controller writes the
 * id maps), then a mount ns owned by it, and builds the root filesystem
 * there while it still has the caller's own uid (the owner of the state
 * directory: it can walk to the disk).  Only then does it become root
 * inside, fork the init into the new pid ns, and leave; the controller, a
 * subreaper, inherits the init. */
static void __attribute__((noreturn)) boot_child(const struct pisb_boot *b, int sock,
						  const int ahead[PREBOOT_NS], bool named, int exe)
{
	const int rest = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
			 CLONE_NEWUTS | CLONE_NEWCGROUP;
	bool joined = ahead[0] >= 0;
	pid_t init, wpid = 0;
	int lower, disk, etc_mask, go[2], ws = -1;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (b->log_fd >= 0)
		dup2(b->log_fd, 2);
	/* the init program, opened while we still have the caller's ids and
	 * the host's tree; exec'ed from the fd once the sandbox is built */
	if (exe < 0 && b->init_path)
		exe = init_copy(b->init_path);
	if (b->init_path && exe < 0)
		fprintf(stderr, "warning: copy '%s': %s; the init is a fork of the controller\n",
			b->init_path, strerror(errno));
	/* Into the sandbox's cgroups first, so that the init and all it forks
	 * are inside.  We move ourselves, with the caller's credentials (the
	 * user namespace is not made yet, so the cgroup files are still ours
	 * to write): just forked, we have one thread, so on cgroup v1 that is
	 * "0" written to tasks, which does not wait for the RCU grace period
	 * (10-20 ms) that the controller writing our pid to cgroup.procs did
	 * (or to tasks: only a thread moving itself skips it). */
	for (int i = 0; i < 16 && b->cgroup_dirfds[i] >= 0; i++)
		if (pisb_cgroup_enter(b->cgroup_dirfds[i]) < 0)
			child_fail(sock, "move the sandbox into its cgroup");
	if (b->project && b->ids.count > 1)
		ws = project_prepare(b, sock, &wpid);
	if (joined && setns(ahead[0], CLONE_NEWUSER) < 0)
		child_fail(sock, "join the user namespace made ahead");
	if (!joined && unshare(CLONE_NEWUSER) < 0)
		child_fail(sock, "unshare user namespace (are user namespaces allowed?)");
	want_maps(sock);
	if (b->project && b->ids.count == 1)
		ws = project_nest(b, sock, &wpid);
	/* the cgroup namespace last (below): its root is the cgroup we are
	 * in when we make it, the sandbox's; the pid namespace's first
	 * process is the init (it cannot be made ahead: a pid namespace
	 * without one cannot be joined) */
	if (joined) {
		for (int i = 1; i < PREBOOT_NS; i++)
			if (setns(ahead[i], preboot_ns[i].type) < 0)
				child_fail(sock, "join the namespaces made ahead");
		if (unshare(CLONE_NEWPID) < 0)
			child_fail(sock, "unshare the pid namespace");
		for (int i = 0; i < PREBOOT_NS; i++)
			close(ahead[i]);
	} else if (unshare(rest & ~CLONE_NEWCGROUP) < 0) {
		child_fail(sock, "unshare namespaces");
	}
	/* private; but a bound project's mount stays a slave of the
	 * project's (ws: the watcher's covers come that way; all else of
	 * that namespace is private) */
	if (mount(NULL, "/", NULL, MS_REC | (ws >= 0 ? MS_SLAVE : MS_PRIVATE), NULL) < 0)
		child_fail(sock, "make / private");
	lower = open(b->lower_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	disk = open_disk(b);
	if (lower < 0 || disk < 0)
		child_fail(sock, "open the image or the disk");
	/* with the caller's ids still (the state directory is 0700) */
	etc_mask = b->etc_mask ? open(b->etc_mask, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
	if (mkdirat(disk, "merged", 0755) < 0 && errno != EEXIST)
		child_fail(sock, "mkdir merged");
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		child_fail(sock, "become root inside");
	if (b->ids.count > 1)
		setgroups(0, NULL);
	mount_root(b, lower, disk, etc_mask, sock);
	close(lower);
	close(disk);
	if (etc_mask >= 0)
		close(etc_mask);
	if (unshare(CLONE_NEWCGROUP) < 0)
		child_fail(sock, "unshare the cgroup namespace");
	/* The init and we share sock: it must not speak before our "P" + pid
	 * is on it, or the controller would read the two interleaved. */
	if (pipe2(go, O_CLOEXEC) < 0)
		child_fail(sock, "pipe");
	init = fork();
	if (init < 0)
		child_fail(sock, "fork init");
	if (init == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		close(go[0]);
		init_main(b, sock, exe, named && joined);
	}
	watch_init(ws, wpid, init, sock);
	{
		char msg[1 + sizeof(init)];
		msg[0] = 'P';
		memcpy(msg + 1, &init, sizeof(init));
		pisb_write_all(sock, msg, sizeof(msg));
	}
	pisb_write_all(go[1], "g", 1);
	_exit(0);
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = pisb_write_all(fd, s, strlen(s));
	close(fd);
	return r < 0 ? -1 : 0;
}

/* guest_config_send's message, from the init's socket (an "E" is left
 * for read_msg); -1 when the init died or spoke out of turn. */
static int guest_config_recv(int fd, const struct pisb_boot *b)
{
	struct pollfd p = { fd, POLLIN, 0 };
	uint32_t len;
	int err;
	char c;

	if (poll(&p, 1, 30000) <= 0 || recv(fd, &c, 1, MSG_PEEK) != 1)
		return -1;
	if (c != 'G')
		return 0;   /* "E": the init failed before it could read */
	if (read(fd, &c, 1) != 1 || pisb_read_all(fd, &err, sizeof(err)) != sizeof(err) ||
	    pisb_read_all(fd, &len, sizeof(len)) != sizeof(len) || len > PISB_CONFIG_MAX)
		return -1;
	*b->guest_config_err = err;
	pisb_buf_release(b->guest_config_out);
	if (len) {
		pisb_buf_grow(b->guest_config_out, len);
		if (pisb_read_all(fd, b->guest_config_out->s, len) != (ssize_t)len)
			return -1;
		b->guest_config_out->len = len;
		b->guest_config_out->s[len] = '\0';
	}
	return 0;
}

static int read_msg(int fd, char *buf, size_t n, int timeout_ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	ssize_t r;

	if (poll(&p, 1, timeout_ms) <= 0)
		return -1;
	r = read(fd, buf, n - 1);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	return (int)r;
}

/* Ours of the namespaces made ahead and of its copy of the init program,
 * and the socket that holds their maker: it leaves (the caller reaps it,
 * pisb_preboot_drop). */
static void close_ahead(const struct pisb_boot *b, int ahead[PREBOOT_NS], int exe)
{
	for (int i = 0; i < PREBOOT_NS; i++)
		if (ahead[i] >= 0)
			close(ahead[i]);
	if (exe >= 0)
		close(exe);
	if (b->pre && b->pre->sock >= 0) {
		close(b->pre->sock);
		b->pre->sock = -1;
	}
}

int pisb_sandbox_boot(const struct pisb_boot *b, pid_t *init, int *ctl,
		      struct pisb_err *e)
{
	int sp[2], ahead[PREBOOT_NS], exe;
	char path[64], map[128], reply[1024] = "";
	pid_t child, ipid = -1;
	bool named;

	preboot_take(b->pre, ahead, &named, &exe);
	if (ahead[0] >= 0)
		pisb_trace("boot: namespaces made ahead");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		close_ahead(b, ahead, exe);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "socketpair");
	}
	/* the init will be our grandchild: adopt it when its parent leaves */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	child = fork();
	if (child < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
		close_ahead(b, ahead, exe);
		goto fail_sp;
	}
	if (child == 0) {
		close(sp[0]);
		/* or the child that made them would wait for us to leave */
		if (b->pre && b->pre->sock >= 0)
			close(b->pre->sock);
		boot_child(b, sp[1], ahead, named, exe);
	}
	close(sp[1]);
	sp[1] = -1;
	/* held by the boot's child now: their maker may go */
	close_ahead(b, ahead, exe);
	pisb_trace("boot: forked");
	if (read_msg(sp[0], reply, sizeof(reply), 30000) < 0 || reply[0] != 'U') {
		if (reply[0] == 'E')
			pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: %s (see 'pisb doctor')", reply + 1);
		else
			pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: its first process died (see 'pisb doctor')");
		goto fail_child;
	}
	/* id maps: written from outside, as only a process outside may */
	if (b->ids.count == 1) {
		snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)child);
		write_file(path, "deny");
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)child);
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)b->ids.uid_base, b->ids.count);
	if (write_file(path, map) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "write uid_map (see 'pisb doctor')");
		goto fail_child;
	}
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)child);
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)b->ids.gid_base, b->ids.count);
	if (write_file(path, map) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "write gid_map (see 'pisb doctor')");
		goto fail_child;
	}
	if (pisb_write_all(sp[0], "M", 1) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "signal the sandbox");
		goto fail_child;
	}
	pisb_trace("boot: user namespace and id maps");
	/* "W" + pid of the project's watcher (if there is one), "P" + pid
	 * of the init, then "R" from the init once it is ready */
	if (b->watch_pid)
		*b->watch_pid = 0;
	{
		struct pollfd p = { sp[0], POLLIN, 0 };
		char c = 0;
		pid_t w;
		if (poll(&p, 1, 30000) > 0 && read(sp[0], &c, 1) == 1 && c == 'W' &&
		    pisb_read_all(sp[0], &w, sizeof(w)) == sizeof(w)) {
			if (b->watch_pid)
				*b->watch_pid = w;
			c = 0;
			if (poll(&p, 1, 30000) <= 0 || read(sp[0], &c, 1) != 1)
				c = 0;
		}
		if (c != 'P' ||
		    pisb_read_all(sp[0], &ipid, sizeof(ipid)) != sizeof(ipid)) {
			if (c == 'E' && read_msg(sp[0], reply, sizeof(reply), 1000) > 0)
				pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: %s (see 'pisb doctor')", reply);
			else
				pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: no init was started (see 'pisb doctor')");
			goto fail_child;
		}
	}
	pisb_trace("boot: namespaces, root mounted, init forked");
	waitpid(child, NULL, 0);
	child = -1;
	if (b->guest_config && guest_config_recv(sp[0], b) < 0) {
		pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: the init died while starting");
		kill(ipid, SIGKILL);
		waitpid(ipid, NULL, 0);
		goto fail_sp;
	}
	/* one byte: the init's "r" may follow its "R" (ns.h); an "E" is
	 * followed by why */
	if (read_msg(sp[0], reply, 2, 30000) < 0 ||
	    (reply[0] == 'E' && read_msg(sp[0], reply + 1, sizeof(reply) - 1, 1000) < 0) ||
	    reply[0] != 'R') {
		pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: %s (see 'pisb doctor')",
			     reply[0] == 'E' ? reply + 1 : "the init died while starting");
		kill(ipid, SIGKILL);
		waitpid(ipid, NULL, 0);
		goto fail_sp;
	}
	pisb_trace("boot: init ready");
	*init = ipid;
	*ctl = sp[0];
	return 0;
fail_child:
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
fail_sp:
	close(sp[0]);
	if (sp[1] >= 0)
		close(sp[1]);
	return -1;
}

int pisb_sandbox_init_named(int ctl, int timeout_ms)
{
	struct pollfd p = { ctl, POLLIN, 0 };
	char c;

	if (poll(&p, 1, timeout_ms) <= 0 || read(ctl, &c, 1) != 1 || c != 'r')
		return -1;
	return 0;
}

int pisb_sandbox_killall(int ctl, int timeout_ms, struct pisb_err *e)
{
	struct pollfd p = { ctl, POLLIN, 0 };
	char c;

	if (pisb_write_all(ctl, "K", 1) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "ask the sandbox init to kill");
	if (poll(&p, 1, timeout_ms) <= 0 || read(ctl, &c, 1) != 1 || c != 'k')
		return pisb_err_set(e, PISB_EXIT_TIMEOUT, "sandbox processes did not end in time");
	return 0;
}

int pisb_sandbox_enter(pid_t init, unsigned long long start, struct pisb_err *e)
{
	return pisb_sandbox_enter_ns(init, start, PISB_NS_ALL, e);
}

int pisb_sandbox_enter_ns(pid_t init, unsigned long long start, unsigned which,
			  struct pisb_err *e)
{
	/* user first: it gives us the capabilities to join the others */
	static const struct { const char *name; int type; unsigned bit; } nss[] = {
		{ "user", CLONE_NEWUSER, PISB_NS_USER }, { "ipc", CLONE_NEWIPC, PISB_NS_IPC },
		{ "uts", CLONE_NEWUTS, PISB_NS_UTS }, { "net", CLONE_NEWNET, PISB_NS_NET },
		{ "pid", CLONE_NEWPID, PISB_NS_PID }, { "cgroup", CLONE_NEWCGROUP, PISB_NS_CGROUP },
		{ "mnt", CLONE_NEWNS, PISB_NS_MNT },
	};
	int fds[7], rootfd, flags = 0;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/root", (int)init);
	rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "the sandbox is not running (init %d)", (int)init);
	for (int i = 0; i < 7; i++)
		if (which & nss[i].bit)
			flags |= nss[i].type;
	/* All of them at once where the kernel can (Linux 5.8: setns on a
	 * pidfd of the init): one new set of namespaces instead of one per
	 * namespace, and none of the seven /proc lookups; all or nothing.
	 * Before 5.8 (EINVAL, or no pidfd) one by one, below. */
	{
		_cleanup_close_ int pfd = pisb_pidfd_open(init);
		if (pfd >= 0) {
			/* the pidfd pins the process: make sure it is the init */
			if (pisb_proc_start(init) != start) {
				close(rootfd);
				return pisb_err_set(e, PISB_EXIT_BACKEND, "the sandbox is not running (its init is gone)");
			}
			/* our own user namespace (root's sandbox seen from
			 * inside it) cannot be joined: EINVAL, harmless */
			if (setns(pfd, flags) == 0 ||
			    (errno == EINVAL && (flags & CLONE_NEWUSER) &&
			     setns(pfd, flags & ~CLONE_NEWUSER) == 0))
				goto root;
		}
	}
	for (int i = 0; i < 7; i++) {
		if (!(which & nss[i].bit)) {
			fds[i] = -1;
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)init, nss[i].name);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			pisb_err_sys(e, PISB_EXIT_BACKEND, "open %s", path);
			while (i-- > 0)
				if (fds[i] >= 0)
					close(fds[i]);
			close(rootfd);
			return -1;
		}
	}
	/* the fds pin the namespaces: now make sure they were the init's */
	if (pisb_proc_start(init) != start) {
		for (int i = 0; i < 7; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		close(rootfd);
		return pisb_err_set(e, PISB_EXIT_BACKEND, "the sandbox is not running (its init is gone)");
	}
	for (int i = 0; i < 7; i++) {
		if (fds[i] < 0)
			continue;
		/* joining our own user ns (root) is EINVAL: harmless */
		if (setns(fds[i], nss[i].type) < 0 && !(i == 0 && errno == EINVAL)) {
			pisb_err_sys(e, PISB_EXIT_BACKEND, "enter the sandbox %s namespace", nss[i].name);
			for (int k = i; k < 7; k++)
				if (fds[k] >= 0)
					close(fds[k]);
			close(rootfd);
			return -1;
		}
		close(fds[i]);
	}
root:
	if (fchdir(rootfd) < 0 || chroot(".") < 0 || chdir("/") < 0) {
		close(rootfd);
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "enter the sandbox root");
	}
	close(rootfd);
	return 0;
}

int pisb_sandbox_sethostname(pid_t init, unsigned long long start, const char *name,
			     struct pisb_err *e)
{
	int p[2], status;
	char why[256] = "";
	pid_t pid = pisb_fork_piped(p, e);

	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct pisb_err ce = PISB_ERR_INIT;
		close(p[0]);
		if (pisb_sandbox_enter_ns(init, start, PISB_NS_USER | PISB_NS_UTS, &ce) < 0) {
			pisb_write_all(p[1], ce.msg, strlen(ce.msg));
			_exit(1);
		}
		if (sethostname(name, strlen(name)) < 0) {
			snprintf(why, sizeof(why), "sethostname: %s", strerror(errno));
			pisb_write_all(p[1], why, strlen(why));
			_exit(1);
		}
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], why, sizeof(why) - 1) < 0)
		why[0] = '\0';
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "wait for the hostname's child");
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return pisb_err_set(e, PISB_EXIT_FAIL, "set the hostname inside: %s", why[0] ? why : "its child died");
	return 0;
}

int pisb_sandbox_become_root(bool privileged, struct pisb_err *e)
{
	if (privileged)
		setgroups(0, NULL);
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "become root inside the sandbox");
	return 0;
}

int pisb_host_skeleton(int dirfd, const char *path, const struct pisb_ids *ids,
		       struct pisb_err *e)
{
	static const char *const dirs[] = {
		"usr", "etc", "var", "var/tmp", "var/lib", "var/cache", "var/log", "opt",
		"root", "home", "srv", "mnt", "media", "run", "tmp", "proc", "dev",
		"sys", "usr/local", NULL,
	};
	static const char *const links[] = {
		"bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL,
	};
	_cleanup_close_ int fd = -1;
	bool root = geteuid() == 0;

	if (pisb_mkdirs_at(dirfd, path, 0755, e) < 0)
		return -1;
	fd = openat(dirfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", path);
	/* made once, then only looked at: each boot of a sandbox checks it,
	 * and a chmod or chown of what is already right would still write
	 * its inode (ctime) to the journal that the create's fsyncs wait for */
	for (int i = 0; dirs[i]; i++) {
		mode_t m = !strcmp(dirs[i], "tmp") || !strcmp(dirs[i], "var/tmp") ? 01777 :
			   !strcmp(dirs[i], "root") ? 0700 : 0755;
		struct stat sb;
		if (fstatat(fd, dirs[i], &sb, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT || (mkdirat(fd, dirs[i], m) < 0 && errno != EEXIST) ||
			    fstatat(fd, dirs[i], &sb, AT_SYMLINK_NOFOLLOW) < 0)
				return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s/%s'", path, dirs[i]);
		}
		if (!S_ISDIR(sb.st_mode)) {
			errno = ENOTDIR;
			return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s/%s'", path, dirs[i]);
		}
		if ((sb.st_mode & 07777) != m)
			fchmodat(fd, dirs[i], m, 0);
		if (root && (sb.st_uid != ids->uid_base || sb.st_gid != ids->gid_base) &&
		    fchownat(fd, dirs[i], ids->uid_base, ids->gid_base, AT_SYMLINK_NOFOLLOW) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "chown '%s/%s'", path, dirs[i]);
	}
	for (int i = 0; links[i]; i++) {
		char target[256], host[64];
		ssize_t n;
		snprintf(host, sizeof(host), "/%s", links[i]);
		n = readlink(host, target, sizeof(target) - 1);
		if (n <= 0)
			continue; /* a real directory (bound at boot) or absent */
		target[n] = '\0';
		if (symlinkat(target, fd, links[i]) < 0 && errno != EEXIST)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "symlink '%s/%s'", path, links[i]);
	}
	if (root) {
		struct stat sb;
		if (fstat(fd, &sb) < 0 ||
		    ((sb.st_uid != ids->uid_base || sb.st_gid != ids->gid_base) &&
		     fchownat(dirfd, path, ids->uid_base, ids->gid_base, AT_SYMLINK_NOFOLLOW) < 0))
			return pisb_err_sys(e, PISB_EXIT_FAIL, "chown '%s'", path);
	}
	return 0;
}
