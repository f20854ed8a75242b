/* rx.c - ripgrep's regular expression syntax, for POSIX regcomp() (rx.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "rx.h"

#include <pcre2.h>

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A character class: a set of ASCII bytes, and what it says of the
 * characters beyond ASCII (UTF-8 sequences, matched as wholes). */
enum wide { W_NONE, W_ANY, W_SOME };

struct cls {
	uint8_t bits[16];       /* bytes 0..127 */
	enum wide wide;
	struct pisb_buf some;   /* W_SOME: the characters, '|'-separated */
};

struct rx {
	const char *s;
	size_t i;
	struct pisb_buf *out;
	struct pisb_err *e;
	bool icase;             /* pisb_rx_to_pcre2: -i or (?i) somewhere */
};

/* one UTF-8 encoded non-ASCII character: a lead byte, continuations */
static const char ANY_WIDE[] = "[\xc0-\xf7][\x80-\xbf]+";

static void cls_add(struct cls *c, unsigned b)
{
	if (b > 0 && b < 128)
		c->bits[b / 8] |= (uint8_t)(1u << (b % 8));
}

static bool cls_has(const struct cls *c, unsigned b)
{
	return b < 128 && (c->bits[b / 8] >> (b % 8)) & 1;
}

static bool cls_empty(const struct cls *c)
{
	for (unsigned b = 1; b < 128; b++)
		if (cls_has(c, b))
			return false;
	return true;
}

/* \d \w \s and their negations; the letter says which */
static void cls_escape(struct cls *c, char k)
{
	struct cls t;
	char lower = (char)tolower((unsigned char)k);

	memset(&t, 0, sizeof(t));
	for (unsigned b = 1; b < 128; b++)
		if ((lower == 'd' && isdigit((int)b)) || (lower == 'w' && (isalnum((int)b) || b == '_')) ||
		    (lower == 's' && isspace((int)b)))
			cls_add(&t, b);
	if (lower != k) {
		for (unsigned b = 1; b < 128; b++)
			if (!cls_has(&t, b) && b != '\n')
				cls_add(c, b);
	} else {
		for (unsigned b = 1; b < 128; b++)
			if (cls_has(&t, b))
				cls_add(c, b);
	}
	/* \w counts every non-ASCII character as a word character (Rust's
	 * \w is Unicode-aware); \D and \S take them all, \W none */
	if (k == 'w' || k == 'D' || k == 'S')
		c->wide = W_ANY;
}

static bool is_escape_class(char k)
{
	return k && strchr("dDwWsS", k);
}

/* ---------- reading characters ---------- */

static int fail(struct rx *r, const char *what)
{
	return pisb_err_set(r->e, PISB_EXIT_USAGE, "invalid regular expression '%s': %s (at offset %zu)",
			    r->s, what, r->i);
}

/* Length of the UTF-8 sequence starting at p (1 for ASCII and stray bytes). */
static size_t u8len(const char *p)
{
	unsigned char c = (unsigned char)*p;
	size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;

	for (size_t k = 1; k < n; k++)
		if (((unsigned char)p[k] & 0xc0) != 0x80)
			return 1;
	return n;
}

static void put_u8(struct pisb_buf *b, uint32_t cp)
{
	if (cp < 0x80) {
		pisb_buf_addc(b, (char)cp);
	} else if (cp < 0x800) {
		pisb_buf_addc(b, (char)(0xc0 | cp >> 6));
		pisb_buf_addc(b, (char)(0x80 | (cp & 0x3f)));
	} else if (cp < 0x10000) {
		pisb_buf_addc(b, (char)(0xe0 | cp >> 12));
		pisb_buf_addc(b, (char)(0x80 | (cp >> 6 & 0x3f)));
		pisb_buf_addc(b, (char)(0x80 | (cp & 0x3f)));
	} else {
		pisb_buf_addc(b, (char)(0xf0 | cp >> 18));
		pisb_buf_addc(b, (char)(0x80 | (cp >> 12 & 0x3f)));
		pisb_buf_addc(b, (char)(0x80 | (cp >> 6 & 0x3f)));
		pisb_buf_addc(b, (char)(0x80 | (cp & 0x3f)));
	}
}

static int hexval(char c)
{
	return isdigit((unsigned char)c) ? c - '0' : isxdigit((unsigned char)c) ? tolower((unsigned char)c) - 'a' + 10 : -1;
}

