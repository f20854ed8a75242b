/* archive.c - push and pull through a pax archive; see archive.h. */
#include "archive.h"
#include "err.h"
#include "fs.h"
#include "gitindex.h"
#include "ignore.h"
#include "proc.h"
#include "sha256.h"
#include "state.h"
#include "util.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include "archive_lazy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* libarchive is loaded when push or pull runs, not at every start (see
 * archive_lazy.h): read and write must stay close to a bare nsenter + cat. */

void pisb_xfer_release(struct pisb_xfer *x)
{
	free(x->where);
	x->where = NULL;
}

/* ---- writing an archive ---- */

struct sink {
	int fd;
	struct pisb_sha256 sha;
	long long n;
	int err;          /* errno of a failed write */
};

static la_ssize_t sink_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
	struct sink *s = ctx;

	if (pisb_write_all(s->fd, buf, n) < 0) {
		s->err = errno;
		archive_set_error(a, errno, "write the archive: %s", strerror(errno));
		return -1;
	}
	pisb_sha256_update(&s->sha, buf, n);
	s->n += (long long)n;
	return (la_ssize_t)n;
}

static struct archive *writer_open(struct sink *s, int fd)
{
	struct archive *a = archive_write_new();

	s->fd = fd;
	s->n = 0;
	s->err = 0;
	pisb_sha256_init(&s->sha);
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_per_block(a, 0);   /* write through, no padding */
	if (archive_write_open(a, s, NULL, sink_write, NULL) != ARCHIVE_OK) {
		archive_write_free(a);
		return NULL;
	}
	return a;
}

/* The data regions of the file on fd (size bytes) as sparse entries of en
 * when it has holes: the archive then carries only the data, and the
 * extracting side seeks over the holes.  Regions are kept in rs (pairs of
 * offset, length); *n 0 when the file is dense (or SEEK_DATA is missing). */
#define SPARSE_MAX 4096   /* regions; past that, the rest is sent densely */
static void sparse_map(int fd, long long size, struct archive_entry *en, long long *rs, size_t *n)
{
	long long off = 0;

	*n = 0;
	if (size <= 0)
		return;
	while (off < size && *n < SPARSE_MAX) {
		off_t d = lseek(fd, off, SEEK_DATA), h;
		if (d < 0) {
			if (errno == ENXIO)
				break;   /* a hole up to the end */
			*n = 0;
			return;
		}
		h = lseek(fd, d, SEEK_HOLE);
		if (h < 0 || h > size)
			h = size;
		if (*n == SPARSE_MAX - 1)
			h = size;
		rs[2 * *n] = d;
		rs[2 * *n + 1] = h - d;
		(*n)++;
		off = h;
	}
	if (*n == 1 && rs[0] == 0 && rs[1] == size)
		*n = 0;   /* no hole */
	if (*n == 0 && off == 0 && lseek(fd, 0, SEEK_DATA) < 0 && errno == ENXIO) {
		rs[0] = size;   /* all hole: one empty region at the end */
		rs[1] = 0;
		*n = 1;
	}
	lseek(fd, 0, SEEK_SET);
	for (size_t i = 0; i < *n; i++)
		archive_entry_sparse_add_entry(en, rs[2 * i], rs[2 * i + 1]);
}

static const char zeros[1 << 20];

/* Send size bytes of fd: the data regions rs[0..n) (hole bytes are given
 * to the archive as zeros, which a sparse entry does not store), or the
 * whole file when n is 0. */
static int send_data(struct archive *a, int fd, long long size, const long long *rs, size_t n,
		     const char *arcname, struct pisb_err *e)
{
	char buf[64 * 1024];
	long long pos = 0;
	size_t i = 0;

	while (pos < size) {
		long long start = n ? (i < n ? rs[2 * i] : size) : 0;
		long long end = n ? (i < n ? rs[2 * i] + rs[2 * i + 1] : size) : size;
		while (pos < start) {
			size_t k = (size_t)(start - pos) < sizeof(zeros) ? (size_t)(start - pos) : sizeof(zeros);
			if (archive_write_data(a, zeros, k) < 0)
				goto aerr;
			pos += (long long)k;
		}
		while (pos < end) {
			size_t want = sizeof(buf) < (size_t)(end - pos) ? sizeof(buf) : (size_t)(end - pos);
			ssize_t r = pread(fd, buf, want, pos);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return pisb_err_sys(e, PISB_EXIT_FAIL, "read '%s'", arcname);
			if (r == 0)
				return 0;   /* it shrank: the archive pads it with zeros */
			if (archive_write_data(a, buf, (size_t)r) < 0)
				goto aerr;
			pos += r;
		}
		i++;
	}
	return 0;
aerr:
	return pisb_err_set(e, PISB_EXIT_FAIL, "archive '%s': %s", arcname, archive_error_string(a));
}

/* Add dirfd/name to the archive as arcname (symlinks as symlinks).
 * sparse: a file with holes travels as a sparse entry (the reader is
 * libarchive, never a tar that may not know them). */
static int add_entry(struct archive *a, int dirfd, const char *name, const char *arcname,
		     bool sparse, struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_free_ long long *rs = NULL;
	size_t nrs = 0;
	struct archive_entry *en;
	struct stat st;
	char link[4096];
	_cleanup_close_ int fd = -1;
	int ret = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) < 0)
		return errno == ENOENT ? 0 : pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s'", arcname);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
		return 0;   /* devices, fifos, sockets do not travel */
	en = archive_entry_new();
	archive_entry_set_pathname(en, arcname);
	archive_entry_set_perm(en, st.st_mode & 01777);
	archive_entry_set_mtime(en, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	archive_entry_set_uid(en, 0);
	archive_entry_set_gid(en, 0);
	if (S_ISDIR(st.st_mode)) {
		archive_entry_set_filetype(en, AE_IFDIR);
	} else if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(dirfd, name, link, sizeof(link) - 1);
		if (n < 0) {
			archive_entry_free(en);
			return pisb_err_sys(e, PISB_EXIT_FAIL, "readlink '%s'", arcname);
		}
		link[n] = '\0';
		archive_entry_set_filetype(en, AE_IFLNK);
		archive_entry_set_symlink(en, link);
		x->files++;
	} else {
		fd = name[0] ? openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
			     : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0) {
			archive_entry_free(en);
			return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", arcname);
		}
		archive_entry_set_filetype(en, AE_IFREG);
		archive_entry_set_size(en, st.st_size);
		if (sparse && st.st_blocks * 512LL < st.st_size) {
			rs = xcalloc(2 * SPARSE_MAX, sizeof(*rs));
			sparse_map(fd, st.st_size, en, rs, &nrs);
		}
		x->files++;
		x->bytes += st.st_size;
	}
	if (archive_write_header(a, en) != ARCHIVE_OK) {
		ret = pisb_err_set(e, PISB_EXIT_FAIL, "archive '%s': %s", arcname, archive_error_string(a));
		goto out;
	}
	if (fd >= 0)
		ret = send_data(a, fd, st.st_size, rs, nrs, arcname, e);
