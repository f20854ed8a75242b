/* fs.c - files inside a local sandbox; see fs.h. */
#include "fs.h"
#include "edit.h"
#include "err.h"
#include "glob.h"
#include "ignore.h"
#include "instance.h"
#include "json.h"
#include "lit.h"
#include "utf16.h"
#include "lock.h"
#include "driver.h"
#include "search.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the sandbox ---- */

/* The config's workspace (absolute), from the record already read. */
static char *record_workspace(const struct pisb_record *rec)
{
	struct pisb_err ig = PISB_ERR_INIT;
	struct pisb_json j;
	char *ws = NULL;

	if (rec->config_json && pisb_json_parse(&j, rec->config_json, strlen(rec->config_json), &ig) == 0) {
		ws = pisb_json_str(&j, pisb_json_get(&j, 0, "workspace"));
		pisb_json_release(&j);
	}
	if (!ws || ws[0] != '/') {
		free(ws);
		ws = xstrdup("/workspace");
	}
	return ws;
}

int pisb_fs_open(struct pisb_fs *fs, struct pisb_sandbox *sb, const struct pisb_fs_how *how,
		 bool running, struct pisb_err *e)
{
	const struct pisb_runtime *rt;

	if (!pisb_sandbox_record(sb, e))
		return -1;
	fs->idir = fcntl(sb->idir, F_DUPFD_CLOEXEC, 3);
	if (fs->idir < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "sandbox '%s'", sb->name);
	fs->name = xstrdup(sb->name);
	fs->log = how ? how->log : NULL;
	fs->services = how ? how->services : true;
	fs->enter = how ? how->enter : NULL;
	if (how && how->workspace) {
		/* a workspace the driver shares with this host: its own root */
		fs->workspace = how->workspace(fs->idir, e);
		return fs->workspace ? 0 : pisb_err_prefix(e, "sandbox '%s'", sb->name);
	}
	fs->workspace = record_workspace(&sb->rec);
	if (!running)
		return 0;
	if (!pisb_lock_is_held(fs->idir, "controller.lock"))
		goto not_running;
	if (!(rt = pisb_sandbox_runtime(sb, e)))
		return -1;
	fs->init_pid = rt->init.pid;
	fs->init_start = rt->init.start;
	if (fs->init_pid <= 0)
		goto not_running;
	return 0;
not_running:
	return pisb_err_set(e, PISB_EXIT_BACKEND,
			    "sandbox '%s' is not running (start it with 'pisb start %s')", sb->name, sb->name);
}

void pisb_fs_release(struct pisb_fs *fs)
{
	if (fs->idir >= 0)
		close(fs->idir);
	if (fs->root >= 0)
		close(fs->root);
	free(fs->name);
	free(fs->workspace);
	fs->idir = fs->root = -1;
	fs->name = fs->workspace = NULL;
}

/* LeakSanitizer (make SANITIZE=1) looks at /proc/self/task at exit, which
 * the sandbox's /proc does not have for us: run its check before entering
 * instead (weak: absent, and skipped, in normal builds). */
extern void __lsan_do_leak_check(void) __attribute__((weak));

int pisb_fs_enter(struct pisb_fs *fs, struct pisb_err *e)
{
	if (__lsan_do_leak_check)
		__lsan_do_leak_check();

	if (!fs->enter)
		return pisb_err_set(e, PISB_EXIT_PISB, "sandbox '%s': its files are not reached from this host",
				    fs->name);
	if (fs->enter(fs, e) < 0) {
		if (e->code == PISB_EXIT_BACKEND && strstr(e->msg, "not running"))
			return pisb_err_set(e, PISB_EXIT_BACKEND,
					    "sandbox '%s' is not running (start it with 'pisb start %s')",
					    fs->name, fs->name);
		return pisb_err_prefix(e, "sandbox '%s'", fs->name);
	}
	/* nothing in the sandbox may ptrace or read the memory of a process
	 * that still holds host fds (it is not in the sandbox's pid namespace
	 * either, so nothing there can even name it) */
	prctl(PR_SET_DUMPABLE, 0);
	umask(022);
	fs->root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fs->root < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "open the sandbox root");
	return 0;
}


char *pisb_fs_abspath(const struct pisb_fs *fs, const char *path)
{
	return pisb_path_in(fs->workspace, path);
}

int pisb_fs_resolve(int rootfd, const char *path, int flags, mode_t mode)
{
	struct open_how how;
	long r;
	int tries = 0;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? mode : 0;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	do {
		r = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
		/* EAGAIN: a rename raced with ".." resolution; try again */
	} while (r < 0 && (errno == EINTR || (errno == EAGAIN && ++tries < 64)));
	return (int)r;
}

/* Map an open/resolve errno on path to an error: missing -> 3. */
static int path_err(struct pisb_err *e, const char *abs, const char *what)
{
	if (errno == ENOENT)
		return pisb_err_set(e, PISB_EXIT_NOTFOUND, "no such file or directory '%s'", abs);
	if (errno == ENOTDIR)
		return pisb_err_set(e, PISB_EXIT_NOTFOUND, "no such file or directory '%s' (a parent is not a directory)", abs);
	if (errno == EXDEV)
		return pisb_err_set(e, PISB_EXIT_FAIL, "%s '%s': path escapes the sandbox root", what, abs);
	return pisb_err_sys(e, PISB_EXIT_FAIL, "%s '%s'", what, abs);
}

/* Open a regular file for reading (directories and devices refused). */
static int open_file(const struct pisb_fs *fs, const char *abs, struct stat *st, struct pisb_err *e)
{
	int fd = pisb_fs_resolve(fs->root, abs, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);

	if (fd < 0)
		return path_err(e, abs, "open");
	if (fstat(fd, st) < 0) {
		close(fd);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s'", abs);
	}
	if (S_ISDIR(st->st_mode)) {
		close(fd);
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is a directory", abs);
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a regular file", abs);
	}
	fcntl(fd, F_SETFL, 0);   /* back to blocking reads */
	return fd;
}

/* ---- read ---- */

/* How many bytes of p[0..n) fit in room without splitting a UTF-8
 * sequence at the cut (backs off over continuation bytes). */
static size_t utf8_cut(const char *p, size_t n, size_t room)
{
	size_t k;

	if (n <= room)
		return n;
	k = room;
	while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80)
		k--;
	return k;
}

/* The cut fell inside a sequence that began in an earlier piece: drop
 * its first bytes from the end of b too. */
