/* fs_cmd.h - what the three files of pisb-fs share: pisb-fs.c (main, read,
 * write, edit, logs), fs_tree.c (ls, stat, mkdir, find, grep) and
 * fs_project.c (push, pull, diff, apply, sync). */
#ifndef PISB_FS_CMD_H
#define PISB_FS_CMD_H

#include "front.h"
#include "driver.h"
#include "fs_out.h"

/* Open sandbox NAME (pos[0]) whose driver must have verb v. */
int fs_sandbox(struct pisb_ctx *c, struct pisb_sandbox *sb, enum pisb_verb_id v);
/* Human output, as it is (a closed stdout: nothing to tell). */
void fs_out_text(const struct pisb_buf *b);

/* JSON output: what FILL writes into w (a struct pisb_jw in scope), plus
 * a newline, on stdout. */
#define FS_OUT_JSON(fill) do { \
	_cleanup_buf_ struct pisb_buf jb_ = PISB_BUF_INIT; \
	struct pisb_jw w; \
	pisb_jw_init(&w, &jb_); \
	fill; \
	pisb_front_out(&jb_); \
} while (0)

int fs_cmd_ls(struct pisb_ctx *c);
int fs_cmd_stat(struct pisb_ctx *c);
int fs_cmd_mkdir(struct pisb_ctx *c);
int fs_cmd_find(struct pisb_ctx *c);
int fs_cmd_grep(struct pisb_ctx *c);
int fs_cmd_push_pull(struct pisb_ctx *c);
int fs_cmd_diff(struct pisb_ctx *c);
int fs_cmd_apply(struct pisb_ctx *c);
int fs_cmd_sync(struct pisb_ctx *c);

#endif
