/* udiff.c - unified diff of two texts, in git's format (project.h's
 * pisb_udiff).  Myers' O(ND) shortest edit script over lines, the common
 * prefix and suffix taken off first; each group of changed lines slid as
 * far down as equal lines allow (git's compaction, without its indent
 * heuristic); hunks with 3 lines of context, merged when at most 6
 * unchanged lines part them; hunk headers carry git's default function
 * line (the nearest line above that starts with a letter, '_' or '$'). */
#include "project.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CTX 3
#define MAX_D 4000      /* past this many edits: the rest as one change */

struct line {
	const char *p;
	size_t n;           /* with its '\n', if it has one */
	uint64_t h;
};

static size_t split(const char *s, size_t len, struct line **out)
{
	size_t n = 0, cap = 64;
	struct line *v = xmalloc(cap * sizeof(*v));

	for (size_t i = 0; i < len;) {
		const char *nl = memchr(s + i, '\n', len - i);
		size_t l = nl ? (size_t)(nl - (s + i)) + 1 : len - i;
		uint64_t h = 1469598103934665603ULL;
		if (n == cap)
			v = xrealloc(v, (cap *= 2) * sizeof(*v));
		for (size_t k = 0; k < l; k++)
			h = (h ^ (unsigned char)s[i + k]) * 1099511628211ULL;
		v[n].p = s + i;
		v[n].n = l;
		v[n].h = h;
		n++;
		i += l;
	}
	*out = v;
	return n;
}

static bool eq(const struct line *a, const struct line *b)
{
	return a->h == b->h && a->n == b->n && !memcmp(a->p, b->p, a->n);
}

/* Mark da[i] (deleted) and db[j] (inserted) for a[0,n) against b[0,m). */
static void myers(const struct line *a, int n, const struct line *b, int m, char *da, char *db)
{
	int max = n + m, off, d, x = 0, y = 0, found = -1;
	int *v, **trace;

	if (!n || !m) {
		memset(da, 1, (size_t)n);
		memset(db, 1, (size_t)m);
		return;
	}
	off = max + 1;
	v = xcalloc((size_t)(2 * max + 3), sizeof(int));
	trace = xcalloc((size_t)(MAX_D + 1), sizeof(int *));
	for (d = 0; d <= max && d <= MAX_D; d++) {
		for (int k = -d; k <= d; k += 2) {
			if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
				x = v[off + k + 1];
			else
				x = v[off + k - 1] + 1;
			y = x - k;
			while (x < n && y < m && eq(&a[x], &b[y]))
				x++, y++;
			v[off + k] = x;
			if (x >= n && y >= m) {
				found = d;
				break;
			}
		}
		trace[d] = xmalloc((size_t)(2 * d + 1) * sizeof(int));
		memcpy(trace[d], v + off - d, (size_t)(2 * d + 1) * sizeof(int));
		if (found >= 0)
			break;
	}
	if (found < 0) {
		/* too many edits: everything changes (a valid, not minimal, diff) */
		memset(da, 1, (size_t)n);
		memset(db, 1, (size_t)m);
	} else {
		x = n;
		y = m;
		for (d = found; d > 0; d--) {
			const int *pv = trace[d - 1];   /* index k + (d - 1) */
			int k = x - y, pk, px, py;
			if (k == -d || (k != d && pv[k - 1 + d - 1] < pv[k + 1 + d - 1]))
				pk = k + 1;
			else
				pk = k - 1;
			px = pv[pk + d - 1];
			py = px - pk;
			if (pk == k + 1)
				db[py] = 1;     /* down: b[py] inserted */
			else
				da[px] = 1;     /* right: a[px] deleted */
			x = px;
			y = py;
		}
	}
	for (d = 0; d <= MAX_D; d++)
		free(trace[d]);
	free(trace);
	free(v);
}

/* Slide each group of changed lines of one file down while the line after
 * it equals its first line. */
static void slide(const struct line *l, int n, char *ch)
{
	for (int s = 0; s < n;) {
		int e;
		if (!ch[s]) {
			s++;
			continue;
		}
		for (e = s; e < n && ch[e]; e++)
			;
		while (e < n && eq(&l[s], &l[e])) {
			ch[s++] = 0;
			ch[e++] = 1;
			while (e < n && ch[e])
				e++;
		}
		s = e;
	}
}

