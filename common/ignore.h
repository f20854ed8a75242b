/* ignore.h - .gitignore rules and the directory walk that honours them.
 *
 * Rules (the basic gitignore semantics): blank lines and '#' comments are
 * skipped; a leading '!' re-includes; a trailing '/' matches directories
 * only; a pattern with a '/' at its start or middle is anchored to the
 * directory of its .gitignore file, one without matches the base name at
 * any depth; '*', '?', '[...]' and '**' as in glob.h; '\' escapes.  Rules
 * of deeper .gitignore files come after those of shallower ones, and the
 * last rule that matches decides.  A directory that is ignored is not
 * entered, so nothing below it can be re-included (as in git).
 *
 * The walk lists each directory, sorts its entries by name (byte order),
 * and calls back once per entry, depth first.  It never follows symlinks
 * and opens each level with a single-component openat(O_NOFOLLOW), so it
 * stays beneath the directory it started from.
 */
#ifndef PISB_IGNORE_H
#define PISB_IGNORE_H

#include <stdbool.h>
#include <stddef.h>

struct pisb_err;

struct pisb_ignore_rule {
	char *pat;
	unsigned flags;   /* PISB_IGN_* */
};
enum { PISB_IGN_NEGATE = 1, PISB_IGN_DIRONLY = 2, PISB_IGN_ANCHORED = 4 };

struct pisb_ignore_frame {
	char *base;       /* absolute directory of the .gitignore ("" for "/") */
	size_t baselen;
	struct pisb_ignore_rule *rules;
	size_t n;
};

struct pisb_ignore {
	struct pisb_ignore_frame *f;
	size_t n, cap;
};
#define PISB_IGNORE_INIT { NULL, 0, 0 }

/* Parse gitignore text into a new frame for directory base. */
void pisb_ignore_push(struct pisb_ignore *ig, const char *base,
		      const char *text, size_t len);
void pisb_ignore_pop(struct pisb_ignore *ig);
void pisb_ignore_release(struct pisb_ignore *ig);
/* Is abspath (below every frame's base) ignored? */
bool pisb_ignore_match(const struct pisb_ignore *ig, const char *abspath,
		       bool is_dir);

/* One entry of the walk, valid during the callback only. */
struct pisb_walk_entry {
	const char *path;   /* absolute, inside the sandbox */
	const char *rel;    /* relative to the walk's directory */
	const char *name;   /* last component */
	int dirfd;          /* the directory holding it */
	unsigned char type; /* DT_REG, DT_DIR, DT_LNK, ... (never DT_UNKNOWN) */
};

enum { PISB_WALK_CONTINUE = 0, PISB_WALK_SKIP = 1, PISB_WALK_STOP = 2 };
/* Returns PISB_WALK_*; SKIP on a directory: do not enter it. -1: error. */
typedef int (*pisb_walk_fn)(void *arg, const struct pisb_walk_entry *e);

struct pisb_walk_opts {
	int rootfd;         /* the sandbox's "/", to find ancestors' .gitignore */
	int dirfd;          /* the directory to walk (borrowed) */
	const char *path;   /* its absolute path */
	bool ignore;        /* skip .git, node_modules and .gitignore'd paths */
};

/* Walk; returns 0 (finished or stopped), or -1 with e set (a callback's
 * error, or the top directory unreadable). Unreadable subdirectories are
 * skipped. */
int pisb_walk(const struct pisb_walk_opts *o, pisb_walk_fn fn, void *arg,
	      struct pisb_err *e);

#endif
