/* edit.h - applying edits to a file's text, for every driver's edit verb
 * (fs.c on a local or sbx sandbox, the opensandbox driver through execd):
 * the same rules and the same messages wherever the file lives. */
#ifndef PISB_EDIT_H
#define PISB_EDIT_H

#include <stddef.h>

struct pisb_err;
struct pisb_buf;
struct pisb_fs_edit;

/* The text of orig (n bytes) with every edit applied, into out.  Every old
 * text must occur exactly once in orig (overlapping occurrences count) and
 * the matches must not overlap; else -1 with code 1 and a message naming
 * the edit (1-based) and abs, the file's path inside. */
int pisb_edit_apply(const char *orig, size_t n, const struct pisb_fs_edit *ed, size_t ned,
		    const char *abs, struct pisb_buf *out, struct pisb_err *e);

#endif
