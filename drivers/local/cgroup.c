#include "cgroup.h"
#include "err.h"
#include "proc.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define CG_ROOT "/sys/fs/cgroup"
#define CGROUP2_MAGIC 0x63677270

int pisb_cgroup_version(void)
{
	struct statfs sf;

	if (statfs(CG_ROOT, &sf) < 0)
		return 0;
	if ((unsigned long)sf.f_type == CGROUP2_MAGIC)
		return 2;
	return access(CG_ROOT "/memory", F_OK) == 0 ? 1 : 0;
}

static int put(int dirfd, const char *file, const char *val)
{
	_cleanup_close_ int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	return pisb_write_all(fd, val, strlen(val)) < 0 ? -1 : 0;
}

static long long get(int dirfd, const char *file)
{
	char buf[64];
	_cleanup_close_ int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = pisb_read_all(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (!strncmp(buf, "max", 3))
		return -2;
	return strtoll(buf, NULL, 10);
}

static int make(const char *ctrl, const char *rel)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), CG_ROOT "%s%s/pisb", ctrl[0] ? "/" : "", ctrl);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -1;
	snprintf(path, sizeof(path), CG_ROOT "%s%s/%s", ctrl[0] ? "/" : "", ctrl, rel);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -1;
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd;
}

int pisb_cgroup_create(struct pisb_cgroup *cg, const char *rel, int cpus,
		       long long mem_bytes, int pids, bool required,
		       struct pisb_err *e)
{
	char v[64];
	int n = 0;

