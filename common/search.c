/* search.c - see search.h. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "search.h"
#include "err.h"
#include "lit.h"
#include "rx.h"
#include "util.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LITS PISB_LIT_MAX

struct pisb_search {
	pcre2_code *code;         /* NULL: the prefilter alone decides */
	bool every_line;          /* the empty pattern */
	bool fold;                /* case-insensitive: literals in lower case */
	struct pisb_lit *lit;     /* NULL: no prefilter */
};

struct pisb_search_ws {
	const struct pisb_search *s;
	pcre2_match_data *md;
	pcre2_match_context *mc;
	pcre2_jit_stack *js;
};

/* ---------- the literals a pattern requires ---------- */

/* A set of byte strings, one of which every match contains, or (high) the
 * knowledge that every match holds a byte from 0x80 up (a character
 * beyond ASCII); none: nothing is known.  The score is the length of the
 * shortest string (2 for high: rarer than any one byte in source text,
 * less telling than three). */
struct lset {
	bool none;
	bool high;
	int n;
	char *v[MAX_LITS];
	size_t len[MAX_LITS];
};
#define LSET_NONE { true, false, 0, { 0 }, { 0 } }

struct lp {
	const char *s;
	size_t i;
	bool icase;
	bool pure;                /* nothing but plain characters so far */
};

static void lset_clear(struct lset *a)
{
	for (int k = 0; k < a->n; k++)
		free(a->v[k]);
	a->n = 0;
	a->none = true;
	a->high = false;
}

static size_t lset_score(const struct lset *a)
{
	size_t m = SIZE_MAX;

	if (a->none)
		return 0;
	if (a->high)
		return 2;
	if (!a->n)
		return 0;
	for (int k = 0; k < a->n; k++)
		if (a->len[k] < m)
			m = a->len[k];
	return m;
}

/* Keep the better of *best and *cand (cand is consumed). */
static void lset_pick(struct lset *best, struct lset *cand)
{
	size_t sb = lset_score(best), sc = lset_score(cand);

	if (sc > sb || (sc == sb && sc && !cand->high && cand->n < best->n)) {
		lset_clear(best);
		*best = *cand;
		cand->n = 0;
	}
	lset_clear(cand);
}

static void lset_one(struct lset *a, const char *p, size_t n)
{
	a->none = false;
	a->high = false;
	a->n = 1;
	a->v[0] = xmalloc(n + 1);
	memcpy(a->v[0], p, n);
	a->v[0][n] = '\0';
	a->len[0] = n;
}

static void lset_high(struct lset *a)
{
	lset_clear(a);
	a->none = false;
	a->high = true;
}

/* Can the atom s[0..n) (a class, an escape, a character) match a
 * character of ASCII?  Asked of PCRE2 itself, character by character;
 * true when unsure. */
static bool atom_ascii(const char *s, size_t n, bool icase)
{
	struct pisb_buf rx = PISB_BUF_INIT, pc = PISB_BUF_INIT;
	struct pisb_err e = PISB_ERR_INIT;
	pcre2_code *code = NULL;
	pcre2_match_data *md = NULL;
	bool any = true;
	int err;
	PCRE2_SIZE off;

	pisb_buf_add(&rx, s, n);
	if (pisb_rx_to_pcre2(rx.s, &pc, icase, &e) < 0)
		goto out;
	code = pcre2_compile((PCRE2_SPTR)pc.s, pc.len, PCRE2_UTF | PCRE2_UCP | (icase ? PCRE2_CASELESS : 0),
			     &err, &off, NULL);
	if (!code)
		goto out;
	md = pcre2_match_data_create_from_pattern(code, NULL);
	any = false;
	for (unsigned c = 1; c < 0x80 && !any; c++) {
		char one = (char)c;
		if (c != '\n' && pcre2_match(code, (PCRE2_SPTR)&one, 1, 0, 0, md, NULL) >= 0)
			any = true;
	}
out:
	if (md)
		pcre2_match_data_free(md);
	if (code)
		pcre2_code_free(code);
	pisb_buf_release(&rx);
	pisb_buf_release(&pc);
	return any;
}

