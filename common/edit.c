/* edit.c - see edit.h. */
#include "edit.h"
#include "err.h"
#include "fs.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

struct hit {
	size_t pos, len, idx;
};

static int cmp_hit(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* How often needle occurs in hay, overlapping ones too; *first the offset
 * of the first. */
static size_t count_occurrences(const char *hay, size_t n, const char *needle, size_t m,
				size_t *first)
{
	size_t count = 0;
	const char *p = hay, *end = hay + n;

	while (p + m <= end) {
		const char *q = memmem(p, (size_t)(end - p), needle, m);
		if (!q)
			break;
		if (!count)
			*first = (size_t)(q - hay);
		count++;
		p = q + 1;
	}
	return count;
}

int pisb_edit_apply(const char *orig, size_t n, const struct pisb_fs_edit *ed, size_t ned,
		    const char *abs, struct pisb_buf *out, struct pisb_err *e)
{
	_cleanup_free_ struct hit *hits = xcalloc(ned ? ned : 1, sizeof(*hits));
	size_t at = 0;

	if (!orig)
		orig = "";
	for (size_t i = 0; i < ned; i++) {
		size_t first = 0, c;
		if (!ed[i].oldn)
			return pisb_err_set(e, PISB_EXIT_FAIL, "edit %zu: the old text is empty", i + 1);
		c = count_occurrences(orig, n, ed[i].old, ed[i].oldn, &first);
		if (c != 1)
			return pisb_err_set(e, PISB_EXIT_FAIL,
					    "edit %zu: the old text matches %zu times in '%s' (it must match exactly once); nothing was written",
					    i + 1, c, abs);
		hits[i] = (struct hit){ first, ed[i].oldn, i };
	}
	qsort(hits, ned, sizeof(*hits), cmp_hit);
	for (size_t i = 1; i < ned; i++)
		if (hits[i - 1].pos + hits[i - 1].len > hits[i].pos)
			return pisb_err_set(e, PISB_EXIT_FAIL,
					    "edits %zu and %zu overlap in '%s'; nothing was written",
					    hits[i - 1].idx + 1, hits[i].idx + 1, abs);
	pisb_buf_grow(out, n + 1);
	for (size_t i = 0; i < ned; i++) {
		pisb_buf_add(out, orig + at, hits[i].pos - at);
		pisb_buf_add(out, ed[hits[i].idx].new_, ed[hits[i].idx].newn);
		at = hits[i].pos + hits[i].len;
	}
	pisb_buf_add(out, orig + at, n - at);
	return 0;
}
