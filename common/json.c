/* the jsmn implementation, private to this file */
#define JSMN_STATIC
#define JSMN_STRICT
#define JSMN_PARENT_LINKS   /* a closing bracket finds its opener in O(1) */
#include <jsmn.h>

#include "json.h"
#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- writer ---- */

void pisb_jw_init(struct pisb_jw *w, struct pisb_buf *b)
{
	memset(w, 0, sizeof(*w));
	w->b = b;
	w->first[0] = true;
}

static void sep(struct pisb_jw *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (!w->first[w->depth])
		pisb_buf_addc(w->b, ',');
	w->first[w->depth] = false;
}

static void open_(struct pisb_jw *w, char c)
{
	sep(w);
	pisb_buf_addc(w->b, c);
	if (w->depth + 1 < PISB_JW_DEPTH)
		w->depth++;
	w->first[w->depth] = true;
}

static void close_(struct pisb_jw *w, char c)
{
	if (w->depth > 0)
		w->depth--;
	pisb_buf_addc(w->b, c);
}

void pisb_jw_obj(struct pisb_jw *w) { open_(w, '{'); }
void pisb_jw_obj_end(struct pisb_jw *w) { close_(w, '}'); }
void pisb_jw_arr(struct pisb_jw *w) { open_(w, '['); }
void pisb_jw_arr_end(struct pisb_jw *w) { close_(w, ']'); }

void pisb_jw_key(struct pisb_jw *w, const char *key)
{
	sep(w);
	pisb_json_escape(w->b, key, strlen(key));
	pisb_buf_addc(w->b, ':');
	w->after_key = true;
}

void pisb_jw_str(struct pisb_jw *w, const char *s)
{
	if (!s) {
		pisb_jw_null(w);
		return;
	}
	pisb_jw_strn(w, s, strlen(s));
}

void pisb_jw_strn(struct pisb_jw *w, const char *s, size_t n)
{
	sep(w);
	pisb_json_escape(w->b, s, n);
}

void pisb_jw_int(struct pisb_jw *w, long long v)
{
	sep(w);
	pisb_buf_addf(w->b, "%lld", v);
}

void pisb_jw_dbl(struct pisb_jw *w, double v)
{
	sep(w);
	pisb_buf_addf(w->b, "%.6g", v);
}

void pisb_jw_bool(struct pisb_jw *w, bool v)
{
	sep(w);
	pisb_buf_adds(w->b, v ? "true" : "false");
}

void pisb_jw_null(struct pisb_jw *w)
{
	sep(w);
	pisb_buf_adds(w->b, "null");
}

void pisb_jw_raw(struct pisb_jw *w, const char *json, size_t n)
{
	sep(w);
	pisb_buf_add(w->b, json, n);
}

void pisb_jw_kstr(struct pisb_jw *w, const char *k, const char *s)
{
	pisb_jw_key(w, k);
	pisb_jw_str(w, s);
}

void pisb_jw_kint(struct pisb_jw *w, const char *k, long long v)
{
	pisb_jw_key(w, k);
	pisb_jw_int(w, v);
}

void pisb_jw_kbool(struct pisb_jw *w, const char *k, bool v)
{
	pisb_jw_key(w, k);
	pisb_jw_bool(w, v);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len, i;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

void pisb_json_escape(struct pisb_buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;

	pisb_buf_grow(b, n + 2);
	pisb_buf_addc(b, '"');
	while (i < n) {
		unsigned char c = p[i];
		size_t l;

		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			/* fast path: copy runs of plain ASCII at once */
			run = i;
			while (i < n && p[i] >= 0x20 && p[i] < 0x80 && p[i] != '"' &&
			       p[i] != '\\')
				i++;
			pisb_buf_add(b, p + run, i - run);
			continue;
		}
		switch (c) {
		case '"': pisb_buf_adds(b, "\\\""); i++; continue;
		case '\\': pisb_buf_adds(b, "\\\\"); i++; continue;
		case '\n': pisb_buf_adds(b, "\\n"); i++; continue;
		case '\r': pisb_buf_adds(b, "\\r"); i++; continue;
		case '\t': pisb_buf_adds(b, "\\t"); i++; continue;
		case '\b': pisb_buf_adds(b, "\\b"); i++; continue;
		case '\f': pisb_buf_adds(b, "\\f"); i++; continue;
		default: break;
		}
		if (c < 0x20 || c == 0x7f) {
			pisb_buf_addf(b, "\\u%04x", c);
			i++;
			continue;
		}
		l = utf8_len(p + i, n - i);
		if (l == 0) {
			pisb_buf_adds(b, "\\ufffd"); /* one per invalid byte */
			i++;
			continue;
		}
		pisb_buf_add(b, p + i, l);
		i += l;
	}
	pisb_buf_addc(b, '"');
}

