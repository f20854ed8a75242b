/* project_mask.c - project.mode bind / bind-ro: the project's secrets and
 * its .git covered by mounts the sandbox cannot remove (project.h,
 * pisb_project_mask), at each start and, for the local driver, as they
 * appear while the sandbox runs (pisb_project_watch_*).  Used by the local
 * driver (drivers/local/ns.c, in the project's own mount namespace) and
 * the vm driver (vm_project.c, in virtiofsd's). */
#include "project.h"
#include "config.h"
#include "err.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MASK_DEPTH 64

struct mask_walk {
	int srcdir;                             /* holds the empty file and dir */
	const struct pisb_project_config *pc;
	struct pisb_err *e;
	struct pisb_project_watch *live;        /* the watcher's walk, or NULL */
};

/* The watcher (project.h): an inotify fd, and the project path of each
 * directory it watches, by watch descriptor. */
struct pisb_project_watch {
	int in;
	int top, srcdir;                        /* borrowed */
	const struct pisb_project_config *pc;
	char **dirs;                            /* owned, each owned; NULL: none */
	size_t ndirs;
};

/* a name made or moved in; a directory's mode changed (one the walk could
 * not read may now be readable).  Through /proc/self/fd: followed. */
#define WATCH_EVENTS (IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR)

/* Cover the entry name of dfd (t: its O_PATH fd, sb its stat): a secret
 * by the empty file or directory of w->srcdir, a .git by itself; then the
 * new mount, found by name again (t is the one below), read-only,
 * nosuid, nodev. */
static int cover(const struct mask_walk *w, int dfd, const char *name, int t,
		 const struct stat *sb, bool secret, const char *rel)
{
	char src[64], tgt[64];
	int m, r;

	if (secret)
		snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", w->srcdir,
			 S_ISDIR(sb->st_mode) ? PISB_PROJECT_HIDDEN_DIR : PISB_PROJECT_HIDDEN_FILE);
	else
		snprintf(src, sizeof(src), "/proc/self/fd/%d", t);
	snprintf(tgt, sizeof(tgt), "/proc/self/fd/%d", t);
	if (mount(src, tgt, NULL, MS_BIND | (secret ? 0 : MS_REC), NULL) < 0)
		return pisb_err_sys(w->e, PISB_EXIT_FAIL, secret ? "hide the secret '%s' of the project"
								 : "bind the project's '%s' read-only", rel);
	m = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (m < 0)
		return pisb_err_sys(w->e, PISB_EXIT_FAIL, "open the mask on '%s'", rel);
	snprintf(tgt, sizeof(tgt), "/proc/self/fd/%d", m);
	r = mount(NULL, tgt, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
	close(m);
	if (r < 0)
		return pisb_err_sys(w->e, PISB_EXIT_FAIL, "make the mask on '%s' read-only", rel);
	return 0;
}

/* The mount id of name in dfd ("": dfd itself), or 0. */
static unsigned long long mnt_id(int dfd, const char *name)
{
	struct statx sx;

	if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH), STATX_MNT_ID, &sx) < 0 ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return 0;
	return sx.stx_mnt_id;
}

/* A detached copy of the mount at src (an O_PATH fd; rec: with what is
 * mounted below it), read-only, nosuid, nodev, private (a copy of the
 * project's shared mount, a .git, would be its peer and get a copy of
 * itself when attached); its fd, or -1. */
static int ro_clone(int src, bool rec)
{
	struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
				.propagation = MS_PRIVATE };
	int t = (int)syscall(SYS_open_tree, src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
			     AT_EMPTY_PATH | (rec ? AT_RECURSIVE : 0));

	if (t >= 0 && syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0) {
		close(t);
		t = -1;
	}
	return t;
}

/* The watcher's cover of name in dfd (t, sb as for cover()).  The mount
 * reaches the sandbox by propagation (the project's mount is shared, the
 * sandbox's a slave of it), and a tree propagated into a less privileged
 * user namespace arrives with every mount locked but its root (Linux's
 * rule: what is under the root was visible there before).  So the cover
 * is a pair: the root a read-only copy of the source, on it a second
 * copy, locked: a path to name reaches the second one, which cannot be
 * unmounted or moved, and the root under it cannot be named.  The pair is
 * made detached, read-only before it is attached (a remount would not
 * propagate), and attached in one move_mount (Linux 6.15 and later mount
 * on a detached tree). */