static void utf8_trim(struct pisb_buf *b)
{
	size_t m = b->len;

	for (int i = 0; i < 3 && m > 0 && ((unsigned char)b->s[m - 1] & 0xC0) == 0x80; i++)
		m--;
	if (m > 0 && ((unsigned char)b->s[m - 1] & 0xC0) == 0xC0)
		m--;
	b->len = m;
	b->s[m] = '\0';
}

void pisb_fs_window_init(struct pisb_fs_window *w, struct pisb_fs_text *t, long long offset,
			 long long limit, size_t cap)
{
	memset(w, 0, sizeof(*w));
	w->t = t;
	w->collecting = offset <= 1;
	w->offset = offset < 1 ? 1 : offset;
	w->limit = limit;
	w->cap = cap;
	w->line = 1;
	w->ended_nl = true;
	t->offset = w->offset;
	pisb_buf_grow(&t->content, 1);
}

bool pisb_fs_window_feed(struct pisb_fs_window *w, const char *p, size_t n)
{
	struct pisb_fs_text *t = w->t;
	const char *end = p + n;

	if (w->done || !n)
		return w->done;
	w->ended_nl = end[-1] == '\n';
	if (!w->collecting) {
		while (w->line < w->offset) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl)
				return false;
			w->line++;
			p = nl + 1;
		}
		w->collecting = true;
	}
	while (p < end) {
		const char *nl, *seg;
		size_t len, room;

		if (w->limit && w->taken >= w->limit) {
			t->next_offset = w->line;
			return w->done = true;
		}
		nl = memchr(p, '\n', (size_t)(end - p));
		seg = nl ? nl + 1 : end;
		len = (size_t)(seg - p);
		room = w->cap - t->content.len;
		if (len > room) {
			/* whole lines only, unless not even one fits */
			if (w->taken) {
				t->content.len = w->line_start;   /* drop a line begun in an earlier piece */
				t->content.s[w->line_start] = '\0';
			} else {
				size_t k = utf8_cut(p, len, room);
				pisb_buf_add(&t->content, p, k);
				if (k == 0 && ((unsigned char)p[0] & 0xC0) == 0x80)
					utf8_trim(&t->content);
			}
			t->truncated = true;
			t->next_offset = w->line;
			return w->done = true;
		}
		pisb_buf_add(&t->content, p, len);
		if (nl) {
			w->line++;
			w->taken++;
			w->line_start = t->content.len;
		}
		p = seg;
	}
	return false;
}

int pisb_fs_window_end(struct pisb_fs_window *w, const char *abs, struct pisb_err *e)
{
	struct pisb_fs_text *t = w->t;

	if (!w->collecting) {
		long long total = w->line - (w->ended_nl ? 1 : 0);
		return pisb_err_set(e, PISB_EXIT_FAIL, "offset %lld is beyond the end of '%s' (%lld line%s)",
				    w->offset, abs, total, total == 1 ? "" : "s");
	}
	t->lines = w->taken + (t->content.len && t->content.s[t->content.len - 1] != '\n' ? 1 : 0);
	return 0;
}

void pisb_fs_text_release(struct pisb_fs_text *t)
{
	pisb_buf_release(&t->content);
}

int pisb_fs_read_text(const struct pisb_fs *fs, const char *abs, long long offset,
		      long long limit, size_t cap, struct pisb_fs_text *t,
		      struct pisb_err *e)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *chunk = NULL;
	struct pisb_fs_window w;
	struct stat st;
	const size_t csz = 64 * 1024;

	memset(t, 0, sizeof(*t));
	fd = open_file(fs, abs, &st, e);
	if (fd < 0)
		return -1;
	t->bytes = st.st_size;
	pisb_fs_window_init(&w, t, offset, limit, cap);
	chunk = xmalloc(csz);
	for (;;) {
		ssize_t r = read(fd, chunk, csz);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return pisb_err_sys(e, PISB_EXIT_FAIL, "read '%s'", abs);
		}
		if (r == 0 || pisb_fs_window_feed(&w, chunk, (size_t)r))
			break;
	}
	return pisb_fs_window_end(&w, abs, e);
}

int pisb_fs_read_raw(const struct pisb_fs *fs, const char *abs, int outfd,
		     long long *bytes, struct pisb_err *e)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	long long total = 0;
	bool use_sendfile = true;
	const size_t bsz = 256 * 1024;

	fd = open_file(fs, abs, &st, e);
	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t r;

		if (use_sendfile) {
			r = sendfile(outfd, fd, NULL, 1 << 30);
			if (r < 0 && (errno == EINVAL || errno == ENOSYS)) {
				use_sendfile = false;
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return pisb_err_sys(e, PISB_EXIT_FAIL, "read '%s'", abs);
			if (r == 0)
				break;
			total += r;
			continue;
		}
		if (!buf)
			buf = xmalloc(bsz);
		r = read(fd, buf, bsz);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "read '%s'", abs);
		if (r == 0)
			break;
		if (pisb_write_all(outfd, buf, (size_t)r) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "write '%s' to the output", abs);
		total += r;
	}
	*bytes = total;
	return 0;
}

/* ---- write, edit, mkdir ---- */

int pisb_fs_mkdir(const struct pisb_fs *fs, const char *abs, bool *created, struct pisb_err *e)
{
	_cleanup_free_ char *p = xstrdup(abs);
	char *s = p;
	int fd;

	*created = false;
	for (;;) {
		char save;
		bool last;

		while (*s == '/')
			s++;
		if (!*s)
			break;
		s += strcspn(s, "/");
		save = *s;
		last = !save || !s[strspn(s, "/")];
		*s = '\0';
		{
			_cleanup_close_ int parent = -1;
			char *slash = strrchr(p, '/');
			const char *comp = slash + 1;
			*slash = '\0';
			parent = pisb_fs_resolve(fs->root, p[0] ? p : "/", O_PATH | O_DIRECTORY, 0);
			*slash = '/';
			if (parent < 0 && errno == ENOTDIR)
				return pisb_err_set(e, PISB_EXIT_FAIL, "mkdir '%s': a file is in the way", abs);
			if (parent < 0)
				return path_err(e, abs, "mkdir");
			if (mkdirat(parent, comp, 0755) == 0) {
				if (last)
					*created = true;
			} else if (errno != EEXIST) {
				return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
						    "mkdir '%s'", p);
			}
		}
		*s = save;
	}
	fd = pisb_fs_resolve(fs->root, abs, O_PATH | O_DIRECTORY, 0);
	if (fd < 0) {
		if (errno == ENOTDIR)
			return pisb_err_set(e, PISB_EXIT_FAIL, "mkdir '%s': a file of that name exists", abs);
		return path_err(e, abs, "mkdir");
	}
	close(fd);
	return 0;
}