/* After "\x", "\u" or "\U" (k): the code point. */
static int read_hex(struct rx *r, char k, uint32_t *cp)
{
	size_t want = k == 'x' ? 2 : k == 'u' ? 4 : 8, n = 0;
	bool braced = r->s[r->i] == '{';
	uint32_t v = 0;

	if (braced)
		r->i++;
	while ((braced || n < want) && hexval(r->s[r->i]) >= 0 && n < 8) {
		v = v * 16 + (uint32_t)hexval(r->s[r->i++]);
		n++;
	}
	if (braced && r->s[r->i] != '}')
		return fail(r, "unterminated \\x{...}");
	if (braced)
		r->i++;
	if (!n || (!braced && n != want) || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return fail(r, "invalid hexadecimal escape");
	if (v == 0)
		return fail(r, "a NUL character cannot be searched for");
	*cp = v;
	return 0;
}

/* After a backslash that is not a class escape: the character it stands
 * for, or -1 (an unsupported or unknown escape, r->e set). */
static int escaped_char(struct rx *r, uint32_t *cp)
{
	char k = r->s[r->i++];

	switch (k) {
	case 't': *cp = '\t'; return 0;
	case 'n': *cp = '\n'; return 0;
	case 'r': *cp = '\r'; return 0;
	case 'f': *cp = '\f'; return 0;
	case 'v': *cp = '\v'; return 0;
	case 'a': *cp = '\a'; return 0;
	case 'x': case 'u': case 'U':
		return read_hex(r, k, cp);
	case 'p': case 'P':
		r->i--;
		return fail(r, "Unicode classes (\\p{...}) are not supported");
	case '\0':
		return fail(r, "the pattern ends in a backslash");
	default:
		break;
	}
	if (isdigit((unsigned char)k)) {
		r->i--;
		return fail(r, "backreferences are not supported (ripgrep has none either)");
	}
	if (ispunct((unsigned char)k) || k == ' ') {
		*cp = (unsigned char)k;
		return 0;
	}
	r->i--;
	return fail(r, "unknown escape sequence");
}

/* ---------- writing ---------- */

/* An ASCII character as an ERE atom. */
static void put_lit(struct pisb_buf *b, uint32_t c)
{
	if (c < 0x80 && strchr(".[]()*+?{}|^$\\", (int)c) && c)
		pisb_buf_addc(b, '\\');
	put_u8(b, c);
}

/* The bracket expression of the ASCII bytes of c (and, if wide_bytes, of
 * every byte from 0x80): ']' first, '^' never first, '-' and '[' last. */
static void put_bracket(struct pisb_buf *b, const struct cls *c, bool wide_bytes)
{
	bool rb = cls_has(c, ']'), caret = cls_has(c, '^'), dash = cls_has(c, '-');
	bool lb = cls_has(c, '['), other = wide_bytes;
	unsigned n = 0, only = 0;

	for (unsigned x = 1; x < 128; x++)
		if (cls_has(c, x)) {
			n++;
			only = x;
		}
	if (n == 1 && !wide_bytes) {    /* one character: no brackets */
		put_lit(b, only);
		return;
	}
	pisb_buf_addc(b, '[');
	if (rb)
		pisb_buf_addc(b, ']');
	for (unsigned x = 1; x < 128; x++) {
		unsigned y = x;
		if (!cls_has(c, x) || strchr("]^-[", (int)x))
			continue;
		while (y + 1 < 128 && cls_has(c, y + 1) && !strchr("]^-[", (int)(y + 1)))
			y++;
		pisb_buf_addc(b, (char)x);
		if (y >= x + 2) {
			pisb_buf_addc(b, '-');
			pisb_buf_addc(b, (char)y);
		} else if (y == x + 1) {
			pisb_buf_addc(b, (char)y);
		}
		other = true;
		x = y;
	}
	if (wide_bytes)
		pisb_buf_adds(b, "\x80-\xff");
	if (lb)
		pisb_buf_addc(b, '[');
	if (caret) {
		if (!rb && !other && !lb) {
			/* '^' would come first: start with '-' instead */
			if (dash) {
				pisb_buf_adds(b, "-^]");
				return;
			}
		}
		pisb_buf_addc(b, '^');
	}
	if (dash)
		pisb_buf_addc(b, '-');
	pisb_buf_addc(b, ']');
}

/* Is the atom about to end followed by '*' or '+' (then byte-wise runs
 * match what character-wise runs match)? */
static bool run_follows(const struct rx *r)
{
	return r->s[r->i] == '*' || r->s[r->i] == '+';
}

static void put_cls(struct rx *r, const struct cls *c)
{
	bool ascii = !cls_empty(c);

	if (c->wide == W_NONE) {
		put_bracket(r->out, c, false);
	} else if (c->wide == W_ANY && run_follows(r)) {
		put_bracket(r->out, c, true);
	} else {
		pisb_buf_addc(r->out, '(');
		if (ascii) {
			put_bracket(r->out, c, false);
			pisb_buf_addc(r->out, '|');
		}
		if (c->wide == W_ANY)
			pisb_buf_adds(r->out, ANY_WIDE);
		else
			pisb_buf_add(r->out, c->some.s, c->some.len);
		pisb_buf_addc(r->out, ')');
	}
}

/* ---------- classes ---------- */

/* One member of a class at r->i: a character (*cp, *bytes for non-ASCII),
 * or an escape class / [:name:] merged into c directly (returns 1). */
static int class_item(struct rx *r, struct cls *c, uint32_t *cp, struct pisb_buf *bytes)
{
	const char *p = r->s + r->i;

	if (p[0] == '[' && p[1] == ':') {
		static const char *const names[] = { "alnum", "alpha", "ascii", "blank", "cntrl", "digit",
			"graph", "lower", "print", "punct", "space", "upper", "word", "xdigit", NULL };
		const char *end = strstr(p + 2, ":]");
		size_t len = end ? (size_t)(end - (p + 2)) : 0;
		bool neg = len && p[2] == '^';
		struct cls t;
		int k;

		for (k = 0; names[k]; k++)
			if (end && strlen(names[k]) == len - neg && !strncmp(p + 2 + neg, names[k], len - neg))
				break;
		if (!names[k])
			return fail(r, "unknown [:class:] in a class");
		memset(&t, 0, sizeof(t));
		for (unsigned b = 1; b < 128; b++) {
			int in;
			switch (k) {
			case 0: in = isalnum((int)b); break;
			case 1: in = isalpha((int)b); break;
			case 2: in = 1; break;
			case 3: in = b == ' ' || b == '\t'; break;
			case 4: in = iscntrl((int)b); break;
			case 5: in = isdigit((int)b); break;
			case 6: in = isgraph((int)b); break;
			case 7: in = islower((int)b); break;
			case 8: in = isprint((int)b); break;
			case 9: in = ispunct((int)b); break;
			case 10: in = isspace((int)b); break;
			case 11: in = isupper((int)b); break;
			case 12: in = isalnum((int)b) || b == '_'; break;
			default: in = isxdigit((int)b); break;
			}
			if (!in != !neg)
				cls_add(c, b);
		}
		if (neg)
			c->wide = W_ANY;
		r->i = (size_t)(end + 2 - r->s);
		return 1;
	}
	if (p[0] == '[')
		return fail(r, "nested classes are not supported");
	if ((p[0] == '&' && p[1] == '&') || (p[0] == '~' && p[1] == '~') || (p[0] == '-' && p[1] == '-'))
		return fail(r, "class set operations (&&, --, ~~) are not supported");
	if (p[0] == '\\' && is_escape_class(p[1])) {
		cls_escape(c, p[1]);
		r->i += 2;
		return 1;
	}
	if (p[0] == '\\') {
		r->i++;
		if (escaped_char(r, cp) < 0)
			return -1;
	} else {
		size_t n = u8len(p);
		if (n == 1) {
			*cp = (unsigned char)p[0];
		} else {
			pisb_buf_add(bytes, p, n);
			*cp = 0x80;     /* some non-ASCII character, in bytes */
		}
		r->i += n;
		if (n > 1)
			return 0;
	}
	if (*cp >= 0x80)
		put_u8(bytes, *cp);
	return 0;
}

static void add_wide(struct cls *c, const struct pisb_buf *bytes)
{
	if (c->wide == W_ANY)
		return;
	if (c->wide == W_SOME)
		pisb_buf_addc(&c->some, '|');
	pisb_buf_add(&c->some, bytes->s, bytes->len);
	c->wide = W_SOME;
}

/* A class, r->i just after its '['. */
static int parse_class(struct rx *r)
{
	struct cls c;
	bool neg = false, first = true;
	int ret = -1;

	memset(&c, 0, sizeof(c));
	if (r->s[r->i] == '^') {
		neg = true;
		r->i++;
	}
	for (;;) {
		uint32_t lo, hi;
		_cleanup_buf_ struct pisb_buf lob = PISB_BUF_INIT, hib = PISB_BUF_INIT;
		int k;

		if (!r->s[r->i]) {
			fail(r, "unclosed character class");
			goto out;
		}
		if (r->s[r->i] == ']' && !first)
			break;
		first = false;
		if (r->s[r->i] == ']') {        /* a leading ']' is literal */
			r->i++;
			cls_add(&c, ']');
			continue;
		}
		k = class_item(r, &c, &lo, &lob);
		if (k < 0)
			goto out;
		if (k > 0)
			continue;
		if (r->s[r->i] == '-' && r->s[r->i + 1] && r->s[r->i + 1] != ']') {
			r->i++;
			k = class_item(r, &c, &hi, &hib);
			if (k < 0)
				goto out;
			if (k > 0) {
				fail(r, "a range cannot end in a class");
				goto out;
			}
			if (lob.len || hib.len) {
				fail(r, "ranges of non-ASCII characters are not supported");
				goto out;
			}
			if (hi < lo) {
				fail(r, "a range's end is before its start");
				goto out;
			}
			for (uint32_t x = lo; x <= hi; x++)
				cls_add(&c, x);
			continue;
		}
		if (lob.len)
			add_wide(&c, &lob);
		else
			cls_add(&c, lo);
	}
	r->i++;
	if (neg) {
		struct cls t = c;
		if (c.wide == W_SOME) {
			fail(r, "a negated class with non-ASCII members is not supported");
			goto out;
		}
		memset(c.bits, 0, sizeof(c.bits));
		for (unsigned b = 1; b < 128; b++)
			if (!cls_has(&t, b) && b != '\n')
				cls_add(&c, b);
		c.wide = t.wide == W_ANY ? W_NONE : W_ANY;
	}
	if (cls_empty(&c) && c.wide == W_NONE) {
		fail(r, "the class matches nothing");
		goto out;
	}
	put_cls(r, &c);
	ret = 0;
out:
	pisb_buf_release(&c.some);
	return ret;
}

/* ---------- groups and flags ---------- */

/* After "(?": a plain group, leading flags, or an error. */
static int parse_group(struct rx *r, bool *icase, bool at_start)
{
	const char *p = r->s + r->i;
	size_t n;

	if (*p == ':') {
		r->i++;
		pisb_buf_addc(r->out, '(');
		return 0;
	}
	if (*p == '=' || *p == '!' || (*p == '<' && (p[1] == '=' || p[1] == '!')))
		return fail(r, "look-around is not supported (ripgrep has none either)");
	if (*p == 'P' || *p == '<') {
		const char *end = strchr(p, '>');
		if ((*p == 'P' && p[1] != '<') || !end)
			return fail(r, "bad group name");
		r->i = (size_t)(end + 1 - r->s);
		pisb_buf_addc(r->out, '(');
		return 0;
	}
	n = strspn(p, "imsuxU-");
	if (!n || (p[n] != ')' && p[n] != ':'))
		return fail(r, "unknown group syntax");
	if (memchr(p, 'x', n))
		return fail(r, "the x flag (verbose syntax) is not supported");
	if (memchr(p, 'U', n))
		return fail(r, "the U flag (swap greed) is not supported");
	if (memchr(p, 'i', n)) {
		const char *minus = memchr(p, '-', n), *i = memchr(p, 'i', n);
		if (minus && minus < i)
			return fail(r, "turning case-insensitivity off is not supported");
		if (!at_start || p[n] == ':')
			return fail(r, "(?i) is supported only at the start of the pattern");
		*icase = true;
	}
	r->i += n + 1;
	if (p[n] == ':')
		pisb_buf_addc(r->out, '(');
	return 0;
}

/* ---------- the whole expression ---------- */

int pisb_rx_to_ere(const char *rx, struct pisb_buf *out, bool *icase, struct pisb_err *e)
{
	struct rx r = { rx, 0, out, e, false };
	int depth = 0;
	bool atom = false;      /* is there something a quantifier can follow */

	*icase = false;
	while (rx[r.i]) {
		char ch = rx[r.i];
		bool at_start = r.i == 0 || (out->len == 0 && !atom);

		if (ch == '\\') {
			char k = rx[r.i + 1];
			uint32_t cp;

			if (is_escape_class(k)) {
				struct cls c;
				memset(&c, 0, sizeof(c));
				cls_escape(&c, k);
				r.i += 2;
				put_cls(&r, &c);
				atom = true;
				continue;
			}
			if (k && strchr("bB<>", k)) {
				pisb_buf_addc(out, '\\');
				pisb_buf_addc(out, k);
				r.i += 2;
				atom = false;
				continue;
			}
			if (k == 'A' || k == 'z') {
				pisb_buf_addc(out, k == 'A' ? '^' : '$');
				r.i += 2;
				atom = false;
				continue;
			}
			r.i++;
			if (escaped_char(&r, &cp) < 0)
				return -1;
			if (cp >= 0x80 && (rx[r.i] == '*' || rx[r.i] == '+' || rx[r.i] == '?' || rx[r.i] == '{')) {
				pisb_buf_addc(out, '(');
				put_u8(out, cp);
				pisb_buf_addc(out, ')');
			} else {
				put_lit(out, cp);
			}
			atom = true;
			continue;
		}
		if (ch == '[') {
			r.i++;
			if (parse_class(&r) < 0)
				return -1;
			atom = true;
			continue;
		}
		if (ch == '(') {
			r.i++;
			if (rx[r.i] == '?') {
				r.i++;
				size_t before = out->len;
				if (parse_group(&r, icase, at_start) < 0)
					return -1;
				if (out->len == before)
					continue;       /* flags only: no group */
			} else {
				pisb_buf_addc(out, '(');
			}
			depth++;
			atom = false;
			continue;
		}
		if (ch == ')') {
			if (!depth)
				return fail(&r, "unopened group");
			depth--;
			pisb_buf_addc(out, ')');
			r.i++;
			atom = true;
			continue;
		}
		if (ch == '{' && !atom) {
			pisb_buf_adds(out, "\\{");
			r.i++;
			atom = true;
			continue;
		}
		if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
			if (!atom)
				return fail(&r, "a repetition operator with nothing to repeat");
			if (ch == '{') {
				size_t n = strspn(rx + r.i + 1, "0123456789,");
				if (rx[r.i + 1 + n] != '}' || !n || rx[r.i + 1] == ',') {
					/* not a repetition: a brace, as grep -E takes it */
					pisb_buf_adds(out, "\\{");
					r.i++;
					atom = true;
					continue;
				}
				pisb_buf_add(out, rx + r.i, n + 2);
				r.i += n + 2;
			} else {
				pisb_buf_addc(out, ch);
				r.i++;
			}
			if (rx[r.i] == '?')     /* lazy: the same lines match */
				r.i++;
			if (rx[r.i] == '*' || rx[r.i] == '+' || rx[r.i] == '{' ||
			    (rx[r.i] == '?' && ch != '?'))
				return fail(&r, "nested repetition operators");
			atom = false;
			continue;
		}
		if (ch == '.') {
			r.i++;
			if (run_follows(&r))
				pisb_buf_addc(out, '.');
			else
				pisb_buf_adds(out, "(.|" "[\xc0-\xf7][\x80-\xbf]+)");
			atom = true;
			continue;
		}
		if (ch == '|' || ch == '^' || ch == '$') {
			pisb_buf_addc(out, ch);
			r.i++;
			atom = false;
			continue;
		}
		{
			size_t n = u8len(rx + r.i);
			bool wrap = n > 1 && strchr("*+?{", rx[r.i + n]) && rx[r.i + n];
			if (wrap)
				pisb_buf_addc(out, '(');
			if (n == 1 && (ch == ']' || ch == '}'))
				pisb_buf_addc(out, '\\');
			pisb_buf_add(out, rx + r.i, n);
			if (wrap)
				pisb_buf_addc(out, ')');
			r.i += n;
			atom = true;
		}
	}
	if (depth)
		return fail(&r, "unclosed group");
	return 0;
}

