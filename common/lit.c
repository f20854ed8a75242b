/* lit.c - see lit.h. */
#include "lit.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define LIT_X86 1
#if defined(__has_include) && __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>
#define LIT_GLIBC_CPU 1
#else
#include <cpuid.h>
#endif
#endif

/* How common each byte is in source and library text (the rank of its
 * count over /usr/include, python3 and perl's library: 0 rarest, 255 the
 * most common), to pick the two bytes of a string that are looked for. */
static const uint8_t RANK[256] = {
	251, 200, 181, 172, 166, 170, 161, 147, 165, 204, 244, 149, 155, 148, 153, 164,
	152, 131, 127, 128, 130, 136, 121, 122, 129, 124, 113, 112, 114, 106, 110, 123,
	255, 140, 190, 208, 179, 132, 158, 214, 229, 232, 230, 151, 235, 211, 216, 217,
	223, 212, 207, 191, 187, 194, 188, 178, 185, 192, 201, 203, 180, 189, 186, 120,
	157, 227, 198, 225, 209, 237, 202, 199, 195, 228, 138, 183, 226, 205, 224, 222,
	220, 133, 221, 240, 234, 197, 184, 163, 193, 177, 154, 168, 174, 169,  93, 252,
	139, 245, 213, 243, 242, 254, 238, 219, 233, 248, 160, 215, 241, 231, 249, 246,
	239, 156, 247, 250, 253, 236, 210, 196, 206, 218, 173, 171, 175, 176, 115,  60,
	143,  73,  75, 111, 125, 104,  54,  66, 145, 150,  79, 126, 108, 119,  48,  81,
	135,  84,  67, 116,  94,  58,  47, 105, 118,  56,  42,  44,  89,  68,  15,  83,
	137,  36,  34,  12,  78,  65, 141,  41, 102,  72,  21, 142,  82,  29,   7,  19,
	 97,  30,  18,  13,  62,  25,  31,  24,  95,  50,  46,  23,  70,  32,  64,  43,
	107,  77,  52,  88,  80,  35,  51,  85,  71,  27,   4,   0,   3,   1,  37,   8,
	162, 134, 100,  14, 144,  10,  20,  92, 146,   6, 167,  38,   2,  96,   5,  55,
	109,  49,  87,  28,  17,  61,   9,  39, 117,  98,  26,  76,  45,  22,  11,  63,
	182, 101,  16, 103,  86,  69,  59,  40,  99,  33,  90,  57,  53,  74,  91, 159,
};

enum mode { M_STRINGS, M_HIGH, M_BYTES, M_TABLE };

struct str {
	char *s;
	size_t len;
	size_t o1, o2;            /* the offsets of the two bytes looked for */
	uint8_t b1, b2;           /* ... their values (lower case under fold) */
	uint8_t m1, m2;           /* ... 0x20 where an ASCII letter folds */
	size_t fo;                /* Teddy: the offset of its window */
};

struct pisb_lit {
	enum mode mode;
	bool fold;
	int n;
	struct str v[PISB_LIT_MAX];
	size_t maxo;              /* the largest o1/o2 */
	uint8_t bytes[3];         /* M_BYTES */
	int nbytes;
	uint8_t set[32];          /* M_TABLE, M_BYTES, M_HIGH */
	/* several strings (Teddy): by their first fp bytes, each string a
	 * bit of a byte, looked up by the low and the high nibble of each
	 * byte (a table of 16, twice: pshufb works in 16-byte lanes) */
	int fp;
	size_t maxfo;             /* the largest window offset */
	uint8_t lo[3][32], hi[3][32];
};

static bool is_lower(uint8_t c)
{
	return c >= 'a' && c <= 'z';
}

static unsigned rank_of(uint8_t c, bool fold)
{
	unsigned r = RANK[c];

	if (fold && is_lower(c) && RANK[c - 32] > r)
		r = RANK[c - 32];
	return r;
}

