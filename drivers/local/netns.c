/* netns.c - the socket factory: a helper inside the sandbox's user and net
 * namespaces that makes sockets for the controller (see netns.h). */
#include "netns.h"
#include "err.h"
#include "ns.h"
#include "proc.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { OP_HELLO, OP_CONNECT, OP_LISTEN, OP_PORT_FREE, OP_SOCKETS };

struct req {
	int op;
	int port;       /* OP_SOCKETS: how many */
	int family;
};

struct rep {
	int err;        /* errno, 0 on success */
	int pending;    /* connect still in progress */
	int free_;      /* OP_PORT_FREE */
	int nfd;        /* fds attached */
	int family;     /* OP_CONNECT: the family that worked */
};

/* How long the helper waits for a loopback connect to complete before it
 * hands the socket over still connecting (a full accept queue). */
#define CONNECT_WAIT_MS 10

/* ---------- the helper's side ---------- */

static void send_rep_fds(int sock, const struct rep *r, const int *fds, int nfd)
{
	struct iovec iov = { (void *)r, sizeof(*r) };
	union {
		char buf[CMSG_SPACE(sizeof(int) * PISB_NETNS_POOL)];
		struct cmsghdr align;
	} u;
	struct msghdr m;

	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (nfd > 0) {
		struct cmsghdr *c;
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfd);
	}
	while (sendmsg(sock, &m, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

static void send_rep(int sock, struct rep *r, int fd)
{
	r->nfd = fd >= 0;
	send_rep_fds(sock, r, &fd, fd >= 0);
}

static int tcp_socket(int family)
{
	int one = 1, fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void do_sockets(int sock, int family, int count)
{
	struct rep r = { 0 };
	int fds[PISB_NETNS_POOL], n = 0;

	if (count > PISB_NETNS_POOL)
		count = PISB_NETNS_POOL;
	while (n < count && (fds[n] = tcp_socket(family)) >= 0)
		n++;
	if (!n)
		r.err = errno;
	r.nfd = n;
	send_rep_fds(sock, &r, fds, n);
	while (n-- > 0)
		close(fds[n]);
}

static void fill_addr(struct sockaddr_storage *ss, socklen_t *len, int v6, int port)
{
	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		a->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = htons((uint16_t)port);
		*len = sizeof(*a);
	}
}

/* Connect to loopback:port, IPv4 then IPv6 (servers that listen on
 * "localhost" may have picked ::1 only). */
static void do_connect(int sock, int port)
{
	struct rep r = { 0 };
	int first_err = ECONNREFUSED;

	for (int v6 = 0; v6 < 2; v6++) {
		struct sockaddr_storage ss;
		socklen_t len;
		int fd, err = 0;
		socklen_t el = sizeof(err);

		fill_addr(&ss, &len, v6, port);
		r.family = ss.ss_family;
		fd = tcp_socket(ss.ss_family);
		if (fd < 0)
			continue;
		if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
			struct pollfd p = { fd, POLLOUT, 0 };
			if (errno != EINPROGRESS) {
				err = errno;
			} else if (poll(&p, 1, CONNECT_WAIT_MS) == 0) {
				/* still connecting: the controller finishes it */
				r.pending = 1;
				send_rep(sock, &r, fd);
				close(fd);
				return;
			} else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) {
				err = errno;
			}
		}
		if (!err) {
			send_rep(sock, &r, fd);
			close(fd);
			return;
		}
		close(fd);
		if (!v6)
			first_err = err;
	}
	r.err = first_err;
	send_rep(sock, &r, -1);
}

static int bind_loopback(int port, int v6, bool quiet_reuse)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	fill_addr(&ss, &len, v6, port);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (!quiet_reuse)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (v6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		int en = errno;
		close(fd);
		errno = en;
		return -1;
	}
	return fd;
}

static void do_listen(int sock, int port)
{
	struct rep r = { 0 };
	int fd = bind_loopback(port, 0, false);

	if (fd < 0 || listen(fd, 512) < 0) {
		r.err = errno;
		if (fd >= 0)
			close(fd);
		send_rep(sock, &r, -1);
		return;
	}
	send_rep(sock, &r, fd);
	close(fd);
}