/* Where a write lands: the directory and name, symlinks at the end
 * followed (inside the sandbox) to the file they name. */
struct target {
	int dirfd;
	char *dir, *base;
	bool exists;
	struct stat st;
};

static void target_release(struct target *t)
{
	if (t->dirfd >= 0)
		close(t->dirfd);
	free(t->dir);
	free(t->base);
}

static int target_open(const struct pisb_fs *fs, const char *abs, bool mkdirs,
		       struct target *t, struct pisb_err *e)
{
	_cleanup_free_ char *cur = xstrdup(abs);

	memset(t, 0, sizeof(*t));
	t->dirfd = -1;
	for (int hops = 0;; hops++) {
		char *slash;
		char link[4096];
		ssize_t n;

		if (hops > 40)
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s': too many levels of symbolic links", abs);
		slash = strrchr(cur, '/');
		if (!slash || !slash[1] || !strcmp(slash + 1, ".") || !strcmp(slash + 1, ".."))
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is a directory", abs);
		free(t->dir);
		free(t->base);
		t->dir = slash == cur ? xstrdup("/") : xstrndup(cur, (size_t)(slash - cur));
		t->base = xstrdup(slash + 1);
		if (t->dirfd >= 0)
			close(t->dirfd);
		t->dirfd = pisb_fs_resolve(fs->root, t->dir, O_PATH | O_DIRECTORY, 0);
		if (t->dirfd < 0 && errno == ENOENT && mkdirs) {
			bool made;
			_cleanup_free_ char *d = pisb_fs_abspath(fs, t->dir);
			if (pisb_fs_mkdir(fs, d, &made, e) < 0)
				return -1;
			t->dirfd = pisb_fs_resolve(fs->root, t->dir, O_PATH | O_DIRECTORY, 0);
		}
		if (t->dirfd < 0) {
			if (errno == ENOENT)
				return pisb_err_set(e, PISB_EXIT_NOTFOUND, "no such directory '%s'%s", t->dir,
						    mkdirs ? "" : " (use --mkdir to create it)");
			if (errno == ENOTDIR)
				return pisb_err_set(e, PISB_EXIT_NOTFOUND, "'%s' is not a directory", t->dir);
			return path_err(e, t->dir, "open");
		}
		if (fstatat(t->dirfd, t->base, &t->st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				return pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s'", abs);
			t->exists = false;
			return 0;
		}
		if (S_ISDIR(t->st.st_mode))
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is a directory", abs);
		if (!S_ISLNK(t->st.st_mode)) {
			if (!S_ISREG(t->st.st_mode))
				return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a regular file", abs);
			t->exists = true;
			return 0;
		}
		n = readlinkat(t->dirfd, t->base, link, sizeof(link) - 1);
		if (n < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "readlink '%s'", abs);
		link[n] = '\0';
		{
			char *next = link[0] == '/' ? xstrdup(link)
						    : xasprintf("%s/%s", strcmp(t->dir, "/") ? t->dir : "", link);
			free(cur);
			cur = next;
		}
	}
}

static void tmpname(char *out, size_t n, const char *base)
{
	unsigned char rnd[8];
	char hex[17];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		uint64_t v = (uint64_t)pisb_mono_ms() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)out;
		memcpy(rnd, &v, sizeof(rnd));
	}
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	if (strlen(base) > 200)
		snprintf(out, n, ".pisb-%s.tmp", hex);
	else
		snprintf(out, n, ".%s.pisb-%s", base, hex);
}

static int copy_fd(int in, int out)
{
	char *buf = xmalloc(256 * 1024);
	long long total = 0;

	for (;;) {
		ssize_t r = read(in, buf, 256 * 1024);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (r == 0) {
			free(buf);
			return 0;
		}
		if (pisb_write_all(out, buf, (size_t)r) < 0)
			break;
		total += r;
	}
	free(buf);
	return -1;
}

/* Remove what killed writes of dirfd/base left: ".BASE.pisb-" and 16 hex
 * digits (tmpname's names, nothing else), regular files whose writer is
 * gone (a live writer holds an flock on its temp file) and older than a
 * few seconds.  Runs where the write runs, with the sandbox's rights. */
static void sweep_leftovers(int dirfd, const char *base)
{
	_cleanup_free_ char *prefix = xasprintf(".%s.pisb-", base);
	size_t pl = strlen(prefix);
	DIR *d = pisb_opendirat(dirfd, ".");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		_cleanup_close_ int tf = -1;
		struct stat a, b;

		if (strncmp(de->d_name, prefix, pl) || strlen(de->d_name + pl) != 16 ||
		    strspn(de->d_name + pl, "0123456789abcdef") != 16)
			continue;
		tf = openat(dirfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (tf < 0 || fstat(tf, &a) < 0 || !S_ISREG(a.st_mode) ||
		    time(NULL) - a.st_mtime < 2 || flock(tf, LOCK_EX | LOCK_NB) < 0)
			continue;
		/* still the file we looked at (nothing renamed in meanwhile) */
		if (fstatat(dirfd, de->d_name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
		    a.st_ino == b.st_ino && a.st_dev == b.st_dev)
			unlinkat(dirfd, de->d_name, 0);
	}
	closedir(d);
}

/* Write src into a temp file next to the target and rename it over. */
static int replace(const struct target *t, const char *abs, const struct pisb_fs_src *src,
		   int mode, long long *bytes, struct pisb_err *e)
{
	char tmp[256];
	int fd;
	struct stat st;
	mode_t m = mode >= 0 ? (mode_t)mode : t->exists ? (t->st.st_mode & 07777) : 0644;

	sweep_leftovers(t->dirfd, t->base);
	tmpname(tmp, sizeof(tmp), t->base);
	fd = openat(t->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "create a temporary file in '%s'", t->dir);
	/* held while we write: tells sweep_leftovers this one is alive */
	flock(fd, LOCK_EX | LOCK_NB);
	if (src->fd >= 0 ? copy_fd(src->fd, fd) < 0 : pisb_write_all(fd, src->data, src->n) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "write '%s'", abs);
		goto fail;
	}
	/* keep the owner of the file being replaced (best effort: an id that is
	 * not mapped into the sandbox cannot be given) */
	if (t->exists && (t->st.st_uid != geteuid() || t->st.st_gid != getegid()))
		if (fchown(fd, t->st.st_uid, t->st.st_gid) < 0) {
			/* the new file stays root's */
		}
	if (fchmod(fd, m) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "chmod '%s'", abs);
		goto fail;
	}
	if (fstat(fd, &st) < 0 || close(fd) < 0) {
		fd = -1;
		pisb_err_sys(e, PISB_EXIT_FAIL, "write '%s'", abs);
		goto fail;
	}
	fd = -1;
	if (renameat(t->dirfd, tmp, t->dirfd, t->base) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "replace '%s'", abs);
		goto fail;
	}
	*bytes = st.st_size;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(t->dirfd, tmp, 0);
	return -1;
}

