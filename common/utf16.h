/* utf16.h - text files in UTF-16, found by their byte-order mark (FF FE:
 * little-endian, FE FF: big-endian) and searched as UTF-8, as ripgrep
 * does: the mark is dropped, a lone surrogate or a trailing odd byte
 * becomes U+FFFD. */
#ifndef PISB_UTF16_H
#define PISB_UTF16_H

#include "util.h"

#include <stdbool.h>
#include <stddef.h>

/* Does buf[0..n) start with a UTF-16 byte-order mark? */
bool pisb_utf16_is(const char *buf, size_t n);
/* The UTF-8 text of buf[0..n) (which pisb_utf16_is), appended to out. */
void pisb_utf16_to_utf8(const char *buf, size_t n, struct pisb_buf *out);

#endif
