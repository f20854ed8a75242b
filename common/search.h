/* search.h - the line search behind grep: ripgrep's pattern syntax,
 * matched by PCRE2 (its JIT when the system allows it) behind literal
 * prefilters.
 *
 * A pattern is compiled once (pisb_search_new) and shared read-only by
 * threads; each thread searches with its own scratch (pisb_search_ws).
 *
 * Literals: every match of the pattern must contain one of a small set of
 * byte strings, read from the pattern (the longest run of plain characters
 * of a concatenation, the union over the branches of an alternation, the
 * common part of those when they share three bytes or more; under -i or
 * (?i) in lower case, without k, s and non-ASCII letters, which fold
 * beyond ASCII), or at least a byte from 0x80 up (a class such as
 * \p{Greek} or [α-ω] that matches no ASCII character).
 * When there is such a set, the buffer is scanned for it (lit.h: a rare
 * pair of bytes, Teddy for several strings) and only the lines that hold
 * one go to PCRE2; a pattern that is nothing but its literals needs no
 * PCRE2 at all.  Without one, PCRE2 runs over the whole buffer and a
 * match is mapped back to its line.  Either way a line matches exactly
 * when the pattern matches within it (no match spans a newline), as with
 * ripgrep.
 */
#ifndef PISB_SEARCH_H
#define PISB_SEARCH_H

#include <stdbool.h>
#include <stddef.h>

struct pisb_err;
struct pisb_search;
struct pisb_search_ws;

/* pattern: ripgrep syntax (rx.h), or with literal a fixed string; icase:
 * Unicode case folding (-i).  A pattern ripgrep would refuse: -1 with e
 * (PISB_EXIT_USAGE) naming the construct. */
int pisb_search_new(struct pisb_search **s, const char *pattern, bool literal,
		    bool icase, struct pisb_err *e);
void pisb_search_free(struct pisb_search *s);

struct pisb_search_ws *pisb_search_ws_new(const struct pisb_search *s);
void pisb_search_ws_free(struct pisb_search_ws *w);

/* Start on a new buffer buf[0..n) (the same one for the _next calls). */
void pisb_search_begin(struct pisb_search_ws *w, const char *buf, size_t n);
/* The first matching line that starts at or after pos (a line start):
 * true with [*ls, *le), the line without its '\n'. */
bool pisb_search_next(struct pisb_search_ws *w, const char *buf, size_t n,
		      size_t pos, size_t *ls, size_t *le);

#endif
