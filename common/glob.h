/* glob.h - shell-style path globs, as find, grep --glob and .gitignore use.
 *
 *   *      any run of characters except '/'
 *   ?      one character except '/'
 *   [...]  one character from a set: ranges a-z, negation [!...] or [^...];
 *          never '/'
 *   **     when it is a whole path component (alone, or between slashes,
 *          or at the start or end next to one): any number of components,
 *          none included
 *   \c     the character c itself
 *
 * Matching is byte-wise (no locale), case-sensitive, and anchored at both
 * ends of the string.
 */
#ifndef PISB_GLOB_H
#define PISB_GLOB_H

#include <stdbool.h>
#include <stddef.h>

bool pisb_glob_match(const char *pattern, const char *path);

/* A search pattern as find and grep --glob take it (fd and ripgrep style):
 * {a,b} alternation first ("{main,util}.c", "*.{c,h}", nested too; an
 * unclosed '{' is itself), then per alternative: without a '/', it
 * is matched against the base name at any depth; with one, against the
 * whole path relative to the search directory, where a leading '/'
 * anchors it there and otherwise it may also match below ("src/x.c"
 * matches "a/src/x.c"). */
struct pisb_pathglob_alt {
	char *pat;        /* owned: the pattern to match */
	bool basename;    /* match the last component only */
	int kind;         /* how: a whole glob, or (no other special
			   * character) a suffix, prefix or exact name */
	const char *lit;  /* ... the literal part of pat */
	size_t litlen;
};
struct pisb_pathglob {
	struct pisb_pathglob_alt *alt;
	size_t n;
	bool icase;       /* ASCII letters of either case */
};
/* Case-sensitive (grep --glob, as ripgrep's -g). */
void pisb_pathglob_init(struct pisb_pathglob *g, const char *pattern);
/* find: fd's smart case, case-insensitive unless the pattern has an
 * uppercase letter. */
void pisb_pathglob_init_find(struct pisb_pathglob *g, const char *pattern);
void pisb_pathglob_release(struct pisb_pathglob *g);
/* rel: path relative to the search directory; name: its last component. */
bool pisb_pathglob_match(const struct pisb_pathglob *g, const char *rel,
			 const char *name);

#endif
