/* glob.c - see glob.h. */
#include "glob.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* One [...] set at p (pointing at '['): does c belong to it?  *end is set
 * past the closing ']'; a set without one is taken as a literal '['. */
static bool bracket(const char *p, unsigned char c, const char **end, bool *ok)
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
		if (c >= lo && c <= hi)
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

static bool match(const char *p0, const char *p, const char *s)
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
					if (match(p0, p, s))
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
				if (match(p0, p, s))
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
			in = bracket(p, (unsigned char)*s, &end, &ok);
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
			if (*p != *s)
				return false;
			p++;
			s++;
		}
	}
}

bool pisb_glob_match(const char *pattern, const char *path)
{
	return match(pattern, pattern, path);
}

void pisb_pathglob_init(struct pisb_pathglob *g, const char *pattern)
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
}

void pisb_pathglob_release(struct pisb_pathglob *g)
{
	free(g->pat);
	g->pat = NULL;
}

bool pisb_pathglob_match(const struct pisb_pathglob *g, const char *rel,
			 const char *name)
{
	return pisb_glob_match(g->pat, g->basename ? name : rel);
}