int pisb_fs_write(const struct pisb_fs *fs, const char *abs, const struct pisb_fs_src *src,
		  int mode, bool mkdirs, long long *bytes, struct pisb_err *e)
{
	struct target t;
	int r;

	if (target_open(fs, abs, mkdirs, &t, e) < 0) {
		target_release(&t);
		return -1;
	}
	r = replace(&t, abs, src, mode, bytes, e);
	target_release(&t);
	return r;
}

int pisb_fs_edit(const struct pisb_fs *fs, const char *abs, const struct pisb_fs_edit *ed,
		 size_t n, long long *bytes, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf orig = PISB_BUF_INIT, out = PISB_BUF_INIT;
	struct pisb_fs_src src = { -1, NULL, 0 };
	struct target t;
	struct stat st;
	int fd, r;

	fd = open_file(fs, abs, &st, e);
	if (fd < 0)
		return -1;
	r = pisb_read_fd(fd, &orig, (size_t)1 << 30);
	close(fd);
	if (r < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "read '%s'", abs);
	if (pisb_edit_apply(orig.s, orig.len, ed, n, abs, &out, e) < 0)
		return -1;
	src.data = out.s ? out.s : "";
	src.n = out.len;
	if (target_open(fs, abs, false, &t, e) < 0) {
		target_release(&t);
		return -1;
	}
	r = replace(&t, abs, &src, -1, bytes, e);
	target_release(&t);
	return r;
}

/* ---- ls, stat ---- */

static const char *type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

void pisb_fs_info_release(struct pisb_fs_info *i)
{
	free(i->name);
	free(i->target);
	i->name = i->target = NULL;
}

void pisb_fs_infos_free(struct pisb_fs_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pisb_fs_info_release(&v[i]);
	free(v);
}

static void fill_info(struct pisb_fs_info *i, const struct stat *st)
{
	i->type = type_name(st->st_mode);
	i->size = st->st_size;
	i->mode = st->st_mode & 07777;
	i->mtime = st->st_mtim.tv_sec;
}

static char *read_link(int dirfd, const char *name)
{
	char buf[4096];
	ssize_t n = readlinkat(dirfd, name, buf, sizeof(buf) - 1);

	if (n < 0)
		return xstrdup("");
	buf[n] = '\0';
	return xstrdup(buf);
}

static int cmp_info(const void *a, const void *b)
{
	return strcmp(((const struct pisb_fs_info *)a)->name, ((const struct pisb_fs_info *)b)->name);
}

/* Open a directory for listing: missing -> 3, not a directory -> 1. */
static int open_dir(const struct pisb_fs *fs, const char *abs, struct pisb_err *e)
{
	int fd = pisb_fs_resolve(fs->root, abs, O_RDONLY | O_DIRECTORY, 0);

	if (fd >= 0)
		return fd;
	if (errno == ENOTDIR) {
		int probe = pisb_fs_resolve(fs->root, abs, O_PATH, 0);
		if (probe >= 0) {
			close(probe);
			return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a directory", abs);
		}
		errno = ENOENT;
	}
	return path_err(e, abs, "open");
}

int pisb_fs_ls(const struct pisb_fs *fs, const char *abs, struct pisb_fs_info **out,
	       size_t *np, struct pisb_err *e)
{
	_cleanup_close_ int fd = open_dir(fs, abs, e);
	struct pisb_fs_info *v = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	struct dirent *de;

	*out = NULL;
	*np = 0;
	if (fd < 0)
		return -1;
	d = fdopendir(dup(fd));
	if (!d)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "list '%s'", abs);
	while ((errno = 0, de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;   /* gone meanwhile */
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			v = xrealloc(v, cap * sizeof(*v));
		}
		memset(&v[n], 0, sizeof(v[n]));
		v[n].name = xstrdup(de->d_name);
		fill_info(&v[n], &st);
		if (S_ISLNK(st.st_mode))
			v[n].target = read_link(fd, de->d_name);
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), cmp_info);
	*out = v;
	*np = n;
	return 0;
}

static bool can(int fd, int how)
{
	return faccessat(fd, "", how, AT_EMPTY_PATH | AT_EACCESS) == 0;
}

int pisb_fs_stat(const struct pisb_fs *fs, const char *abs, struct pisb_fs_info *i,
		 struct pisb_err *e)
{
	_cleanup_close_ int fd = pisb_fs_resolve(fs->root, abs, O_PATH | O_NOFOLLOW, 0);
	_cleanup_close_ int tfd = -1;
	struct stat st;

