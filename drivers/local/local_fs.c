/* local_fs.c - how the file verbs reach a local sandbox's files: from
 * inside its user and mount namespaces, as root of its files only, never
 * with the host's rights. */
#include "local.h"
#include "err.h"
#include "fs.h"
#include "ns.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* user + mount are all file access needs: the mount namespace gives the
 * sandbox's view, the user namespace makes us root of its files only */
static int fs_enter(const struct pisb_fs *fs, struct pisb_err *e)
{
	if (pisb_sandbox_enter_ns(fs->init_pid, fs->init_start, PISB_NS_USER | PISB_NS_MNT, e) < 0)
		return -1;
	return pisb_sandbox_become_root(geteuid() == 0, e);
}

const struct pisb_fs_how pisb_local_fs_how = { NULL, true, NULL, fs_enter };

int pisb_local_guest_read_in(int root, const char *abs, size_t max, struct pisb_buf *b)
{
	_cleanup_close_ int fd = pisb_fs_resolve(root, abs, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	struct stat st;

	if (fd < 0)
		return errno ? errno : EIO;
	if (fstat(fd, &st) < 0)
		return errno;
	if (!S_ISREG(st.st_mode))
		return EISDIR;
	if ((unsigned long long)st.st_size > max || pisb_read_fd(fd, b, max) < 0)
		return EFBIG;
	return 0;
}

/* The child of pisb_local_read_guest: errno (4 bytes, 0 ok), then the file. */
static void __attribute__((noreturn)) guest_child(pid_t pid, unsigned long long start, const char *abs,
						 size_t max, int out)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_close_ int root = -1;
	int err;

	if (pisb_sandbox_enter_ns(pid, start, PISB_NS_USER | PISB_NS_MNT, &e) < 0 ||
	    pisb_sandbox_become_root(geteuid() == 0, &e) < 0) {
		err = ESRCH;
	} else {
		prctl(PR_SET_DUMPABLE, 0);
		root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		err = root < 0 ? errno : pisb_local_guest_read_in(root, abs, max, &b);
	}
	if (pisb_write_all(out, &err, sizeof(err)) < 0 || (!err && b.len && pisb_write_all(out, b.s, b.len) < 0))
		_exit(1);
	_exit(0);
}

int pisb_local_read_guest(pid_t pid, unsigned long long start, const char *abs, size_t max,
		       struct pisb_buf *b)
{
	_cleanup_buf_ struct pisb_buf got = PISB_BUF_INIT;
	int p[2], status = 0, err;
	pid_t child;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	child = fork();
	if (child < 0) {
		err = errno;
		close(p[0]);
		close(p[1]);
		errno = err;
		return -1;
	}
	if (child == 0) {
		close(p[0]);
		guest_child(pid, start, abs, max, p[1]);
	}
	close(p[1]);
	err = pisb_read_fd(p[0], &got, max + sizeof(int)) < 0 ? errno : 0;
	close(p[0]);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (!err && (got.len < sizeof(int) || !WIFEXITED(status) || WEXITSTATUS(status)))
		err = EIO;
	if (!err)
		memcpy(&err, got.s, sizeof(int));
	if (!err && got.len - sizeof(int) > max)
		err = EFBIG;
	if (err) {
		errno = err == E2BIG ? EFBIG : err;
		return -1;
	}
	pisb_buf_add(b, got.s + sizeof(int), got.len - sizeof(int));
	return 0;
}