out:
	archive_entry_free(en);
	return ret;
}

struct tree_ctx {
	struct archive *a;
	bool sparse;
	struct pisb_xfer *x;
	struct pisb_err *e;
};

static int tree_cb(void *arg, const struct pisb_walk_entry *en)
{
	struct tree_ctx *t = arg;

	return add_entry(t->a, en->dirfd, en->name, en->rel, t->sparse, t->x, t->e) < 0 ? -1 : PISB_WALK_CONTINUE;
}

/* Every entry under dirfd (named path, for messages) into a. */
static int add_tree(struct archive *a, int dirfd, const char *path, bool sparse,
		    struct pisb_xfer *x, struct pisb_err *e)
{
	struct tree_ctx t = { a, sparse, x, e };
	struct pisb_walk_opts o = { -1, dirfd, path, false };

	return pisb_walk(&o, tree_cb, &t, e);
}

/* Finish an archive; the digest and size go into x. */
static int writer_close(struct archive *a, struct sink *s, struct pisb_xfer *x, struct pisb_err *e)
{
	unsigned char d[32];
	int r = archive_write_close(a);

	if (r != ARCHIVE_OK && !e->msg[0])
		pisb_err_set(e, PISB_EXIT_FAIL, "finish the archive: %s", archive_error_string(a));
	archive_write_free(a);
	pisb_sha256_final(&s->sha, d);
	pisb_sha256_hex(d, x->sha256);
	x->archive_bytes = s->n;
	return r == ARCHIVE_OK ? 0 : -1;
}

/* ---- reading and extracting ---- */

ssize_t pisb_archive_src_read(struct archive *a, void *ctx, const void **out)
{
	struct pisb_archive_src *s = ctx;
	ssize_t r;

	do
		r = read(s->fd, s->buf, sizeof(s->buf));
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		archive_set_error(a, errno, "read the archive: %s", strerror(errno));
		return -1;
	}
	pisb_sha256_update(&s->sha, s->buf, (size_t)r);
	s->n += r;
	*out = s->buf;
	return r;
}

/* A relative name without "..": "a/b", never "/a", "../a", "a/../b". */
static bool safe_name(const char *p)
{
	if (!*p || p[0] == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		p += n;
		while (*p == '/')
			p++;
	}
	return true;
}

/* Follow the components of p[0..n) from depth; -1 once above the top. */
static int climb(const char *p, size_t n, int depth)
{
	const char *end = p + n;

	while (p < end) {
		const char *s = memchr(p, '/', (size_t)(end - p));
		size_t k = s ? (size_t)(s - p) : (size_t)(end - p);
		if (k == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return -1;
		} else if (k && !(k == 1 && p[0] == '.')) {
			depth++;
		}
		p += k + (s ? 1 : 0);
	}
	return depth;
}

/* Does symlink target t, placed at entry name, stay inside the tree? */
static bool safe_link(const char *name, const char *t)
{
	const char *last = strrchr(name, '/');
	int depth = last ? climb(name, (size_t)(last - name), 0) : 0;

	if (!*t || t[0] == '/' || depth < 0)
		return false;
	return climb(t, strlen(t), depth) >= 0;
}

bool pisb_path_in_git_dir(const char *p)
{
	while (p && *p) {
		size_t n = strcspn(p, "/");
		if (n == 4 && !strncasecmp(p, ".git", 4))
			return true;
		p += n;
		while (*p == '/')
			p++;
	}
	return false;
}

/* Extract the archive on fd into the directory destfd (the process's cwd
 * becomes destfd).  The digest of every byte read goes into sha_hex.
 * any_symlink: symlinks may point anywhere (inside a sandbox, where
 * "anywhere" is still the sandbox, and nothing is written through them);
 * else one that leaves the tree is refused.  skip_special: devices, fifos
 * and sockets are left out instead of refused.  o (pull): entries under
 * .git left out unless o->include_git; at most o->max_bytes of file data
 * (holes are not written: the disk seeks over them). */
static int extract(int fd, int destfd, bool any_symlink, bool skip_special,
		   const struct pisb_pull_opts *o, struct pisb_xfer *x, char sha_hex[65],
		   struct pisb_err *e)
{
	long long cap = o ? (o->max_bytes > 0 ? o->max_bytes : PISB_PULL_MAX_BYTES) : -1, data = 0;
	struct archive *a = archive_read_new(), *w = archive_write_disk_new();
	struct archive_entry *en;
	struct pisb_archive_src *src = xcalloc(1, sizeof(*src));
	unsigned char d[32];
	int ret = 0, r;

