/* lit.h - scanning a buffer for the first of a few byte strings, or for
 * the first byte of a set, many bytes at a time.
 *
 * The prefilter behind grep (search.h): each string is looked for by two
 * of its bytes at once (the rarest two, by a table of byte frequencies in
 * source and library text), sixteen or thirty-two positions per step
 * (SSE2, or AVX2 where the processor has it), and every position where
 * both bytes sit is checked against the whole string.  With fold, ASCII
 * letters match either case (the strings are given in lower case).
 * A byte set: the positions of any of its members (bytes from 0x80 up
 * for "a non-ASCII character must appear", a few bytes otherwise).
 */
#ifndef PISB_LIT_H
#define PISB_LIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PISB_LIT_MAX 8

struct pisb_lit;

/* n (1..PISB_LIT_MAX) strings v[k] of len[k] (>= 1) bytes; fold: ASCII
 * case-insensitive (v in lower case). */
struct pisb_lit *pisb_lit_new(const char *const *v, const size_t *len, int n, bool fold);
/* Every byte b with set[b / 8] bit b % 8. */
struct pisb_lit *pisb_lit_new_bytes(const uint8_t set[32]);
void pisb_lit_free(struct pisb_lit *l);

/* The first offset at or after pos in h[0..n) where one of the strings
 * starts (or a byte of the set sits): SIZE_MAX when there is none. */
size_t pisb_lit_find(const struct pisb_lit *l, const char *h, size_t n, size_t pos);

/* How many bytes of p[0..n) are c (newlines, to number lines). */
size_t pisb_lit_count(const char *p, size_t n, char c);

#endif