/* ---------- ripgrep's syntax for PCRE2 ----------
 *
 * PCRE2 (UTF, UCP) reads Rust's syntax nearly as is; what differs is
 * rewritten here and what ripgrep's default engine refuses is refused. */

/* The POSIX classes of Rust's regex are ASCII only, PCRE2's follow UCP. */
static const char *posix_ascii(const char *name, size_t n)
{
	static const char *const tab[][2] = {
		{ "alnum", "0-9A-Za-z" }, { "alpha", "A-Za-z" }, { "ascii", "\\x00-\\x7F" },
		{ "blank", "\\t " }, { "cntrl", "\\x00-\\x1F\\x7F" }, { "digit", "0-9" },
		{ "graph", "!-~" }, { "lower", "a-z" }, { "print", " -~" },
		{ "punct", "!-/:-@\\[-`{-~" }, { "space", "\\t\\n\\x0B\\f\\r " },
		{ "upper", "A-Z" }, { "word", "0-9A-Za-z_" }, { "xdigit", "0-9A-Fa-f" },
	};
	for (size_t k = 0; k < sizeof(tab) / sizeof(tab[0]); k++)
		if (strlen(tab[k][0]) == n && !memcmp(tab[k][0], name, n))
			return tab[k][1];
	return NULL;
}

