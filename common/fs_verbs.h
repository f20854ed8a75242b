/* fs_verbs.h - the file verbs (driver.h's file slots) for a sandbox whose
 * files this host reaches itself: by entering the sandbox's namespaces
 * (local) or a workspace it shares with the host (sbx), as the driver's
 * fs_how says.  Each has its slot's contract. */
#ifndef PISB_FS_VERBS_H
#define PISB_FS_VERBS_H

#include "driver.h"
#include "fs.h"

int pisb_fsv_read_text(struct pisb_sandbox *sb, const char *path, long long offset,
		       long long limit, size_t cap, char **abs, struct pisb_fs_text *t,
		       struct pisb_err *e);
int pisb_fsv_read_raw(struct pisb_sandbox *sb, const char *path, int outfd, long long *bytes,
		      struct pisb_err *e);
int pisb_fsv_write(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_src *src,
		   int mode, bool mkdirs, char **abs, long long *bytes, struct pisb_err *e);
int pisb_fsv_edit(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_edit *ed,
		  size_t n, char **abs, long long *bytes, struct pisb_err *e);
int pisb_fsv_ls(struct pisb_sandbox *sb, const char *path, char **abs,
		struct pisb_fs_info **out, size_t *n, struct pisb_err *e);
int pisb_fsv_stat(struct pisb_sandbox *sb, const char *path, char **abs,
		  struct pisb_fs_info *out, struct pisb_err *e);
int pisb_fsv_mkdir(struct pisb_sandbox *sb, const char *path, char **abs, bool *created,
		   struct pisb_err *e);
int pisb_fsv_find(struct pisb_sandbox *sb, const struct pisb_fs_find *o, char **abs,
		  pisb_fs_find_fn fn, void *arg, bool *truncated, struct pisb_err *e);
int pisb_fsv_grep(struct pisb_sandbox *sb, const struct pisb_fs_grep *o, char **abs,
		  pisb_fs_grep_fn fn, void *arg, struct pisb_fs_grep_result *r,
		  struct pisb_err *e);
/* host-side files: the sandbox need not run, nothing is entered */
int pisb_fsv_logs(struct pisb_sandbox *sb, const char *service, long long lines, size_t cap,
		  struct pisb_buf *out, long long *nlines, bool *truncated, struct pisb_err *e);
int pisb_fsv_push(struct pisb_sandbox *sb, const char *hostdir, const char *to, bool all,
		  struct pisb_xfer *x, struct pisb_err *e);
int pisb_fsv_pull(struct pisb_sandbox *sb, const char *path, const char *hostdir,
		  const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e);

#endif