	memset(i, 0, sizeof(*i));
	if (fd < 0)
		return path_err(e, abs, "stat");
	if (fstat(fd, &st) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s'", abs);
	i->name = xstrdup(abs);
	fill_info(i, &st);
	if (S_ISLNK(st.st_mode)) {
		i->target = read_link(fd, "");
		tfd = pisb_fs_resolve(fs->root, abs, O_PATH, 0);
	}
	if (!S_ISLNK(st.st_mode) || tfd >= 0) {
		int f = tfd >= 0 ? tfd : fd;
		i->readable = can(f, R_OK);
		i->writable = can(f, W_OK);
	}
	return 0;
}

/* ---- find ---- */

struct find_ctx {
	struct pisb_pathglob g;
	long long limit, count;
	bool truncated;
	pisb_fs_find_fn fn;
	void *arg;
	struct pisb_buf tmp;
};

static int find_cb(void *arg, const struct pisb_walk_entry *en)
{
	struct find_ctx *f = arg;

	if (!pisb_pathglob_match(&f->g, en->rel, en->name))
		return PISB_WALK_CONTINUE;
	if (f->count == f->limit) {
		f->truncated = true;
		return PISB_WALK_STOP;
	}
	f->count++;
	if (en->type == DT_DIR) {
		pisb_buf_reset(&f->tmp);
		pisb_buf_adds(&f->tmp, en->rel);
		pisb_buf_addc(&f->tmp, '/');
		f->fn(f->arg, f->tmp.s);
	} else {
		f->fn(f->arg, en->rel);
	}
	return PISB_WALK_CONTINUE;
}

int pisb_fs_find(const struct pisb_fs *fs, const struct pisb_fs_find *o,
		 pisb_fs_find_fn fn, void *arg, bool *truncated, struct pisb_err *e)
{
	_cleanup_close_ int fd = open_dir(fs, o->dir, e);
	struct find_ctx f;
	struct pisb_walk_opts wo = { fs->root, fd, o->dir, !o->no_ignore };
	int r;

	*truncated = false;
	if (fd < 0)
		return -1;
	memset(&f, 0, sizeof(f));
	pisb_pathglob_init_find(&f.g, o->pattern);
	f.limit = o->limit;
	f.fn = fn;
	f.arg = arg;
	r = pisb_walk(&wo, find_cb, &f, e);
	*truncated = f.truncated;
	pisb_pathglob_release(&f.g);
	pisb_buf_release(&f.tmp);
	return r;
}

/* ---- grep ----
 *
 * Files are searched whole (search.h).  A directory is searched by a pool:
 * this thread walks (pisb_walk, in order) and opens each file, workers
 * search them into per-file records, and this thread reports the records
 * file by file in walk order, so the output and --limit are those of a
 * single-threaded search. */

enum { REC_MATCH = 1, REC_AFTER, REC_BEFORE, REC_MORE };

struct grep {
	const struct pisb_fs_grep *o;
	struct pisb_search *search;
	struct pisb_pathglob glob;
	bool have_glob;
	pisb_fs_grep_fn fn;
	void *arg;
	struct pisb_fs_grep_result *res;
	bool stop;
};

/* One searcher: the pool's workers, or the caller for a single file. */
struct gsearch {
	struct grep *g;
	struct pisb_search_ws *ws;
	char *buf;
	size_t cap;
	struct pisb_buf *rec;    /* NULL: report directly */
	struct pisb_buf u8;      /* a UTF-16 file as UTF-8 */
	struct pisb_buf mrec;    /* a mapped file's records, reporting directly */
	/* per file */
	const char *rel;
	size_t emitted_end;      /* lines before this offset were reported */
	long long emitted_line;  /* number of the last reported line */
	long long matches;       /* of this file (with rec) */
	int after_left;
};

static void gsearch_release(struct gsearch *w)
{
	pisb_search_ws_free(w->ws);
	free(w->buf);
	pisb_buf_release(&w->u8);
	pisb_buf_release(&w->mrec);
}

/* Newlines in p[0..n) (lit.h: many bytes at a time). */
static long long count_nl(const char *p, size_t n)
{
	return (long long)pisb_lit_count(p, n, '\n');
}

static void rec_put(struct pisb_buf *b, int kind, long long line, const char *s, size_t len, bool cut)
{
	unsigned char h[14];
	uint32_t l32 = (uint32_t)len;

	h[0] = (unsigned char)kind;
	h[1] = cut;
	memcpy(h + 2, &line, 8);
	memcpy(h + 10, &l32, 4);
	pisb_buf_add(b, h, sizeof(h));
	pisb_buf_add(b, s, len);
}

static void emit(struct gsearch *w, const char *s, size_t len, long long line, int kind)
{
	struct pisb_fs_grep_line l = { w->rel, line, s, len, false, kind != REC_MATCH };
	size_t chars = 0, i;

	/* no more characters than bytes: only a longer line may need a cut */
	for (i = len > PISB_FS_LINE_CAP ? 0 : len; i < len; i++) {
		if (((unsigned char)s[i] & 0xC0) != 0x80 && ++chars > PISB_FS_LINE_CAP)
			break;
	}
	if (i < len) {
		l.len = i;
		l.cut = true;
	}
	if (w->rec) {
		rec_put(w->rec, kind, line, l.text, l.len, l.cut);
		return;
	}
	if (l.cut)
		w->g->res->lines_truncated = true;
	w->g->fn(w->g->arg, &l);
}

/* Report the line starting at off; returns the offset past it. */
static size_t emit_line_at(struct gsearch *w, const char *buf, size_t n, size_t off, long long line,
			   int kind)
{
	const char *nl = memchr(buf + off, '\n', n - off);
	size_t end = nl ? (size_t)(nl - buf) : n;

	emit(w, buf + off, end - off, line, kind);
	return nl ? end + 1 : n;
}

static void flush_after(struct gsearch *w, const char *buf, size_t n, size_t upto)
{
	while (w->after_left > 0 && w->emitted_end < upto && w->emitted_end < n) {
		w->emitted_end = emit_line_at(w, buf, n, w->emitted_end, w->emitted_line + 1, REC_AFTER);
		w->emitted_line++;
		w->after_left--;
	}
}

/* Has the limit been reached (reporting directly: stop everything; into
 * records: mark the file as having more)? */
static bool at_limit(struct gsearch *w)
{
	struct grep *g = w->g;

	if (w->rec) {
		if (w->matches < g->o->limit)
			return false;
		rec_put(w->rec, REC_MORE, 0, "", 0, false);
		return true;
	}
	if (g->res->matches < g->o->limit)
		return false;
	g->res->limit_reached = true;
	g->stop = true;
	return true;
}

static void grep_buf(struct gsearch *w, const char *buf, size_t n)
{
	long long lineno = 1;
	size_t lineno_pos = 0, pos = 0, ls, le;
	int C = w->g->o->context;

	w->emitted_end = 0;
	w->emitted_line = 0;
	w->after_left = 0;
	w->matches = 0;
	pisb_search_begin(w->ws, buf, n);
	while (pos < n && pisb_search_next(w->ws, buf, n, pos, &ls, &le)) {
		size_t b = ls;
		long long k = 0;

		lineno += count_nl(buf + lineno_pos, ls - lineno_pos);
		lineno_pos = ls;
		flush_after(w, buf, n, ls);
		if (at_limit(w))
			return;
		while (k < C && b > w->emitted_end) {
			const char *a = b - 1 > w->emitted_end ? memrchr(buf + w->emitted_end, '\n', b - 1 - w->emitted_end) : NULL;
			b = a ? (size_t)(a - buf) + 1 : w->emitted_end;
			k++;
		}
		for (long long i = k; i > 0; i--)
			b = emit_line_at(w, buf, n, b, lineno - i, REC_BEFORE);
		emit(w, buf + ls, le - ls, lineno, REC_MATCH);
		if (w->rec)
			w->matches++;
		else
			w->g->res->matches++;
		w->emitted_end = le < n ? le + 1 : n;
		w->emitted_line = lineno;
		w->after_left = C;
		pos = w->emitted_end;
	}
	flush_after(w, buf, n, n);
}

/* A file is binary when its first BIN_PEEK bytes hold a NUL (as ripgrep's
 * first buffer). */
#define BIN_PEEK 8192
/* A file larger than this is read in two: its first BIN_PEEK bytes, and
 * the rest only when they are text (a binary file is mostly not read at
 * all; below this a second read costs more than the bytes it saves) */
#define SPLIT_READ (16 * 1024)

static bool is_binary(const char *buf, size_t n)
{
	return !pisb_utf16_is(buf, n) && memchr(buf, 0, n < BIN_PEEK ? n : BIN_PEEK);
}

/* Read fd (size bytes when fstat was asked) into w->buf; false for a
 * binary file, read no further than to tell. */
static bool read_text(struct gsearch *w, int fd, size_t size, size_t *np)
{
	size_t n = 0, want = size >= SPLIT_READ ? BIN_PEEK : size + 1;
	bool peeked = false;

	for (;;) {
		ssize_t r;
		if (w->cap < n + want) {
			w->cap = n + want < 256 * 1024 ? 256 * 1024 : n + want;
			w->buf = xrealloc(w->buf, w->cap);
		}
		r = read(fd, w->buf + n, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (!peeked && (n >= BIN_PEEK || (size_t)r < want)) {
			peeked = true;
			if (is_binary(w->buf, n))
				return false;
		}
		/* a short read at the size fstat gave: the end (no read of 0
		 * to learn it); a file that grew is read on */
		if ((size_t)r < want && n >= size)
			break;
		want = n < size ? size + 1 - n : 64 * 1024;
	}
	*np = n;
	return true;
}

/* Report the records of the file rel (only one thread at a time). */
static void report_recs(struct grep *g, const char *rel, const struct pisb_buf *rec)
{
	const char *q = rec->s, *end = q + rec->len;
	const char *before = NULL;    /* before-context held until its match */

	while (q && q < end && !g->stop) {
		struct pisb_fs_grep_line l;
		uint32_t len;
		int kind = (unsigned char)q[0];
		const char *r = q;
		memcpy(&len, q + 10, 4);
		q += 14 + len;
		if (kind == REC_BEFORE) {
			if (!before)
				before = r;
			continue;
		}
		if (kind == REC_MORE || (kind == REC_MATCH && g->res->matches >= g->o->limit)) {
			g->res->limit_reached = true;
			g->stop = true;
			break;
		}
		for (const char *b = before ? before : r; b <= r; ) {
			uint32_t bl;
			memcpy(&l.line, b + 2, 8);
			memcpy(&bl, b + 10, 4);
			l.path = rel;
			l.text = b + 14;
			l.len = bl;
			l.cut = b[1];
			l.context = (unsigned char)b[0] != REC_MATCH;
			if (l.cut)
				g->res->lines_truncated = true;
			g->fn(g->arg, &l);
			b += 14 + bl;
		}
		before = NULL;
		if (kind == REC_MATCH)
			g->res->matches++;
	}
}

/* Search len bytes of text (UTF-16 as UTF-8) for the file rel. */
static void grep_text(struct gsearch *w, const char *buf, size_t len, const char *rel)
{
	if (pisb_utf16_is(buf, len)) {
		/* UTF-16 text: searched as UTF-8 (utf16.h) */
		pisb_buf_reset(&w->u8);
		pisb_utf16_to_utf8(buf, len, &w->u8);
		buf = w->u8.s ? w->u8.s : "";
		len = w->u8.len;
	}
	if (memchr(buf, 0, len < BIN_PEEK ? len : BIN_PEEK))
		return;
	w->rel = rel;
	/* a UTF-8 byte-order mark is not part of the first line (ripgrep
	 * drops it too) */
	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3))
		grep_buf(w, buf + 3, len - 3);
	else
		grep_buf(w, buf, len);
}

