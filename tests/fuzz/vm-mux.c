/* vm-mux.c - the net port's stream layer (drivers/vm/vm_mux.c) against
 * hostile peers: random bytes and frames with random types, stream ids
 * (ours and others), lengths (huge ones too) and payloads, fed to both the
 * host's side (with streams open, taking the guest's opens to port 3128
 * as the egress proxy's relay does) and the guest's (which connects on
 * NOPEN).  Built with ASan and UBSan by tests/97; after each stream the
 * bounds of vm_mux.h must hold: at most PISB_MUX_MAX_STREAMS streams (the
 * host: at most PISB_MUX_MAX_PEER_STREAMS of them the guest's), at most
 * PISB_MUX_WINDOW bytes held per stream, the queue to the peer short.  Prints "N streams ok".  vm-mux N [SEED]
 */
#include "vm_mux.h"
#include "vm_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static unsigned long long rs = 88172645463325252ull;

static unsigned rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (unsigned)rs;
}

static int peers[4096];
static int npeers;

/* the guest's connect: one end of a fresh socket pair (the other kept,
 * read and written at random) */
static int fake_connect(void *arg, unsigned port, bool *pending)
{
	int sp[2];

	(void)arg;
	(void)port;
	*pending = false;
	if (npeers >= 4000 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	peers[npeers++] = sp[1];
	return sp[0];
}

/* the host's accept of a guest-opened stream: the egress proxy's port
 * only, as drivers/vm/vm_net.c */
static unsigned long long taken;

static int fake_accept(void *arg, unsigned port)
{
	bool pending;
	int fd;

	if (port != PISB_VM_EGRESS_PORT)
		return -1;
	fd = fake_connect(arg, port, &pending);
	taken += fd >= 0;
	return fd;
}

static size_t put_frame(unsigned char *b, size_t cap, const struct pisb_mux *m)
{
	static const int types[] = { PISB_VM_NOPEN, PISB_VM_NDATA, PISB_VM_NEOF, PISB_VM_NRST,
				     PISB_VM_NCREDIT, PISB_VM_EXEC, 0x99 };
	unsigned type = (unsigned)types[rnd() % 7];
	uint32_t id, len;

	/* an id of a live stream half the time */
	if (m->n && rnd() % 2)
		id = m->s[rnd() % m->n]->id;
	else
		id = rnd() % 8 == 0 ? 0 : rnd() % 64;
	switch (rnd() % 6) {
	case 0: len = 0xFFFFFFF0u; break;
	case 1: len = PISB_MUX_CHUNK + rnd() % 16; break;
	case 2: len = type == PISB_VM_NCREDIT ? 4 : type == PISB_VM_NOPEN ? 2 : 1; break;
	default: len = rnd() % 2048;
	}
	if (PISB_VM_HDR + (size_t)(len < 4096 ? len : 0) > cap)
		return 0;
	pisb_vm_hdr(b, (int)type, id, len);
	if (len < 4096) {
		for (uint32_t i = 0; i < len; i++)
			b[PISB_VM_HDR + i] = (unsigned char)rnd();
		if (type == PISB_VM_NCREDIT && len == 4)
			pisb_vm_put32(b + PISB_VM_HDR, rnd() % (2 * PISB_MUX_WINDOW));
		if (type == PISB_VM_NOPEN && len == 2 && rnd() % 2) {
			/* the proxy's port, often: the host takes those */
			b[PISB_VM_HDR] = PISB_VM_EGRESS_PORT & 0xff;
			b[PISB_VM_HDR + 1] = PISB_VM_EGRESS_PORT >> 8;
		}
		return PISB_VM_HDR + len;
	}
	return PISB_VM_HDR;
}

static int check(const struct pisb_mux *m, const char *who)
{
	if (m->n > PISB_MUX_MAX_STREAMS) {
		fprintf(stderr, "%s: %zu streams\n", who, m->n);
		return -1;
	}
	if (m->host && m->n - pisb_mux_opened(m) > PISB_MUX_MAX_PEER_STREAMS) {
		fprintf(stderr, "%s: %zu streams the guest opened\n", who, m->n - pisb_mux_opened(m));
		return -1;
	}
	for (size_t i = 0; i < m->n; i++)
		if (m->s[i]->in_len > PISB_MUX_WINDOW || m->s[i]->credit > PISB_MUX_WINDOW) {
			fprintf(stderr, "%s: stream %u holds %zu, credit %u\n", who, m->s[i]->id,
				m->s[i]->in_len, m->s[i]->credit);
			return -1;
		}
	if (m->tx_len - m->tx_off > 4 * PISB_MUX_OUT_HIGH) {
		fprintf(stderr, "%s: %zu bytes queued\n", who, m->tx_len - m->tx_off);
		return -1;
	}
	return 0;
}

static void pump(struct pisb_mux *m, int other)
{
	static struct pollfd p[PISB_MUX_MAX_STREAMS + 1];
	static char sink[1 << 16];

	for (int round = 0; round < 8; round++) {
		int n = pisb_mux_pollfds(m, p, PISB_MUX_MAX_STREAMS + 1);
		if (poll(p, (nfds_t)n, 0) <= 0)
			break;
		pisb_mux_poll(m, p, n);
		/* the peer reads what we send, most of the time */
		while (rnd() % 4 && read(other, sink, sizeof(sink)) > 0)
			;
		/* the local sockets' far ends read, write, close at random */
		for (int i = 0; i < npeers; i++) {
			if (peers[i] < 0)
				continue;
			switch (rnd() % 8) {
			case 0: (void)!write(peers[i], "hello", 5); break;
			case 1: (void)!read(peers[i], sink, sizeof(sink)); break;
			case 2: if (rnd() % 16 == 0) { close(peers[i]); peers[i] = -1; } break;
			default: break;
			}
		}
	}
}

static unsigned long long dropped, resets, opened, refused;

static int one(bool host)
{
	struct pisb_mux m;
	int sp[2];
	static unsigned char b[1 << 18];
	int ret = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	npeers = 0;
	pisb_mux_init(&m, sp[0], host);
	m.connect = fake_connect;
	m.accept = fake_accept;
	if (host)
		for (int k = 0; k < 8; k++) {
			int cs[2];
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, cs) < 0)
				break;
			if (!pisb_mux_open(&m, cs[0], 80, "GET /", 5))
				close(cs[0]);
			peers[npeers++] = cs[1];
		}
	for (int chunk = 0; chunk < 64 && !ret; chunk++) {
		size_t len = 0;
		while (len < sizeof(b) - 8192) {
			if (rnd() % 3 == 0) {
				size_t k = rnd() % 512;
				for (size_t i = 0; i < k; i++)
					b[len++] = (unsigned char)(rnd() % 4 ? rnd() : (unsigned)"PSB1"[i % 4]);
			} else {
				size_t k = put_frame(b + len, sizeof(b) - len, &m);
				if (!k)
					break;
				len += k;
			}
		}
		for (size_t off = 0; off < len;) {
			ssize_t w = write(sp[1], b + off, len - off);
			if (w > 0)
				off += (size_t)w;
			pump(&m, sp[1]);
			if (check(&m, host ? "host" : "guest") < 0) {
				ret = -1;
				break;
			}
			if (w < 0 && errno != EAGAIN)
				break;
		}
	}
	dropped += m.dropped;
	resets += m.resets;
	refused += m.refused_opens;
	opened += (unsigned long long)npeers;
	pisb_mux_release(&m);
	close(sp[0]);
	close(sp[1]);
	for (int i = 0; i < npeers; i++)
		if (peers[i] >= 0)
			close(peers[i]);
	return ret;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;

	signal(SIGPIPE, SIG_IGN);
	if (argc > 2)
		rs = strtoull(argv[2], NULL, 10) | 1;
	for (int i = 0; i < n; i++)
		if (one(i % 2 == 0) < 0) {
			printf("stream %d failed\n", i);
			return 1;
		}
	fprintf(stderr, "dropped %llu, resets %llu, local sockets %llu, guest opens taken %llu, refused %llu\n",
		dropped, resets, opened, taken, refused);
	printf("%d streams ok\n", n);
	return 0;
}
