/* glob.c - see glob.h. */
#include "glob.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* One [...] set at p (pointing at '['): does c belong to it?  *end is set
 * past the closing ']'; a set without one is taken as a literal '['. */
static unsigned char lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static unsigned char upper(unsigned char c)
{
	return c >= 'a' && c <= 'z' ? (unsigned char)(c - 32) : c;
}

static bool bracket(const char *p, unsigned char c, bool icase, const char **end, bool *ok)
{
	const char *q = p + 1;
	bool neg = false, hit = false;

	if (*q == '!' || *q == '^') {
		neg = true;
		q++;
	}
	for (bool first = true; *q && (first || *q != ']'); first = false) {
		unsigned char lo = (unsigned char)*q, hi;
		if (lo == '\\' && q[1])
			lo = (unsigned char)*++q;
		q++;
		hi = lo;
		if (q[0] == '-' && q[1] && q[1] != ']') {
			hi = (unsigned char)q[1];
			q += 2;
			if (hi == '\\' && *q) {
				hi = (unsigned char)*q;
				q++;
			}
		}
		if ((c >= lo && c <= hi) ||
		    (icase && ((lower(c) >= lo && lower(c) <= hi) || (upper(c) >= lo && upper(c) <= hi))))
			hit = true;
	}
	if (*q != ']') {
		*ok = false;   /* unterminated: literal '[' */
		return false;
	}
	*ok = true;
	*end = q + 1;
	return hit != neg;
}

static bool match(const char *p0, const char *p, const char *s, bool icase)
{
	for (;;) {
		switch (*p) {
		case '\0':
			return *s == '\0';
		case '*':
			if (p[1] == '*' && (p == p0 || p[-1] == '/') && (p[2] == '/' || p[2] == '\0')) {
				if (p[2] == '\0')
					return true;
				p += 3;   /* "**" "/": zero or more whole components */
				for (;;) {
					if (match(p0, p, s, icase))
						return true;
					s = strchr(s, '/');
					if (!s)
						return false;
					s++;
				}
			}
			while (*p == '*')
				p++;
			if (*p == '\0')
				return strchr(s, '/') == NULL;
			for (;;) {
				if (match(p0, p, s, icase))
					return true;
				if (*s == '\0' || *s == '/')
					return false;
				s++;
			}
		case '?':
			if (*s == '\0' || *s == '/')
				return false;
			p++;
			s++;
			break;
		case '[': {
			const char *end;
			bool ok, in;
			if (*s == '\0' || *s == '/')
				return false;
			in = bracket(p, (unsigned char)*s, icase, &end, &ok);
			if (ok) {
				if (!in)
					return false;
				p = end;
				s++;
				break;
			}
			if (*s != '[')
				return false;
			p++;
			s++;
			break;
		}
		case '\\':
			if (p[1])
				p++;
			/* fall through */
		default:
			if (*p != *s && !(icase && lower((unsigned char)*p) == lower((unsigned char)*s)))
				return false;
			p++;
			s++;
		}
	}
}

bool pisb_glob_match(const char *pattern, const char *path)
{
	return match(pattern, pattern, path, false);
}

/* ---- search patterns: {a,b} alternation, then the pathglob rules ---- */

enum { K_GLOB, K_SUFFIX, K_PREFIX, K_EXACT };

static bool same(const char *a, const char *b, size_t n, bool icase)
{
	if (!icase)
		return !memcmp(a, b, n);
	for (size_t i = 0; i < n; i++)
		if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
			return false;
	return true;
}

/* The name against a literal alternative (kind != K_GLOB). */
static bool match_lit(const struct pisb_pathglob_alt *a, const char *name, bool icase)
{
	size_t n = strlen(name);

	if (a->kind == K_EXACT)
		return n == a->litlen && same(name, a->lit, n, icase);
	if (n < a->litlen)
		return false;
	return same(a->kind == K_SUFFIX ? name + n - a->litlen : name, a->lit, a->litlen, icase);
}

#define MAX_ALTS 1024

/* The '}' or ',' that ends the brace item starting at p (depth 0), or
 * NULL; [...] sets and escapes are skipped. */
/* The ']' closing the bracket expression at p, or p itself when it has
 * none (then '[' is an ordinary character). */
static const char *bracket_end(const char *p)
{
	const char *q = p + 1;

	if (*q == '!' || *q == '^')
		q++;
	if (*q == ']')
		q++;
	while (*q && *q != ']')
		q++;
	return *q ? q : p;
}

