/* json.h - a JSON writer with exact escaping, and jsmn-based reading.
 *
 * Writer: appends to a struct pisb_buf; commas are tracked per nesting level.
 * Strings are escaped so that any byte sequence yields valid JSON: quotes,
 * backslash and control characters are escaped, valid UTF-8 is kept as is,
 * and every byte that is not part of valid UTF-8 becomes U+FFFD.
 *
 * Reader: pisb_json_parse() tokenises with jsmn, growing the token array as
 * needed (no fixed token limit).  Tokens point into the caller's buffer,
 * which must outlive the struct pisb_json: the parser does not copy it.
 */
#ifndef PISB_JSON_H
#define PISB_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define JSMN_HEADER
#define JSMN_PARENT_LINKS
#include <jsmn.h>

struct pisb_err;

#define PISB_JW_DEPTH 64

struct pisb_jw {
	struct pisb_buf *b;
	int depth;
	bool first[PISB_JW_DEPTH];
	bool after_key;
};

void pisb_jw_init(struct pisb_jw *w, struct pisb_buf *b);
void pisb_jw_obj(struct pisb_jw *w);     /* { */
void pisb_jw_obj_end(struct pisb_jw *w); /* } */
void pisb_jw_arr(struct pisb_jw *w);     /* [ */
void pisb_jw_arr_end(struct pisb_jw *w); /* ] */
void pisb_jw_key(struct pisb_jw *w, const char *key);
void pisb_jw_str(struct pisb_jw *w, const char *s);  /* NULL writes null */
void pisb_jw_strn(struct pisb_jw *w, const char *s, size_t n);
void pisb_jw_int(struct pisb_jw *w, long long v);
void pisb_jw_dbl(struct pisb_jw *w, double v);
void pisb_jw_bool(struct pisb_jw *w, bool v);
void pisb_jw_null(struct pisb_jw *w);
/* Insert already-valid JSON text as one value. */
void pisb_jw_raw(struct pisb_jw *w, const char *json, size_t n);
/* key + value shorthands */
void pisb_jw_kstr(struct pisb_jw *w, const char *k, const char *s);
void pisb_jw_kint(struct pisb_jw *w, const char *k, long long v);
void pisb_jw_kbool(struct pisb_jw *w, const char *k, bool v);

/* Escape n bytes of s as a JSON string literal (with quotes) into b. */
void pisb_json_escape(struct pisb_buf *b, const char *s, size_t n);

struct pisb_json {
	const char *js;   /* borrowed: the text being read */
	size_t len;
	jsmntok_t *tok;   /* owned */
	int ntok;
};

/* Parse; tokens index into js.  Returns 0, or -1 with e set (code 2).
 * Linear in len; nesting deeper than PISB_JSON_MAX_DEPTH is refused. */
#define PISB_JSON_MAX_DEPTH 128
int pisb_json_parse(struct pisb_json *j, const char *js, size_t len,
		    struct pisb_err *e);
void pisb_json_release(struct pisb_json *j);

/* Token navigation.  All return a token index, or -1. */
int pisb_json_skip(const struct pisb_json *j, int i);      /* next sibling */
int pisb_json_get(const struct pisb_json *j, int obj, const char *key);
int pisb_json_at(const struct pisb_json *j, int arr, int n);
bool pisb_json_is_str(const struct pisb_json *j, int i);
bool pisb_json_is_num(const struct pisb_json *j, int i);
bool pisb_json_is_bool(const struct pisb_json *j, int i);
bool pisb_json_is_null(const struct pisb_json *j, int i);
bool pisb_json_eq(const struct pisb_json *j, int i, const char *s);
/* Unescaped copy of a string token (caller frees); NULL if not a string
 * or if it contains \u0000 and nul_ok is false. */
char *pisb_json_str(const struct pisb_json *j, int i);
/* Unescape into b (binary-safe: \u0000 allowed). */
int pisb_json_str_buf(const struct pisb_json *j, int i, struct pisb_buf *b);
int pisb_json_int(const struct pisb_json *j, int i, long long *out);
int pisb_json_bool(const struct pisb_json *j, int i, bool *out);
/* Raw text of any token (borrowed). */
const char *pisb_json_raw(const struct pisb_json *j, int i, size_t *n);

#endif