	src->fd = fd;
	pisb_sha256_init(&src->sha);
	archive_read_support_format_tar(a);
	archive_write_disk_set_options(w, ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
					  ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_PERM |
					  ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_NO_OVERWRITE);
	if (fchdir(destfd) < 0) {
		ret = pisb_err_sys(e, PISB_EXIT_FAIL, "enter the staging directory");
		goto out;
	}
	if (archive_read_open(a, src, NULL, pisb_archive_src_read, NULL) != ARCHIVE_OK) {
		ret = pisb_err_set(e, PISB_EXIT_FAIL, "read the archive: %s", archive_error_string(a));
		goto out;
	}
	while ((r = archive_read_next_header(a, &en)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(en);
		const char *hl = archive_entry_hardlink(en);
		mode_t type = archive_entry_filetype(en);

		if (name && name[0] && !name[strspn(name, "./")] && strstr(name, "..") == NULL)
			continue;   /* "." or "./": the staging directory itself is ours */
		if (!name || !safe_name(name)) {
			ret = pisb_err_set(e, PISB_EXIT_FAIL, "refusing archive entry '%s': absolute or '..' path",
					   name ? name : "");
			goto out;
		}
		if (hl && !safe_name(hl)) {
			ret = pisb_err_set(e, PISB_EXIT_FAIL, "refusing hard link '%s' -> '%s': it points outside",
					   name, hl);
			goto out;
		}
		if (o && !o->include_git && (pisb_path_in_git_dir(name) || pisb_path_in_git_dir(hl))) {
			x->left_out_git++;
			continue;   /* git would run what .git/config and hooks say */
		}
		if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && skip_special)
			continue;   /* as the local side's archives: specials do not travel */
		if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
			ret = pisb_err_set(e, PISB_EXIT_FAIL, "refusing archive entry '%s': not a file, directory or link",
					   name);
			goto out;
		}
		if (type == AE_IFLNK && !any_symlink && !safe_link(name, archive_entry_symlink(en) ? archive_entry_symlink(en) : "")) {
			ret = pisb_err_set(e, PISB_EXIT_FAIL, "refusing symlink '%s' -> '%s': it points outside",
					   name, archive_entry_symlink(en) ? archive_entry_symlink(en) : "");
			goto out;
		}
		archive_entry_set_perm(en, archive_entry_perm(en) & 01777);
		if (cap >= 0 && type == AE_IFREG && !hl && archive_entry_sparse_count(en) == 0 &&
		    archive_entry_size(en) > cap - data) {
			ret = pisb_err_set(e, PISB_EXIT_FAIL,
					   "pull would write more than %lld bytes of file data (at '%s', %lld bytes); nothing was written (raise the limit with --max-bytes)",
					   cap, name, (long long)archive_entry_size(en));
			goto out;
		}
		if (archive_write_header(w, en) != ARCHIVE_OK) {
			ret = pisb_err_set(e, PISB_EXIT_FAIL, "extract '%s': %s", name, archive_error_string(w));
			goto out;
		}
		if (type == AE_IFREG && !hl) {
			const void *buf;
			size_t size;
			la_int64_t off;
			while ((r = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK) {
				data += (long long)size;
				if (cap >= 0 && data > cap) {
					ret = pisb_err_set(e, PISB_EXIT_FAIL,
							   "pull would write more than %lld bytes of file data (at '%s'); nothing was written (raise the limit with --max-bytes)",
							   cap, name);
					goto out;
				}
				if (archive_write_data_block(w, buf, size, off) < 0) {
					ret = pisb_err_set(e, PISB_EXIT_FAIL, "extract '%s': %s", name,
							   archive_error_string(w));
					goto out;
				}
			}
			if (r != ARCHIVE_EOF) {
				ret = pisb_err_set(e, PISB_EXIT_FAIL, "read '%s' from the archive: %s", name,
						   archive_error_string(a));
				goto out;
			}
			x->bytes += archive_entry_size(en);
		}
		if (archive_write_finish_entry(w) != ARCHIVE_OK) {
			ret = pisb_err_set(e, PISB_EXIT_FAIL, "extract '%s': %s", name, archive_error_string(w));
			goto out;
		}
		if (type != AE_IFDIR)
			x->files++;
	}
	if (r != ARCHIVE_EOF) {
		ret = pisb_err_set(e, PISB_EXIT_FAIL, "read the archive: %s", archive_error_string(a));
		goto out;
	}
	/* what the reader left (end blocks) belongs to the digest too */
	for (;;) {
		const void *b;
		if (pisb_archive_src_read(a, src, &b) <= 0)
			break;
	}
out:
	archive_read_free(a);
	archive_write_free(w);
	pisb_sha256_final(&src->sha, d);
	pisb_sha256_hex(d, sha_hex);
	x->archive_bytes = src->n;
	free(src);
	return ret;
}

/* ---- the child/parent protocol ---- */

/* The child's last word on the result pipe: "ok FILES BYTES SHA\n" or
 * "err CODE MESSAGE". */
