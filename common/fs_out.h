/* fs_out.h - what the file and project verbs answer (pisb-fs(1)): their
 * JSON objects and their text lines, built from the slots' results.
 *
 * Everything here writes into a buffer or a JSON writer the caller owns,
 * except the streaming lines of find and grep, which go to the file
 * descriptor the caller names (its standard output) in 64 KiB pieces as
 * they come: a search of a big tree must not hold all of its answer.
 */
#ifndef PISB_FS_OUT_H
#define PISB_FS_OUT_H

#include <stdbool.h>

#include "archive.h"
#include "fs.h"
#include "json.h"
#include "project.h"
#include "util.h"

/* read --json: {path, content, truncated, bytes, offset, lines, nextOffset} */
void pisb_fs_text_json(struct pisb_jw *w, const char *abs, const struct pisb_fs_text *t);
/* write and edit --json: {path, bytes} (and "edits" when EDITS >= 0) */
void pisb_fs_written_json(struct pisb_jw *w, const char *abs, long long bytes, long long edits);
/* ls --json: {path, entries: [{name, type, size, mode, mtime, target?}]};
 * ls: one "drwxr-xr-x SIZE MTIME NAME[ -> TARGET]" line an entry */
void pisb_fs_ls_json(struct pisb_jw *w, const char *abs, const struct pisb_fs_info *v, size_t n);
void pisb_fs_ls_text(struct pisb_buf *b, const struct pisb_fs_info *v, size_t n);
/* stat --json: {path, type, size, mode, mtime, target?, readable,
 * writable}; stat: the same as "key: value" lines */
void pisb_fs_stat_json(struct pisb_jw *w, const struct pisb_fs_info *i);
void pisb_fs_stat_text(struct pisb_buf *b, const struct pisb_fs_info *i);
/* mkdir --json: {path, created} */
void pisb_fs_mkdir_json(struct pisb_jw *w, const char *abs, bool created);
/* logs --json: {service, content, lines, truncated} */
void pisb_fs_logs_json(struct pisb_jw *w, const char *service, const struct pisb_buf *text,
		       long long lines, bool truncated);
/* push and pull --json: {files, bytes, sha256, archiveBytes, to,
 * keptConfig (push)} */
void pisb_fs_xfer_json(struct pisb_jw *w, const struct pisb_xfer *x, bool push);
/* apply --json: {project, dryRun, written, deleted, paths} */
void pisb_fs_apply_json(struct pisb_jw *w, const struct pisb_pdiff *d, bool dry_run,
			const struct pisb_apply_result *r);
/* sync --json: {written, deleted, unchangedBoth, conflicts} */
void pisb_fs_sync_json(struct pisb_jw *w, const struct pisb_sync_result *r);

/* The lines of find and grep as the slot reports them.  Text: a line a
 * path (find), "PATH:LINE:TEXT" for a match and "PATH-LINE-TEXT" for a
 * context line, with "--" between groups that do not touch (grep),
 * written to fd as they come.  JSON: collected, then one object. */
struct pisb_fs_lines {
	bool json;
	bool context;            /* grep -C given: separators wanted */
	int fd;                  /* text: where the lines go */
	struct pisb_buf b;
	struct pisb_jw w;
	char *last_path;         /* grep: for the "--" group separator */
	long long last_line;
	bool any;
};
void pisb_fs_lines_init(struct pisb_fs_lines *o, bool json, bool context, int fd);
void pisb_fs_lines_release(struct pisb_fs_lines *o);
/* The callbacks of the find and grep slots (arg: the pisb_fs_lines). */
void pisb_fs_find_line(void *arg, const char *rel);
void pisb_fs_grep_line(void *arg, const struct pisb_fs_grep_line *l);
/* The end.  Text: what is left goes to fd (a closed standard output is
 * not an error: the reader left, as with grep | head).  JSON: find's {path, matches, truncated} and grep's {path,
 * matches, matchCount, limitReached, linesTruncated} into out. */
void pisb_fs_lines_end_text(struct pisb_fs_lines *o);
void pisb_fs_find_json(struct pisb_fs_lines *o, const char *abs, bool truncated, struct pisb_buf *out);
void pisb_fs_grep_json(struct pisb_fs_lines *o, const char *abs, const struct pisb_fs_grep_result *r,
		       struct pisb_buf *out);

#endif
