/* sha256.h - SHA-256 (FIPS 180-4), used to verify push/pull transfers. */
#ifndef PISB_SHA256_H
#define PISB_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct pisb_sha256 {
	uint32_t h[8];
	uint64_t len;        /* bytes hashed so far */
	unsigned char buf[64];
	size_t n;            /* bytes waiting in buf */
};

void pisb_sha256_init(struct pisb_sha256 *c);
void pisb_sha256_update(struct pisb_sha256 *c, const void *p, size_t n);
void pisb_sha256_final(struct pisb_sha256 *c, unsigned char out[32]);
/* Lowercase hex of a digest: 64 characters and a NUL. */
void pisb_sha256_hex(const unsigned char d[32], char out[65]);

#endif