/* A mapped file can shrink while it is searched (the sandbox writes its
 * own files as pisb reads them), and a read past its new end is SIGBUS.
 * So a mapped file is searched with this thread's jump point set: the
 * handler (installed once, for the process) jumps back for a fault inside
 * that map, and the file is reported as far as it was searched; any other
 * SIGBUS still ends the process as it would have. */
static __thread sigjmp_buf *bus_jmp;
static __thread const char *bus_lo, *bus_hi;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	const char *a = si->si_addr;

	(void)uc;
	if (bus_jmp && a >= bus_lo && a < bus_hi)
		siglongjmp(*bus_jmp, 1);
	signal(sig, SIG_DFL);   /* the fault repeats, and kills */
}

static void bus_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

/* Search a mapped file into records (never straight to the output, which
 * a jump out of must not leave half-written), then report them. */
static void grep_mapped(struct gsearch *w, const char *map, size_t n, const char *rel)
{
	struct pisb_buf *volatile rec = w->rec;
	sigjmp_buf env;

	pthread_once(&bus_once, bus_install);
	if (!rec) {
		pisb_buf_reset(&w->mrec);
		w->rec = &w->mrec;
		w->matches = 0;
	}
	bus_lo = map;
	bus_hi = map + n;
	if (sigsetjmp(env, 1) == 0) {
		bus_jmp = &env;
		grep_text(w, map, n, rel);
	}
	bus_jmp = NULL;
	if (!rec) {
		w->rec = NULL;
		report_recs(w->g, rel, &w->mrec);
	}
}

static void grep_fd(struct gsearch *w, int fd, const char *rel)
{
	struct stat st;
	size_t n = 0;
	char *map;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if (st.st_size >= (16 << 20)) {
		n = (size_t)st.st_size;
		map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED)
			return;
		madvise(map, n, MADV_SEQUENTIAL);
		grep_mapped(w, map, n, rel);
		munmap(map, n);
	} else if (read_text(w, fd, (size_t)st.st_size, &n)) {
		grep_text(w, w->buf, n, rel);
	}
}

