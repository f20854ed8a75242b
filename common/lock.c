#include "lock.h"
#include "err.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

int pisb_lock_acquire(int dirfd, const char *path, bool exclusive, int wait_ms,
		      const char *what, struct pisb_err *e)
{
	int fd = openat(dirfd, path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int op = exclusive ? LOCK_EX : LOCK_SH;
	int64_t deadline = pisb_mono_ms() + (wait_ms > 0 ? wait_ms : 0);

	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open lock '%s'", path);
	for (;;) {
		if (flock(fd, op | (wait_ms < 0 ? 0 : LOCK_NB)) == 0)
			return fd;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "lock '%s'", path);
			close(fd);
			return -1;
		}
		if (pisb_mono_ms() >= deadline) {
			close(fd);
			return pisb_err_set(e, PISB_EXIT_BUSY,
					    "%s is busy (another pisb command holds its lock); retry, or pass --wait to block",
					    what);
		}
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

bool pisb_lock_is_held(int dirfd, const char *path)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return false;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		return false; /* closing the fd drops our probe lock */
	return errno == EWOULDBLOCK;
}
