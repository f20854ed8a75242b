/* malloc.c - the allocator of the musl build of pisb (compat.h).
 *
 * musl's own (mallocng) gives a group of chunks back to the kernel as
 * soon as its last chunk is freed, and the next allocation of that size
 * maps fresh pages again: a sandbox's config, loaded from its record,
 * took ~9 page faults and 44 us warm (120 us cold) where glibc's malloc
 * took 8.5 (30-50); each pisb command and each controller loads several
 * such documents (issue #21).  This one keeps what it was given:
 *
 *   - a chunk of up to 64 KiB (with its 16-byte header) is one of 12
 *     power-of-two sizes, 32 B to 64 KiB, cut from 256 KiB areas mapped
 *     as needed; freed, it goes on its size's list, for the next one;
 *   - a larger one is a mapping of its own, grown with mremap and
 *     unmapped when freed;
 *   - one lock (a spin lock: pisb's threads are few and brief), held
 *     across fork so that a child never inherits it taken.
 *
 * musl's internal allocations (posix_spawn's file actions, atexit, the
 * time zone) keep musl's allocator, with its own free: the two never
 * meet.  A glibc build compiles none of this.
 */
#include "compat.h"

#ifndef __GLIBC__
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HDR 16
#define MIN_SHIFT 5                /* the smallest chunk: 32 bytes */
#define NCLASS 12                  /* up to 32 << 11 = 64 KiB */
#define AREA (256 * 1024)
#define PAGE 4096
#define LARGE ((size_t)-1)         /* a header's class: a mapping of its own */

struct hdr {
	size_t cls;   /* 0..NCLASS-1, or LARGE */
	size_t len;   /* LARGE: the mapping's length, header included */
};

static void *free_list[NCLASS];
static char *area_next, *area_end;
static volatile char lock_word;

static void lock(void)
{
	while (__atomic_test_and_set(&lock_word, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void unlock(void)
{
	__atomic_clear(&lock_word, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void lock_across_fork(void)
{
	pthread_atfork(lock, unlock, unlock);
}

static struct hdr *hdr_of(void *p)
{
	return (struct hdr *)((uintptr_t)p - HDR);
}

static int class_of(size_t n)
{
	size_t need = n + HDR;
	int c = 0;

	if (n > SIZE_MAX - HDR)
		return NCLASS;   /* large() refuses it */
	while (c < NCLASS && ((size_t)1 << (MIN_SHIFT + c)) < need)
		c++;
	return c;
}

/* a chunk of class c cut from the current area, a new area when it has
 * no room (what is left of the old one goes on the lists, in the
 * largest sizes that fit); locked */
static struct hdr *cut(int c)
{
	size_t size = (size_t)1 << (MIN_SHIFT + c);
	struct hdr *h;

	if ((size_t)(area_end - area_next) < size) {
		char *a = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (a == MAP_FAILED)
			return NULL;
		for (int k = NCLASS - 1; k >= 0; k--)
			while ((size_t)(area_end - area_next) >= ((size_t)1 << (MIN_SHIFT + k))) {
				struct hdr *r = (struct hdr *)area_next;
				r->cls = (size_t)k;
				*(void **)(r + 1) = free_list[k];
				free_list[k] = r + 1;
				area_next += (size_t)1 << (MIN_SHIFT + k);
			}
		area_next = a;
		area_end = a + AREA;
	}
	h = (struct hdr *)area_next;
	area_next += size;
	h->cls = (size_t)c;
	return h;
}

/* the length of a mapping of its own for n bytes, 0 (ENOMEM) for none */
static size_t large_len(size_t n)
{
	if (n > SIZE_MAX - HDR - PAGE) {
		errno = ENOMEM;
		return 0;
	}
	return (n + HDR + PAGE - 1) & ~(size_t)(PAGE - 1);
}

static void *large(size_t n)
{
	size_t len = large_len(n);
	struct hdr *h;

	if (!len)
		return NULL;
	h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED)
		return NULL;
	h->cls = LARGE;
	h->len = len;
	return h + 1;
}

void *malloc(size_t n)
{
	int c = class_of(n);
	void *p;

	if (c == NCLASS)
		return large(n);
	lock();
	p = free_list[c];
	if (p) {
		free_list[c] = *(void **)p;
	} else {
		struct hdr *h = cut(c);
		p = h ? h + 1 : NULL;
	}
	unlock();
	if (!p)
		errno = ENOMEM;
	return p;
}

void free(void *p)
{
	struct hdr *h = hdr_of(p);

	if (!p)
		return;
	if (h->cls == LARGE) {
		munmap(h, h->len);
		return;
	}
	lock();
	*(void **)p = free_list[h->cls];
	free_list[h->cls] = p;
	unlock();
}

size_t malloc_usable_size(void *p)
{
	const struct hdr *h = hdr_of(p);

	if (!p)
		return 0;
	return (h->cls == LARGE ? h->len : (size_t)1 << (MIN_SHIFT + h->cls)) - HDR;
}

void *realloc(void *p, size_t n)
{
	struct hdr *h = hdr_of(p);
	size_t have;
	void *q;

	if (!p)
		return malloc(n);
	have = malloc_usable_size(p);
	if (n <= have)
		return p;
	/* (grown beyond a mapping of its own: larger than any chunk) */
	if (h->cls == LARGE) {
		size_t len = large_len(n);
		if (!len)
			return NULL;
		h = mremap(h, h->len, len, MREMAP_MAYMOVE);
		if (h == MAP_FAILED)
			return NULL;
		h->len = len;
		return h + 1;
	}
	q = malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, have);
	free(p);
	return q;
}

void *calloc(size_t m, size_t n)
{
	void *p;

	if (n && m > SIZE_MAX / n) {
		errno = ENOMEM;
		return NULL;
	}
	p = malloc(m * n);
	/* a mapping of its own is fresh, zeroed pages */
	if (p && hdr_of(p)->cls != LARGE)
		memset(p, 0, m * n);
	return p;
}

/* Alignments beyond the header's 16 bytes: none that pisb asks for;
 * refused rather than met by half. */
void *aligned_alloc(size_t align, size_t n)
{
	if (align > HDR || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return malloc(n);
}

void *memalign(size_t align, size_t n)
{
	return aligned_alloc(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = aligned_alloc(align, n);
	if (!p)
		return errno;
	*out = p;
	return 0;
}
#endif
