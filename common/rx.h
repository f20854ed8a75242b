/* rx.h - ripgrep's regular expression syntax, for POSIX regcomp().
 *
 * Pi's grep tool (and its model) write patterns for ripgrep, that is in
 * the syntax of Rust's regex crate: \d, \w, \s inside and outside
 * classes, (?:...), (?i), lazy quantifiers, \x{...}.  pisb greps with the
 * C library's POSIX extended expressions, byte-wise, so a pattern is
 * rewritten into an ERE that matches the same lines:
 *
 *   \d \w \s \D \W \S    bracket expressions of the ASCII classes
 *   [...]                rebuilt from the set of bytes it names, escapes
 *                        and [:name:] classes included; a non-ASCII member
 *                        becomes an alternative of its own
 *   \b \B \< \> \A \z    word boundaries, ^ and $
 *   \t \n \r \f \v \a    the control characters; \xHH, \x{H..}, \uHHHH,
 *   \UHHHHHHHH           the character, UTF-8 encoded
 *   \PUNCT               the punctuation character itself
 *   (?:..) (?P<n>..)     plain groups
 *   (?i) (?s) (?m) (?u)  leading flags: i sets *icase, the others change
 *                        nothing for matching lines
 *   *? +? ?? {n,m}?      greedy: the same lines match
 *   .                    one character, UTF-8 aware where it counts
 *
 * Refused with a message naming the construct, as ripgrep refuses most of
 * them: look-around, backreferences, \p{..} classes, set operations
 * inside classes, flags after the start, (?x).
 */
#ifndef PISB_RX_H
#define PISB_RX_H

#include "err.h"
#include "util.h"

#include <stdbool.h>

/* Append the ERE for the ripgrep-syntax pattern rx to out; *icase is set
 * when the pattern starts with (?i).  -1 with e (PISB_EXIT_USAGE). */
int pisb_rx_to_ere(const char *rx, struct pisb_buf *out, bool *icase, struct pisb_err *e);

/* Append the PCRE2 pattern (for PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE)
 * for the ripgrep-syntax pattern rx to out.  What the dialects spell
 * differently is rewritten (\v, \uHHHH, \A, \z, ASCII-only [:name:]
 * and [:^name:] classes, Unicode class names Script=.. and gc=.., (?x),
 * (?u), (?m) and (?s) dropped as a line is matched alone, classes nested
 * in classes, the set operations &&, -- and ~~ as look-arounds over one
 * character); what ripgrep refuses without -P is refused: look-around,
 * backreferences, a literal \n, unknown escapes, possessive repeats,
 * empty flag groups, an intersection with nothing.  icase: the pattern is matched
 * case-insensitively somewhere (-i or (?i)), where \p{Lu}, \p{Ll} and
 * \p{Lt} stand for every cased letter, as Rust folds them.  -1 with e
 * (PISB_EXIT_USAGE). */
int pisb_rx_to_pcre2(const char *rx, struct pisb_buf *out, bool icase, struct pisb_err *e);

#endif