struct pisb_lit *pisb_lit_new(const char *const *v, const size_t *len, int n, bool fold)
{
	struct pisb_lit *l = xcalloc(1, sizeof(*l));

	l->mode = M_STRINGS;
	l->fold = fold;
	l->n = n;
	for (int k = 0; k < n; k++) {
		struct str *s = &l->v[k];
		s->s = xmalloc(len[k] + 1);
		memcpy(s->s, v[k], len[k]);
		s->s[len[k]] = '\0';
		s->len = len[k];
		/* the rarest byte, then the rarest of the other values (a
		 * doubled letter, "ll", is too common a pair); the same byte
		 * again where there is no other */
		for (size_t i = 1; i < s->len; i++)
			if (rank_of((uint8_t)s->s[i], fold) < rank_of((uint8_t)s->s[s->o1], fold))
				s->o1 = i;
		s->o2 = s->o1;
		for (size_t i = 0; i < s->len; i++) {
			unsigned r = rank_of((uint8_t)s->s[i], fold);
			bool other = s->s[i] != s->s[s->o1];
			bool cur_other = s->s[s->o2] != s->s[s->o1];
			if (i == s->o1)
				continue;
			if (s->o2 == s->o1 || (other && !cur_other) ||
			    (other == cur_other && r < rank_of((uint8_t)s->s[s->o2], fold)))
				s->o2 = i;
		}
		s->b1 = (uint8_t)s->s[s->o1];
		s->b2 = (uint8_t)s->s[s->o2];
		s->m1 = fold && is_lower(s->b1) ? 0x20 : 0;
		s->m2 = fold && is_lower(s->b2) ? 0x20 : 0;
		if (s->o1 > l->maxo)
			l->maxo = s->o1;
		if (s->o2 > l->maxo)
			l->maxo = s->o2;
	}
	l->fp = 3;
	for (int k = 0; k < n; k++)
		if ((int)len[k] < l->fp)
			l->fp = (int)len[k];
	for (int k = 0; k < n; k++) {
		/* each string's rarest window of fp bytes */
		unsigned best = UINT32_MAX;
		for (size_t o = 0; o + (size_t)l->fp <= len[k]; o++) {
			unsigned sum = 0;
			for (int j = 0; j < l->fp; j++)
				sum += rank_of((uint8_t)v[k][o + (size_t)j], fold);
			if (sum < best) {
				best = sum;
				l->v[k].fo = o;
			}
		}
		if (l->v[k].fo > l->maxfo)
			l->maxfo = l->v[k].fo;
		for (int j = 0; j < l->fp; j++) {
			uint8_t c = (uint8_t)l->v[k].s[l->v[k].fo + (size_t)j];
			for (int t = 0; t < (fold && is_lower(c) ? 2 : 1); t++) {
				uint8_t b = t ? (uint8_t)(c - 32) : c;
				l->lo[j][b & 15] |= (uint8_t)(1u << k);
				l->lo[j][16 + (b & 15)] |= (uint8_t)(1u << k);
				l->hi[j][b >> 4] |= (uint8_t)(1u << k);
				l->hi[j][16 + (b >> 4)] |= (uint8_t)(1u << k);
			}
		}
	}
	return l;
}

struct pisb_lit *pisb_lit_new_bytes(const uint8_t set[32])
{
	struct pisb_lit *l = xcalloc(1, sizeof(*l));
	bool high = true;

	memcpy(l->set, set, 32);
	for (unsigned b = 0; b < 256; b++) {
		bool in = (set[b / 8] >> (b % 8)) & 1;
		if (in != (b >= 0x80))
			high = false;
		if (in && l->nbytes <= 3) {
			if (l->nbytes < 3)
				l->bytes[l->nbytes] = (uint8_t)b;
			l->nbytes++;
		}
	}
	l->mode = high ? M_HIGH : l->nbytes <= 3 ? M_BYTES : M_TABLE;
	return l;
}

void pisb_lit_free(struct pisb_lit *l)
{
	if (!l)
		return;
	for (int k = 0; k < l->n; k++)
		free(l->v[k].s);
	free(l);
}

