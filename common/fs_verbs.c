/* fs_verbs.c - the file verbs through fs.h and archive.h; see fs_verbs.h. */
#include "fs_verbs.h"
#include "archive.h"
#include "err.h"

#include <stdlib.h>

/* Open sb's files (running: the sandbox must run) and, with enter, move
 * into the sandbox; *abs the absolute path inside for path. */
static int open_at(struct pisb_fs *fs, struct pisb_sandbox *sb, bool running, bool enter,
		   const char *path, char **abs, struct pisb_err *e)
{
	if (pisb_fs_open(fs, sb, sb->drv->fs_how, running, e) < 0)
		return -1;
	if (enter && pisb_fs_enter(fs, e) < 0)
		return -1;
	if (abs)
		*abs = pisb_fs_abspath(fs, path ? path : fs->workspace);
	return 0;
}

int pisb_fsv_read_text(struct pisb_sandbox *sb, const char *path, long long offset,
		       long long limit, size_t cap, char **abs, struct pisb_fs_text *t,
		       struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r = -1;

	if (open_at(&fs, sb, true, true, path, abs, e) == 0)
		r = pisb_fs_read_text(&fs, *abs, offset, limit, cap, t, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_read_raw(struct pisb_sandbox *sb, const char *path, int outfd, long long *bytes,
		      struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	_cleanup_free_ char *abs = NULL;
	int r = -1;

	if (open_at(&fs, sb, true, true, path, &abs, e) == 0)
		r = pisb_fs_read_raw(&fs, abs, outfd, bytes, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_write(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_src *src,
		   int mode, bool mkdirs, char **abs, long long *bytes, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r = -1;

	if (open_at(&fs, sb, true, true, path, abs, e) == 0)
		r = pisb_fs_write(&fs, *abs, src, mode, mkdirs, bytes, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_edit(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_edit *ed,
		  size_t n, char **abs, long long *bytes, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r = -1;

	if (open_at(&fs, sb, true, true, path, abs, e) == 0)
		r = pisb_fs_edit(&fs, *abs, ed, n, bytes, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_ls(struct pisb_sandbox *sb, const char *path, char **abs,
		struct pisb_fs_info **out, size_t *n, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r = -1;

	if (open_at(&fs, sb, true, true, path, abs, e) == 0)
		r = pisb_fs_ls(&fs, *abs, out, n, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_stat(struct pisb_sandbox *sb, const char *path, char **abs,
		  struct pisb_fs_info *out, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r = -1;

	if (open_at(&fs, sb, true, true, path, abs, e) == 0)
		r = pisb_fs_stat(&fs, *abs, out, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_mkdir(struct pisb_sandbox *sb, const char *path, char **abs, bool *created,
		   struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r = -1;

	if (open_at(&fs, sb, true, true, path, abs, e) == 0)
		r = pisb_fs_mkdir(&fs, *abs, created, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_find(struct pisb_sandbox *sb, const struct pisb_fs_find *o, char **abs,
		  pisb_fs_find_fn fn, void *arg, bool *truncated, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	struct pisb_fs_find f = *o;
	int r = -1;

	if (open_at(&fs, sb, true, true, o->dir, abs, e) == 0) {
		f.dir = *abs;
		r = pisb_fs_find(&fs, &f, fn, arg, truncated, e);
	}
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_grep(struct pisb_sandbox *sb, const struct pisb_fs_grep *o, char **abs,
		  pisb_fs_grep_fn fn, void *arg, struct pisb_fs_grep_result *r,
		  struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	struct pisb_fs_grep g = *o;
	int ret = -1;

	if (open_at(&fs, sb, true, true, o->path, abs, e) == 0) {
		g.path = *abs;
		ret = pisb_fs_grep(&fs, &g, fn, arg, r, e);
	}
	pisb_fs_release(&fs);
	return ret;
}

int pisb_fsv_logs(struct pisb_sandbox *sb, const char *service, long long lines, size_t cap,
		  struct pisb_buf *out, long long *nlines, bool *truncated, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r = -1;

	if (open_at(&fs, sb, false, false, NULL, NULL, e) == 0)
		r = pisb_fs_logs(&fs, service, lines, cap, out, nlines, truncated, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_push(struct pisb_sandbox *sb, const char *hostdir, const char *to, bool all,
		  struct pisb_xfer *x, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	int r = -1;

	if (open_at(&fs, sb, true, false, NULL, NULL, e) == 0)
		r = pisb_push(&fs, hostdir, to, all, x, e);
	pisb_fs_release(&fs);
	return r;
}

int pisb_fsv_pull(struct pisb_sandbox *sb, const char *path, const char *hostdir,
		  const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e)
{
	struct pisb_fs fs = PISB_FS_INIT;
	/* the pull test hook reads a crafted archive instead of the sandbox */
	const char *hook = getenv("PISB_TEST_PULL_ARCHIVE");
	int r = -1;

	if (open_at(&fs, sb, !(hook && *hook), false, NULL, NULL, e) == 0)
		r = pisb_pull(&fs, path, hostdir, o, x, e);
	pisb_fs_release(&fs);
	return r;
}