	memset(cg, 0, sizeof(*cg));
	for (int i = 0; i <= PISB_CG_MAX; i++)
		cg->dirfds[i] = -1;
	snprintf(cg->rel, sizeof(cg->rel), "%s", rel);
	cg->version = pisb_cgroup_version();
	if (cg->version == 2) {
		int fd = make("", rel);
		if (fd < 0)
			goto unenforced;
		/* enable the controllers for our children */
		{
			_cleanup_close_ int pfd = open(CG_ROOT "/pisb", O_PATH | O_DIRECTORY | O_CLOEXEC);
			_cleanup_close_ int rfd = open(CG_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
			put(rfd, "cgroup.subtree_control", "+memory +pids +cpu");
			put(pfd, "cgroup.subtree_control", "+memory +pids +cpu");
		}
		cg->dirfds[n++] = fd;
		if (mem_bytes > 0) {
			snprintf(v, sizeof(v), "%lld", mem_bytes);
			cg->mem = put(fd, "memory.max", v) == 0 && get(fd, "memory.max") == mem_bytes;
			put(fd, "memory.swap.max", "0");
		}
		if (pids > 0) {
			snprintf(v, sizeof(v), "%d", pids);
			cg->pids = put(fd, "pids.max", v) == 0 && get(fd, "pids.max") == pids;
		}
		if (cpus > 0) {
			snprintf(v, sizeof(v), "%d 100000", cpus * 100000);
			cg->cpu = put(fd, "cpu.max", v) == 0 && get(fd, "cpu.max") == (long long)cpus * 100000;
		}
	} else if (cg->version == 1) {
		int fd;
		if (mem_bytes > 0 && (fd = make("memory", rel)) >= 0) {
			cg->dirfds[n++] = fd;
			snprintf(v, sizeof(v), "%lld", mem_bytes);
			cg->mem = put(fd, "memory.limit_in_bytes", v) == 0 &&
				  get(fd, "memory.limit_in_bytes") == mem_bytes;
			put(fd, "memory.memsw.limit_in_bytes", v); /* no swap around it */
		}
		if (pids > 0 && (fd = make("pids", rel)) >= 0) {
			cg->dirfds[n++] = fd;
			snprintf(v, sizeof(v), "%d", pids);
			cg->pids = put(fd, "pids.max", v) == 0 && get(fd, "pids.max") == pids;
		}
		if (cpus > 0 && (fd = make("cpu", rel)) >= 0) {
			cg->dirfds[n++] = fd;
			put(fd, "cpu.cfs_period_us", "100000");
			snprintf(v, sizeof(v), "%d", cpus * 100000);
			cg->cpu = put(fd, "cpu.cfs_quota_us", v) == 0 &&
				  get(fd, "cpu.cfs_quota_us") == (long long)cpus * 100000;
		}
	}
unenforced:
	if ((mem_bytes > 0 && !cg->mem) || (pids > 0 && !cg->pids) || (cpus > 0 && !cg->cpu)) {
		snprintf(cg->note, sizeof(cg->note),
			 "%s%s%snot enforced: cannot create or write cgroup v%d limits under %s as uid %u (run as root or delegate a cgroup; see 'pisb doctor')",
			 mem_bytes > 0 && !cg->mem ? "memory " : "",
			 cpus > 0 && !cg->cpu ? "cpus " : "",
			 pids > 0 && !cg->pids ? "pids " : "",
			 cg->version, CG_ROOT, (unsigned)geteuid());
		if (required && ((mem_bytes > 0 && !cg->mem) || (cpus > 0 && !cg->cpu))) {
			pisb_cgroup_close(cg);
			pisb_cgroup_remove(rel);
			return pisb_err_set(e, PISB_EXIT_FAIL, "resources: %s", cg->note);
		}
	}
	return 0;
}

void pisb_cgroup_close(struct pisb_cgroup *cg)
{
	for (int i = 0; i <= PISB_CG_MAX; i++) {
		if (cg->dirfds[i] >= 0)
			close(cg->dirfds[i]);
		cg->dirfds[i] = -1;
	}
}

/* the hierarchies pisb makes its cgroups in: the limits' three, then the
 * ones only a delegated sandbox (docker: true) has a cgroup in */
static const char *const v1_ctrls[] = { "memory", "pids", "cpu", "cpuset", "cpuacct",
	"devices", "freezer", "blkio", "net_cls", "net_prio", "perf_event", "hugetlb", "rdma",
	"misc", "systemd", NULL };
#define V1_LIMITS 3

/* fd (O_PATH) and its file f owned by uid:gid; f NULL: fd itself */
static int own(int fd, const char *f, unsigned uid, unsigned gid)
{
	return fchownat(fd, f ? f : "", (uid_t)uid, (gid_t)gid, f ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH);
}

/* cpuset.cpus and cpuset.mems of a new cpuset cgroup: its parent's (a
 * v1 cpuset cgroup takes no task until both are set) */
static void cpuset_inherit(const char *dir)
{
	static const char *const f[] = { "cpuset.cpus", "cpuset.mems", NULL };
	for (int i = 0; f[i]; i++) {
		_cleanup_free_ char *pp = xasprintf("%s/../%s", dir, f[i]), *cp = xasprintf("%s/%s", dir, f[i]);
		_cleanup_close_ int in = open(pp, O_RDONLY | O_CLOEXEC), out = -1;
		char buf[256];
		ssize_t n = in >= 0 ? pisb_read_all(in, buf, sizeof(buf) - 1) : -1;
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* only when unset: a set one may have tasks below it */
		{
			_cleanup_close_ int cur = open(cp, O_RDONLY | O_CLOEXEC);
			char c2[8];
			if (cur >= 0 && pisb_read_all(cur, c2, sizeof(c2)) > 1)
				continue;
		}
		out = open(cp, O_WRONLY | O_CLOEXEC);
		if (out >= 0)
			pisb_write_all(out, buf, (size_t)n);
	}
}

int pisb_cgroup_delegate(struct pisb_cgroup *cg, unsigned uid, unsigned gid, struct pisb_err *e)
{
	int n = 0;

	while (n <= PISB_CG_MAX && cg->dirfds[n] >= 0)
		n++;
	if (cg->version == 2) {
		static const char *const f[] = { "cgroup.procs", "cgroup.threads", "cgroup.subtree_control", NULL };
		if (n == 0)
			return pisb_err_set(e, PISB_EXIT_FAIL, "no cgroup of its own to hand over");
		if (own(cg->dirfds[0], NULL, uid, gid) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "chown the sandbox's cgroup");
		for (int i = 0; f[i]; i++)
			if (own(cg->dirfds[0], f[i], uid, gid) < 0 && errno != ENOENT)
				return pisb_err_sys(e, PISB_EXIT_FAIL, "chown the sandbox's cgroup's %s", f[i]);
		return 0;
	}
	if (cg->version != 1)
		return pisb_err_set(e, PISB_EXIT_FAIL, "no usable cgroup hierarchy");
	for (int i = V1_LIMITS; v1_ctrls[i]; i++) {
		char path[1024], top[256];
		struct statfs sf;
		int fd;
		snprintf(top, sizeof(top), CG_ROOT "/%s", v1_ctrls[i]);
		if (statfs(top, &sf) < 0 || (unsigned long)sf.f_type != 0x27e0eb /* CGROUP_SUPER_MAGIC */)
			continue;
		if (n > PISB_CG_MAX)
			return pisb_err_set(e, PISB_EXIT_FAIL, "too many cgroup hierarchies");
		snprintf(path, sizeof(path), "%s/pisb", top);
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s'", path);
		if (!strcmp(v1_ctrls[i], "cpuset"))
			cpuset_inherit(path);
		snprintf(path, sizeof(path), "%s/%s", top, cg->rel);
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s'", path);
		if (!strcmp(v1_ctrls[i], "cpuset"))
			cpuset_inherit(path);
		if ((fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", path);
		cg->dirfds[n++] = fd;
	}
	/* the limits' hierarchies too (pisb_cgroup_create made them) */
	for (int i = 0; i < n; i++)
		if (own(cg->dirfds[i], NULL, uid, gid) < 0 || own(cg->dirfds[i], "cgroup.procs", uid, gid) < 0 ||
		    own(cg->dirfds[i], "tasks", uid, gid) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "chown the sandbox's cgroup '%s'", cg->rel);
	cg->delegated = true;
	return 0;
}

/* SIGKILL every process listed in dir/cgroup.procs (only with kill) but
 * ourselves (we move out instead); how many were killed. */
static int kill_procs(const char *dir, bool kill_them)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroup.procs", dir);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int n = 0;

	if (fd < 0 || pisb_read_fd(fd, &b, 4 << 20) < 0 || !b.s)
		return 0;
	for (char *s = b.s; *s; ) {
		char *end;
		long pid = strtol(s, &end, 10);
		if (end == s)
			break;
		if (pid == getpid()) {
			/* we are in it (the controller stays out: the boot
			 * child moves itself in; kept for any caller that
			 * joined): move to the hierarchy's root to
			 * let the cgroup go (pisb/NAME.GEN: two levels up) */
			_cleanup_free_ char *root = xasprintf("%s/../../cgroup.procs", dir);
			_cleanup_close_ int rfd = open(root, O_WRONLY | O_CLOEXEC);
			char me[32];
			snprintf(me, sizeof(me), "%d", (int)pid);
			if (rfd >= 0)
				pisb_write_all(rfd, me, strlen(me));
		} else if (pid > 1 && kill_them) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
		s = end + strspn(end, "\n");
	}
	return n;
}

static int remove_dir(const char *dir, int64_t deadline);

/* a delegated sandbox's own cgroups below dir */
static void remove_children(const char *dir, int64_t deadline)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			_cleanup_free_ char *sub = xasprintf("%s/%s", dir, de->d_name);
			remove_dir(sub, deadline);
		}
	if (d)
		closedir(d);
}

