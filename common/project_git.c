/* project_git.c - the base's blobs as one git pack, written by the host
 * into the fresh workspace at create (see project_internal.h).
 *
 * git inside the sandbox makes the workspace a repository whose one
 * commit is the base (project.c's git_script).  Written by git, the base
 * is one zlib-compressed loose object per file: for 10,000 files, 10,000
 * small files created through the sandbox's overlay, most of create's
 * time.  The host already reads every file it copies; here it writes
 * their blobs once more as a single pack (format version 2, objects
 * stored whole: zlib's "stored" blocks, so no compressor is needed), and
 * git inside only indexes it (git index-pack, which checks every object
 * and the pack's SHA-1) before its update-index finds every blob already
 * there.  The files read are the workspace copies pisb itself just wrote
 * (no sandbox ran on this disk yet), opened without following a link. */
#include "project_internal.h"
#include "err.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- SHA-1 (the pack's trailer, as git checks it) ---- */

struct sha1 {
	uint32_t h[5];
	uint64_t len;
	unsigned char buf[64];
	size_t n;
};

static uint32_t rol(uint32_t x, int k)
{
	return (x << k) | (x >> (32 - k));
}

static void sha1_block(struct sha1 *c, const unsigned char *p)
{
	uint32_t w[80], a = c->h[0], b = c->h[1], d = c->h[3], e = c->h[4], cc = c->h[2];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	/* the four rounds as four loops: no branch per step */
#define STEP(F, K) do {                                         \
		uint32_t t = rol(a, 5) + (F) + e + (K) + w[i];  \
		e = d;                                          \
		d = cc;                                         \
		cc = rol(b, 30);                                \
		b = a;                                          \
		a = t;                                          \
	} while (0)
	for (int i = 0; i < 20; i++)
		STEP((b & cc) | (~b & d), 0x5a827999);
	for (int i = 20; i < 40; i++)
		STEP(b ^ cc ^ d, 0x6ed9eba1);
	for (int i = 40; i < 60; i++)
		STEP((b & cc) | (b & d) | (cc & d), 0x8f1bbcdc);
	for (int i = 60; i < 80; i++)
		STEP(b ^ cc ^ d, 0xca62c1d6);
#undef STEP
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += cc;
	c->h[3] += d;
	c->h[4] += e;
}

static void sha1_init(struct sha1 *c)
{
	static const uint32_t h0[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };

	memcpy(c->h, h0, sizeof(h0));
	c->len = 0;
	c->n = 0;
}

static void sha1_update(struct sha1 *c, const void *data, size_t n)
{
	const unsigned char *p = data;

	c->len += n;
	if (c->n) {
		size_t k = 64 - c->n < n ? 64 - c->n : n;
		memcpy(c->buf + c->n, p, k);
		c->n += k;
		p += k;
		n -= k;
		if (c->n < 64)
			return;
		sha1_block(c, c->buf);
		c->n = 0;
	}
	for (; n >= 64; p += 64, n -= 64)
		sha1_block(c, p);
	memcpy(c->buf, p, n);
	c->n = n;
}

static void sha1_final(struct sha1 *c, unsigned char out[20])
{
	uint64_t bits = c->len * 8;
	unsigned char pad[72] = { 0x80 };
	size_t k = (c->n < 56 ? 56 : 120) - c->n;

	for (int i = 0; i < 8; i++)
		pad[k + i] = (unsigned char)(bits >> (56 - 8 * i));
	sha1_update(c, pad, k + 8);
	for (int i = 0; i < 5; i++) {
		out[4 * i] = (unsigned char)(c->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)c->h[i];
	}
}

/* ---- the pack: written through a buffer, hashed as it goes ---- */

struct pack {
	int fd;
	struct sha1 sum;
	unsigned char buf[1 << 20];
	size_t n;
	int err;
	unsigned char in[1 << 16];   /* pack_file's reads */
};

static void pack_flush(struct pack *p)
{
	if (p->n && !p->err && pisb_write_all(p->fd, p->buf, p->n) < 0)
		p->err = errno ? errno : EIO;
	p->n = 0;
}

static void pack_put(struct pack *p, const void *data, size_t n)
{
	const unsigned char *s = data;

	sha1_update(&p->sum, s, n);
	while (n) {
		size_t k = sizeof(p->buf) - p->n < n ? sizeof(p->buf) - p->n : n;
		memcpy(p->buf + p->n, s, k);
		p->n += k;
		s += k;
		n -= k;
		if (p->n == sizeof(p->buf))
			pack_flush(p);
	}
}

static void put_be32(struct pack *p, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16),
			       (unsigned char)(v >> 8), (unsigned char)v };

	pack_put(p, b, 4);
}

/* One blob of n bytes: its type-and-size header, then a zlib stream of
 * stored blocks (at most 65,535 bytes each, the last marked final) and
 * its Adler-32; blob_data as many times as it takes to give n bytes. */
struct blob {
	size_t left;
	uint32_t a, b;
};

static void blob_begin(struct pack *p, struct blob *z, size_t n)
{
	unsigned char h[16];
	size_t k = 0;
	uint64_t sz = n;

	h[k++] = (unsigned char)(0x30 | (sz & 0x0f) | (sz > 0x0f ? 0x80 : 0));   /* type 3: blob */
	for (sz >>= 4; sz; sz >>= 7)
		h[k++] = (unsigned char)((sz & 0x7f) | (sz > 0x7f ? 0x80 : 0));
	h[k++] = 0x78;   /* deflate, 32 KiB window */
	h[k++] = 0x01;   /* no dictionary; (0x78 << 8 | 0x01) % 31 == 0 */
	pack_put(p, h, k);
	z->left = n;
	z->a = 1;
	z->b = 0;
	if (!n) {
		static const unsigned char empty[5] = { 1, 0, 0, 0xff, 0xff };
		pack_put(p, empty, 5);
	}
}