/* ---------- checking a position ---------- */

static bool eq_fold(const char *a, const char *lower, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)a[i];
		if (c >= 'A' && c <= 'Z')
			c += 32;
		if (c != (uint8_t)lower[i])
			return false;
	}
	return true;
}

/* Does one of the strings start at h[at] (within n)? */
static bool starts_here(const struct pisb_lit *l, const char *h, size_t n, size_t at)
{
	for (int k = 0; k < l->n; k++) {
		const struct str *s = &l->v[k];
		if (s->len > n - at)
			continue;
		if (l->fold ? eq_fold(h + at, s->s, s->len) : !memcmp(h + at, s->s, s->len))
			return true;
	}
	return false;
}

/* The first start in [i, end) of a string (within n). */
static size_t scalar_upto(const struct pisb_lit *l, const char *h, size_t n, size_t i, size_t end)
{
	for (; i < end; i++)
		for (int k = 0; k < l->n; k++) {
			const struct str *s = &l->v[k];
			if (s->len <= n - i && (((uint8_t)h[i + s->o1] | s->m1) == s->b1) &&
			    (l->fold ? eq_fold(h + i, s->s, s->len) : !memcmp(h + i, s->s, s->len)))
				return i;
		}
	return SIZE_MAX;
}

static size_t scalar_strings(const struct pisb_lit *l, const char *h, size_t n, size_t i)
{
	return scalar_upto(l, h, n, i, n);
}

static size_t scalar_set(const struct pisb_lit *l, const char *h, size_t n, size_t i)
{
	for (; i < n; i++) {
		uint8_t c = (uint8_t)h[i];
		if ((l->set[c / 8] >> (c % 8)) & 1)
			return i;
	}
	return SIZE_MAX;
}

/* ---------- many positions at a time ---------- */

#ifdef LIT_X86
static size_t sse2_strings(const struct pisb_lit *l, const char *h, size_t n, size_t i)
{
	__m128i b1[PISB_LIT_MAX], b2[PISB_LIT_MAX], m1[PISB_LIT_MAX], m2[PISB_LIT_MAX];

	for (int k = 0; k < l->n; k++) {
		b1[k] = _mm_set1_epi8((char)l->v[k].b1);
		b2[k] = _mm_set1_epi8((char)l->v[k].b2);
		m1[k] = _mm_set1_epi8((char)l->v[k].m1);
		m2[k] = _mm_set1_epi8((char)l->v[k].m2);
	}
	while (n - i >= 16 + l->maxo) {
		unsigned m = 0;
		for (int k = 0; k < l->n; k++) {
			const struct str *s = &l->v[k];
			__m128i x = _mm_loadu_si128((const __m128i *)(h + i + s->o1));
			__m128i y = _mm_loadu_si128((const __m128i *)(h + i + s->o2));
			x = _mm_cmpeq_epi8(_mm_or_si128(x, m1[k]), b1[k]);
			y = _mm_cmpeq_epi8(_mm_or_si128(y, m2[k]), b2[k]);
			m |= (unsigned)_mm_movemask_epi8(_mm_and_si128(x, y));
		}
		while (m) {
			size_t at = i + (size_t)__builtin_ctz(m);
			if (starts_here(l, h, n, at))
				return at;
			m &= m - 1;
		}
		i += 16;
	}
	return scalar_strings(l, h, n, i);
}