static void do_port_free(int sock, int port)
{
	struct rep r = { 0 };
	int fd = bind_loopback(port, 0, false);

	if (fd >= 0) {
		close(fd);
		r.free_ = 1;
	} else if (errno != EADDRINUSE && errno != EACCES) {
		r.err = errno;
	}
	send_rep(sock, &r, -1);
}

static void __attribute__((noreturn)) helper_main(int sock, pid_t parent, pid_t init,
						  unsigned long long start)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct rep hello = { 0 };
	sigset_t none;

	/* die with the controller; it may already be gone */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	/* only the socketpair and stderr: a copy of any relayed socket kept
	 * here would keep that connection open after the controller closes it */
	pisb_close_from(3, sock);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_NAME, "pisb-netns");
	/* user first (capabilities over the sandbox's net ns), then net; the
	 * mount ns and root stay the host's (enter_ns only chroots, which
	 * does not matter to sockets) */
	if (pisb_sandbox_enter_ns(init, start, PISB_NS_USER | PISB_NS_NET, &e) < 0) {
		hello.err = e.errnum ? e.errnum : ESRCH;
		send_rep(sock, &hello, -1);
		_exit(1);
	}
	send_rep(sock, &hello, -1);
	for (;;) {
		struct req q;
		ssize_t n = recv(sock, &q, sizeof(q), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(q))
			_exit(0);
		if (q.port < 0 || q.port > 65535) {
			struct rep r = { .err = EINVAL };
			send_rep(sock, &r, -1);
			continue;
		}
		switch (q.op) {
		case OP_CONNECT:
			do_connect(sock, q.port);
			break;
		case OP_LISTEN:
			do_listen(sock, q.port);
			break;
		case OP_PORT_FREE:
			do_port_free(sock, q.port);
			break;
		case OP_SOCKETS:
			do_sockets(sock, q.family, q.port);
			break;
		default: {
			struct rep r = { .err = EINVAL };
			send_rep(sock, &r, -1);
		}
		}
	}
}

/* ---------- the controller's side ---------- */

void pisb_netns_init(struct pisb_netns *n, pid_t init, unsigned long long start)
{
	n->init = init;
	n->start = start;
	n->pid = 0;
	n->sock = -1;
	n->last_family = 0;
	n->npool[0] = n->npool[1] = 0;
}

pid_t pisb_netns_pid(const struct pisb_netns *n)
{
	return n->pid;
}

void pisb_netns_reaped(struct pisb_netns *n, pid_t pid)
{
	if (pid != n->pid || pid <= 0)
		return;
	n->pid = 0;
	if (n->sock >= 0)
		close(n->sock);
	n->sock = -1;
}

void pisb_netns_release(struct pisb_netns *n)
{
	for (int k = 0; k < 2; k++)
		while (n->npool[k] > 0)
			close(n->pool[k][--n->npool[k]]);
	if (n->sock >= 0)
		close(n->sock);
	n->sock = -1;
	if (n->pid > 0) {
		kill(n->pid, SIGKILL);
		waitpid(n->pid, NULL, 0);
	}
	n->pid = 0;
}