static void blob_data(struct pack *p, struct blob *z, const unsigned char *data, size_t n)
{
	while (n) {
		size_t len = n > 65535 ? 65535 : n;
		unsigned char bh[5] = { z->left == len ? 1 : 0, (unsigned char)len, (unsigned char)(len >> 8),
					(unsigned char)~len, (unsigned char)(~len >> 8) };
		pack_put(p, bh, 5);
		pack_put(p, data, len);
		/* Adler-32 in runs of 5552 bytes, the most that cannot
		 * overflow 32 bits before the modulo (zlib's NMAX) */
		for (size_t i = 0; i < len;) {
			size_t end = i + 5552 < len ? i + 5552 : len;
			for (; i < end; i++) {
				z->a += data[i];
				z->b += z->a;
			}
			z->a %= 65521;
			z->b %= 65521;
		}
		data += len;
		n -= len;
		z->left -= len;
	}
}

static void blob_end(struct pack *p, struct blob *z)
{
	put_be32(p, z->b << 16 | z->a);
}

/* The workspace file rel as a blob (its size as it is now, read whole or
 * the pack fails). */
static int pack_file(struct pack *p, int wsfd, const char *rel)
{
	unsigned char *buf = p->in;
	_cleanup_close_ int fd = pisb_open_beneath(wsfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	struct blob z;
	off_t off = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return -1;
	}
	blob_begin(p, &z, (size_t)st.st_size);
	while (off < st.st_size) {
		size_t want = st.st_size - off < (off_t)sizeof(p->in) ? (size_t)(st.st_size - off) : sizeof(p->in);
		ssize_t r = pread(fd, buf, want, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			errno = r < 0 ? errno : EIO;   /* shorter than its size */
			return -1;
		}
		blob_data(p, &z, buf, (size_t)r);
		off += r;
	}
	blob_end(p, &z);
	return 0;
}

/* Stored whole, a blob costs its size a second time on the sandbox's
 * disk (the file, and the pack): the pack takes the files of at most
 * PACK_FILE_MAX bytes, PACK_TOTAL_MAX in all, in the base's order, and git
 * writes the rest itself (compressed).  Many small files are what make
 * git's own way slow, not a few large ones. */
#define PACK_FILE_MAX (1LL << 20)
#define PACK_TOTAL_MAX (256LL << 20)

static bool pack_takes(const struct pisb_pentry *en, long long *total)
{
	long long n = en->type == 'l' ? (long long)strlen(en->target) : en->size;

	if (n > PACK_FILE_MAX || *total + n > PACK_TOTAL_MAX)
		return false;
	*total += n;
	return true;
}

int pisb_project_pack(int wsfd, int packdir, const struct pisb_manifest *m, bool own, uid_t uid,
		      gid_t gid, char name[64], struct pisb_err *e)
{
	static const char tmp[] = "tmp_pack_pisb";
	struct pack *p = xcalloc(1, sizeof(*p));
	unsigned char sum[20];
	long long total = 0;
	size_t count = 0;
	int r = -1;

	p->fd = -1;
	for (size_t i = 0; i < m->n; i++)
		count += pack_takes(&m->v[i], &total);
	if (!count) {
		name[0] = '\0';   /* nothing small: git writes it all */
		r = 0;
		goto out;
	}
	if (count > UINT32_MAX) {
		pisb_err_set(e, PISB_EXIT_FAIL, "too many files for one pack");
		goto out;
	}
	unlinkat(packdir, tmp, 0);
	p->fd = openat(packdir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (p->fd < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "create the base's pack in the workspace");
		goto out;
	}
	sha1_init(&p->sum);
	pack_put(p, "PACK", 4);
	put_be32(p, 2);
	put_be32(p, (uint32_t)count);
	total = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct pisb_pentry *en = &m->v[i];
		if (!pack_takes(en, &total))
			continue;
		if (en->type == 'l') {
			struct blob z;
			size_t n = strlen(en->target);
			blob_begin(p, &z, n);
			blob_data(p, &z, (const unsigned char *)en->target, n);
			blob_end(p, &z);
		} else if (pack_file(p, wsfd, en->path) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "read '%s' in the workspace", en->path);
			goto out;
		}
	}
	sha1_final(&p->sum, sum);
	pack_flush(p);
	if (!p->err && pisb_write_all(p->fd, sum, sizeof(sum)) < 0)
		p->err = errno;
	if (p->err) {
		errno = p->err;
		pisb_err_sys(e, PISB_EXIT_FAIL, "write the base's pack in the workspace");
		goto out;
	}
	if (own && fchown(p->fd, uid, gid) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "chown the base's pack");
		goto out;
	}
	memcpy(name, "pack-", 5);
	for (int i = 0; i < 20; i++)
		snprintf(name + 5 + 2 * i, 3, "%02x", sum[i]);
	strcpy(name + 45, ".pack");
	if (renameat(packdir, tmp, packdir, name) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "name the base's pack");
		goto out;
	}
	r = 0;
out:
	if (r < 0)
		unlinkat(packdir, tmp, 0);
	if (p->fd >= 0)
		close(p->fd);
	free(p);
	return r;
}