static int cover_live(const struct mask_walk *w, int dfd, const char *name, int t,
		      const struct stat *sb, bool secret, const char *rel)
{
	int src = t, r = -1, k = -1, ret = -1;

	if (secret)
		src = openat(w->srcdir, S_ISDIR(sb->st_mode) ? PISB_PROJECT_HIDDEN_DIR : PISB_PROJECT_HIDDEN_FILE,
			     O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0 || (r = ro_clone(src, !secret)) < 0 || (k = ro_clone(src, !secret)) < 0)
		pisb_err_sys(w->e, PISB_EXIT_FAIL, "copy the cover of '%s'", rel);
	else if (syscall(SYS_move_mount, k, "", r, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		pisb_err_sys(w->e, PISB_EXIT_FAIL, "stack the cover of '%s' (Linux 6.15 or later)", rel);
	else if (syscall(SYS_move_mount, r, "", dfd, name, MOVE_MOUNT_F_EMPTY_PATH) < 0 &&
		 errno != ENOENT && errno != ENOTDIR && errno != EISDIR)
		pisb_err_sys(w->e, PISB_EXIT_FAIL, secret ? "hide the new secret '%s' of the project"
							  : "bind the project's new '%s' read-only", rel);
	else
		ret = 0;   /* gone, or replaced by another type since the fstat:
			    * what is there now came with its own event */
	if (k >= 0)
		close(k);
	if (r >= 0)
		close(r);
	if (secret && src >= 0)
		close(src);
	return ret;
}

static int watch_dir(const struct mask_walk *w, int dfd, const char *rel);

static int walk(const struct mask_walk *w, int dfd, const char *rel, int depth);

/* The entry name of dfd (at rel; type: its d_type, or DT_UNKNOWN): a
 * secret or a .git covered, a directory walked.  here: for the watcher,
 * the mount id of dfd (a name with another one is covered already). */
static int entry(const struct mask_walk *w, int dfd, const char *rel, const char *name,
		 unsigned char type, int depth, unsigned long long here)
{
	char r[4096];
	struct stat sb;
	bool git, secret;
	int t, ret = 0;

	snprintf(r, sizeof(r), "%s%s%s", rel, *rel ? "/" : "", name);
	git = !strcmp(name, ".git");
	secret = !w->pc || !w->pc->secrets_include
		? pisb_project_secret(r, name, w->pc ? w->pc->secret_patterns : NULL,
				      w->pc ? w->pc->nsecret_patterns : 0)
		: false;
	if (!git && !secret && type != DT_DIR && type != DT_UNKNOWN)
		return 0;
	t = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (t < 0 || fstat(t, &sb) < 0 || !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode))) {
		if (t >= 0)
			close(t);
		return 0;   /* a symlink resolves inside the sandbox's view */
	}
	if (here && mnt_id(dfd, name) != here) {
		/* covered already */
	} else if (secret || git) {
		ret = (w->live ? cover_live : cover)(w, dfd, name, t, &sb, secret, r);
	} else if (depth < MASK_DEPTH) {
		int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			ret = walk(w, sub, r, depth + 1);
			close(sub);
		}
	}
	close(t);
	return ret;
}

/* dfd: a directory of the project's mount, rel its path in the project.
 * Nothing is followed: each entry is opened O_NOFOLLOW and mounted on
 * through its fd.  A directory that cannot be read is left as it is (the
 * sandbox cannot read it either).  The watcher's walk watches each
 * directory before it reads it: a name made meanwhile has its event. */
