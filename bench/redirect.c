/* bench/redirect.c - is there a faster relay than pisb's splice one here?
 *
 * The preview relay moves a service's bytes from one TCP socket to another
 * with splice (drivers/local/relay.c).  The kernel has one other way that
 * skips user space: a sockmap, whose BPF verdict program redirects each
 * received skb to the other socket's send side.  This measures, in one run
 * and round by round, SIZE MiB from a server to a client over loopback:
 *
 *   direct   the client connected to the server
 *   splice   through a relay process as pisb's: one pipe (1 MiB), splice in
 *            and out
 *   sockmap  through a relay process that puts both sockets in sockmaps
 *            (a stream verdict program, bpf_sk_redirect_hash on the socket
 *            cookie) and waits for the server's EOF; needs CAP_BPF and
 *            CAP_NET_ADMIN (root): skipped otherwise
 *
 * and, for the sockmap, how many bytes were still queued in the kernel for
 * the client when the server's EOF reached the relay: the redirect takes
 * what the server sends at the server's pace and queues what the client
 * has not taken yet, with no bound (the reason pisb's relay does not use
 * it, beside the EOF, which the relay must hold back until that queue is
 * empty).
 *
 * Usage: redirect SIZE_MIB ROUNDS.  One line per round:
 *   direct MB/s, splice MB/s, sockmap MB/s (or -), MiB queued (or -)
 * Built by bench/lib.sh's bench_tool; bench/preview.sh reports it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long total;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int listener(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (s < 0 || bind(s, (void *)&a, sizeof(a)) < 0 || listen(s, 16) < 0 ||
	    getsockname(s, (void *)&a, &l) < 0)
		die("listen");
	*port = ntohs(a.sin_port);
	return s;
}

static int dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (s < 0 || connect(s, (void *)&a, sizeof(a)) < 0)
		die("connect");
	return s;
}

/* the server: one connection, a byte in, total bytes out, close */
static void serve(int ls)
{
	static char buf[1 << 16];
	int c = accept(ls, NULL, NULL);
	char rq;

	if (c < 0 || read(c, &rq, 1) != 1)
		_exit(1);
	for (long left = total; left > 0;) {
		ssize_t n = write(c, buf, left < (long)sizeof(buf) ? (size_t)left : sizeof(buf));
		if (n <= 0)
			_exit(1);
		left -= n;
	}
	_exit(0);
}

/* ---- the sockmap: two maps, one verdict program ---- */

static long bpf(int cmd, union bpf_attr *a)
{
	return syscall(SYS_bpf, cmd, a, sizeof(*a));
}

#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })

static int sockhash(void)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_SOCKHASH;
	a.key_size = 8;
	a.value_size = 8;
	a.max_entries = 16;
	return (int)bpf(BPF_MAP_CREATE, &a);
}

/* skb received on a socket of the map it is attached to: send it out of
 * the socket that `to` holds under the receiving socket's cookie */
static int verdict(int to)
{
	struct bpf_insn p[] = {
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0),            /* r6 = skb */
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_socket_cookie),
		INSN(BPF_STX | BPF_MEM | BPF_DW, 10, 0, -8, 0),           /* key on the stack */
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0),
		INSN(BPF_LD | BPF_IMM | BPF_DW, 2, BPF_PSEUDO_MAP_FD, 0, to),
		INSN(0, 0, 0, 0, 0),
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, 3, 10, 0, 0),
		INSN(BPF_ALU64 | BPF_ADD | BPF_K, 3, 0, 0, -8),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, 0),           /* to its egress */
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sk_redirect_hash),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_SK_SKB;
	a.insns = (uintptr_t)p;
	a.insn_cnt = sizeof(p) / sizeof(p[0]);
	a.license = (uintptr_t)"GPL";
	return (int)bpf(BPF_PROG_LOAD, &a);
}

static int attach(int prog, int map)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.target_fd = map;
	a.attach_bpf_fd = prog;
	a.attach_type = BPF_SK_SKB_STREAM_VERDICT;
	return (int)bpf(BPF_PROG_ATTACH, &a);
}

static int put(int map, uint64_t key, int fd)
{
	uint64_t v = fd;
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = map;
	a.key = (uintptr_t)&key;
	a.value = (uintptr_t)&v;
	a.flags = BPF_NOEXIST;
	return (int)bpf(BPF_MAP_UPDATE_ELEM, &a);
}

static uint64_t cookie(int fd)
{
	uint64_t c = 0;
	socklen_t l = sizeof(c);

	getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &l);
	return c;
}

static struct tcp_info info(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l);
	return ti;
}

/* bytes ever written into fd's send side: acknowledged + still queued
 * (read in that order, so that an ACK in between undercounts) */