/* rmdir dir; while it is busy (cgroups below it, processes still
 * exiting or left behind), remove those, kill what is in it and retry
 * until the deadline. */
static int remove_dir(const char *dir, int64_t deadline)
{
	/* a v1 cgroup stays busy for about a millisecond after its last
	 * process was reaped: retry soon, then back off to 10 ms.  Kill what
	 * is in it only after 100 ms: a process that joined from outside (an
	 * attached pisb exec whose command was just killed) first reports
	 * that and leaves by itself; the sandbox's own are dead already */
	long wait_us = 500;
	int64_t kill_at = pisb_mono_ms() + 100;

	for (;;) {
		/* rmdir first: a hierarchy the sandbox is not in (most of
		 * cgroup v1's fifteen) costs one call, not a directory read */
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY || pisb_mono_ms() > deadline)
			return -1;
		/* busy: cgroups below it (they go first), or processes */
		remove_children(dir, deadline);
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		kill_procs(dir, pisb_mono_ms() >= kill_at);
		struct timespec ts = { 0, wait_us * 1000 };
		nanosleep(&ts, NULL);
		if (wait_us < 10000)
			wait_us = wait_us * 2 > 10000 ? 10000 : wait_us * 2;
	}
}

int pisb_cgroup_remove(const char *rel)
{
	/* a delegated sandbox may hold a tree of its containers' cgroups whose
	 * processes die only now: 10 s for all of it (3 s ran out under load) */
	int64_t deadline = pisb_mono_ms() + 10000;
	char path[512];
	int ret = 0, en = 0;

	if (!rel || !*rel)
		return 0;
	/* only pisb's own: never a path that climbs out of pisb/ */
	if (!pisb_str_starts(rel, "pisb/") || strstr(rel, "..") || strchr(rel + 5, '/')) {
		errno = EINVAL;
		return -1;
	}
	if (pisb_cgroup_version() == 2) {
		snprintf(path, sizeof(path), CG_ROOT "/%s", rel);
		return remove_dir(path, deadline);
	}
	for (int i = 0; v1_ctrls[i]; i++) {
		snprintf(path, sizeof(path), CG_ROOT "/%s/%s", v1_ctrls[i], rel);
		if (remove_dir(path, deadline) < 0) {
			en = errno;
			ret = -1;
		}
	}
	errno = en;
	return ret;
}

void pisb_cgroup_sweep(const char *name, const char *keep, int min_age_s,
		       struct pisb_strv *removed)
{
	int ver = pisb_cgroup_version();
	size_t nl = name ? strlen(name) : 0;
	time_t now = time(NULL);