__attribute__((target("avx2")))
static size_t avx2_strings(const struct pisb_lit *l, const char *h, size_t n, size_t i)
{
	__m256i b1[PISB_LIT_MAX], b2[PISB_LIT_MAX], m1[PISB_LIT_MAX], m2[PISB_LIT_MAX];

	for (int k = 0; k < l->n; k++) {
		b1[k] = _mm256_set1_epi8((char)l->v[k].b1);
		b2[k] = _mm256_set1_epi8((char)l->v[k].b2);
		m1[k] = _mm256_set1_epi8((char)l->v[k].m1);
		m2[k] = _mm256_set1_epi8((char)l->v[k].m2);
	}
	while (n - i >= 32 + l->maxo) {
		unsigned m = 0;
		for (int k = 0; k < l->n; k++) {
			const struct str *s = &l->v[k];
			__m256i x = _mm256_loadu_si256((const __m256i *)(h + i + s->o1));
			__m256i y = _mm256_loadu_si256((const __m256i *)(h + i + s->o2));
			x = _mm256_cmpeq_epi8(_mm256_or_si256(x, m1[k]), b1[k]);
			y = _mm256_cmpeq_epi8(_mm256_or_si256(y, m2[k]), b2[k]);
			m |= (unsigned)_mm256_movemask_epi8(_mm256_and_si256(x, y));
		}
		while (m) {
			size_t at = i + (size_t)__builtin_ctz(m);
			if (starts_here(l, h, n, at))
				return at;
			m &= m - 1;
		}
		i += 32;
	}
	return sse2_strings(l, h, n, i);
}

/* Does string k start at h[at] (within n)? */
static bool string_at(const struct pisb_lit *l, int k, const char *h, size_t n, size_t at)
{
	const struct str *s = &l->v[k];

	if (s->len > n - at)
		return false;
	return l->fold ? eq_fold(h + at, s->s, s->len) : !memcmp(h + at, s->s, s->len);
}

/* One string: its two bytes, 64 positions a step. */
__attribute__((target("avx2")))
static size_t avx2_one(const struct pisb_lit *l, const char *h, size_t n, size_t i)
{
	const struct str *s = &l->v[0];
	const __m256i b1 = _mm256_set1_epi8((char)s->b1), b2 = _mm256_set1_epi8((char)s->b2);
	const __m256i m1 = _mm256_set1_epi8((char)s->m1), m2 = _mm256_set1_epi8((char)s->m2);
	const char *p1 = h + s->o1, *p2 = h + s->o2;

	while (n - i >= 64 + l->maxo) {
		__m256i x0 = _mm256_loadu_si256((const __m256i *)(p1 + i));
		__m256i y0 = _mm256_loadu_si256((const __m256i *)(p2 + i));
		__m256i x1 = _mm256_loadu_si256((const __m256i *)(p1 + i + 32));
		__m256i y1 = _mm256_loadu_si256((const __m256i *)(p2 + i + 32));
		__m256i e0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_or_si256(x0, m1), b1),
					      _mm256_cmpeq_epi8(_mm256_or_si256(y0, m2), b2));
		__m256i e1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_or_si256(x1, m1), b1),
					      _mm256_cmpeq_epi8(_mm256_or_si256(y1, m2), b2));
		if (!_mm256_testz_si256(_mm256_or_si256(e0, e1), _mm256_or_si256(e0, e1))) {
			uint64_t m = (uint32_t)_mm256_movemask_epi8(e0) |
				     (uint64_t)(uint32_t)_mm256_movemask_epi8(e1) << 32;
			while (m) {
				size_t at = i + (size_t)__builtin_ctzll(m);
				if (string_at(l, 0, h, n, at))
					return at;
				m &= m - 1;
			}
		}
		i += 64;
	}
	return avx2_strings(l, h, n, i);
}

/* Several strings: Teddy, by a window of fp bytes of each (its rarest,
 * at its own offset).  A window found at i + p is its string at i + p -
 * fo: a string found may not be the first, which may start up to maxfo
 * bytes before it and be seen up to maxfo bytes later; so the scan goes
 * on that far for an earlier one. */