/* Is name a script PCRE2 knows (\p{sc:name} compiles)? */
static bool is_script(const char *name, size_t n)
{
	char pat[96];
	int code;
	PCRE2_SIZE off;
	pcre2_code *c;

	if (n > 64)
		return false;
	snprintf(pat, sizeof(pat), "\\p{sc:%.*s}", (int)n, name);
	c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL);
	if (!c)
		return false;
	pcre2_code_free(c);
	return true;
}

/* An escape at s[i] == '\\' that both dialects spell alike but PCRE2 reads
 * otherwise, or that one lacks: appended to out, *i moved past it. */
static int pcre_escape(struct rx *r, bool in_class)
{
	const char *s = r->s;
	char k = s[r->i + 1];

	if (!k)
		return fail(r, "a trailing backslash");
	if (k >= '1' && k <= '9')
		return fail(r, "backreferences are not supported");
	if (k == 'k' || k == 'g')
		return fail(r, "backreferences are not supported");
	if (k == 'n' && !in_class)
		return fail(r, "the literal '\\n' is not allowed: grep matches within one line");
	if (k == 'v') {                 /* Rust: vertical tab; PCRE2: a class */
		pisb_buf_adds(r->out, "\\x0B");
		r->i += 2;
		return 0;
	}
	if (k == 'u' || k == 'U') {
		uint32_t cp;
		r->i += 2;
		if (read_hex(r, k, &cp) < 0)
			return -1;
		pisb_buf_addf(r->out, "\\x{%x}", (unsigned)cp);
		return 0;
	}
	if (!in_class && (k == 'A' || k == 'z')) {
		/* the start and end of the line: grep sees one line at a time */
		pisb_buf_adds(r->out, k == 'A' ? "(?<![^\\n])" : "(?![^\\n])");
		r->i += 2;
		return 0;
	}
	if (!in_class && (k == '<' || k == '>')) {
		pisb_buf_adds(r->out, k == '<' ? "\\b(?=\\w)" : "\\b(?<=\\w)");
		r->i += 2;
		return 0;
	}
	if (isalnum((unsigned char)k) && !strchr("dDwWsSbBpPxtrfae0", k))
		return fail(r, "unrecognized escape sequence");
	if (k == 'p' || k == 'P') {
		/* \pL, \p{Name}; Rust's "Script=Greek" and "gc=L" forms too */
		size_t j = r->i + 2;
		if (s[j] != '{') {
			if (!s[j])
				return fail(r, "an incomplete Unicode class");
			pisb_buf_add(r->out, s + r->i, 3);
			r->i += 3;
			return 0;
		}
		const char *end = strchr(s + j, '}');
		if (!end)
			return fail(r, "an unclosed Unicode class");
		const char *name = s + j + 1, *eq = memchr(name, '=', (size_t)(end - name));
		if (!eq)
			eq = memchr(name, ':', (size_t)(end - name));
		pisb_buf_addc(r->out, '\\');
		pisb_buf_addc(r->out, k);
		pisb_buf_addc(r->out, '{');
		if (eq) {
			size_t kl = (size_t)(eq - name);
			bool gc = (kl == 2 && !strncasecmp(name, "gc", 2)) ||
				  (kl == 16 && !strncasecmp(name, "general_category", 16));
			if (!gc)
				pisb_buf_add(r->out, name, kl + 1);
			name = eq + 1;
		}
		if (name[0] == '^')
			return fail(r, "a negated Unicode class name: use \\P");
		size_t nl = (size_t)(end - name);
		if (r->icase && !eq && (nl == 2 || nl > 10) &&
		    (!strncasecmp(name, "Lu", nl) || !strncasecmp(name, "Ll", nl) || !strncasecmp(name, "Lt", nl) ||
		     !strncasecmp(name, "Uppercase_Letter", nl) || !strncasecmp(name, "Lowercase_Letter", nl) ||
		     !strncasecmp(name, "Titlecase_Letter", nl))) {
			/* case-folded, as Rust folds a class under (?i): every cased letter */
			pisb_buf_adds(r->out, "L&}");
			r->i = (size_t)(end - s) + 1;
			return 0;
		}
		if (!eq && is_script(name, (size_t)(end - name)))
			pisb_buf_adds(r->out, "sc:");   /* Rust: Script; PCRE2 alone: Script_Extensions */
		pisb_buf_add(r->out, name, (size_t)(end - name));
		pisb_buf_addc(r->out, '}');
		r->i = (size_t)(end - s) + 1;
		return 0;
	}
	pisb_buf_add(r->out, s + r->i, 2);
	r->i += 2;
	return 0;
}