/* ---- reader ---- */

/* The offset where nesting first goes deeper than max, or -1: one pass,
 * strings skipped (brackets in them do not count). */
static long too_deep(const char *js, size_t len, int max)
{
	int depth = 0;

	for (size_t i = 0; i < len; i++) {
		char c = js[i];
		if (c == '"') {
			for (i++; i < len && js[i] != '"'; i++)
				if (js[i] == '\\')
					i++;
		} else if (c == '[' || c == '{') {
			if (++depth > max)
				return (long)i;
		} else if (c == ']' || c == '}') {
			depth--;
		}
	}
	return -1;
}

int pisb_json_parse(struct pisb_json *j, const char *js, size_t len,
		    struct pisb_err *e)
{
	jsmn_parser p;
	long deep;
	int r;

	memset(j, 0, sizeof(*j));
	j->js = js;
	j->len = len;
	/* bounded depth and one counting pass, then one real one: linear in
	 * the input whatever its shape */
	deep = too_deep(js, len, PISB_JSON_MAX_DEPTH);
	if (deep >= 0)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "invalid JSON: nested deeper than %d levels at offset %ld",
				    PISB_JSON_MAX_DEPTH, deep);
	jsmn_init(&p);
	r = jsmn_parse(&p, js, len, NULL, 0);
	if (r > 0) {
		j->tok = xcalloc((size_t)r, sizeof(jsmntok_t));
		jsmn_init(&p);
		r = jsmn_parse(&p, js, len, j->tok, (unsigned)r);
	}
	if (r < 0 || r == 0) {
		pisb_json_release(j);
		if (r == JSMN_ERROR_INVAL)
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "invalid JSON: unexpected character at offset %u", p.pos);
		return pisb_err_set(e, PISB_EXIT_USAGE, "invalid JSON%s",
				    r == JSMN_ERROR_PART ? ": unexpected end of input" :
				    r == 0 ? ": empty input" : "");
	}
	/* jsmn (non-strict) accepts a few things JSON does not; check the
	 * top level is a single value covering the input. */
	for (size_t k = (size_t)j->tok[0].end; k < len; k++) {
		if (js[k] != ' ' && js[k] != '\n' && js[k] != '\t' && js[k] != '\r') {
			pisb_json_release(j);
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "invalid JSON: trailing data at offset %zu", k);
		}
	}
	j->ntok = r;
	return 0;
}

void pisb_json_release(struct pisb_json *j)
{
	free(j->tok);
	j->tok = NULL;
	j->ntok = 0;
}

int pisb_json_skip(const struct pisb_json *j, int i)
{
	int pending = 1;

	if (i < 0 || i >= j->ntok)
		return -1;
	while (pending > 0 && i < j->ntok) {
		const jsmntok_t *t = &j->tok[i];
		pending--;
		if (t->type == JSMN_OBJECT)
			pending += t->size * 2;
		else if (t->type == JSMN_ARRAY)
			pending += t->size;
		i++;
	}
	return i < j->ntok ? i : -1;
}

static bool tok_eq(const struct pisb_json *j, int i, const char *s, size_t n)
{
	const jsmntok_t *t = &j->tok[i];
	return (size_t)(t->end - t->start) == n && memcmp(j->js + t->start, s, n) == 0;
}

int pisb_json_get(const struct pisb_json *j, int obj, const char *key)
{
	int n, i;
	size_t klen = strlen(key);

	if (obj < 0 || obj >= j->ntok || j->tok[obj].type != JSMN_OBJECT)
		return -1;
	n = j->tok[obj].size;
	i = obj + 1;
	for (int k = 0; k < n && i >= 0; k++) {
		/* keys with escapes are compared raw: pisb keys never need them */
		if (j->tok[i].type == JSMN_STRING && tok_eq(j, i, key, klen))
			return i + 1;
		i = pisb_json_skip(j, i + 1);
	}
	return -1;
}

int pisb_json_at(const struct pisb_json *j, int arr, int n)
{
	int i;

	if (arr < 0 || arr >= j->ntok || j->tok[arr].type != JSMN_ARRAY ||
	    n < 0 || n >= j->tok[arr].size)
		return -1;
	i = arr + 1;
	while (n-- > 0 && i >= 0)
		i = pisb_json_skip(j, i);
	return i;
}

bool pisb_json_is_str(const struct pisb_json *j, int i)
{
	return i >= 0 && i < j->ntok && j->tok[i].type == JSMN_STRING;
}

static char first_char(const struct pisb_json *j, int i)
{
	return j->js[j->tok[i].start];
}

bool pisb_json_is_num(const struct pisb_json *j, int i)
{
	char c;
	if (i < 0 || i >= j->ntok || j->tok[i].type != JSMN_PRIMITIVE)
		return false;
	c = first_char(j, i);
	return c == '-' || (c >= '0' && c <= '9');
}