static int walk(const struct mask_walk *w, int dfd, const char *rel, int depth)
{
	DIR *d;
	struct dirent *de;
	int fd, ret = 0;
	unsigned long long here = 0;

	if (w->live) {
		if (watch_dir(w, dfd, rel) < 0)
			return -1;
		here = mnt_id(dfd, "");
	}
	/* an open of its own: a dup would share dfd's offset, at the end
	 * after a first walk (the watcher walks top again) */
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while (ret == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ret = entry(w, dfd, rel, de->d_name, de->d_type, depth, here);
	closedir(d);
	return ret;
}

int pisb_project_mask(int top, int srcdir, const struct pisb_project_config *pc,
		      struct pisb_err *e)
{
	struct mask_walk w = { srcdir, pc, e, NULL };

	return walk(&w, top, "", 0);
}

/* ---- the watcher ---- */

/* Watch dfd, at rel, for names that appear in it (a directory already
 * watched keeps its descriptor: its path is brought up to date, as after
 * a rename).  A directory the caller cannot read is left unwatched, as
 * the walk leaves it uncovered; running out of watches is an error. */
static int watch_dir(const struct mask_walk *w, int dfd, const char *rel)
{
	struct pisb_project_watch *pw = w->live;
	char p[64];
	int wd;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", dfd);
	wd = inotify_add_watch(pw->in, p, WATCH_EVENTS);
	if (wd < 0)
		return errno == EACCES || errno == ENOENT || errno == ENOTDIR ? 0
			: pisb_err_sys(w->e, PISB_EXIT_FAIL, "watch the project's '%s'", *rel ? rel : ".");
	if ((size_t)wd >= pw->ndirs) {
		size_t n = (size_t)wd + 64;
		pw->dirs = xrealloc(pw->dirs, n * sizeof(*pw->dirs));
		memset(pw->dirs + pw->ndirs, 0, (n - pw->ndirs) * sizeof(*pw->dirs));
		pw->ndirs = n;
	}
	free(pw->dirs[wd]);
	pw->dirs[wd] = xstrdup(rel);
	return 0;
}

static int depth_of(const char *rel)
{
	int depth = 0;

	for (const char *c = rel; *c; c++)
		depth += *c == '/';
	return *rel ? depth + 1 : 0;
}

/* The name that appeared in dfd (at rel). */
static int watch_name(struct pisb_project_watch *pw, int dfd, const char *rel, const char *name,
		      struct pisb_err *e)
{
	struct mask_walk w = { pw->srcdir, pw->pc, e, pw };
	unsigned long long here = mnt_id(dfd, "");

	if (!here)
		return 0;
	return entry(&w, dfd, rel, name, DT_UNKNOWN, depth_of(rel), here);
}

/* A directory name of dfd whose attributes changed: walked if it was
 * not watched (it could not be read before), else left alone. */
static int watch_attr(struct pisb_project_watch *pw, int dfd, const char *rel, const char *name,
		      struct pisb_err *e)
{
	char p[64];
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), wd;

	if (sub < 0)
		return 0;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", sub);
	wd = inotify_add_watch(pw->in, p, WATCH_EVENTS | IN_MASK_CREATE);
	close(sub);
	if (wd < 0)
		return 0;   /* EEXIST: watched already */
	return watch_name(pw, dfd, rel, name, e);
}

static int watch_walk(struct pisb_project_watch *pw, int dfd, const char *rel, struct pisb_err *e)
{
	struct mask_walk w = { pw->srcdir, pw->pc, e, pw };

	return walk(&w, dfd, rel, depth_of(rel));
}

bool pisb_project_watch_supported(int srcdir)
{
	int src = openat(srcdir, PISB_PROJECT_HIDDEN_FILE, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int r = src < 0 ? -1 : ro_clone(src, false), k = src < 0 ? -1 : ro_clone(src, false);
	bool ok = r >= 0 && k >= 0 &&
		  syscall(SYS_move_mount, k, "", r, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0;

	if (k >= 0)
		close(k);
	if (r >= 0)
		close(r);
	if (src >= 0)
		close(src);
	return ok;
}

struct pisb_project_watch *pisb_project_watch_new(int top, int srcdir,
						  const struct pisb_project_config *pc,
						  struct pisb_err *e)
{
	struct pisb_project_watch *pw = xcalloc(1, sizeof(*pw));

	pw->top = top;
	pw->srcdir = srcdir;
	pw->pc = pc;
	pw->in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (pw->in < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "watch the project (inotify)");
		pisb_project_watch_free(pw);
		return NULL;
	}
	if (watch_walk(pw, top, "", e) < 0) {
		pisb_project_watch_free(pw);
		return NULL;
	}
	return pw;
}

int pisb_project_watch_fd(const struct pisb_project_watch *pw)
{
	return pw->in;
}

/* The directory rel of the project, reached without following a symlink
 * or leaving the project's mount (a cover), or -1. */
static int open_rel(const struct pisb_project_watch *pw, const char *rel)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};

	return (int)syscall(SYS_openat2, pw->top, *rel ? rel : ".", &how, sizeof(how));
}