static void report_child(int fd, int ok, const struct pisb_xfer *x, const struct pisb_err *e)
{
	char line[2200];
	int n;

	if (ok == 0)
		n = snprintf(line, sizeof(line), "ok %lld %lld %s %d\n", x->files, x->bytes, x->sha256,
			     x->kept_config ? 1 : 0);
	else
		n = snprintf(line, sizeof(line), "err %d %s", e->code ? e->code : PISB_EXIT_FAIL, e->msg);
	pisb_write_all(fd, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
}

/* Read the child's report; 0 with x filled, -1 with e when the child told
 * why it failed, -2 with e when it died or exited without a word. */
static int read_report(int fd, pid_t pid, struct pisb_xfer *x, char sha[65], struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	int status = 0, code;
	char shabuf[65];
	int kept = 0;

	pisb_read_fd(fd, &b, 1 << 16);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (b.len > 3 && pisb_str_starts(b.s, "ok ") &&
	    sscanf(b.s, "ok %lld %lld %64s %d", &x->files, &x->bytes, shabuf, &kept) == 4) {
		memcpy(sha, shabuf, 65);
		x->kept_config = kept;
		return 0;
	}
	if (b.len > 4 && sscanf(b.s, "err %d", &code) == 1) {
		const char *msg = strchr(b.s + 4, ' ');
		return pisb_err_set(e, code, "%s", msg ? msg + 1 : "failed in the sandbox");
	}
	if (WIFSIGNALED(status))
		pisb_err_set(e, PISB_EXIT_FAIL, "the sandbox side died (signal %d)", WTERMSIG(status));
	else
		pisb_err_set(e, PISB_EXIT_FAIL, "the sandbox side failed (status %d)", WEXITSTATUS(status));
	return -2;
}

/* ---- push ---- */

/* A tracked path rel under hostfd into the archive.  No symlink is
 * followed on the way (git never tracks a path through one): such a path,
 * like one deleted in the working tree, is left out. */
static int add_tracked(struct archive *a, int hostfd, const char *rel, bool sparse,
		       struct pisb_xfer *x, struct pisb_err *e)
{
	const char *slash = strrchr(rel, '/');
	_cleanup_close_ int pfd = -1;
	struct stat st;

	if (slash) {
		_cleanup_free_ char *parent = xstrndup(rel, (size_t)(slash - rel));
		struct open_how how;
		memset(&how, 0, sizeof(how));
		how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
		how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
		do
			pfd = (int)syscall(SYS_openat2, hostfd, parent, &how, sizeof(how));
		while (pfd < 0 && (errno == EINTR || errno == EAGAIN));
		if (pfd < 0)
			return errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV
			       ? 0 : pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", parent);
	}
	if (fstatat(slash ? pfd : hostfd, slash ? slash + 1 : rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;   /* deleted in the working tree */
	if (S_ISDIR(st.st_mode))
		return 0;   /* a submodule that is not checked out */
	return add_entry(a, slash ? pfd : hostfd, slash ? slash + 1 : rel, rel, sparse, x, e);
}

/* The host side of push: the archive of hostdir onto fd (sparse: files
 * with holes as sparse entries, for a libarchive reader). */
static int push_write(int hostfd, const char *hostdir, bool all, bool sparse, int fd,
		      struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf list = PISB_BUF_INIT;
	struct sink s;
	struct archive *a;
	int r = 0, g = 1;

	if (!all && (g = pisb_git_tracked(hostdir, &list, e)) < 0)
		return -1;
	a = writer_open(&s, fd);
	if (!a)
		return pisb_err_set(e, PISB_EXIT_FAIL, "start the archive");
	if (g == 1) {
		r = add_tree(a, hostfd, hostdir, sparse, x, e);
	} else {
		for (size_t off = 0; off < list.len && r == 0;) {
			const char *rel = list.s + off;
			off += strlen(rel) + 1;
			r = add_tracked(a, hostfd, rel, sparse, x, e);
		}
	}
	if (writer_close(a, &s, x, e) < 0 || r < 0)
		return -1;
	return 0;
}

static void hexname(char *out, size_t n, const char *fmt, const char *base)
{
	char hex[17];

	pisb_random_hex(hex, 16);
	snprintf(out, n, fmt, strlen(base) > 180 ? "x" : base, hex);
}

/* overlayfs without redirect_dir (how the local driver mounts it) cannot
 * rename a directory that sits directly in a merged directory (one the
 * image also has, like "/" or /srv): rename(2) fails with EXDEV.  Deeper
 * directories, and files anywhere, move fine.  Probe whether a new
 * directory next to the target can move. */
static bool siblings_move(int pfd, const char *base)
{
	char a[256], b[256];
	bool ok;

	hexname(a, sizeof(a), ".%s.pisb-probe-%s", base);
	hexname(b, sizeof(b), ".%s.pisb-probe-%s", base);
	if (mkdirat(pfd, a, 0700) < 0)
		return false;
	ok = renameat(pfd, a, pfd, b) == 0;
	unlinkat(pfd, ok ? b : a, AT_REMOVEDIR);
	return ok;
}

/* Copy the small file sdir/name to ddir/name (a hard link if possible). */
static int carry_file(int sdir, int ddir, const char *name)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_close_ int in = -1, out = -1;
	struct stat st;

	if (linkat(sdir, name, ddir, name, 0) == 0)
		return 0;
	in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) < 0 || pisb_read_fd(in, &b, 16 << 20) < 0)
		return -1;
	out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 07777);
	if (out < 0 || pisb_write_all(out, b.s ? b.s : "", b.len) < 0)
		return -1;
	return 0;
}

/* Names in a directory (not "." or ".."), NUL-separated. */
static int list_names(int dfd, struct pisb_strv *out)
{
	DIR *d = fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 0));
	struct dirent *de;

	if (!d)
		return -1;
	rewinddir(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			pisb_strv_push(out, de->d_name);
	closedir(d);
	return 0;
}

/* Replace the contents of the directory tfd with those of sfd, entry by
 * entry: every old entry into a fresh directory inside the target first,
 * then every new one into place, then the old ones removed.  On a failure
 * what was moved goes back.  skip: names in the target left alone (the
 * staging directory itself, a kept .sandbox.yaml). */
static int swap_entries(int tfd, int sfd, const char *skip1, const char *skip2, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv olds = PISB_STRV_INIT, news = PISB_STRV_INIT;
	_cleanup_close_ int ofd = -1;
	char old[64];
	size_t i = 0, k = 0;
	struct pisb_err ig = PISB_ERR_INIT;

	char hex[17];

	pisb_random_hex(hex, 16);
	snprintf(old, sizeof(old), ".pisb-old-%s", hex);
	if (mkdirat(tfd, old, 0700) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s'", old);
	ofd = openat(tfd, old, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ofd < 0 || list_names(tfd, &olds) < 0 || list_names(sfd, &news) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "list the directories to swap");
		goto undo_none;
	}
	for (i = 0; i < olds.n; i++) {
		const char *n = olds.v[i];
		if (!strcmp(n, old) || (skip1 && !strcmp(n, skip1)) || (skip2 && !strcmp(n, skip2)))
			continue;
		if (renameat(tfd, n, ofd, n) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "move '%s' aside", n);
			goto undo_old;
		}
	}
	for (k = 0; k < news.n; k++) {
		if (renameat(sfd, news.v[k], tfd, news.v[k]) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "move '%s' into place", news.v[k]);
			goto undo_new;
		}
	}
	close(ofd);
	ofd = -1;
	pisb_rm_rf_at(tfd, old, &ig);
	return 0;