static void skip_class(struct lp *p)
{
	const char *s = p->s;
	int depth = 0;

	do {
		if (s[p->i] == '[') {
			depth++;
			p->i++;
			if (s[p->i] == '^')
				p->i++;
			if (s[p->i] == ']')
				p->i++;
			continue;
		}
		if (s[p->i] == '\\' && s[p->i + 1]) {
			p->i += 2;
			continue;
		}
		if (s[p->i] == ']') {
			depth--;
			p->i++;
			continue;
		}
		p->i++;
	} while (s[p->i] && depth > 0);
}

/* After '\': the length of an escape that is not a literal character. */
static size_t escape_len(const char *s)
{
	size_t n = 2;

	if ((s[1] == 'x' || s[1] == 'u' || s[1] == 'U' || s[1] == 'p' || s[1] == 'P') && s[2] == '{') {
		const char *e = strchr(s + 2, '}');
		return e ? (size_t)(e - s) + 1 : strlen(s);
	}
	if (s[1] == 'x')
		n += 2;
	else if (s[1] == 'u')
		n += 4;
	else if (s[1] == 'U')
		n += 8;
	else if (s[1] == 'p' || s[1] == 'P')
		n += 1;
	for (size_t k = 2; k < n; k++)
		if (!s[k])
			return k;
	return n;
}

static void alt(struct lp *p, struct lset *out);

/* A quantifier at s[i]: skipped; *min0 when it allows zero repeats. */
static bool quantifier(struct lp *p, bool *min0)
{
	const char *s = p->s;
	char c = s[p->i];

	if (c == '*' || c == '?') {
		*min0 = true;
	} else if (c == '+') {
		*min0 = false;
	} else if (c == '{' && (s[p->i + 1] >= '0' && s[p->i + 1] <= '9')) {
		const char *e = strchr(s + p->i, '}');
		if (!e)
			return false;
		*min0 = strtol(s + p->i + 1, NULL, 10) == 0;
		p->i = (size_t)(e - s);
	} else {
		return false;
	}
	p->i++;
	if (s[p->i] == '?')
		p->i++;
	return true;
}