static uint64_t written(int fd)
{
	uint64_t acked = info(fd).tcpi_bytes_acked;
	int q = 0;

	ioctl(fd, SIOCOUTQ, &q);
	return acked + (uint64_t)q;
}

/* can this process load and attach the program? */
static bool sockmap_ok(void)
{
	int v = sockhash(), r = sockhash(), p = r >= 0 ? verdict(r) : -1;
	bool ok = v >= 0 && p >= 0 && attach(p, v) == 0;

	close(v);
	close(r);
	close(p);
	return ok;
}

/* ---- the relays ---- */

enum mode { DIRECT, SPLICE, SOCKMAP };

/* the relay process: accept a, dial b, carry b's bytes to a; the client's
 * one byte goes the other way first.  Writes the MiB queued at the
 * server's EOF (sockmap) to report. */
static void relay(enum mode m, int lf, int port, int report)
{
	int a = accept(lf, NULL, NULL), b = dial(port);
	char rq;
	double queued = -1;

	if (a < 0 || read(a, &rq, 1) != 1)
		_exit(1);
	if (m == SPLICE) {
		int p[2];
		ssize_t n;
		if (write(b, &rq, 1) != 1 || pipe(p) < 0)
			_exit(1);
		fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
		while ((n = splice(b, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE)) > 0)
			for (ssize_t m2; n > 0; n -= m2)
				if ((m2 = splice(p[0], NULL, a, NULL, (size_t)n, SPLICE_F_MOVE)) <= 0)
					_exit(1);
	} else {
		/* b's skbs go out of a; b is in v (the program's), a in r */
		int v = sockhash(), r = sockhash(), prog = verdict(r);
		uint64_t kb = cookie(b), got;
		struct pollfd pf = { b, POLLRDHUP, 0 };
		if (prog < 0 || attach(prog, v) < 0 || put(r, kb, a) < 0 || put(v, kb, b) < 0)
			_exit(1);
		if (write(b, &rq, 1) != 1)
			_exit(1);
		if (poll(&pf, 1, -1) != 1)
			_exit(1);
		/* bytes_received counts the FIN's sequence number too */
		got = info(b).tcpi_bytes_received - 1;
		queued = (double)(got - written(a)) / (1 << 20);
		while (written(a) < got)
			usleep(200);
	}
	shutdown(a, SHUT_WR);
	if (write(report, &queued, sizeof(queued)) != sizeof(queued))
		_exit(1);
	read(a, &rq, 1);
	_exit(0);
}

/* one download of total bytes; returns MB/s (and the MiB queued) */
static double run(enum mode m, double *queued)
{
	static char buf[1 << 20];
	int sp, rp, ls = listener(&sp), lf = m == DIRECT ? -1 : listener(&rp);
	int rep[2];
	pid_t srv, rel = -1;
	long got = 0;
	ssize_t n;
	double t, q = -1;
	int c;

	if (pipe(rep) < 0)
		die("pipe");
	if ((srv = fork()) == 0)
		serve(ls);
	if (m != DIRECT && (rel = fork()) == 0)
		relay(m, lf, sp, rep[1]);
	close(rep[1]);
	t = now();
	c = dial(m == DIRECT ? sp : rp);
	if (write(c, "x", 1) != 1)
		die("write");
	while ((n = read(c, buf, sizeof(buf))) > 0)
		got += n;
	t = now() - t;
	if (m != DIRECT && read(rep[0], &q, sizeof(q)) != sizeof(q))
		q = -1;
	close(c);
	close(rep[0]);
	close(ls);
	if (lf >= 0)
		close(lf);
	waitpid(srv, NULL, 0);
	if (rel > 0)
		waitpid(rel, NULL, 0);
	if (got != total) {
		fprintf(stderr, "redirect: %s: %ld of %ld bytes\n",
			m == DIRECT ? "direct" : m == SPLICE ? "splice" : "sockmap", got, total);
		exit(1);
	}
	if (queued)
		*queued = q;
	return got / t / 1e6;
}

int main(int argc, char **argv)
{
	int rounds;
	bool sm;

	if (argc != 3 || (total = atol(argv[1]) << 20) <= 0 || (rounds = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: redirect SIZE_MIB ROUNDS\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	alarm(600);
	sm = sockmap_ok();
	for (int i = 0; i < rounds; i++) {
		double d = run(DIRECT, NULL), s = run(SPLICE, NULL), k = 0, q = 0;
		if (sm)
			k = run(SOCKMAP, &q);
		if (sm)
			printf("%.0f %.0f %.0f %.1f\n", d, s, k, q);
		else
			printf("%.0f %.0f - -\n", d, s);
		fflush(stdout);
	}
	return 0;
}