undo_new:
	while (k-- > 0)
		renameat(tfd, news.v[k], sfd, news.v[k]);
undo_old:
	while (i-- > 0)
		renameat(ofd, olds.v[i], tfd, olds.v[i]);
undo_none:
	pisb_rm_rf_at(tfd, old, &ig);
	return -1;
}

/* Inside the sandbox: extract the archive on fd into a staging directory
 * (next to the target when directories there can move, else inside it),
 * check the digest that arrives on hashfd, then put the new tree in place:
 * one RENAME_EXCHANGE when the file system allows, else entry by entry. */
static int push_child(struct pisb_fs *fs, const char *target, int fd, int hashfd,
		      struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_free_ char *dir = NULL, *base = NULL;
	_cleanup_close_ int pfd = -1, sfd = -1, tfd = -1;
	char stage[256], want[65] = "";
	struct stat st;
	bool made, exists, sibling, keep_cfg = false;
	const char *slash = strrchr(target, '/');
	int hostfd, r;
	struct pisb_err ig = PISB_ERR_INIT;

	if (pisb_fs_enter(fs, e) < 0)
		return -1;
	dir = slash == target ? xstrdup("/") : xstrndup(target, (size_t)(slash - target));
	base = xstrdup(slash + 1);
	if (pisb_fs_mkdir(fs, dir, &made, e) < 0)
		return -1;
	pfd = pisb_fs_resolve(fs->root, dir, O_PATH | O_DIRECTORY, 0);
	if (pfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", dir);
	exists = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && !S_ISDIR(st.st_mode))
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' exists and is not a directory", target);
	sibling = siblings_move(pfd, base);
	if (!sibling) {
		if (!exists && mkdirat(pfd, base, 0755) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s'", target);
		exists = true;
	}
	if (exists) {
		tfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (tfd < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", target);
	}
	hostfd = sibling ? pfd : tfd;
	hexname(stage, sizeof(stage), sibling ? ".%s.pisb-push-%s" : ".pisb-push-%s%s", sibling ? base : "");
	if (mkdirat(hostfd, stage, 0700) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s/%s'", sibling ? dir : target, stage);
	sfd = openat(hostfd, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "open the staging directory");
		goto fail;
	}
	if (extract(fd, sfd, true, false, NULL, x, x->sha256, e) < 0)
		goto fail;
	if (pisb_read_all(hashfd, want, 64) != 64) {
		pisb_err_set(e, PISB_EXIT_FAIL, "the host side did not finish the transfer");
		goto fail;
	}
	want[64] = '\0';
	if (strcmp(want, x->sha256)) {
		pisb_err_set(e, PISB_EXIT_FAIL, "checksum mismatch: sent %s, received %s; nothing was replaced",
			     want, x->sha256);
		goto fail;
	}
	/* the guest copy of the config lives in the workspace: keep it */
	keep_cfg = tfd >= 0 && !strcmp(target, fs->workspace) &&
		   faccessat(sfd, ".sandbox.yaml", F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
		   faccessat(tfd, ".sandbox.yaml", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	if (sibling && !exists) {
		fchmod(sfd, 0755);
		if (renameat(pfd, stage, pfd, base) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "rename into '%s'", target);
			goto fail;
		}
		return 0;
	}
	if (sibling) {
		fchmod(sfd, st.st_mode & 07777);
		if (fchown(sfd, st.st_uid, st.st_gid) < 0) {
			/* stays root's */
		}
		if (keep_cfg && carry_file(tfd, sfd, ".sandbox.yaml") < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "keep '%s/.sandbox.yaml'", target);
			goto fail;
		}
		if (renameat2(pfd, stage, pfd, base, RENAME_EXCHANGE) == 0) {
			/* the old tree now has the staging name */
			pisb_rm_rf_at(pfd, stage, &ig);
			x->kept_config = keep_cfg;
			return 0;
		}
		if (errno != EXDEV && errno != EINVAL && errno != ENOSYS) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "replace '%s'", target);
			goto fail;
		}
		if (keep_cfg)
			unlinkat(sfd, ".sandbox.yaml", 0);
	}
	r = swap_entries(tfd, sfd, sibling ? NULL : stage, keep_cfg ? ".sandbox.yaml" : NULL, e);
	if (r < 0) {
		pisb_err_prefix(e, "replace '%s'", target);
		goto fail;
	}
	pisb_rm_rf_at(hostfd, stage, &ig);
	x->kept_config = keep_cfg;
	return 0;
fail:
	pisb_rm_rf_at(hostfd, stage, &ig);
	return -1;
}

char *pisb_push_target(const char *abs)
{
	_cleanup_strv_ struct pisb_strv parts = PISB_STRV_INIT;
	struct pisb_buf b = PISB_BUF_INIT;

	for (const char *p = abs; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (parts.n) {
				free(parts.v[--parts.n]);
				parts.v[parts.n] = NULL;
			}
		} else if (n && !(n == 1 && p[0] == '.')) {
			char *c = xstrndup(p, n);
			pisb_strv_push(&parts, c);
			free(c);
		}
		p += n;
		while (*p == '/')
			p++;
	}
	for (size_t i = 0; i < parts.n; i++) {
		pisb_buf_addc(&b, '/');
		pisb_buf_adds(&b, parts.v[i]);
	}
	if (!b.len)
		pisb_buf_addc(&b, '/');
	return pisb_buf_detach(&b);
}