__attribute__((target("avx2"), always_inline))
static inline size_t teddy(const struct pisb_lit *l, const char *h, size_t n, size_t pos, const int fp)
{
	const __m256i nib = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
	__m256i lo[3], hi[3];
	size_t i = pos, best = SIZE_MAX;

	for (int j = 0; j < fp; j++) {
		lo[j] = _mm256_loadu_si256((const __m256i *)l->lo[j]);
		hi[j] = _mm256_loadu_si256((const __m256i *)l->hi[j]);
	}
	while (n - i >= 32 + (size_t)fp - 1) {
		if (best != SIZE_MAX && i > best + l->maxfo)
			return best;
		/* (written out: the compiler keeps the tables in registers) */
#define TEDDY_AT(j) _mm256_and_si256( \
		_mm256_shuffle_epi8(lo[j], _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(h + i + j)), nib)), \
		_mm256_shuffle_epi8(hi[j], _mm256_and_si256(_mm256_srli_epi16( \
			_mm256_loadu_si256((const __m256i *)(h + i + j)), 4), nib)))
		__m256i r = TEDDY_AT(0);
		if (fp > 1)
			r = _mm256_and_si256(r, TEDDY_AT(1));
		if (fp > 2)
			r = _mm256_and_si256(r, TEDDY_AT(2));
#undef TEDDY_AT
		unsigned m = ~(unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(r, zero));
		if (m) {
			uint8_t bits[32];
			_mm256_storeu_si256((__m256i *)bits, r);
			for (; m; m &= m - 1) {
				size_t p = i + (size_t)__builtin_ctz(m);
				for (unsigned b = bits[p - i]; b; b &= b - 1) {
					int k = __builtin_ctz(b);
					size_t at = p - l->v[k].fo;
					if (p < pos + l->v[k].fo || at >= best)
						continue;
					if (string_at(l, k, h, n, at))
						best = at;
				}
			}
		}
		i += 32;
	}
	/* the last bytes: every start from where the windows stop */
	size_t from = i > pos + l->maxfo ? i - l->maxfo : pos;
	size_t tail = from < best ? scalar_upto(l, h, n, from, best == SIZE_MAX ? n : best) : SIZE_MAX;
	return tail < best ? tail : best;
}

/* (a loop of its own for each window length: unrolled, in registers) */
__attribute__((target("avx2")))
static size_t avx2_teddy(const struct pisb_lit *l, const char *h, size_t n, size_t pos)
{
	return l->fp == 3 ? teddy(l, h, n, pos, 3) : l->fp == 2 ? teddy(l, h, n, pos, 2) : teddy(l, h, n, pos, 1);
}

__attribute__((target("avx2")))
static size_t avx2_high(const char *h, size_t n, size_t i)
{
	for (; n - i >= 32; i += 32) {
		unsigned m = (unsigned)_mm256_movemask_epi8(_mm256_loadu_si256((const __m256i *)(h + i)));
		if (m)
			return i + (size_t)__builtin_ctz(m);
	}
	for (; i < n; i++)
		if ((uint8_t)h[i] >= 0x80)
			return i;
	return SIZE_MAX;
}

static size_t sse2_high(const char *h, size_t n, size_t i)
{
	for (; n - i >= 16; i += 16) {
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(h + i)));
		if (m)
			return i + (size_t)__builtin_ctz(m);
	}
	for (; i < n; i++)
		if ((uint8_t)h[i] >= 0x80)
			return i;
	return SIZE_MAX;
}

__attribute__((target("avx2")))
static size_t avx2_bytes(const struct pisb_lit *l, const char *h, size_t n, size_t i)
{
	__m256i a = _mm256_set1_epi8((char)l->bytes[0]);
	__m256i b = _mm256_set1_epi8((char)l->bytes[l->nbytes > 1 ? 1 : 0]);
	__m256i c = _mm256_set1_epi8((char)l->bytes[l->nbytes > 2 ? 2 : 0]);

	for (; n - i >= 32; i += 32) {
		__m256i x = _mm256_loadu_si256((const __m256i *)(h + i));
		__m256i e = _mm256_or_si256(_mm256_cmpeq_epi8(x, a),
					    _mm256_or_si256(_mm256_cmpeq_epi8(x, b), _mm256_cmpeq_epi8(x, c)));
		unsigned m = (unsigned)_mm256_movemask_epi8(e);
		if (m)
			return i + (size_t)__builtin_ctz(m);
	}
	return scalar_set(l, h, n, i);
}