/* A class, as PCRE2 can take it: either a plain bracket expression (body
 * between the brackets, not negated: a nested class of the same kind is
 * merged into an enclosing one), or an expression matching one character
 * (expr) where Rust's set operations or a negated nested class need more:
 *   A&&B  (?:(?=A)B)      A--B  (?:(?!B)A)      A~~B  (?:(?!B)A|(?!A)B)
 *   [^E]  (?:(?!E)[^\n])   [A[^B]]  (?:[A]|[^B])
 * (a line never holds its newline: no class of ripgrep's matches one). */
struct pcls {
	bool plain;
	struct pisb_buf body;     /* plain: the members between the brackets */
	struct pisb_buf expr;     /* the whole class */
};

static int pcre_class_parse(struct rx *r, struct pcls *o);

/* The union of plain members body and one-character expressions alts
 * ('|'-separated), as one expression. */
static void union_expr(struct pisb_buf *out, const struct pisb_buf *body, const struct pisb_buf *alts)
{
	if (!alts->len) {
		pisb_buf_addc(out, '[');
		pisb_buf_add(out, body->s, body->len);
		pisb_buf_addc(out, ']');
		return;
	}
	pisb_buf_adds(out, "(?:");
	if (body->len) {
		pisb_buf_addc(out, '[');
		pisb_buf_add(out, body->s, body->len);
		pisb_buf_adds(out, "]|");
	}
	pisb_buf_add(out, alts->s, alts->len);
	pisb_buf_addc(out, ')');
}