/* Receive one reply and its fds (at most max) within timeout_ms. */
static int recv_rep(int sock, struct rep *r, int *fds, int max, int timeout_ms)
{
	struct iovec iov = { r, sizeof(*r) };
	union {
		char buf[CMSG_SPACE(sizeof(int) * PISB_NETNS_POOL)];
		struct cmsghdr align;
	} u;
	struct msghdr m;
	struct pollfd p = { sock, POLLIN, 0 };
	ssize_t got;
	int pr, n = 0;

	for (int i = 0; i < max; i++)
		fds[i] = -1;
	while ((pr = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (pr <= 0) {
		errno = pr == 0 ? ETIMEDOUT : errno;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	while ((got = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (got != (ssize_t)sizeof(*r)) {
		errno = got < 0 ? errno : EPIPE;
		return -1;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

static int helper_start(struct pisb_netns *n, struct pisb_err *e)
{
	int sp[2], fd;
	struct rep r = { 0 };
	pid_t pid, me = getpid();

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "socketpair");
	pid = fork();
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "fork");
	}
	if (pid == 0) {
		close(sp[0]);
		helper_main(sp[1], me, n->init, n->start);
	}
	close(sp[1]);
	n->pid = pid;
	n->sock = sp[0];
	if (recv_rep(n->sock, &r, &fd, 1, 5000) < 0 || r.err) {
		int en = r.err ? r.err : errno;
		pisb_netns_release(n);
		errno = en;
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "enter the sandbox's network namespace");
	}
	return 0;
}

/* One request; starts (or restarts, once) the helper as needed.  Returns
 * the number of fds received into fds (at most max), or -1. */
static int call(struct pisb_netns *n, int op, int port, int family, struct rep *r,
		int *fds, int max, struct pisb_err *e)
{
	struct req q = { op, port, family };

	for (int attempt = 0; attempt < 2; attempt++) {
		int got;
		if (n->sock < 0 && helper_start(n, e) < 0)
			return -1;
		if (send(n->sock, &q, sizeof(q), MSG_NOSIGNAL) == (ssize_t)sizeof(q) &&
		    (got = recv_rep(n->sock, r, fds, max, 5000)) >= 0)
			return got;
		/* the helper died (the sandbox stopped?) or hung: replace it */
		pisb_netns_release(n);
	}
	return pisb_err_sys(e, PISB_EXIT_BACKEND, "the sandbox's socket helper does not answer");
}

int pisb_netns_connect(struct pisb_netns *n, int port, bool *pending,
		       struct pisb_err *e)
{
	struct rep r;
	int fd;

	*pending = false;
	if (call(n, OP_CONNECT, port, 0, &r, &fd, 1, e) < 0)
		return -1;
	if (r.err || fd < 0) {
		if (fd >= 0)
			close(fd);
		errno = r.err ? r.err : EPROTO;
		return pisb_err_sys(e, PISB_EXIT_FAIL, "connect to port %d in the sandbox", port);
	}
	*pending = r.pending;
	n->last_family = r.family;
	return fd;
}

int pisb_netns_last_family(const struct pisb_netns *n)
{
	return n->last_family ? n->last_family : AF_INET;
}

int pisb_netns_connect_fast(struct pisb_netns *n, int family, int port,
			    bool *pending, struct pisb_err *e)
{
	int k = family == AF_INET6, fd;
	struct sockaddr_storage ss;
	socklen_t len;

	*pending = false;
	if (!n->npool[k]) {
		struct rep r;
		int got = call(n, OP_SOCKETS, PISB_NETNS_POOL, k ? AF_INET6 : AF_INET, &r,
			       n->pool[k], PISB_NETNS_POOL, e);
		if (got < 0)
			return -1;
		if (!got) {
			errno = r.err ? r.err : EMFILE;
			return pisb_err_sys(e, PISB_EXIT_FAIL, "sockets in the sandbox");
		}
		n->npool[k] = got;
	}
	fd = n->pool[k][--n->npool[k]];
	fill_addr(&ss, &len, k, port);
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno == EINPROGRESS) {
			*pending = true;
			return fd;
		}
		int en = errno;
		close(fd);
		errno = en;
		return pisb_err_sys(e, PISB_EXIT_FAIL, "connect to port %d in the sandbox", port);
	}
	return fd;
}

int pisb_netns_listen(struct pisb_netns *n, int port, struct pisb_err *e)
{
	struct rep r;
	int fd;

	if (call(n, OP_LISTEN, port, 0, &r, &fd, 1, e) < 0)
		return -1;
	if (r.err || fd < 0) {
		if (fd >= 0)
			close(fd);
		errno = r.err ? r.err : EPROTO;
		return pisb_err_sys(e, PISB_EXIT_FAIL, "listen on 127.0.0.1:%d in the sandbox", port);
	}
	return fd;
}

int pisb_netns_port_free(struct pisb_netns *n, int port, struct pisb_err *e)
{
	struct rep r;
	int fd;

	if (call(n, OP_PORT_FREE, port, 0, &r, &fd, 1, e) < 0)
		return -1;
	if (fd >= 0)
		close(fd);
	if (r.err) {
		errno = r.err;
		return pisb_err_sys(e, PISB_EXIT_FAIL, "check port %d in the sandbox", port);
	}
	return r.free_;
}
