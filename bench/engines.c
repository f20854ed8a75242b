/* bench/engines.c - the engine choice of issue 17, measured: pisb's line
 * search (common/search.h: PCRE2 with its JIT behind literal prefilters)
 * against Hyperscan (libhyperscan-dev: multi-literal and DFA matching),
 * each counting the matching lines of the same files held in memory, so
 * that only the engines differ (no walk, no reads, no output).
 *
 * Usage: bench/engines.sh (builds this; needs libhyperscan-dev), or
 *   engines ROUNDS PATTERN[@-i]... < FILE-LIST
 * Prints, per pattern: lines found by each, min/median CPU ms of ROUNDS;
 * with ENGINES_TSV=FILE also "PATTERN<tab>PISB-MEDIAN<tab>HS-MEDIAN" lines
 * into FILE, for bench/run's summary.
 * Hyperscan gets the dialect it takes (no look-around, no backreferences:
 * none of the patterns below has them) with HS_FLAG_UTF8 | HS_FLAG_UCP
 * (Unicode classes, as ripgrep's), or without UCP where it refuses a
 * construct under it (\b: then ASCII word boundaries, said in the row),
 * and HS_FLAG_CASELESS for -i; a match is counted once per line. */
#include "search.h"
#include "err.h"

#include <hs/hs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct file {
	char *buf;
	size_t n;
};

static struct file *files;
static size_t nfiles, bytes;

static void load(void)
{
	char path[4096];

	while (fgets(path, sizeof(path), stdin)) {
		FILE *f;
		struct file x = { NULL, 0 };
		size_t cap = 0, r;

		path[strcspn(path, "\n")] = '\0';
		f = fopen(path, "rb");
		if (!f)
			continue;
		for (;;) {
			if (x.n + 65536 > cap) {
				cap = (x.n + 65536) * 2;
				x.buf = realloc(x.buf, cap);
			}
			r = fread(x.buf + x.n, 1, 65536, f);
			if (!r)
				break;
			x.n += r;
		}
		fclose(f);
		/* text only, as grep skips binary files (a NUL in 8 KiB) */
		if (!x.n || memchr(x.buf, 0, x.n < 8192 ? x.n : 8192)) {
			free(x.buf);
			continue;
		}
		files = realloc(files, (nfiles + 1) * sizeof(*files));
		files[nfiles++] = x;
		bytes += x.n;
	}
}

static double cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static long long run_pisb(struct pisb_search_ws *w)
{
	long long lines = 0;

	for (size_t i = 0; i < nfiles; i++) {
		size_t pos = 0, ls, le;
		const char *b = files[i].buf;
		size_t n = files[i].n;

		pisb_search_begin(w, b, n);
		while (pos < n && pisb_search_next(w, b, n, pos, &ls, &le)) {
			lines++;
			pos = le + 1;
		}
	}
	return lines;
}

struct hs_ctx {
	const char *buf;
	size_t n, line_end;   /* the end of the last line counted (exclusive) */
	long long lines;
};

static int on_match(unsigned id, unsigned long long from, unsigned long long to,
		    unsigned flags, void *arg)
{
	struct hs_ctx *c = arg;
	const char *nl;

	(void)id, (void)from, (void)flags;
	/* the line of the match's last byte (to is one past it) */
	if (to && to - 1 < c->line_end)
		return 0;
	nl = to ? memchr(c->buf + to - 1, '\n', c->n - (to - 1)) : memchr(c->buf, '\n', c->n);
	c->line_end = nl ? (size_t)(nl - c->buf) + 1 : c->n;
	c->lines++;
	return 0;
}

static long long run_hs(hs_database_t *db, hs_scratch_t *scr)
{
	struct hs_ctx c = { 0 };

	for (size_t i = 0; i < nfiles; i++) {
		c.buf = files[i].buf;
		c.n = files[i].n;
		c.line_end = 0;
		hs_scan(db, c.buf, (unsigned)c.n, 0, scr, on_match, &c);
	}
	return c.lines;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;

	if (argc < 3 || rounds < 1) {
		fprintf(stderr, "usage: engines ROUNDS PATTERN[@-i]... < FILE-LIST\n");
		return 2;
	}
	const char *tsv_path = getenv("ENGINES_TSV");
	FILE *tsv = tsv_path ? fopen(tsv_path, "a") : NULL;

	load();
	printf("%zu text files, %.1f MB in memory; CPU ms over %d rounds (min / median)\n",
	       nfiles, bytes / 1e6, rounds);
	printf("%-24s %10s %17s %10s %17s %8s\n", "pattern", "pisb lines", "pisb ms", "hs lines",
	       "hyperscan ms", "hs/pisb");
	for (int a = 2; a < argc; a++) {
		char pat[512];
		bool icase;
		struct pisb_search *s = NULL;
		struct pisb_search_ws *w;
		struct pisb_err e = PISB_ERR_INIT;
		hs_database_t *db = NULL;
		hs_scratch_t *scr = NULL;
		hs_compile_error_t *ce = NULL;
		double tp[64], th[64];
		long long lp = 0, lh = 0;
		int r, n = rounds > 64 ? 64 : rounds;

		snprintf(pat, sizeof(pat), "%s", argv[a]);
		icase = strlen(pat) > 3 && !strcmp(pat + strlen(pat) - 3, "@-i");
		if (icase)
			pat[strlen(pat) - 3] = '\0';
		if (pisb_search_new(&s, pat, false, icase, &e) < 0) {
			printf("%-24s pisb refuses it: %s\n", pat, e.msg);
			continue;
		}
		unsigned fl = HS_FLAG_UTF8 | HS_FLAG_MULTILINE | HS_FLAG_ALLOWEMPTY |
			      (icase ? HS_FLAG_CASELESS : 0);
		const char *note = "";
		if (hs_compile(pat, fl | HS_FLAG_UCP, HS_MODE_BLOCK, NULL, &db, &ce) != HS_SUCCESS) {
			hs_free_compile_error(ce);
			ce = NULL;
			note = " (hs: ASCII only; it refuses this under UCP)";
		}
		if (!db && hs_compile(pat, fl, HS_MODE_BLOCK, NULL, &db, &ce) != HS_SUCCESS) {
			printf("%-24s hyperscan refuses it: %s\n", pat, ce->message);
			hs_free_compile_error(ce);
			pisb_search_free(s);
			continue;
		}
		hs_alloc_scratch(db, &scr);
		w = pisb_search_ws_new(s);
		for (r = 0; r < n; r++) {
			double t0 = cpu_ms();
			lp = run_pisb(w);
			double t1 = cpu_ms();
			lh = run_hs(db, scr);
			double t2 = cpu_ms();
			tp[r] = t1 - t0;
			th[r] = t2 - t1;
		}
		qsort(tp, n, sizeof(double), cmp);
		qsort(th, n, sizeof(double), cmp);
		printf("%-24s %10lld %8.0f / %6.0f %10lld %8.0f / %6.0f %7.2fx%s\n", argv[a], lp, tp[0],
		       tp[n / 2], lh, th[0], th[n / 2], th[n / 2] / tp[n / 2], note);
		if (tsv)
			fprintf(tsv, "%s\t%.1f\t%.1f\n", argv[a], tp[n / 2], th[n / 2]);
		pisb_search_ws_free(w);
		pisb_search_free(s);
		hs_free_scratch(scr);
		hs_free_database(db);
	}
	if (tsv)
		fclose(tsv);
	return 0;
}