/* A concatenation, up to '|', ')' or the end. */
static void seq(struct lp *p, struct lset *best)
{
	const char *s = p->s;
	struct pisb_buf cur = PISB_BUF_INIT;
	struct lset cand = LSET_NONE;

	best->none = true;
	best->high = false;
	best->n = 0;
#define FLUSH() do { if (cur.len) { lset_one(&cand, cur.s, cur.len); lset_pick(best, &cand); } \
		pisb_buf_reset(&cur); } while (0)
	while (s[p->i] && s[p->i] != '|' && s[p->i] != ')') {
		char c = s[p->i];
		char lit[4];
		size_t litn = 0, at = p->i;
		struct lset grp = LSET_NONE;
		bool min0 = false, single = false;   /* single: one character's class or escape */

		if (c == '\\') {
			char k = s[p->i + 1];
			if (k && (unsigned char)k < 0x80 && !((k >= '0' && k <= '9') || (k >= 'A' && k <= 'Z') || (k >= 'a' && k <= 'z'))) {
				lit[litn++] = k;
				p->i += 2;
			} else {
				single = k && !strchr("bBAzG<>", k);
				p->i += escape_len(s + p->i);
				p->pure = false;
			}
		} else if (c == '[') {
			skip_class(p);
			single = true;
			p->pure = false;
		} else if (c == '(') {
			p->pure = false;
			p->i++;
			if (s[p->i] == '?') {
				size_t j = p->i + 1;
				if (s[j] == 'P' || s[j] == '<') {
					const char *e = strchr(s + j, '>');
					p->i = e ? (size_t)(e - s) + 1 : strlen(s);
				} else {
					while (s[j] && s[j] != ':' && s[j] != ')')
						j++;
					p->i = s[j] ? j + 1 : j;
					if (s[j] == ')') {
						FLUSH();
						continue;    /* flags only */
					}
				}
			}
			alt(p, &grp);
			if (s[p->i] == ')')
				p->i++;
		} else if (c == '.' || c == '^' || c == '$') {
			p->i++;
			p->pure = false;
		} else {
			size_t n = 1;
			unsigned char b = (unsigned char)c;
			if (b >= 0xc0)
				while (n < 4 && ((unsigned char)s[p->i + n] & 0xc0) == 0x80)
					n++;
			memcpy(lit, s + p->i, n);
			litn = n;
			p->i += n;
		}
		size_t atom_end = p->i;
		bool q = quantifier(p, &min0);
		if (q)
			p->pure = false;
		if (litn) {
			bool usable = true;
			if (p->icase) {
				unsigned char b = (unsigned char)lit[0];
				/* only ASCII letters fold to ASCII alone (not k and s:
				 * KELVIN SIGN, LONG S) */
				if (b >= 0x80 || b == 'k' || b == 'K' || b == 's' || b == 'S') {
					usable = false;
					p->pure = false;
				}
				if (b >= 'A' && b <= 'Z')
					lit[0] = (char)(b + 32);
			}
			if (!usable && !min0 && (unsigned char)lit[0] >= 0x80 &&
			    !atom_ascii(s + at, atom_end - at, p->icase)) {
				/* é under -i: É or é, never ASCII */
				FLUSH();
				lset_high(&cand);
				lset_pick(best, &cand);
			} else if (!usable || min0) {
				FLUSH();
			} else {
				pisb_buf_add(&cur, lit, litn);
				if (q)
					FLUSH();
			}
		} else if (!grp.none) {
			FLUSH();
			if (!min0)
				lset_pick(best, &grp);
			else
				lset_clear(&grp);
		} else {
			lset_clear(&grp);
			FLUSH();
			if (single && !min0 && !atom_ascii(s + at, atom_end - at, p->icase)) {
				/* \p{Greek}, [α-ω]: only characters beyond ASCII */
				lset_high(&cand);
				lset_pick(best, &cand);
			}
		}
	}
	FLUSH();
#undef FLUSH
	pisb_buf_release(&cur);
}

/* An alternation: the union of its branches' sets.  Where every branch is
 * plain characters, p->pure stays. */
static void alt(struct lp *p, struct lset *out)
{
	bool first = true;

	out->none = true;
	out->high = false;
	out->n = 0;
	for (;;) {
		struct lset b = LSET_NONE;
		seq(p, &b);
		if (first) {
			*out = b;
		} else if (out->high && b.high) {
			/* still high */
		} else if (out->none || b.none || out->high || b.high || out->n + b.n > MAX_LITS) {
			lset_clear(out);
			lset_clear(&b);
		} else {
			for (int k = 0; k < b.n; k++) {
				out->v[out->n] = b.v[k];
				out->len[out->n++] = b.len[k];
			}
		}
		first = false;
		if (p->s[p->i] != '|')
			break;
		p->i++;
	}
}

/* Does the pattern set a flag f ((?f) or (?f:) anywhere, not after '-')? */
static bool has_flag(const char *s, char f)
{
	for (const char *q = s; (q = strstr(q, "(?")); q += 2) {
		if (q > s && q[-1] == '\\')
			continue;
		for (const char *r = q + 2; *r && *r != ')' && *r != ':'; r++) {
			if (*r == '-')
				break;
			if (*r == f)
				return true;
		}
	}
	return false;
}

/* The longest string every member of a holds (NULL, 0 if none). */
static size_t common_part(const struct lset *a, size_t *at)
{
	int sh = 0;

	for (int k = 1; k < a->n; k++)
		if (a->len[k] < a->len[sh])
			sh = k;
	for (size_t len = a->len[sh]; len > 0; len--) {
		for (size_t off = 0; off + len <= a->len[sh]; off++) {
			int k;
			for (k = 0; k < a->n; k++)
				if (!memmem(a->v[k], a->len[k], a->v[sh] + off, len))
					break;
			if (k == a->n) {
				*at = off;
				return len;
			}
		}
	}
	return 0;
}

/* The prefilter for a (consumed); true when it is the whole set, so that
 * a pattern of plain characters needs nothing more. */