	for (int i = 0; ver == 2 ? i < 1 : v1_ctrls[i] != NULL; i++) {
		_cleanup_free_ char *base = ver == 2 ? xstrdup(CG_ROOT "/pisb")
						     : xasprintf(CG_ROOT "/%s/pisb", v1_ctrls[i]);
		DIR *d = opendir(base);
		struct dirent *de;

		if (!d)
			continue;
		while ((de = readdir(d))) {
			_cleanup_free_ char *p = NULL, *rel = NULL;
			const char *dot = strrchr(de->d_name, '.');
			struct stat sb;

			/* NAME.GEN: a sandbox name, a dot, 8 hex digits */
			if (!dot || dot == de->d_name || strlen(dot + 1) != 8 ||
			    strspn(dot + 1, "0123456789abcdef") != 8)
				continue;
			if (name && ((size_t)(dot - de->d_name) != nl || strncmp(de->d_name, name, nl)))
				continue;
			rel = xasprintf("pisb/%s", de->d_name);
			if (keep && !strcmp(rel, keep))
				continue;
			p = xasprintf("%s/%s", base, de->d_name);
			if (stat(p, &sb) < 0 || now - sb.st_mtime < min_age_s)
				continue;
			/* never kills: only an empty cgroup can be removed, so a
			 * sandbox that runs (from any state dir) keeps its own */
			if (rmdir(p) == 0 && removed && !pisb_strv_has(removed, rel))
				pisb_strv_push(removed, rel);
		}
		closedir(d);
	}
}

/* Whether the calling process has one thread (field 20 of /proc/self/stat).
 * False when that cannot be read, so that the caller takes the path that
 * moves every thread. */
static bool alone(void)
{
	unsigned long long threads;

	return pisb_proc_stat(0, 20, 1, &threads) == 0 && threads == 1;
}

/* Move the calling process into the cgroup dir at/dir.  cgroup.procs moves
 * a whole thread group, and on cgroup v1 it (like any other thread's id
 * written to tasks) takes cgroup_threadgroup_rwsem for writing, which
 * waits for an RCU grace period: 10-20 ms.  "0" written to tasks moves the
 * calling thread alone and skips that lock; it is the whole process when
 * the process has one thread, which `one` says (no thread of ours can
 * start another meanwhile: we are it).  v2 has no tasks file. */
static int enter(int at, const char *dir, bool one, bool v1)
{
	char path[512];
	_cleanup_close_ int fd = -1;

	if (one) {
		snprintf(path, sizeof(path), "%s/tasks", dir);
		fd = openat(at, path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0)
			return pisb_write_all(fd, "0", 1) < 0 ? -1 : 0;
		/* every v1 cgroup has tasks: without it there is no cgroup
		 * (a hierarchy the sandbox has none in), so no cgroup.procs
		 * to look up either: ENOENT */
		if (errno != ENOENT || v1)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	fd = openat(at, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	return pisb_write_all(fd, "0", 1) < 0 ? -1 : 0;
}

int pisb_cgroup_enter(int dirfd)
{
	return enter(dirfd, ".", alone(), false);
}

int pisb_cgroup_join(const char *rel, bool limits_only, struct pisb_err *e)
{
	char path[512];
	int ver;
	bool one;

	if (!rel || !*rel)
		return 0;
	ver = pisb_cgroup_version();
	one = ver == 1 && alone();
	for (int i = 0; ver == 2 ? i < 1 : v1_ctrls[i] != NULL && (!limits_only || i < V1_LIMITS); i++) {
		if (ver == 2)
			snprintf(path, sizeof(path), CG_ROOT "/%s", rel);
		else
			snprintf(path, sizeof(path), CG_ROOT "/%s/%s", v1_ctrls[i], rel);
		if (enter(AT_FDCWD, path, one, ver == 1) < 0) {
			if (errno == ENOENT)
				continue;
			return pisb_err_sys(e, PISB_EXIT_PISB, "join cgroup '%s'", path);
		}
	}
	return 0;
}

long long pisb_cgroup_read(const char *rel, const char *what)
{
	char path[512];
	_cleanup_close_ int fd = -1;
	bool v2 = pisb_cgroup_version() == 2;
	const char *ctrl, *file;

	if (!strcmp(what, "memory")) {
		ctrl = "memory";
		file = v2 ? "memory.max" : "memory.limit_in_bytes";
	} else if (!strcmp(what, "pids")) {
		ctrl = "pids";
		file = "pids.max";
	} else {
		ctrl = "cpu";
		file = v2 ? "cpu.max" : "cpu.cfs_quota_us";
	}
	if (v2)
		snprintf(path, sizeof(path), CG_ROOT "/%s", rel);
	else
		snprintf(path, sizeof(path), CG_ROOT "/%s/%s", ctrl, rel);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	return get(fd, file);
}