int pisb_push(struct pisb_fs *fs, const char *hostdir, const char *to, bool all,
	      struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_close_ int hostfd = -1;
	int data[2] = { -1, -1 }, hash[2] = { -1, -1 }, res[2] = { -1, -1 };
	char got[65];
	pid_t pid;
	int wr;
	struct pisb_err werr = PISB_ERR_INIT;

	memset(x, 0, sizeof(*x));
	if (pisb_archive_load(e) < 0)
		return -1;
	hostfd = open(hostdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (hostfd < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "open host directory '%s'", hostdir);
	{
		_cleanup_free_ char *a = pisb_fs_abspath(fs, to ? to : fs->workspace);
		x->where = pisb_push_target(a);
	}
	if (!strcmp(x->where, "/"))
		return pisb_err_set(e, PISB_EXIT_USAGE, "refusing to replace the sandbox's root directory");
	if (pipe2(data, O_CLOEXEC) < 0 || pipe2(hash, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "pipe");
		goto fail;
	}
	signal(SIGPIPE, SIG_IGN);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
		goto fail;
	}
	if (pid == 0) {
		struct pisb_xfer cx = { 0 };
		struct pisb_err ce = PISB_ERR_INIT;
		int r;
		close(data[1]);
		close(hash[1]);
		close(res[0]);
		close(hostfd);
		r = push_child(fs, x->where, data[0], hash[0], &cx, &ce);
		report_child(res[1], r, &cx, &ce);
		_exit(r == 0 ? 0 : 1);
	}
	close(data[0]);
	close(hash[0]);
	close(res[1]);
	wr = push_write(hostfd, hostdir, all, true, data[1], x, &werr);
	close(data[1]);
	if (wr == 0)
		pisb_write_all(hash[1], x->sha256, 64);
	close(hash[1]);
	{
		long long files = x->files, bytes = x->bytes;
		int rr = read_report(res[0], pid, x, got, e);
		close(res[0]);
		if (wr < 0) {
			/* the sandbox side's reason is the better one when it stopped first */
			if (rr == 0 || !e->msg[0] || werr.errnum != EPIPE)
				*e = werr;
			return -1;
		}
		if (rr < 0)
			return -1;
		if (strcmp(got, x->sha256))
			return pisb_err_set(e, PISB_EXIT_FAIL, "checksum mismatch after the transfer");
		x->files = files;
		x->bytes = bytes;
	}
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (data[i] >= 0)
			close(data[i]);
		if (hash[i] >= 0)
			close(hash[i]);
		if (res[i] >= 0)
			close(res[i]);
	}
	return -1;
}

/* ---- pull ---- */

/* Inside the sandbox: the archive of path onto fd. */
static int pull_child(struct pisb_fs *fs, const char *path, int fd, struct pisb_xfer *x,
		      struct pisb_err *e)
{
	_cleanup_close_ int pfd = -1;
	struct stat st;
	struct sink s;
	struct archive *a;
	int r;

