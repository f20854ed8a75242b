/* gitindex.h - the files git tracks, read from the index file itself.
 *
 * No git process runs: a tree that came out of a sandbox (pulled, say)
 * may carry a .git/config with core.fsmonitor, hooks, attribute filters,
 * include.path, core.pager ..., and git would run them on the host.  This
 * reader opens only <gitdir>/index (format versions 2, 3 and 4, SHA-1 or
 * SHA-256 names) and never looks at configuration.  Submodules are
 * followed through their own .git (directory or "gitdir:" file), as
 * `git ls-files --recurse-submodules` does.
 */
#ifndef PISB_GITINDEX_H
#define PISB_GITINDEX_H

#include "util.h"

struct pisb_err;

/* The paths tracked under dir, relative to dir, NUL-separated in out (each
 * checked: relative, no "." or ".." component, none named .git).
 * Returns 0, or 1 when dir is in no git checkout, or -1 with e (an index
 * it cannot read: split index, damaged, unknown version). */
int pisb_git_tracked(const char *dir, struct pisb_buf *out, struct pisb_err *e);

#endif