bool pisb_json_is_bool(const struct pisb_json *j, int i)
{
	return i >= 0 && i < j->ntok && j->tok[i].type == JSMN_PRIMITIVE &&
	       (first_char(j, i) == 't' || first_char(j, i) == 'f');
}

bool pisb_json_is_null(const struct pisb_json *j, int i)
{
	return i >= 0 && i < j->ntok && j->tok[i].type == JSMN_PRIMITIVE &&
	       first_char(j, i) == 'n';
}

bool pisb_json_eq(const struct pisb_json *j, int i, const char *s)
{
	return pisb_json_is_str(j, i) && tok_eq(j, i, s, strlen(s));
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int k = 0; k < 4; k++) {
		int h = hexval(s[k]);
		if (h < 0)
			return -1;
		v = v * 16 + (unsigned)h;
	}
	*out = v;
	return 0;
}

static void put_utf8(struct pisb_buf *b, unsigned cp)
{
	char u[4];
	if (cp < 0x80) {
		pisb_buf_addc(b, (char)cp);
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3f));
		pisb_buf_add(b, u, 2);
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		pisb_buf_add(b, u, 3);
	} else {
		u[0] = (char)(0xf0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		pisb_buf_add(b, u, 4);
	}
}

int pisb_json_str_buf(const struct pisb_json *j, int i, struct pisb_buf *b)
{
	const char *s, *end;

	if (!pisb_json_is_str(j, i))
		return -1;
	s = j->js + j->tok[i].start;
	end = j->js + j->tok[i].end;
	pisb_buf_grow(b, (size_t)(end - s));
	while (s < end) {
		const char *q = memchr(s, '\\', (size_t)(end - s));
		unsigned cp, lo;

		if (!q) {
			pisb_buf_add(b, s, (size_t)(end - s));
			break;
		}
		pisb_buf_add(b, s, (size_t)(q - s));
		s = q + 1;
		if (s >= end)
			return -1;
		switch (*s) {
		case '"': pisb_buf_addc(b, '"'); break;
		case '\\': pisb_buf_addc(b, '\\'); break;
		case '/': pisb_buf_addc(b, '/'); break;
		case 'b': pisb_buf_addc(b, '\b'); break;
		case 'f': pisb_buf_addc(b, '\f'); break;
		case 'n': pisb_buf_addc(b, '\n'); break;
		case 'r': pisb_buf_addc(b, '\r'); break;
		case 't': pisb_buf_addc(b, '\t'); break;
		case 'u':
			if (end - s < 5 || hex4(s + 1, &cp) < 0)
				return -1;
			s += 4;
			if (cp >= 0xd800 && cp <= 0xdbff && end - s >= 7 &&
			    s[1] == '\\' && s[2] == 'u' && hex4(s + 3, &lo) == 0 &&
			    lo >= 0xdc00 && lo <= 0xdfff) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				s += 6;
			} else if (cp >= 0xd800 && cp <= 0xdfff) {
				cp = 0xfffd;
			}
			put_utf8(b, cp);
			break;
		default:
			return -1;
		}
		s++;
	}
	return 0;
}

char *pisb_json_str(const struct pisb_json *j, int i)
{
	struct pisb_buf b = PISB_BUF_INIT;

	if (pisb_json_str_buf(j, i, &b) < 0 || (b.len && memchr(b.s, '\0', b.len))) {
		pisb_buf_release(&b);
		return NULL;
	}
	return pisb_buf_detach(&b);
}

int pisb_json_int(const struct pisb_json *j, int i, long long *out)
{
	char tmp[32];
	size_t n;

	if (!pisb_json_is_num(j, i))
		return -1;
	n = (size_t)(j->tok[i].end - j->tok[i].start);
	if (n >= sizeof(tmp))
		return -1;
	memcpy(tmp, j->js + j->tok[i].start, n);
	tmp[n] = '\0';
	return pisb_parse_ll(tmp, -9007199254740991LL, 9007199254740991LL, out);
}

int pisb_json_bool(const struct pisb_json *j, int i, bool *out)
{
	if (!pisb_json_is_bool(j, i))
		return -1;
	*out = first_char(j, i) == 't';
	return 0;
}

const char *pisb_json_raw(const struct pisb_json *j, int i, size_t *n)
{
	if (i < 0 || i >= j->ntok)
		return NULL;
	*n = (size_t)(j->tok[i].end - j->tok[i].start);
	/* strings exclude their quotes in jsmn; include them for raw text */
	if (j->tok[i].type == JSMN_STRING) {
		*n += 2;
		return j->js + j->tok[i].start - 1;
	}
	return j->js + j->tok[i].start;
}