static int grep_cb(void *arg, const struct pisb_walk_entry *en)
{
	struct gsearch *w = arg;
	int fd;

	if (en->type != DT_REG)
		return PISB_WALK_CONTINUE;
	if (w->g->have_glob && !pisb_pathglob_match(&w->g->glob, en->rel, en->name))
		return PISB_WALK_CONTINUE;
	fd = openat(en->dirfd, en->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return PISB_WALK_CONTINUE;
	grep_fd(w, fd, en->rel);
	close(fd);
	return w->g->stop ? PISB_WALK_STOP : PISB_WALK_CONTINUE;
}

/* ---- the pool ----
 *
 * This thread walks and lists the files; workers (and this thread once
 * the walk is done) take them in order, search each into its records,
 * and whoever finishes the file that is next in walk order reports it and
 * the finished ones after it.  Nobody waits for another but for work. */

#define POOL_WINDOW 4096          /* files searched ahead of the report */
#define POOL_MAX_WORKERS 8

/* A directory of listed files, held open for the workers: a file is
 * opened by its name in it (one lookup, as the walk's own openat) rather
 * than by its path from the searched directory (a lookup of each of its
 * directories again: a fifth of a literal search's time, measured) */
struct gdir {
	int fd;
	int refs;                 /* its listed files not yet opened, + the walk's */
};

struct gitem {
	char *rel;
	size_t name;              /* the offset of its name in rel */
	struct gdir *dir;         /* NULL: opened by rel from the searched dir */
	bool done;
	struct pisb_buf rec;
};

struct gpool {
	struct grep *g;
	int dirfd;                /* the searched directory */
	pthread_mutex_t mu;
	pthread_cond_t work;
	struct gitem *v;          /* grows; index = walk order */
	size_t n, cap;
	size_t take, head;        /* next to search, next to report */
	bool walked, reporting;
	int waiting;
	/* the walk's (this thread's) current directory */
	struct gdir *cur;
	char *cur_rel;            /* its path in rel terms ("" at the top) */
	int ndirs, maxdirs;       /* gdirs open, and how many may be (a
				   * quarter of the fds a process may have) */
};

/* Drop a reference to d (with p->mu held); its fd, to close once the lock
 * is let go, is returned when it was the last. */
static int gdir_put(struct gpool *p, struct gdir *d)
{
	int fd = -1;

	if (d && --d->refs == 0) {
		fd = d->fd;
		free(d);
		p->ndirs--;
	}
	return fd;
}

static void pool_report(struct gpool *p, struct gitem *it)
{
	report_recs(p->g, it->rel, &it->rec);
	pisb_buf_release(&it->rec);
	free(it->rel);
	it->rel = NULL;
}

/* Search files until the walk is over and none is left. */
static void pool_work(struct gpool *p, struct gsearch *w)
{
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->take == p->n && !p->walked) {
			p->waiting++;
			pthread_cond_wait(&p->work, &p->mu);
			p->waiting--;
		}
		if (p->take == p->n)
			break;
		if (p->take - p->head >= POOL_WINDOW && !p->g->stop) {
			/* far ahead of the report: let it catch up */
			p->waiting++;
			pthread_cond_wait(&p->work, &p->mu);
			p->waiting--;
			continue;
		}
		size_t i = p->take++;
		char *rel = p->v[i].rel;
		struct gdir *dir = p->v[i].dir;
		bool stop = p->g->stop;
		struct pisb_buf rec = PISB_BUF_INIT;
		int fd = -1, dfd;
		pthread_mutex_unlock(&p->mu);
		if (!stop && dir) {
			/* a name, no '/': the walk's own open, one lookup */
			fd = openat(dir->fd, rel + p->v[i].name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		} else if (!stop) {
			struct open_how how = { .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
						.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
			fd = (int)syscall(SYS_openat2, p->dirfd, rel, &how, sizeof(how));
		}
		if (fd >= 0) {
			w->rec = &rec;
			grep_fd(w, fd, rel);
			close(fd);
		}
		pthread_mutex_lock(&p->mu);
		if ((dfd = gdir_put(p, dir)) >= 0) {
			pthread_mutex_unlock(&p->mu);
			close(dfd);
			pthread_mutex_lock(&p->mu);
		}
		p->v[i].rec = rec;
		p->v[i].done = true;
		if (p->reporting || i != p->head)
			continue;
		/* the next file in order is done: report it and those after it */
		p->reporting = true;
		while (p->head < p->n && p->v[p->head].done) {
			/* a copy: the walk may move p->v as it grows */
			struct gitem it = p->v[p->head];
			pthread_mutex_unlock(&p->mu);
			pool_report(p, &it);
			pthread_mutex_lock(&p->mu);
			p->v[p->head].rel = NULL;
			memset(&p->v[p->head].rec, 0, sizeof(it.rec));
			p->head++;
		}
		p->reporting = false;
		if (p->waiting)
			pthread_cond_broadcast(&p->work);
	}
	pthread_mutex_unlock(&p->mu);
}

static void *pool_worker(void *arg)
{
	struct gpool *p = arg;
	struct gsearch w;

	memset(&w, 0, sizeof(w));
	w.g = p->g;
	w.ws = pisb_search_ws_new(p->g->search);
	pool_work(p, &w);
	gsearch_release(&w);
	return NULL;
}

static int pool_cb(void *arg, const struct pisb_walk_entry *en)
{
	struct gpool *p = arg;
	struct grep *g = p->g;

	if (en->type != DT_REG)
		return PISB_WALK_CONTINUE;
	if (g->have_glob && !pisb_pathglob_match(&g->glob, en->rel, en->name))
		return PISB_WALK_CONTINUE;
	char *rel = xstrdup(en->rel);
	size_t name = (size_t)(en->name - en->path) - (size_t)(en->rel - en->path);
	int old = -1, nfd = -1;
	if (!p->cur_rel || strlen(p->cur_rel) != name || memcmp(p->cur_rel, rel, name)) {
		/* a new directory: held open for its files (a dup of the
		 * walk's, which it closes when done with it), while few are */
		bool room;
		pthread_mutex_lock(&p->mu);
		old = gdir_put(p, p->cur);
		p->cur = NULL;
		room = p->ndirs < p->maxdirs;
		pthread_mutex_unlock(&p->mu);
		if (old >= 0)
			close(old);
		free(p->cur_rel);
		p->cur_rel = xstrndup(rel, name);
		if (room && (nfd = fcntl(en->dirfd, F_DUPFD_CLOEXEC, 0)) >= 0) {
			p->cur = xcalloc(1, sizeof(*p->cur));
			p->cur->fd = nfd;
			p->cur->refs = 1;
		}
	}
	pthread_mutex_lock(&p->mu);
	if (p->cur && nfd >= 0)
		p->ndirs++;
	if (g->stop) {
		pthread_mutex_unlock(&p->mu);
		free(rel);
		return PISB_WALK_STOP;
	}
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 1024;
		p->v = xrealloc(p->v, p->cap * sizeof(*p->v));
	}
	memset(&p->v[p->n], 0, sizeof(p->v[p->n]));
	p->v[p->n].rel = rel;
	p->v[p->n].name = name;
	p->v[p->n].dir = p->cur;
	if (p->cur)
		p->cur->refs++;
	p->n++;
	if (p->waiting)
		pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->mu);
	return PISB_WALK_CONTINUE;
}

