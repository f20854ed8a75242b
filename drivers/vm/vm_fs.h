/* vm_fs.h - the vm driver's file verbs (vm_fs.c): driver.h's file slots,
 * each one command of the guest agent's (agent/agent_fs.c), with the
 * local driver's contracts, JSON, messages and exit codes.  A sandbox that
 * is not running: exit 5; a guest reply that is malformed or larger than
 * 64 MiB (read: its cap): exit 5. */
#ifndef PISB_VM_FS_H
#define PISB_VM_FS_H

#include "driver.h"
#include "fs.h"

int pisb_vm_fs_read_text(struct pisb_sandbox *sb, const char *path, long long offset,
			 long long limit, size_t cap, char **abs, struct pisb_fs_text *t,
			 struct pisb_err *e);
int pisb_vm_fs_read_raw(struct pisb_sandbox *sb, const char *path, int outfd, long long *bytes,
			struct pisb_err *e);
int pisb_vm_fs_write(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_src *src,
		     int mode, bool mkdirs, char **abs, long long *bytes, struct pisb_err *e);
int pisb_vm_fs_edit(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_edit *ed,
		    size_t n, char **abs, long long *bytes, struct pisb_err *e);
int pisb_vm_fs_ls(struct pisb_sandbox *sb, const char *path, char **abs,
		  struct pisb_fs_info **out, size_t *n, struct pisb_err *e);
int pisb_vm_fs_stat(struct pisb_sandbox *sb, const char *path, char **abs,
		    struct pisb_fs_info *out, struct pisb_err *e);
int pisb_vm_fs_mkdir(struct pisb_sandbox *sb, const char *path, char **abs, bool *created,
		     struct pisb_err *e);
int pisb_vm_fs_find(struct pisb_sandbox *sb, const struct pisb_fs_find *o, char **abs,
		    pisb_fs_find_fn fn, void *arg, bool *truncated, struct pisb_err *e);
int pisb_vm_fs_grep(struct pisb_sandbox *sb, const struct pisb_fs_grep *o, char **abs,
		    pisb_fs_grep_fn fn, void *arg, struct pisb_fs_grep_result *r,
		    struct pisb_err *e);
/* pull: tar in the guest, the archive unpacked on the host by
 * pisb_pull_archive's rules (archive.h) */
int pisb_vm_fs_pull(struct pisb_sandbox *sb, const char *path, const char *hostdir,
		    const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e);
/* project_archive (driver.h): the workspace as the guest's tar (./.git
 * left out) onto fd, parsed as data by project_remote.c */
int pisb_vm_fs_project_archive(struct pisb_sandbox *sb, int fd, char sha[65], struct pisb_err *e);
/* push: the host's archive (archive.h) unpacked in the guest by its own
 * tar with archive.h's push script; the local driver's JSON */
int pisb_vm_fs_push(struct pisb_sandbox *sb, const char *hostdir, const char *to, bool all,
		    struct pisb_xfer *x, struct pisb_err *e);
/* shell (vm_shell.c): a login shell on a pty in the guest (util-linux
 * script there), as user (NULL: root) through su; the caller's terminal
 * is put in raw mode on the host and restored, never handed in */
int pisb_vm_shell(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e);

#endif