/* glibc's own record of the CPU (filled in at start) where it has one;
 * else cpuid, here, the first time a search asks.  Not
 * __builtin_cpu_supports: it links libgcc's constructor, which runs
 * cpuid at every start of every binary, grep or not, and cpuid traps to
 * the hypervisor in a VM (5% of a 'pisb list'). */
static bool have_avx2(void)
{
	static int v = -1;

	if (v < 0) {
#ifdef LIT_GLIBC_CPU
		v = CPU_FEATURE_ACTIVE(AVX2) && CPU_FEATURE_ACTIVE(POPCNT);
#else
		/* AVX2 and POPCNT, and the kernel saving the AVX registers
		 * (OSXSAVE, and XCR0's SSE and AVX state bits) */
		unsigned a, b, c, d, lo = 0, hi = 0;
		bool os = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_POPCNT);
		if (os)
			__asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		v = os && (lo & 6) == 6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
#endif
	}
	return v;
}
#endif

size_t pisb_lit_find(const struct pisb_lit *l, const char *h, size_t n, size_t pos)
{
	if (pos >= n)
		return SIZE_MAX;
	switch (l->mode) {
	case M_STRINGS:
		if (l->n == 1 && l->v[0].len == 1 && !l->v[0].m1) {
			const char *q = memchr(h + pos, l->v[0].b1, n - pos);
			return q ? (size_t)(q - h) : SIZE_MAX;
		}
#ifdef LIT_X86
		if (!have_avx2())
			return sse2_strings(l, h, n, pos);
		return l->n == 1 ? avx2_one(l, h, n, pos) : avx2_teddy(l, h, n, pos);
#else
		return scalar_strings(l, h, n, pos);
#endif
	case M_HIGH:
#ifdef LIT_X86
		return have_avx2() ? avx2_high(h, n, pos) : sse2_high(h, n, pos);
#else
		return scalar_set(l, h, n, pos);
#endif
	case M_BYTES:
		if (l->nbytes == 1) {
			const char *q = memchr(h + pos, l->bytes[0], n - pos);
			return q ? (size_t)(q - h) : SIZE_MAX;
		}
#ifdef LIT_X86
		if (have_avx2())
			return avx2_bytes(l, h, n, pos);
#endif
		return scalar_set(l, h, n, pos);
	case M_TABLE:
		break;
	}
	return scalar_set(l, h, n, pos);
}

/* ---------- counting ---------- */

#ifdef LIT_X86
__attribute__((target("avx2,popcnt")))
static size_t avx2_count(const char *p, size_t n, char c)
{
	__m256i v = _mm256_set1_epi8(c);
	size_t k = 0, i = 0;

	for (; n - i >= 32; i += 32) {
		__m256i x = _mm256_loadu_si256((const __m256i *)(p + i));
		k += (size_t)__builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, v)));
	}
	for (; i < n; i++)
		k += p[i] == c;
	return k;
}

static size_t sse2_count(const char *p, size_t n, char c)
{
	__m128i v = _mm_set1_epi8(c), one = _mm_set1_epi8(1), zero = _mm_setzero_si128();
	size_t k = 0, i = 0;

	for (; n - i >= 16; i += 16) {
		__m128i x = _mm_and_si128(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)), v), one);
		__m128i s = _mm_sad_epu8(x, zero);     /* the two halves' sums */
		k += (size_t)_mm_cvtsi128_si32(s) + (size_t)_mm_extract_epi16(s, 4);
	}
	for (; i < n; i++)
		k += p[i] == c;
	return k;
}
#endif

size_t pisb_lit_count(const char *p, size_t n, char c)
{
#ifdef LIT_X86
	return have_avx2() ? avx2_count(p, n, c) : sse2_count(p, n, c);
#else
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += p[i] == c;
	return k;
#endif
}