int pisb_project_watch_run(struct pisb_project_watch *pw, struct pisb_err *e)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool rescan = false;
	ssize_t n;

	while ((n = read(pw->in, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				rescan = true;
				continue;
			}
			if (ev->wd < 0 || (size_t)ev->wd >= pw->ndirs || !pw->dirs[ev->wd])
				continue;
			if (ev->mask & IN_IGNORED) {
				free(pw->dirs[ev->wd]);
				pw->dirs[ev->wd] = NULL;
				continue;
			}
			if (!ev->len || rescan || ((ev->mask & IN_ATTRIB) && !(ev->mask & IN_ISDIR)))
				continue;
			{
				/* the one new name, walked as the walk would meet it:
				 * a directory with all in it (made before its watch) */
				_cleanup_free_ char *rel = xstrdup(pw->dirs[ev->wd]);
				int dfd = open_rel(pw, rel), r;
				if (dfd < 0)
					continue;   /* moved or gone: its new place has an event */
				r = (ev->mask & IN_ATTRIB ? watch_attr : watch_name)(pw, dfd, rel, ev->name, e);
				close(dfd);
				if (r < 0)
					return -1;
			}
		}
	}
	if (n < 0 && errno != EAGAIN && errno != EINTR)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "read the project's events");
	/* events were lost: walk it all again */
	return rescan ? watch_walk(pw, pw->top, "", e) : 0;
}

int pisb_project_watch_serve(struct pisb_project_watch *pw, int stop, struct pisb_err *e)
{
	for (;;) {
		struct pollfd p[2] = { { pw->in, POLLIN, 0 }, { stop, POLLIN, 0 } };
		if (poll(p, stop >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return pisb_err_sys(e, PISB_EXIT_FAIL, "wait for the project's events");
		}
		if (p[0].revents && pisb_project_watch_run(pw, e) < 0)
			return -1;
		if (stop >= 0 && p[1].revents)
			return 0;
	}
}

void pisb_project_watch_free(struct pisb_project_watch *pw)
{
	if (!pw)
		return;
	if (pw->in >= 0)
		close(pw->in);
	for (size_t i = 0; i < pw->ndirs; i++)
		free(pw->dirs[i]);
	free(pw->dirs);
	free(pw);
}

int pisb_project_mask_sources(int dir, struct pisb_err *e)
{
	int fd = openat(dir, PISB_PROJECT_HIDDEN_FILE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444);

	if (fd < 0 || ftruncate(fd, 0) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "make the empty file secrets are hidden under");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	if (mkdirat(dir, PISB_PROJECT_HIDDEN_DIR, 0555) < 0 && errno != EEXIST)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "make the empty directory secrets are hidden under");
	return 0;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int r;

	if (fd < 0)
		return -1;
	r = pisb_write_all(fd, s, strlen(s)) < 0 ? -1 : 0;
	close(fd);
	return r;
}

int pisb_idmap_userns(const char *uid_map, const char *gid_map)
{
	int p[2], fd = -1;
	char path[64], c;
	pid_t h;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	h = fork();
	if (h == 0) {
		close(p[1]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		(void)!read(p[0], &c, 1);   /* until the parent is done */
		_exit(0);
	}
	close(p[0]);
	if (h < 0)
		goto out;
	for (int i = 0; i < 2000; i++) {   /* until it has its own user ns */
		struct stat a, b;
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)h);
		if (stat(path, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 && a.st_ino != b.st_ino)
			break;
		usleep(1000);
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)h);
	if (write_str(path, uid_map) < 0)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)h);
	write_str(path, "deny");
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)h);
	if (write_str(path, gid_map) < 0)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)h);
	fd = open(path, O_RDONLY | O_CLOEXEC);
out:
	close(p[1]);
	if (h > 0)
		while (waitpid(h, NULL, 0) < 0 && errno == EINTR) {
		}
	return fd;
}