	if (pisb_fs_enter(fs, e) < 0)
		return -1;
	pfd = pisb_fs_resolve(fs->root, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (pfd < 0)
		return pisb_err_sys(e, errno == ENOENT || errno == ENOTDIR ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "open '%s'", path);
	if (fstat(pfd, &st) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s'", path);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return pisb_err_set(e, PISB_EXIT_FAIL, "'%s' is not a file or directory", path);
	a = writer_open(&s, fd);
	if (!a)
		return pisb_err_set(e, PISB_EXIT_FAIL, "start the archive");
	if (S_ISDIR(st.st_mode)) {
		r = add_tree(a, pfd, path, true, x, e);
	} else {
		/* the file as opened (a final symlink followed), under its own name */
		const char *base = strrchr(path, '/');
		r = add_entry(a, pfd, "", base && base[1] ? base + 1 : path, true, x, e);
	}
	if (writer_close(a, &s, x, e) < 0 || r < 0)
		return -1;
	return 0;
}

/* Move everything in src into dst (both host directories).  dry: only
 * check for conflicts.  Never follows a symlink in dst. */
static int merge(int src, int dst, const char *rel, bool dry, struct pisb_err *e)
{
	DIR *d = fdopendir(fcntl(src, F_DUPFD_CLOEXEC, 0));
	struct dirent *de;
	int ret = 0;

	if (!d)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "list the staging directory");
	rewinddir(d);   /* the offset is shared with src: start over */
	while (ret == 0 && (de = readdir(d))) {
		struct stat ss, ds;
		_cleanup_free_ char *path = NULL;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		path = rel[0] ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		if (fstatat(src, de->d_name, &ss, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (fstatat(dst, de->d_name, &ds, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				ret = pisb_err_sys(e, PISB_EXIT_FAIL, "stat '%s'", path);
			else if (!dry && renameat(src, de->d_name, dst, de->d_name) < 0)
				ret = pisb_err_sys(e, PISB_EXIT_FAIL, "move '%s' into place", path);
			continue;
		}
		if (S_ISDIR(ss.st_mode) && S_ISDIR(ds.st_mode)) {
			_cleanup_close_ int s2 = openat(src, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			_cleanup_close_ int d2 = openat(dst, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (s2 < 0 || d2 < 0)
				ret = pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", path);
			else
				ret = merge(s2, d2, path, dry, e);
			continue;
		}
		if (S_ISLNK(ds.st_mode)) {
			/* replacing it would be writing where it points, for a user
			 * who follows it later: a conflict, as for a directory */
			ret = pisb_err_set(e, PISB_EXIT_BUSY, "'%s' is a symlink on the host; nothing was changed",
					   path);
			continue;
		}
		if (S_ISDIR(ss.st_mode) || S_ISDIR(ds.st_mode)) {
			ret = pisb_err_set(e, PISB_EXIT_BUSY, "'%s' is a %s on the host and a %s in the sandbox; nothing was changed",
					   path, S_ISDIR(ds.st_mode) ? "directory" : S_ISLNK(ds.st_mode) ? "symlink" : "file",
					   S_ISDIR(ss.st_mode) ? "directory" : "file");
			continue;
		}
		if (!dry && renameat(src, de->d_name, dst, de->d_name) < 0)
			ret = pisb_err_sys(e, PISB_EXIT_FAIL, "replace '%s'", path);
	}
	closedir(d);
	return ret;
}

/* Pull into hostdir: the archive on afd when afd >= 0 (its digest compared
 * with want when want is given; skip_special as extract()), else one made
 * in sandbox fs from path by a child. */
static int pull_into(struct pisb_fs *fs, const char *path, int afd, const char *want,
		     bool skip_special, const char *hostdir, const struct pisb_pull_opts *o,
		     struct pisb_xfer *x, struct pisb_err *e)
{
	_cleanup_close_ int hostfd = -1, sfd = -1, cwd = -1;
	_cleanup_free_ char *abs = NULL;
	char stage[64], got[65] = "", sha[65];
	int data[2] = { -1, -1 }, res[2] = { -1, -1 };
	pid_t pid = -1;
	int ret = -1, r;
	struct pisb_err ig = PISB_ERR_INIT;
	static const struct pisb_pull_opts defaults = { false, 0 };

	memset(x, 0, sizeof(*x));
	if (!o)
		o = &defaults;
	if (pisb_pull_check(path, hostdir, o, e) < 0 || pisb_archive_load(e) < 0)
		return -1;
	x->where = xstrdup(hostdir);
	if (pisb_mkdirs_at(AT_FDCWD, hostdir, 0755, e) < 0)
		return -1;
	hostfd = open(hostdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (hostfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open host directory '%s'", hostdir);
	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	{
		char hex[17];
		pisb_random_hex(hex, 16);
		snprintf(stage, sizeof(stage), ".pisb-pull-%s", hex);
	}
	if (mkdirat(hostfd, stage, 0700) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s/%s'", hostdir, stage);
	sfd = openat(hostfd, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s/%s'", hostdir, stage);
		goto out;
	}
	if (afd >= 0) {
		if (extract(afd, sfd, false, skip_special, o, x, sha, e) < 0)
			goto out;
		if (want && strcmp(want, sha)) {
			pisb_err_set(e, PISB_EXIT_FAIL, "checksum mismatch: sent %s, received %s; nothing was written",
				     want, sha);
			goto out;
		}
		memcpy(x->sha256, sha, 65);
	} else {
		abs = pisb_fs_abspath(fs, path);
		if (pipe2(data, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "pipe");
			goto out;
		}
		signal(SIGPIPE, SIG_IGN);
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
			goto out;
		}
		if (pid == 0) {
			struct pisb_xfer cx = { 0 };
			struct pisb_err ce = PISB_ERR_INIT;
			close(data[0]);
			close(res[0]);
			close(hostfd);
			close(sfd);
			signal(SIGPIPE, SIG_DFL);
			r = pull_child(fs, abs, data[1], &cx, &ce);
			close(data[1]);
			report_child(res[1], r, &cx, &ce);
			_exit(r == 0 ? 0 : 1);
		}
		close(data[1]);
		close(res[1]);
		data[1] = res[1] = -1;
		r = extract(data[0], sfd, false, false, o, x, sha, e);
		close(data[0]);
		data[0] = -1;
		{
			struct pisb_xfer cx = { 0 };
			struct pisb_err ce = PISB_ERR_INIT;
			int rr = read_report(res[0], pid, &cx, got, &ce);
			pid = -1;
			/* the sandbox side's own reason first (it stopped writing, so
			 * our extraction failed too), then ours (we stopped reading,
			 * so it died of SIGPIPE) */
			if (rr == -1 || (rr < 0 && r == 0)) {
				*e = ce;
				goto out;
			}
			if (r < 0)
				goto out;
			if (strcmp(got, sha)) {
				pisb_err_set(e, PISB_EXIT_FAIL, "checksum mismatch: sent %s, received %s; nothing was written",
					     got, sha);
				goto out;
			}
		}
		memcpy(x->sha256, sha, 65);
	}
	if (merge(sfd, hostfd, "", true, e) < 0 || merge(sfd, hostfd, "", false, e) < 0)
		goto out;
	ret = 0;
out:
	if (cwd >= 0 && fchdir(cwd) < 0) {
		/* the staging dir stays our cwd: harmless */
	}
	for (int i = 0; i < 2; i++) {
		if (data[i] >= 0)
			close(data[i]);
		if (res[i] >= 0)
			close(res[i]);
	}
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	pisb_rm_rf_at(hostfd, stage, &ig);
	return ret;
}

int pisb_pull_check(const char *path, const char *hostdir, const struct pisb_pull_opts *o,
		    struct pisb_err *e)
{
	if (o && o->include_git)
		return 0;
	if (path && pisb_path_in_git_dir(path))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "'%s' is inside a .git directory: pass --include-git to pull git's own files", path);
	if (pisb_path_in_git_dir(hostdir))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "host directory '%s' is inside a .git directory: pass --include-git to pull into it",
				    hostdir);
	return 0;
}

int pisb_pull(struct pisb_fs *fs, const char *path, const char *hostdir, const struct pisb_pull_opts *o,
	      struct pisb_xfer *x, struct pisb_err *e)
{
	const char *hook = getenv("PISB_TEST_PULL_ARCHIVE");
	_cleanup_close_ int afd = -1;

	if (hook && *hook) {
		memset(x, 0, sizeof(*x));
		afd = open(hook, O_RDONLY | O_CLOEXEC);
		if (afd < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "PISB_TEST_PULL_ARCHIVE '%s'", hook);
	}
	return pull_into(fs, path, afd, NULL, false, hostdir, o, x, e);
}

int pisb_pull_archive(int fd, const char *want, const char *hostdir, const struct pisb_pull_opts *o,
		      struct pisb_xfer *x, struct pisb_err *e)
{
	return pull_into(NULL, NULL, fd, want, true, hostdir, o, x, e);
}

int pisb_push_archive(const char *hostdir, bool all, int fd, struct pisb_xfer *x,
		      struct pisb_err *e)
{
	_cleanup_close_ int hostfd = -1;

	memset(x, 0, sizeof(*x));
	if (pisb_archive_load(e) < 0)
		return -1;
	hostfd = open(hostdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (hostfd < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "open host directory '%s'", hostdir);
	return push_write(hostfd, hostdir, all, false, fd, x, e);
}

/* archive.h: the sandbox side of a remote push, as shell */
const char pisb_xfer_sh_prelude[] =
	"cleanup() { rm -f -- \"$A\"; if [ -n \"$S\" ]; then rm -rf -- \"$S\"; fi; }\n"
	"fail() { c=$1; shift; printf '%s\\n' \"$*\" >&2; cleanup; exit \"$c\"; }\n"
	"have() { command -v \"$1\" >/dev/null 2>&1; }\n"
	"bb() { have busybox && busybox \"$1\" --help >/dev/null 2>&1; }\n"
	"if have tar; then TAR=tar; elif bb tar; then TAR='busybox tar';\n"
	"else fail 127 'tar is not installed in the sandbox'; fi\n"
	"if have sha256sum; then SUM=sha256sum; elif bb sha256sum; then SUM='busybox sha256sum';\n"
	"elif have shasum; then SUM='shasum -a 256'; elif have openssl; then SUM='openssl dgst -sha256 -r';\n"
	"else fail 127 'sha256sum is not installed in the sandbox'; fi\n"
	"digest() { d=$($SUM < \"$A\") || fail 1 'cannot compute the digest of the archive in the sandbox'; d=${d%% *}; }\n";

/* push: A archive, T target, W the host's digest, H random, K 1 when the
 * target is the workspace (its .sandbox.yaml is kept unless the tree has
 * one).  Prints "pisb-ok KEPT". */
const char pisb_push_sh[] =
	"digest\n"
	"[ \"$d\" = \"$W\" ] || fail 1 \"checksum mismatch: sent $W, received $d; nothing was replaced\"\n"
	"P=${T%/*}; PP=$P; [ -n \"$P\" ] || P=/; B=${T##*/}\n"
	"if [ -L \"$T\" ] || { [ -e \"$T\" ] && [ ! -d \"$T\" ]; }; then fail 1 \"'$T' exists and is not a directory\"; fi\n"
	"mkdir -p -- \"$P\" || fail 1 \"cannot create '$P'\"\n"
	"E=0; [ -d \"$T\" ] && E=1\n"
	"IN=0\n"
	"if [ $E = 1 ]; then\n"
	"  dt=$(stat -L -c %d -- \"$T\" 2>/dev/null); dp=$(stat -L -c %d -- \"$P\" 2>/dev/null)\n"
	"  [ -n \"$dt\" ] && [ \"$dt\" != \"$dp\" ] && IN=1\n"   /* a mount point cannot move */
	"fi\n"
	"if [ $IN = 1 ]; then S=\"$T/.pisb-push-$H\"; else S=\"$PP/.$B.pisb-push-$H\"; fi\n"
	"mkdir -m 700 -- \"$S\" || { S=; fail 1 \"cannot create the staging directory next to '$T'\"; }\n"
	"PO=; case \"$($TAR --version 2>/dev/null)\" in *GNU*|*bsdtar*) PO=-p;; esac\n"
	"$TAR -x $PO -o -f \"$A\" -C \"$S\" || fail 1 \"unpacking the archive in the sandbox failed; nothing was replaced\"\n"
	"rm -f -- \"$A\"\n"
	"K2=0\n"
	"if [ \"$K\" = 1 ] && [ $E = 1 ] && [ ! -e \"$S/.sandbox.yaml\" ] && [ ! -L \"$S/.sandbox.yaml\" ] &&\n"
	"   { [ -e \"$T/.sandbox.yaml\" ] || [ -L \"$T/.sandbox.yaml\" ]; }; then K2=1; fi\n"
	"if [ $E = 0 ]; then\n"
	"  chmod 755 -- \"$S\"; mv -- \"$S\" \"$T\" || fail 1 \"cannot move the new tree to '$T'\"\n"
	"  echo 'pisb-ok 0'; exit 0\n"
	"fi\n"
	"if [ $IN = 0 ]; then\n"
	"  chmod \"$(stat -c %a -- \"$T\")\" -- \"$S\" 2>/dev/null; chown \"$(stat -c %u:%g -- \"$T\")\" -- \"$S\" 2>/dev/null\n"
	"  if [ $K2 = 1 ]; then cp -P -p -- \"$T/.sandbox.yaml\" \"$S/.sandbox.yaml\" || fail 1 \"cannot keep '$T/.sandbox.yaml'\"; fi\n"
	"  O=\"$PP/.$B.pisb-old-$H\"\n"
	"  if mv -- \"$T\" \"$O\" 2>/dev/null; then\n"
	"    if mv -- \"$S\" \"$T\"; then rm -rf -- \"$O\"; echo \"pisb-ok $K2\"; exit 0; fi\n"
	"    mv -- \"$O\" \"$T\"; fail 1 \"cannot move the new tree to '$T'; the old one is back\"\n"
	"  fi\n"
	"  rm -rf -- \"$O\"\n"
	"  [ $K2 = 1 ] && rm -f -- \"$S/.sandbox.yaml\"\n"
	"fi\n"
	/* the target cannot move: its entries go aside, the new ones in */
	"O=\"$T/.pisb-old-$H\"\n"
	"mkdir -m 700 -- \"$O\" || fail 1 \"cannot create '$O'\"\n"
	"skip() { [ \"$1\" = \"$O\" ] || [ \"$1\" = \"$S\" ] || { [ $K2 = 1 ] && [ \"$1\" = \"$T/.sandbox.yaml\" ]; }; }\n"
	"moveall() {\n"
	"  for e in \"$1\"/* \"$1\"/.[!.]* \"$1\"/..?*; do\n"
	"    { [ -e \"$e\" ] || [ -L \"$e\" ]; } || continue\n"
	"    skip \"$e\" && continue\n"
	"    mv -- \"$e\" \"$2/\" || return 1\n"
	"  done\n"
	"}\n"
	"if ! moveall \"$T\" \"$O\"; then moveall \"$O\" \"$T\"; rm -rf -- \"$O\"; fail 1 \"cannot move the old entries of '$T' aside; nothing was replaced\"; fi\n"
	"if ! moveall \"$S\" \"$T\"; then moveall \"$T\" \"$S\"; moveall \"$O\" \"$T\"; rm -rf -- \"$O\"; fail 1 \"cannot move the new entries into '$T'; the old ones are back\"; fi\n"
	"rm -rf -- \"$O\"; rm -rf -- \"$S\"\n"
	"echo \"pisb-ok $K2\"\n";
