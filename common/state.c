#include "state.h"
#include "err.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *pisb_state_path(const char *override, struct pisb_err *e)
{
	const char *v;

	if (override && *override)
		return xstrdup(override);
	v = getenv("PI_SANDBOX_HOME");
	if (v && *v)
		return xstrdup(v);
	v = getenv("XDG_STATE_HOME");
	if (v && *v)
		return xasprintf("%s/pi-sandbox", v);
	v = getenv("HOME");
	if (!v || !*v) {
		pisb_err_set(e, PISB_EXIT_USAGE,
			     "cannot find the state directory: HOME is not set (use --state-dir or PI_SANDBOX_HOME)");
		return NULL;
	}
	return xasprintf("%s/.local/state/pi-sandbox", v);
}

int pisb_mkdirs_at(int dirfd, const char *path, mode_t mode, struct pisb_err *e)
{
	_cleanup_free_ char *p = xstrdup(path);
	char *s = p;

	if (*s == '/')
		s++;
	for (;;) {
		char *slash = strchr(s, '/');
		if (slash)
			*slash = '\0';
		if (*p && mkdirat(dirfd, p, mode) < 0 && errno != EEXIST)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s'", p);
		if (!slash)
			break;
		*slash = '/';
		s = slash + 1;
	}
	return 0;
}

int pisb_state_open(struct pisb_state *st, const char *override,
		    struct pisb_err *e)
{
	_cleanup_free_ char *path = pisb_state_path(override, e);
	struct stat sb;
	int fd;

	if (!path)
		return -1;
	if (path[0] != '/') {
		_cleanup_free_ char *cwd = getcwd(NULL, 0);
		char *abs;
		if (!cwd)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "getcwd");
		abs = xasprintf("%s/%s", cwd, path);
		free(path);
		path = abs;
	}
	if (stat(path, &sb) < 0) {
		if (errno != ENOENT)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "state directory '%s'", path);
		if (pisb_mkdirs_at(AT_FDCWD, path, 0700, e) < 0)
			return pisb_err_prefix(e, "create state directory '%s'", path);
		if (chmod(path, 0700) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "chmod '%s'", path);
		if (stat(path, &sb) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "state directory '%s'", path);
	}
	if (!S_ISDIR(sb.st_mode))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "state directory '%s' is not a directory", path);
	if (sb.st_uid != geteuid())
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "state directory '%s' belongs to uid %u, not to you (uid %u)",
				    path, (unsigned)sb.st_uid, (unsigned)geteuid());
	if (sb.st_mode & 077)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "state directory '%s' is accessible by group or others (mode %04o); fix it with: chmod 700 '%s'",
				    path, (unsigned)(sb.st_mode & 07777), path);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open state directory '%s'", path);
	st->fd = fd;
	st->path = PISB_STEAL(path);
	return 0;
}

void pisb_state_release(struct pisb_state *st)
{
	if (st->fd >= 0)
		close(st->fd);
	st->fd = -1;
	free(st->path);
	st->path = NULL;
}

int pisb_fsync_parent(int dirfd, const char *path)
{
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *dir = slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup(".");
	_cleanup_close_ int fd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -1 : fsync(fd);
}

int pisb_fsync_dir(int dirfd)
{
	_cleanup_close_ int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	return fsync(fd);
}

/* the files (and their directories) whose fsync is deferred */
#define DEFER_MAX 32
static struct {
	bool on;
	int n;
	int fd[DEFER_MAX];
	dev_t dev[DEFER_MAX];
	ino_t ino[DEFER_MAX];
} deferred;

void pisb_sync_defer(void)
{
	deferred.on = true;
}

/* keep fd (a written file or its directory) for the flush; false when
 * not deferring or full (the caller fsyncs now).  A directory that holds
 * several of the files is kept once: each fsync waits for the disk's
 * cache flush, even one with nothing left to write (issue #21) */
static bool defer_fd(int fd)
{
	struct stat sb;
	int d;

	if (!deferred.on || deferred.n == DEFER_MAX || fstat(fd, &sb) < 0)
		return false;
	for (int i = 0; i < deferred.n; i++)
		if (deferred.dev[i] == sb.st_dev && deferred.ino[i] == sb.st_ino)
			return true;
	d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (d < 0)
		return false;
	deferred.dev[deferred.n] = sb.st_dev;
	deferred.ino[deferred.n] = sb.st_ino;
	deferred.fd[deferred.n++] = d;
	return true;
}

int pisb_sync_flush(void)
{
	int ret = 0, en = 0;

	for (int i = 0; i < deferred.n; i++)
		sync_file_range(deferred.fd[i], 0, 0, SYNC_FILE_RANGE_WRITE);
	for (int i = 0; i < deferred.n; i++) {
		if (fsync(deferred.fd[i]) < 0 && errno != EINVAL) {
			en = errno;
			ret = -1;
		}
		close(deferred.fd[i]);
	}
	deferred.n = 0;
	errno = en;
	return ret;
}