static bool take_literals(struct pisb_search *s, struct lset *a)
{
	size_t at = 0, len;

	if (a->none)
		return false;
	if (a->high) {
		uint8_t set[32];
		memset(set, 0, sizeof(set));
		memset(set + 16, 0xff, 16);
		s->lit = pisb_lit_new_bytes(set);
		return false;
	}
	if (!a->n)
		return false;
	/* several strings that share three bytes or more: those, and PCRE2
	 * checks the line (measured: "alloc" and PCRE2 for malloc|calloc|
	 * realloc take 34 ms over 154 MB, Teddy over the three 48 ms) */
	if (a->n > 1 && (len = common_part(a, &at)) >= 3) {
		int sh = 0;
		const char *v;
		for (int k = 1; k < a->n; k++)
			if (a->len[k] < a->len[sh])
				sh = k;
		v = a->v[sh] + at;
		s->lit = pisb_lit_new(&v, &len, 1, s->fold);
		lset_clear(a);
		return false;
	}
	s->lit = pisb_lit_new((const char *const *)a->v, a->len, a->n, s->fold);
	lset_clear(a);
	return true;
}

/* ---------- compiling ---------- */

static int compile(struct pisb_search *s, const char *pat, uint32_t opts, struct pisb_err *e,
		   const char *shown)
{
	int code;
	PCRE2_SIZE off;
	pcre2_compile_context *cc = pcre2_compile_context_create(NULL);

	pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
	/* a fixed string takes none of the options of an expression;
	 * ALT_CIRCUMFLEX: ^ also matches after a '\n' that ends the subject,
	 * as it must where a line ends the subject a line check hands PCRE2 */
	if (!(opts & PCRE2_LITERAL))
		opts |= PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX;
	s->code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
				opts | PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &code, &off, cc);
	pcre2_compile_context_free(cc);
	if (!s->code) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(code, msg, sizeof(msg));
		return pisb_err_set(e, PISB_EXIT_USAGE, "invalid regular expression '%s': %s", shown,
				    (const char *)msg);
	}
	/* without a JIT (no executable memory): the interpreter, slower */
	(void)pcre2_jit_compile(s->code, PCRE2_JIT_COMPLETE);
	return 0;
}