/* A set operation at s[i]: &&, -- or ~~ (as in Rust, before a ']' too:
 * an operand may be empty). */
static bool set_op_at(const char *s, size_t i)
{
	char c = s[i];

	return (c == '&' || c == '-' || c == '~') && s[i + 1] == c;
}

/* One operand of a class: its members up to a set operation or the ']'
 * that closes the class.  first: a ']' right here is a member. */
static int pcre_class_operand(struct rx *r, bool first, struct pisb_buf *body, struct pisb_buf *alts)
{
	const char *s = r->s;
	struct pisb_buf *out = r->out;
	int ret = 0;

	r->out = body;
	/* the '-'s that start a class are members ([--a], [-]) */
	if (first && s[r->i] == '-') {
		while (s[r->i] == '-') {
			pisb_buf_adds(body, "\\-");
			r->i++;
		}
		first = false;
	}
	for (;; first = false) {
		char c = s[r->i];
		if (!c) {
			ret = fail(r, "an unclosed character class");
			break;
		}
		if (c == ']' && !first)
			break;
		if (set_op_at(s, r->i))
			break;
		if (c == '[' && s[r->i + 1] == ':') {
			const char *end = strstr(s + r->i + 2, ":]");
			const char *name = s + r->i + 2;
			bool neg = *name == '^';
			const char *a;
			if (!end) {
				ret = fail(r, "an unclosed [: class");
				break;
			}
			a = posix_ascii(name + neg, (size_t)(end - name) - neg);
			if (a && neg) {
				/* [:^alpha:]: the ASCII class's complement */
				if (alts->len)
					pisb_buf_addc(alts, '|');
				pisb_buf_addf(alts, "[^%s]", a);
			} else if (a) {
				pisb_buf_adds(body, a);
			} else {
				pisb_buf_add(body, s + r->i, (size_t)(end - s) + 2 - r->i);
			}
			r->i = (size_t)(end - s) + 2;
			continue;
		}
		if (c == '[') {
			struct pcls in = { false, PISB_BUF_INIT, PISB_BUF_INIT };
			r->out = out;
			ret = pcre_class_parse(r, &in);
			r->out = body;
			if (ret == 0 && in.plain) {
				pisb_buf_add(body, in.body.s, in.body.len);
			} else if (ret == 0) {
				if (alts->len)
					pisb_buf_addc(alts, '|');
				pisb_buf_add(alts, in.expr.s, in.expr.len);
			}
			pisb_buf_release(&in.body);
			pisb_buf_release(&in.expr);
			if (ret < 0)
				break;
			continue;
		}
		if (c == '\\') {
			if ((ret = pcre_escape(r, true)) < 0)
				break;
			continue;
		}
		pisb_buf_addc(body, c);
		r->i++;
	}
	r->out = out;
	return ret;
}

