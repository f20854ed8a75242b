/* utf16.c - see utf16.h. */
#include "utf16.h"

#include <stdint.h>

bool pisb_utf16_is(const char *buf, size_t n)
{
	const unsigned char *p = (const unsigned char *)buf;

	return n >= 2 && ((p[0] == 0xff && p[1] == 0xfe) || (p[0] == 0xfe && p[1] == 0xff));
}

static void put(struct pisb_buf *b, uint32_t cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	pisb_buf_add(b, u, n);
}

void pisb_utf16_to_utf8(const char *buf, size_t n, struct pisb_buf *out)
{
	const unsigned char *p = (const unsigned char *)buf;
	bool le = p[0] == 0xff;
	size_t i = 2;

	pisb_buf_grow(out, n + n / 2);
	while (i + 1 < n) {
		uint32_t u = le ? (uint32_t)(p[i] | p[i + 1] << 8) : (uint32_t)(p[i] << 8 | p[i + 1]);
		i += 2;
		if (u >= 0xd800 && u < 0xdc00 && i + 1 < n) {
			uint32_t v = le ? (uint32_t)(p[i] | p[i + 1] << 8) : (uint32_t)(p[i] << 8 | p[i + 1]);
			if (v >= 0xdc00 && v < 0xe000) {
				i += 2;
				put(out, 0x10000 + ((u - 0xd800) << 10) + (v - 0xdc00));
				continue;
			}
		}
		put(out, u >= 0xd800 && u < 0xe000 ? 0xfffd : u);
	}
	if (i < n)
		put(out, 0xfffd);    /* an odd byte at the end */
}