struct op {
	char t;        /* ' ', '-', '+' */
	int a, b;      /* line of a (for ' ' and '-'), of b (' ', '+') */
};

static void put_line(struct pisb_buf *out, char t, const struct line *l)
{
	pisb_buf_addc(out, t);
	pisb_buf_add(out, l->p, l->n);
	if (!l->n || l->p[l->n - 1] != '\n')
		pisb_buf_adds(out, "\n\\ No newline at end of file\n");
}

static void put_range(struct pisb_buf *out, int start, int count)
{
	pisb_buf_addf(out, "%d", count ? start + 1 : start);
	if (count != 1)
		pisb_buf_addf(out, ",%d", count);
}

/* git's default function line: from line `from` down to `limit`
 * (exclusive); 1 and the line in fn when found. */
static int func_line(const struct line *a, int from, int limit, char fn[81], size_t *fl)
{
	for (int l = from; l > limit && l >= 0; l--) {
		const char *p = a[l].p;
		size_t len = a[l].n;
		if (len && (isalpha((unsigned char)*p) || *p == '_' || *p == '$')) {
			if (len > 80)
				len = 80;
			while (len && isspace((unsigned char)p[len - 1]))
				len--;
			memcpy(fn, p, len);
			*fl = len;
			return 1;
		}
	}
	return 0;
}

void pisb_udiff(const char *as, size_t an, const char *bs, size_t bn, struct pisb_buf *out,
		int *added, int *removed)
{
	struct line *a, *b;
	int n = (int)split(as, an, &a), m = (int)split(bs, bn, &b);
	int pre = 0, suf = 0, nops = 0, i, j, prevfrom = -1;
	char *da = xcalloc((size_t)n + 1, 1), *db = xcalloc((size_t)m + 1, 1);
	struct op *ops = xmalloc(((size_t)n + (size_t)m + 1) * sizeof(*ops));
	char fn[81];
	size_t fl = 0;

	*added = *removed = 0;
	while (pre < n && pre < m && eq(&a[pre], &b[pre]))
		pre++;
	while (suf < n - pre && suf < m - pre && eq(&a[n - 1 - suf], &b[m - 1 - suf]))
		suf++;
	myers(a + pre, n - pre - suf, b + pre, m - pre - suf, da + pre, db + pre);
	slide(a, n, da);
	slide(b, m, db);
	for (i = j = 0; i < n || j < m;) {
		if (i < n && da[i]) {
			ops[nops++] = (struct op){ '-', i++, j };
			(*removed)++;
		} else if (j < m && db[j]) {
			ops[nops++] = (struct op){ '+', i, j++ };
			(*added)++;
		} else {
			ops[nops++] = (struct op){ ' ', i++, j++ };
		}
	}
	for (int k = 0; out && k < nops;) {
		int first, last, s, e, a0, b0, ac = 0, bc = 0;
		if (ops[k].t == ' ') {
			k++;
			continue;
		}
		/* one hunk: from this change to the last one within 2*CTX */
		first = last = k;
		for (int q = k + 1; q < nops; q++) {
			if (ops[q].t == ' ')
				continue;
			if (q - last - 1 > 2 * CTX)
				break;
			last = q;
		}
		s = first - CTX < 0 ? 0 : first - CTX;
		e = last + CTX >= nops ? nops - 1 : last + CTX;
		a0 = ops[s].a;
		b0 = ops[s].b;
		for (int q = s; q <= e; q++) {
			ac += ops[q].t != '+';
			bc += ops[q].t != '-';
		}
		pisb_buf_adds(out, "@@ -");
		put_range(out, a0, ac);
		pisb_buf_adds(out, " +");
		put_range(out, b0, bc);
		pisb_buf_adds(out, " @@");
		if (func_line(a, a0 - 1, prevfrom, fn, &fl) || fl) {
			if (fl) {
				pisb_buf_addc(out, ' ');
				pisb_buf_add(out, fn, fl);
			}
		}
		prevfrom = a0 - 1;
		pisb_buf_addc(out, '\n');
		for (int q = s; q <= e; q++)
			put_line(out, ops[q].t, ops[q].t == '+' ? &b[ops[q].b] : &a[ops[q].a]);
		k = e + 1;
	}
	free(ops);
	free(da);
	free(db);
	free(a);
	free(b);
}