void pisb_sync_discard(void)
{
	for (int i = 0; i < deferred.n; i++)
		close(deferred.fd[i]);
	deferred.n = 0;
	deferred.on = false;
}

static int atomic_write(int dirfd, const char *name, const void *data, size_t n,
			mode_t mode, bool sync, struct pisb_err *e)
{
	char tmp[512];
	_cleanup_close_ int fd = -1;
	const char *base = strrchr(name, '/');
	_cleanup_close_ int pfd = -1;
	int dfd = dirfd;

	/* Operate in the file's own directory so the rename stays atomic. */
	if (base) {
		_cleanup_free_ char *dir = xstrndup(name, (size_t)(base - name));
		pfd = openat(dirfd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", dir);
		dfd = pfd;
		base++;
	} else {
		base = name;
	}
	for (int tries = 0; tries < 100; tries++) {
		snprintf(tmp, sizeof(tmp), ".%s.tmp.%d.%d", base, (int)getpid(), tries);
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "create '%s'", tmp);
	if (fchmod(fd, mode) < 0 || pisb_write_all(fd, data, n) < 0 ||
	    (sync && !defer_fd(fd) && fsync(fd) < 0)) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "write '%s'", name);
		unlinkat(dfd, tmp, 0);
		return -1;
	}
	/* Unsynced, an existing file is swapped with the new one, whose old
	 * content is then unlinked: ext4 flushes a file renamed over another
	 * (auto_da_alloc), 100-250 us a write here, three per start (issue
	 * #21).  A reader sees the old file or the new one, whole, either way. */
	if (!sync && renameat2(dfd, tmp, dfd, base, RENAME_EXCHANGE) == 0) {
		unlinkat(dfd, tmp, 0);
		return 0;
	}
	if (renameat(dfd, tmp, dfd, base) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "rename '%s'", name);
		unlinkat(dfd, tmp, 0);
		return -1;
	}
	if (sync) {
		_cleanup_close_ int d = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d >= 0 && !defer_fd(d))
			fsync(d);
	}
	return 0;
}

int pisb_atomic_write(int dirfd, const char *name, const void *data, size_t n,
		      mode_t mode, struct pisb_err *e)
{
	return atomic_write(dirfd, name, data, n, mode, true, e);
}

int pisb_atomic_write_volatile(int dirfd, const char *name, const void *data, size_t n,
			       mode_t mode, struct pisb_err *e)
{
	return atomic_write(dirfd, name, data, n, mode, false, e);
}

static int rm_rf_fd(int pfd, const char *name, int depth)
{
	_cleanup_close_ int fd = -1;
	DIR *d;
	struct dirent *de;
	int ret = 0;

	if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	if (depth > 256) {
		errno = ELOOP;
		return -1;
	}
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		/* maybe a directory without search permission */
		if (fchmodat(pfd, name, 0700, 0) == 0)
			fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -1;
	}
	fchmod(fd, 0700);
	d = fdopendir(fd);
	if (!d)
		return -1;
	fd = -1; /* owned by d now */
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (rm_rf_fd(dirfd(d), de->d_name, depth + 1) < 0)
			ret = -1;
	}
	closedir(d);
	if (unlinkat(pfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		ret = -1;
	return ret;
}

int pisb_rm_rf_at(int dirfd, const char *path, struct pisb_err *e)
{
	if (rm_rf_fd(dirfd, path, 0) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "remove '%s'", path);
	return 0;
}

int pisb_state_trash(struct pisb_state *st, const char *dir, const char *name,
		     struct pisb_err *e)
{
	_cleanup_free_ char *from = xasprintf("%s/%s", dir, name);
	_cleanup_free_ char *to = NULL;

	if (pisb_mkdirs_at(st->fd, "trash", 0700, e) < 0)
		return -1;
	to = xasprintf("trash/%s-%s-%d-%lld", dir, name, (int)getpid(),
		       (long long)pisb_now_ms());
	if (renameat(st->fd, from, st->fd, to) < 0) {
		if (errno == ENOENT)
			return pisb_err_set(e, PISB_EXIT_NOTFOUND, "no such %s '%s'",
					    dir, name);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "move '%s' to trash", from);
	}
	/* gone from its directory, there in the trash, after a crash too */
	pisb_fsync_parent(st->fd, from);
	pisb_fsync_parent(st->fd, to);
	return pisb_rm_rf_at(st->fd, to, e);
}

char *pisb_image_lock_path(const char *name)
{
	return xasprintf("images/%s.lock", name);
}