static const char *brace_scan(const char *p, bool want_close, bool *comma)
{
	int depth = 0;

	for (; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
		} else if (*p == '[') {
			p = bracket_end(p);
		} else if (*p == '{') {
			depth++;
		} else if (*p == '}') {
			if (depth == 0)
				return p;
			depth--;
		} else if (*p == ',' && depth == 0) {
			*comma = true;
			if (!want_close)
				return p;
		}
	}
	return NULL;
}

/* Expand the first {..,..} of pat (recursively) into out. */
static void expand(const char *pat, char ***out, size_t *n, size_t *cap)
{
	const char *p = pat;

	for (; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p == '[') {
			p = bracket_end(p);
			continue;
		}
		if (*p != '{')
			continue;
		bool comma = false;
		const char *close = brace_scan(p + 1, true, &comma);
		if (!close)
			continue;           /* an open brace: literal */
		for (const char *a = p + 1; a <= close && *n < MAX_ALTS;) {
			bool c2 = false;
			const char *b = brace_scan(a, false, &c2);
			if (!b || b > close)
				b = close;
			char *alt = xasprintf("%.*s%.*s%s", (int)(p - pat), pat, (int)(b - a), a, close + 1);
			expand(alt, out, n, cap);
			free(alt);
			a = b + 1;
		}
		return;
	}
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 4;
		*out = xrealloc(*out, *cap * sizeof(**out));
	}
	(*out)[(*n)++] = xstrdup(pat);
}

static void alt_init(struct pisb_pathglob_alt *g, const char *pattern)
{
	while (pattern[0] == '.' && pattern[1] == '/')
		pattern += 2;   /* a leading "./" adds nothing */
	if (!strchr(pattern, '/')) {
		g->pat = xstrdup(pattern);
		g->basename = true;
	} else if (pattern[0] == '/') {
		g->pat = xstrdup(pattern + 1);
		g->basename = false;
	} else if (pisb_str_starts(pattern, "**/") || !strcmp(pattern, "**")) {
		g->pat = xstrdup(pattern);
		g->basename = false;
	} else {
		g->pat = xasprintf("**/%s", pattern);
		g->basename = false;
	}
	/* "dir/" in a search pattern means the directory itself */
	size_t n = strlen(g->pat);
	if (!g->basename && n > 1 && g->pat[n - 1] == '/')
		g->pat[n - 1] = '\0';
	/* a base name "*.c", "Makefile*" or "x.h": compared, not matched */
	g->kind = K_GLOB;
	if (g->basename) {
		const char *p = g->pat;
		size_t len = strlen(p);
		bool star0 = len > 0 && p[0] == '*', star1 = len > 1 && p[len - 1] == '*';
		const char *a = p + star0;
		size_t al = len - star0 - (star1 && !(star0 && len == 1));
		if (al > 0 && !memchr(a, '*', al) && !memchr(a, '?', al) && !memchr(a, '[', al) &&
		    !memchr(a, '\\', al) && !(star0 && star1)) {
			g->kind = star0 ? K_SUFFIX : star1 ? K_PREFIX : K_EXACT;
			g->lit = a;
			g->litlen = al;
		}
	}
}

void pisb_pathglob_init(struct pisb_pathglob *g, const char *pattern)
{
	char **v = NULL;
	size_t n = 0, cap = 0;

	expand(pattern, &v, &n, &cap);
	g->alt = xcalloc(n, sizeof(*g->alt));
	for (size_t i = 0; i < n; i++) {
		alt_init(&g->alt[i], v[i]);
		free(v[i]);
	}
	free(v);
	g->n = n;
	g->icase = false;
}

void pisb_pathglob_init_find(struct pisb_pathglob *g, const char *pattern)
{
	pisb_pathglob_init(g, pattern);
	g->icase = true;
	for (const char *p = pattern; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			g->icase = false;
}

void pisb_pathglob_release(struct pisb_pathglob *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->alt[i].pat);
	free(g->alt);
	g->alt = NULL;
	g->n = 0;
}

bool pisb_pathglob_match(const struct pisb_pathglob *g, const char *rel,
			 const char *name)
{
	for (size_t i = 0; i < g->n; i++) {
		const char *p = g->alt[i].pat;
		if (g->alt[i].kind != K_GLOB ? match_lit(&g->alt[i], name, g->icase) :
		    match(p, p, g->alt[i].basename ? name : rel, g->icase))
			return true;
	}
	return false;
}