/* A class at s[i] == '[' (see struct pcls); r->i moved past its ']'. */
static int pcre_class_parse(struct rx *r, struct pcls *o)
{
	const char *s = r->s;
	struct pisb_buf alts = PISB_BUF_INIT, acc = PISB_BUF_INIT;
	bool neg = false, ops = false;
	int ret;

	r->i++;
	if (s[r->i] == '^') {
		neg = true;
		r->i++;
	}
	ret = pcre_class_operand(r, true, &o->body, &alts);
	if (ret == 0 && !o->body.len && !alts.len)
		ret = fail(r, "empty character classes are not allowed");
	if (ret == 0)
		union_expr(&acc, &o->body, &alts);
	while (ret == 0 && set_op_at(s, r->i)) {
		char op = s[r->i];
		struct pisb_buf b = PISB_BUF_INIT, balts = PISB_BUF_INIT, be = PISB_BUF_INIT, res = PISB_BUF_INIT;
		ops = true;
		r->i += 2;
		ret = pcre_class_operand(r, false, &b, &balts);
		if (ret == 0 && !b.len && !balts.len && op == '&')
			ret = fail(r, "empty character classes are not allowed");
		if (ret == 0 && !b.len && !balts.len) {
			/* A--[] and A~~[] are A */
		} else if (ret == 0) {
			union_expr(&be, &b, &balts);
			if (op == '&')
				pisb_buf_addf(&res, "(?:(?=%s)%s)", acc.s, be.s);
			else if (op == '-')
				pisb_buf_addf(&res, "(?:(?!%s)%s)", be.s, acc.s);
			else
				pisb_buf_addf(&res, "(?:(?!%s)%s|(?!%s)%s)", be.s, acc.s, acc.s, be.s);
			pisb_buf_release(&acc);
			acc = res;
		} else {
			pisb_buf_release(&res);
		}
		pisb_buf_release(&b);
		pisb_buf_release(&balts);
		pisb_buf_release(&be);
	}
	if (ret == 0) {
		r->i++;                  /* the ']' */
		o->plain = !ops && !alts.len && !neg;
		if (o->plain || (!ops && !alts.len)) {
			pisb_buf_adds(&o->expr, neg ? "[^" : "[");
			pisb_buf_add(&o->expr, o->body.s, o->body.len);
			pisb_buf_addc(&o->expr, ']');
		} else if (neg) {
			pisb_buf_addf(&o->expr, "(?:(?!%s)[^\\n])", acc.s);
		} else {
			pisb_buf_add(&o->expr, acc.s, acc.len);
		}
	}
	pisb_buf_release(&alts);
	pisb_buf_release(&acc);
	return ret;
}