static int cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		return CPU_COUNT(&set);
	return 1;
}

/* A directory: walked here, searched by the pool (when there is more than
 * one core), reported in walk order. */
static int grep_dir(struct grep *g, const struct pisb_walk_opts *wo, struct pisb_err *e)
{
	struct gpool *p;
	pthread_t th[POOL_MAX_WORKERS];
	int nw = 0, want = cpus(), ret;
	struct rlimit rl;

	if (want > POOL_MAX_WORKERS)
		want = POOL_MAX_WORKERS;
	p = xcalloc(1, sizeof(*p));
	p->g = g;
	p->dirfd = wo->dirfd;
	p->maxdirs = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur / 4 < POOL_WINDOW ? (int)(rl.rlim_cur / 4) : POOL_WINDOW;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	if (want > 1)
		for (; nw < want; nw++)
			if (pthread_create(&th[nw], NULL, pool_worker, p) != 0)
				break;
	if (nw == 0) {
		/* one core (or no thread to be had): search as we walk */
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->work);
		free(p);
		struct gsearch w;
		memset(&w, 0, sizeof(w));
		w.g = g;
		w.ws = pisb_search_ws_new(g->search);
		ret = pisb_walk(wo, grep_cb, &w, e);
		gsearch_release(&w);
		return ret;
	}
	ret = pisb_walk(wo, pool_cb, p, e);
	pthread_mutex_lock(&p->mu);
	int last = gdir_put(p, p->cur);
	p->cur = NULL;
	p->walked = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	if (last >= 0)
		close(last);
	free(p->cur_rel);
	pool_worker(p);          /* this thread helps with what is left */
	for (int i = 0; i < nw; i++)
		pthread_join(th[i], NULL);
	for (size_t i = p->head; i < p->n; i++) {   /* stopped: unreported */
		pisb_buf_release(&p->v[i].rec);
		free(p->v[i].rel);
	}
	free(p->v);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	free(p);
	return ret;
}

int pisb_fs_grep(const struct pisb_fs *fs, const struct pisb_fs_grep *o,
		 pisb_fs_grep_fn fn, void *arg, struct pisb_fs_grep_result *r,
		 struct pisb_err *e)
{
	struct grep g;
	_cleanup_close_ int fd = -1;
	struct stat st;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	memset(&g, 0, sizeof(g));
	g.o = o;
	g.fn = fn;
	g.arg = arg;
	g.res = r;
	if (pisb_search_new(&g.search, o->pattern, o->literal, o->icase, e) < 0)
		return -1;
	if (o->glob) {
		pisb_pathglob_init(&g.glob, o->glob);
		g.have_glob = true;
	}

	fd = pisb_fs_resolve(fs->root, o->path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0) {
		ret = path_err(e, o->path, "open");
	} else if (fstat(fd, &st) < 0) {
		ret = pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s'", o->path);
	} else if (S_ISDIR(st.st_mode)) {
		struct pisb_walk_opts wo = { fs->root, fd, o->path, !o->no_ignore };
		ret = grep_dir(&g, &wo, e);
	} else if (S_ISREG(st.st_mode)) {
		const char *base = strrchr(o->path, '/');
		struct gsearch w;
		memset(&w, 0, sizeof(w));
		w.g = &g;
		w.ws = pisb_search_ws_new(g.search);
		grep_fd(&w, fd, base && base[1] ? base + 1 : o->path);
		gsearch_release(&w);
	} else {
		ret = pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a regular file or directory", o->path);
	}
	if (g.have_glob)
		pisb_pathglob_release(&g.glob);
	pisb_search_free(g.search);
	return ret;
}

/* ---- logs ---- */

int pisb_fs_logs(const struct pisb_fs *fs, const char *service, long long lines,
		 size_t cap, struct pisb_buf *out, long long *nlines, bool *truncated,
		 struct pisb_err *e)
{
	_cleanup_free_ char *rel = NULL;
	_cleanup_free_ char *win = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;
	off_t from;
	size_t n, start, end, ws = 0, s;
	long long k = 0;
	bool more;

	*truncated = false;
	*nlines = 0;
	if (service && !pisb_service_name_valid(service))
		return pisb_err_set(e, PISB_EXIT_USAGE, "invalid service name '%s'", service);
	if (service && !fs->services)
		return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' has no services: its driver runs none (its log is %s)",
				    fs->name, fs->log);
	rel = service ? xasprintf("logs/%s.log", service) : xstrdup(fs->log ? fs->log : "controller.log");
	fd = openat(fs->idir, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT && !service)
			return 0;   /* nothing logged yet */
		if (errno == ENOENT)
			return pisb_err_set(e, PISB_EXIT_NOTFOUND, "sandbox '%s' has no log for service '%s'",
					    fs->name, service);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open %s", rel);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return pisb_err_set(e, PISB_EXIT_FAIL, "%s is not a regular file", rel);
	/* one window at the end: cap bytes, plus one to tell whether the first
	 * line in it is whole */
	from = st.st_size > (off_t)cap + 1 ? st.st_size - (off_t)cap - 1 : 0;
	win = xmalloc(cap + 2);
	n = 0;
	while (n < cap + 1) {
		ssize_t r = pread(fd, win + n, cap + 1 - n, from + (off_t)n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "read %s", rel);
		if (r == 0)
			break;
		n += (size_t)r;
	}
	end = n;
	start = end;
	/* the first whole line of the window: skip a part cut by the window */
	if (from > 0) {
		const char *a = memchr(win, '\n', n);
		ws = a ? (size_t)(a - win) + 1 : n;
	}
	more = end > ws;
	s = end;
	if (s > ws && win[s - 1] == '\n')
		s--;   /* the last line's own newline */
	while (more && k < lines) {
		const char *a = s > ws ? memrchr(win + ws, '\n', s - ws) : NULL;
		if (a) {
			start = (size_t)(a - win) + 1;
			s = (size_t)(a - win);
		} else {
			start = ws;
			more = false;
		}
		k++;
	}
	if (k < lines && from > 0) {
		*truncated = true;   /* the cap ran out before the lines did */
		if (start == end && end > 0)
			start = end > cap ? end - cap : 0;   /* one line longer than the cap */
	}
	pisb_buf_add(out, win + start, end - start);
	*nlines = end > start ? count_nl(win + start, end - start) + (win[end - 1] != '\n') : 0;
	return 0;
}