int pisb_search_new(struct pisb_search **out, const char *pattern, bool literal,
		    bool icase, struct pisb_err *e)
{
	struct pisb_search *s = xcalloc(1, sizeof(*s));
	struct lset a = LSET_NONE;
	bool pure;

	*out = NULL;
	if (!*pattern) {
		s->every_line = true;
		*out = s;
		return 0;
	}
	if (literal) {
		struct lp p = { "", 0, icase, true };
		struct pisb_buf esc = PISB_BUF_INIT;
		/* the literals of the fixed string: read as a pattern of escaped
		 * characters, so -i drops what ASCII folding cannot cover */
		for (const char *q = pattern; *q; q++) {
			if ((unsigned char)*q < 0x80 && !((*q >= '0' && *q <= '9') ||
			    (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z')))
				pisb_buf_addc(&esc, '\\');
			pisb_buf_addc(&esc, *q);
		}
		p.s = esc.s;
		alt(&p, &a);
		pure = p.pure && !strchr(pattern, '\n');
		pisb_buf_release(&esc);
		if ((!pure || icase) && compile(s, pattern, PCRE2_LITERAL | (icase ? PCRE2_CASELESS : 0), e, pattern) < 0)
			goto fail;
	} else {
		struct pisb_buf pc = PISB_BUF_INIT;
		struct lp p = { pattern, 0, icase || has_flag(pattern, 'i'), true };
		if (pisb_rx_to_pcre2(pattern, &pc, p.icase, e) < 0) {
			pisb_buf_release(&pc);
			goto fail;
		}
		int r = compile(s, pc.s, icase ? PCRE2_CASELESS : 0, e, pattern);
		pisb_buf_release(&pc);
		if (r < 0)
			goto fail;
		if (!has_flag(pattern, 'x')) {
			alt(&p, &a);
			pure = p.pure && p.s[p.i] == '\0';
		} else {
			pure = false;
		}
		s->fold = p.icase;
	}
	if (literal)
		s->fold = icase;
	/* a pattern of plain characters found whole by the prefilter needs no
	 * PCRE2 (under -i too: its letters fold within ASCII alone) */
	if (take_literals(s, &a) && pure && s->code) {
		pcre2_code_free(s->code);
		s->code = NULL;
	}
	lset_clear(&a);
	*out = s;
	return 0;
fail:
	lset_clear(&a);
	pisb_search_free(s);
	return -1;
}

void pisb_search_free(struct pisb_search *s)
{
	if (!s)
		return;
	if (s->code)
		pcre2_code_free(s->code);
	pisb_lit_free(s->lit);
	free(s);
}

struct pisb_search_ws *pisb_search_ws_new(const struct pisb_search *s)
{
	struct pisb_search_ws *w = xcalloc(1, sizeof(*w));

	w->s = s;
	if (s->code) {
		w->md = pcre2_match_data_create_from_pattern(s->code, NULL);
		w->mc = pcre2_match_context_create(NULL);
		w->js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
		if (w->js)
			pcre2_jit_stack_assign(w->mc, NULL, w->js);
	}
	return w;
}

void pisb_search_ws_free(struct pisb_search_ws *w)
{
	if (!w)
		return;
	if (w->md)
		pcre2_match_data_free(w->md);
	if (w->mc)
		pcre2_match_context_free(w->mc);
	if (w->js)
		pcre2_jit_stack_free(w->js);
	free(w);
}

/* ---------- searching ---------- */

void pisb_search_begin(struct pisb_search_ws *w, const char *buf, size_t n)
{
	(void)w;
	(void)buf;
	(void)n;
}

static size_t line_start(const char *buf, size_t pos, size_t at)
{
	const char *a = at > pos ? memrchr(buf + pos, '\n', at - pos) : NULL;

	return a ? (size_t)(a - buf) + 1 : pos;
}

static size_t line_end(const char *buf, size_t n, size_t at)
{
	const char *nl = memchr(buf + at, '\n', n - at);

	return nl ? (size_t)(nl - buf) : n;
}

/* Does the pattern match within the line [ls, le)? */
static bool line_matches(struct pisb_search_ws *w, const char *buf, size_t ls, size_t le)
{
	return pcre2_match(w->s->code, (PCRE2_SPTR)buf, le, ls, 0, w->md, w->mc) >= 0;
}

bool pisb_search_next(struct pisb_search_ws *w, const char *buf, size_t n, size_t pos,
		      size_t *ls, size_t *le)
{
	const struct pisb_search *s = w->s;

	while (pos < n) {
		if (s->every_line) {
			*ls = pos;
			*le = line_end(buf, n, pos);
			return true;
		}
		if (s->lit) {
			size_t at = pisb_lit_find(s->lit, buf, n, pos);
			if (at == SIZE_MAX)
				return false;
			*ls = line_start(buf, pos, at);
			*le = line_end(buf, n, at);
			if (!s->code || line_matches(w, buf, *ls, *le))
				return true;
			pos = *le + 1;
			continue;
		}
		if (!s->code)
			return false;
		/* no literal: PCRE2 over the rest of the buffer */
		int rc = pcre2_match(s->code, (PCRE2_SPTR)buf, n, pos, 0, w->md, w->mc);
		if (rc == PCRE2_ERROR_NOMATCH)
			return false;
		if (rc < 0) {
			/* a limit hit over the buffer: this line alone */
			*ls = pos;
			*le = line_end(buf, n, pos);
			if (line_matches(w, buf, *ls, *le))
				return true;
			pos = *le + 1;
			continue;
		}
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
		size_t ms = ov[0], me = ov[1];
		if (ms >= n && n && buf[n - 1] == '\n')
			return false;     /* past the last line */
		*ls = line_start(buf, pos, ms);
		*le = line_end(buf, n, ms);
		if (me <= *le || line_matches(w, buf, *ls, *le))
			return true;
		pos = *le + 1;
	}
	return false;
}