/* A class at s[i] == '[', appended to r->out. */
static int pcre_class(struct rx *r)
{
	struct pcls o = { false, PISB_BUF_INIT, PISB_BUF_INIT };
	int ret = pcre_class_parse(r, &o);

	if (ret == 0)
		pisb_buf_add(r->out, o.expr.s, o.expr.len);
	pisb_buf_release(&o.body);
	pisb_buf_release(&o.expr);
	return ret;
}

/* After "(?": flags, a non-capturing or named group; look-around refused. */
static int pcre_group(struct rx *r)
{
	const char *s = r->s;
	size_t j = r->i + 2;

	if (s[j] == '=' || s[j] == '!' || (s[j] == '<' && (s[j + 1] == '=' || s[j + 1] == '!')))
		return fail(r, "look-around, including look-ahead and look-behind, is not supported");
	if (s[j] == 'P' && s[j + 1] == '<') {
		pisb_buf_adds(r->out, "(?P<");
		r->i = j + 2;
		return 0;
	}
	if (s[j] == '<') {
		pisb_buf_adds(r->out, "(?<");
		r->i = j + 1;
		return 0;
	}
	/* flags: m and s are dropped (a line is matched alone, so ^ and $ are
	 * its ends and . never meets a newline either way), u is PCRE2's UCP,
	 * x is xx (spaces inside classes too, as in Rust) */
	struct pisb_buf on = PISB_BUF_INIT, off = PISB_BUF_INIT;
	bool neg = false, any = false, after_neg = false;
	int ret = 0;
	for (;; j++) {
		char f = s[j];
		if ((f == ')' || f == ':') && neg && !after_neg) {
			ret = fail(r, "a dangling flag negation");
			break;
		}
		if (f == ')' && !any) {
			ret = fail(r, "an empty flag group");
			break;
		}
		if (f == ')' || f == ':') {
			if (on.len || off.len) {
				pisb_buf_adds(r->out, "(?");
				pisb_buf_add(r->out, on.s, on.len);
				if (off.len)
					pisb_buf_addc(r->out, '-');
				pisb_buf_add(r->out, off.s, off.len);
				pisb_buf_addc(r->out, f);
			} else if (f == ':') {
				pisb_buf_adds(r->out, "(?:");
			}
			r->i = j + 1;
			break;
		}
		if (f == '-' && !neg) {
			neg = true;
			continue;
		}
		if (!f || !strchr("imsUux", f)) {
			ret = fail(r, f ? "an unknown group flag" : "an unclosed group");
			break;
		}
		any = true;
		after_neg = neg;
		if (f == 'm' || f == 's' || f == 'u')
			continue;
		pisb_buf_adds(neg ? &off : &on, f == 'x' ? "xx" : (char[]){ f, '\0' });
	}
	pisb_buf_release(&on);
	pisb_buf_release(&off);
	return ret;
}

int pisb_rx_to_pcre2(const char *rx, struct pisb_buf *out, bool icase, struct pisb_err *e)
{
	struct rx r = { rx, 0, out, e, icase };

	pisb_buf_adds(out, "");
	while (rx[r.i]) {
		char c = rx[r.i];
		if (c == '\\') {
			if (pcre_escape(&r, false) < 0)
				return -1;
		} else if (c == '[') {
			if (pcre_class(&r) < 0)
				return -1;
		} else if (c == '(' && rx[r.i + 1] == '?') {
			if (pcre_group(&r) < 0)
				return -1;
		} else if ((c == '*' || c == '+' || c == '?' || c == '}') && rx[r.i + 1] == '+') {
			return fail(&r, "possessive repetitions are not supported");
		} else {
			pisb_buf_addc(out, c);
			r.i++;
		}
	}
	return 0;
}
