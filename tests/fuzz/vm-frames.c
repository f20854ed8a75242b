/* vm-frames.c - fuzz the host's frame reader (drivers/vm/vm_exec.c:
 * vm_fill, vm_next, vm_take, vm_partial) with streams a hostile guest
 * could send: frames of this session and of others, noise, headers with
 * over-long lengths, a truncated frame at the end, all cut into reads of
 * random sizes.  Each stream checks that exactly this session's frames
 * come out, byte for byte, that every noise byte is skipped once, and
 * that a truncated tail is seen as one.  Built with ASan/UBSan by
 * tests/97-security-vm-protocol.bats.
 *
 * Usage: vm-frames N    (N streams; prints "N streams ok") */
#include "vm_internal.h"
#include "vm_proto.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng;
static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

struct out { unsigned char *p; size_t n, cap; };
static void put(struct out *o, const void *d, size_t n)
{
	if (o->n + n > o->cap) {
		o->cap = (o->n + n) * 2;
		o->p = realloc(o->p, o->cap);
	}
	memcpy(o->p + o->n, d, n);
	o->n += n;
}

struct want { int type; uint32_t len; uint32_t sum; };

static uint32_t sum(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static int one(unsigned seed)
{
	const uint32_t sid = 0x1234567u | 1;
	struct out s = { 0 };
	struct want w[256];
	size_t nw = 0;
	uint64_t noise = 0;
	int events = 1 + (int)(next() % 40), truncated = next() % 4 == 0;
	static unsigned char payload[PISB_VM_MAX_FRAME];

	rng = seed * 2654435761u + 1;
	for (int i = 0; i < events; i++) {
		unsigned char h[PISB_VM_HDR];
		uint32_t len = next() % 5 == 0 ? next() % (PISB_VM_MAX_FRAME + 1) : next() % 3000;
		int kind = (int)(next() % 5);
		for (uint32_t j = 0; j < len; j++)
			payload[j] = (unsigned char)next();
		if (kind <= 1 && nw < 256) {              /* ours */
			int t = 0x81 + (int)(next() % 4);
			pisb_vm_hdr(h, t, sid, len);
			put(&s, h, sizeof(h));
			put(&s, payload, len);
			w[nw++] = (struct want){ t, len, sum(payload, len) };
		} else if (kind == 2) {                   /* another session's */
			pisb_vm_hdr(h, 0x81, sid + 2, len);
			put(&s, h, sizeof(h));
			put(&s, payload, len);
		} else if (kind == 3) {                   /* noise, with no 'P' in it */
			for (uint32_t j = 0; j < len; j++)
				if (payload[j] == 'P')
					payload[j] = 'Q';
			put(&s, payload, len);
			noise += len;
		} else {                                  /* a length over the limit */
			pisb_vm_hdr(h, 0x81, sid, PISB_VM_MAX_FRAME + 1 + next() % 1000);
			for (int j = 4; j < PISB_VM_HDR; j++)
				if (h[j] == 'P')
					h[j] = 'Q';
			put(&s, h, sizeof(h));
			noise += sizeof(h);
		}
	}
	{	/* end on a frame of ours, so that all noise before it is skipped */
		unsigned char h[PISB_VM_HDR], code[4] = { 7, 0, 0, 0 };
		pisb_vm_hdr(h, PISB_VM_EXIT, sid, 4);
		put(&s, h, sizeof(h));
		put(&s, code, 4);
		w[nw++] = (struct want){ PISB_VM_EXIT, 4, sum(code, 4) };
	}
	if (truncated) {
		unsigned char h[PISB_VM_HDR];
		pisb_vm_hdr(h, 0x81, sid, 100);
		put(&s, h, sizeof(h));
		put(&s, "partial", 7);
	}

	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return perror("socketpair"), -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		for (size_t off = 0; off < s.n;) {
			size_t n = 1 + next() % 100000;
			if (n > s.n - off)
				n = s.n - off;
			if (write(sv[1], s.p + off, n) != (ssize_t)n)
				_exit(1);
			off += n;
		}
		_exit(0);
	}
	close(sv[1]);
	struct vm_conn c = VM_CONN_INIT;
	c.fd = sv[0];
	size_t got = 0;
	int bad = 0;
	for (;;) {
		int t;
		const unsigned char *p;
		uint32_t len;
		while (vm_next(&c, sid, &t, &p, &len) == 1) {
			if (got >= nw || w[got].type != t || w[got].len != len || w[got].sum != sum(p, len)) {
				fprintf(stderr, "seed %u: frame %zu differs\n", seed, got);
				bad = 1;
			}
			if (c.off > c.have || c.have > c.cap) {
				fprintf(stderr, "seed %u: buffer bounds broken\n", seed);
				bad = 1;
			}
			got++;
			vm_take(&c, len);
		}
		int f = vm_fill(&c);
		if (f <= 0)
			break;
	}
	if (got != nw) {
		fprintf(stderr, "seed %u: %zu of %zu frames\n", seed, got, nw);
		bad = 1;
	}
	if (c.skipped != noise) {
		fprintf(stderr, "seed %u: skipped %llu noise bytes, sent %llu\n", seed,
			(unsigned long long)c.skipped, (unsigned long long)noise);
		bad = 1;
	}
	if (vm_partial(&c) != (bool)truncated) {
		fprintf(stderr, "seed %u: truncated tail %sseen\n", seed, truncated ? "not " : "");
		bad = 1;
	}
	waitpid(pid, NULL, 0);
	c.fd = -1;
	close(sv[0]);
	vm_conn_close(&c);
	free(s.p);
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000, fails = 0;

	for (int i = 0; i < n; i++) {
		rng = (uint64_t)i * 0x9E3779B97F4A7C15ull + 1;
		if (one((unsigned)i) < 0)
			fails++;
	}
	if (fails) {
		printf("%d of %d streams failed\n", fails, n);
		return 1;
	}
	printf("%d streams ok\n", n);
	return 0;
}
