/* proxy.c - the egress proxy: CONNECT tunnels and absolute-URI forwarding
 * for allowed hosts, 403 for the rest (proxy.h). */
#include "proxy.h"
#include "proc.h"
#include "relay.h"
#include "services.h"
#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX (64 * 1024)
#define HEAD_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 15000
#define RESOLVE_TIMEOUT_MS 20000
#define MAX_PENDING 256
#define MAX_ADDRS 8

enum { P_HEAD, P_RESOLVE, P_CONNECT };

struct pend {
	int fd;                 /* the client, inside the sandbox */
	int state;
	char *buf;              /* what the client sent so far */
	size_t len, head_len;   /* head_len: through the blank line */
	int64_t deadline;
	bool tunnel;            /* CONNECT */
	char host[256];
	int port;
	char *out;              /* the request head to send upstream (forwarding) */
	size_t out_len;
	int rfd;                /* resolver pipe */
	struct pisb_buf rbuf;
	struct sockaddr_storage addr[MAX_ADDRS];
	socklen_t alen[MAX_ADDRS];
	int naddr, ai;
	int ufd;                /* upstream, connecting */
	int last_err;
	int idx;
	struct pend *prev, *next;
};

struct pisb_proxy {
	int lfd, lidx;
	char *const *allowed;
	size_t nallowed;
	char *sandbox;
	struct pisb_relay *relay;
	struct pend *head;
	size_t npend;
	int64_t pause_until;    /* out of fds: stop accepting for a moment */
	void (*log)(void *arg, const char *line);
	void *log_arg;
};

static void plog(struct pisb_proxy *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void plog(struct pisb_proxy *p, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (p->log)
		p->log(p->log_arg, line);
	else
		pisb_svc_log("%s", line);
}

/* An allowedHosts entry: its host part (without brackets, trailing dot
 * dropped) into h, and its port (0: none given). */
static bool entry_split(const char *a, char *h, size_t hsz, int *port)
{
	const char *end, *colon;
	size_t hl;

	*port = 0;
	if (a[0] == '[') {
		end = strchr(a, ']');
		if (!end)
			return false;
		hl = (size_t)(end - a - 1);
		a++;
		colon = end[1] == ':' ? end + 1 : NULL;
	} else {
		colon = strrchr(a, ':');
		hl = colon ? (size_t)(colon - a) : strlen(a);
	}
	if (colon)
		*port = atoi(colon + 1);
	if (!hl || hl >= hsz)
		return false;
	memcpy(h, a, hl);
	h[hl] = '\0';
	if (h[hl - 1] == '.')
		h[hl - 1] = '\0';
	return true;
}

bool pisb_proxy_host_allowed(char *const *allowed, size_t n, const char *host, int port)
{
	char h[256];
	size_t hl = strlen(host);

	if (!hl || hl >= sizeof(h))
		return false;
	memcpy(h, host, hl + 1);
	if (h[hl - 1] == '.')
		h[--hl] = '\0';
	for (size_t i = 0; i < n; i++) {
		char a[256];
		int ap;
		size_t al;

		if (!entry_split(allowed[i], a, sizeof(a), &ap))
			continue;
		if (ap ? port != ap : port != 80 && port != 443)
			continue;
		al = strlen(a);
		if (a[0] == '*' && a[1] == '.') {
			/* "*.d": any name ending in ".d", longer than it */
			size_t dl = al - 1;  /* ".d" */
			if (hl > dl && !strncasecmp(h + hl - dl, a + 1, dl))
				return true;
		} else if (al == hl && !strncasecmp(h, a, al)) {
			return true;
		}
	}
	return false;
}

static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Addresses that are not the Internet: this host, its networks, the
 * cloud metadata service.  An IPv6 address that carries an IPv4 one is
 * judged as that IPv4 address: IPv4-mapped (::ffff:a.b.c.d),
 * IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4
 * (2002:AABB:CCDD::/48), since a route may take it there. */
static const char *addr_class(const struct sockaddr_storage *ss)
{
	uint32_t v4;

	if (ss->ss_family == AF_INET6) {
		const unsigned char *b = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
		static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };
		static const unsigned char zero[16];

		if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0) {
			v4 = be32(b + 12);
			goto v4;
		}
		if (memcmp(b, zero, 15) == 0)
			return b[15] == 1 ? "a loopback address" : "the unspecified address";
		if (memcmp(b, zero, 12) == 0) {
			v4 = be32(b + 12);
			goto v4;
		}
		if (b[0] == 0x20 && b[1] == 0x02) {
			v4 = be32(b + 2);
			goto v4;
		}
		if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
			return "a link-local address";
		if ((b[0] & 0xfe) == 0xfc)
			return "a private (unique local) address";
		if (b[0] == 0xff)
			return "a multicast address";
		if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
			return "a documentation address";
		if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b)
			return "a NAT64 address";   /* 64:ff9b:1::/48 and the rest of 64:ff9b::/32: local use */
		return NULL;
	}
	if (ss->ss_family != AF_INET)
		return "not an IP address";
	v4 = ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr);
v4:
	if (v4 >> 24 == 127)
		return "a loopback address";
	if (v4 >> 24 == 0)
		return "the unspecified network (0.0.0.0/8)";
	if (v4 >> 24 == 10 || (v4 >> 20) == (172u << 4 | 1) || (v4 >> 16) == (192u << 8 | 168))
		return "a private address";
	if ((v4 >> 22) == (100u << 2 | 1))
		return "a shared (CGNAT) address";
	if (v4 >> 16 == (169u << 8 | 254))
		return v4 == 0xa9fea9fe ? "the cloud metadata address" : "a link-local address";
	if (v4 >> 8 == (192u << 16 | 0 << 8 | 0))
		return "an IETF protocol address";
	if (v4 >> 28 >= 14)
		return "a multicast or reserved address";
	return NULL;
}

/* Is address ss named literally (an IP entry, any port) in the list? */
static bool addr_listed(char *const *allowed, size_t n, const struct sockaddr_storage *ss)
{
	for (size_t i = 0; i < n; i++) {
		char a[256];
		int ap;
		unsigned char bin[16];

		if (!entry_split(allowed[i], a, sizeof(a), &ap))
			continue;
		if (ss->ss_family == AF_INET && inet_pton(AF_INET, a, bin) == 1 &&
		    !memcmp(bin, &((const struct sockaddr_in *)ss)->sin_addr, 4))
			return true;
		if (ss->ss_family == AF_INET6 && inet_pton(AF_INET6, a, bin) == 1 &&
		    !memcmp(bin, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16))
			return true;
	}
	return false;
}

struct pisb_proxy *pisb_proxy_new(int lfd, char *const *allowed, size_t nallowed,
				  const char *sandbox, struct pisb_relay *relay)
{
	struct pisb_proxy *p = xcalloc(1, sizeof(*p));

	p->lfd = lfd;
	p->lidx = -1;
	p->allowed = allowed;
	p->nallowed = nallowed;
	p->sandbox = xstrdup(sandbox);
	p->relay = relay;
	return p;
}

void pisb_proxy_set_log(struct pisb_proxy *p, void (*log)(void *arg, const char *line), void *arg)
{
	p->log = log;
	p->log_arg = arg;
}

static void pend_free(struct pisb_proxy *p, struct pend *q, bool close_client)
{
	if (close_client && q->fd >= 0)
		close(q->fd);
	if (q->rfd >= 0)
		close(q->rfd);
	if (q->ufd >= 0)
		close(q->ufd);
	free(q->buf);
	free(q->out);
	pisb_buf_release(&q->rbuf);
	if (q->prev)
		q->prev->next = q->next;
	else
		p->head = q->next;
	if (q->next)
		q->next->prev = q->prev;
	p->npend--;
	free(q);
}

void pisb_proxy_free(struct pisb_proxy *p)
{
	if (!p)
		return;
	while (p->head)
		pend_free(p, p->head, true);
	if (p->lfd >= 0)
		close(p->lfd);
	free(p->sandbox);
	free(p);
}

/* Answer the client with an HTTP error and let the relay close it. */
static void answer(struct pisb_proxy *p, struct pend *q, int code, const char *reason,
		   const char *msg)
{
	struct pisb_buf b = PISB_BUF_INIT;
	char hdr[512];
	size_t i;

	/* the message once more as a header: curl -v shows it for CONNECT */
	for (i = 0; msg[i] && msg[i] != '\n' && i < sizeof(hdr) - 1; i++)
		hdr[i] = (unsigned char)msg[i] < 0x20 ? ' ' : msg[i];
	hdr[i] = '\0';
	pisb_buf_addf(&b, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
		      "X-Pisb-Error: %s\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
		      code, reason, hdr, strlen(msg), msg);
	pisb_relay_reject(p->relay, q->fd, b.s, b.len, NULL);
	q->fd = -1;
	pisb_buf_release(&b);
	pend_free(p, q, false);
}

/* host[:port] or [v6]:port; returns 0 or -1. */
static int parse_authority(const char *s, size_t n, char *host, size_t hn, int *port,
			   int def_port)
{
	const char *colon = NULL, *h = s, *he;
	char num[8];

	if (n && s[0] == '[') {
		const char *rb = memchr(s, ']', n);
		if (!rb)
			return -1;
		h = s + 1;
		he = rb;
		if (rb + 1 < s + n) {
			if (rb[1] != ':')
				return -1;
			colon = rb + 1;
		}
	} else {
		colon = memrchr(s, ':', n);
		he = colon ? colon : s + n;
	}
	if (he <= h || (size_t)(he - h) >= hn)
		return -1;
	memcpy(host, h, (size_t)(he - h));
	host[he - h] = '\0';
	for (char *c = host; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == '/' || *c == '@')
			return -1;
	*port = def_port;
	if (colon) {
		size_t pl = (size_t)(s + n - colon - 1);
		long long v;
		if (!pl || pl >= sizeof(num))
			return -1;
		memcpy(num, colon + 1, pl);
		num[pl] = '\0';
		if (pisb_parse_ll(num, 1, 65535, &v) < 0)
			return -1;
		*port = (int)v;
	}
	return 0;
}

static bool hdr_is(const char *line, size_t n, const char *name)
{
	size_t l = strlen(name);
	return n > l && line[l] == ':' && !strncasecmp(line, name, l);
}

/* The head is complete: decide, and either answer or start resolving. */
static void start_resolve(struct pisb_proxy *p, struct pend *q);

static void parse_head(struct pisb_proxy *p, struct pend *q)
{
	char *line_end = memchr(q->buf, '\n', q->head_len);
	char *sp1, *sp2, *target;
	size_t rl, tl;
	char method[32], version[16];

	rl = (size_t)(line_end - q->buf);
	if (rl && q->buf[rl - 1] == '\r')
		rl--;
	sp1 = memchr(q->buf, ' ', rl);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', rl - (size_t)(sp1 + 1 - q->buf)) : NULL;
	if (!sp1 || !sp2 || (size_t)(sp1 - q->buf) >= sizeof(method) ||
	    (size_t)(q->buf + rl - sp2 - 1) >= sizeof(version)) {
		answer(p, q, 400, "Bad Request", "pisb egress proxy: malformed request line\n");
		return;
	}
	memcpy(method, q->buf, (size_t)(sp1 - q->buf));
	method[sp1 - q->buf] = '\0';
	memcpy(version, sp2 + 1, (size_t)(q->buf + rl - sp2 - 1));
	version[q->buf + rl - sp2 - 1] = '\0';
	target = sp1 + 1;
	tl = (size_t)(sp2 - target);
	if (strncmp(version, "HTTP/1.", 7)) {
		answer(p, q, 400, "Bad Request", "pisb egress proxy: only HTTP/1.x requests are understood\n");
		return;
	}
	if (!strcmp(method, "CONNECT")) {
		q->tunnel = true;
		if (parse_authority(target, tl, q->host, sizeof(q->host), &q->port, 443) < 0) {
			answer(p, q, 400, "Bad Request", "pisb egress proxy: CONNECT needs host:port\n");
			return;
		}
	} else if (tl > 7 && !strncasecmp(target, "http://", 7)) {
		const char *auth = target + 7, *path;
		size_t al = strcspn(auth, "/?# ");
		struct pisb_buf out = PISB_BUF_INIT;
		bool has_host = false, upgrade = false;
		char *l, *next;

		if (al > tl - 7)
			al = tl - 7;
		path = auth + al;
		if (parse_authority(auth, al, q->host, sizeof(q->host), &q->port, 80) < 0) {
			answer(p, q, 400, "Bad Request", "pisb egress proxy: bad host in the request URI\n");
			return;
		}
		/* request line in origin form */
		pisb_buf_addf(&out, "%s ", method);
		if (path >= sp2 || *path != '/')
			pisb_buf_addc(&out, '/');
		pisb_buf_add(&out, path, (size_t)(sp2 - path));
		pisb_buf_addf(&out, " %s\r\n", version);
		for (l = line_end + 1; l < q->buf + q->head_len; l = next) {
			char *nl = memchr(l, '\n', (size_t)(q->buf + q->head_len - l));
			size_t ll = (size_t)(nl - l);
			next = nl + 1;
			if (ll && l[ll - 1] == '\r')
				ll--;
			if (hdr_is(l, ll, "upgrade"))
				upgrade = true;
		}
		for (l = line_end + 1; l < q->buf + q->head_len; l = next) {
			char *nl = memchr(l, '\n', (size_t)(q->buf + q->head_len - l));
			size_t ll = (size_t)(nl - l);
			next = nl + 1;
			if (ll && l[ll - 1] == '\r')
				ll--;
			if (!ll)
				break;
			if (hdr_is(l, ll, "proxy-connection") || hdr_is(l, ll, "proxy-authorization") ||
			    (!upgrade && (hdr_is(l, ll, "connection") || hdr_is(l, ll, "keep-alive"))))
				continue;
			if (hdr_is(l, ll, "host"))
				has_host = true;
			pisb_buf_add(&out, l, ll);
			pisb_buf_adds(&out, "\r\n");
		}
		if (!has_host) {
			pisb_buf_adds(&out, "Host: ");
			pisb_buf_add(&out, auth, al);
			pisb_buf_adds(&out, "\r\n");
		}
		/* one request per upstream connection: a second request on the
		 * client's connection may be for another host */
		if (!upgrade)
			pisb_buf_adds(&out, "Connection: close\r\n");
		pisb_buf_adds(&out, "\r\n");
		q->out_len = out.len;
		q->out = pisb_buf_detach(&out);
	} else if (tl > 8 && !strncasecmp(target, "https://", 8)) {
		answer(p, q, 400, "Bad Request",
		       "pisb egress proxy: https:// URLs go through CONNECT (use HTTPS_PROXY)\n");
		return;
	} else {
		answer(p, q, 400, "Bad Request",
		       "pisb egress proxy: send absolute-URI requests (http://host/...) or CONNECT\n");
		return;
	}
	if (!pisb_proxy_host_allowed(p->allowed, p->nallowed, q->host, q->port)) {
		bool other_port = q->port != 80 && q->port != 443 &&
				  (pisb_proxy_host_allowed(p->allowed, p->nallowed, q->host, 80) ||
				   pisb_proxy_host_allowed(p->allowed, p->nallowed, q->host, 443));
		char *msg = other_port
			? xasprintf("pisb: egress to '%s' port %d is denied: network.allowedHosts of sandbox '%s' "
				    "allows that host on ports 80 and 443 only (add '%s:%d' to allow that port)\n",
				    q->host, q->port, p->sandbox, q->host, q->port)
			: xasprintf("pisb: egress to '%s' is denied: the host is not in network.allowedHosts "
				    "of sandbox '%s' (outbound network is blocked by default; add '%s' to "
				    "network.allowedHosts in the sandbox's YAML to allow it)\n",
				    q->host, p->sandbox, q->host);
		plog(p, "egress: denied %s %s:%d (%s)", q->tunnel ? "CONNECT" : method, q->host,
			     q->port, other_port ? "port not allowed" : "not in network.allowedHosts");
		answer(p, q, 403, "Forbidden", msg);
		free(msg);
		return;
	}
	start_resolve(p, q);
}

static void try_connect(struct pisb_proxy *p, struct pend *q);

static void start_resolve(struct pisb_proxy *p, struct pend *q)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)&q->addr[0];
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&q->addr[0];
	int pp[2];
	pid_t pid;

	memset(&q->addr[0], 0, sizeof(q->addr[0]));
	if (inet_pton(AF_INET, q->host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)q->port);
		q->alen[0] = sizeof(*a4);
		q->naddr = 1;
		try_connect(p, q);
		return;
	}
	if (inet_pton(AF_INET6, q->host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)q->port);
		q->alen[0] = sizeof(*a6);
		q->naddr = 1;
		try_connect(p, q);
		return;
	}
	if (pipe2(pp, O_CLOEXEC | O_NONBLOCK) < 0) {
		answer(p, q, 502, "Bad Gateway", "pisb egress proxy: out of resources\n");
		return;
	}
	pid = fork();
	if (pid < 0) {
		close(pp[0]);
		close(pp[1]);
		answer(p, q, 502, "Bad Gateway", "pisb egress proxy: out of resources\n");
		return;
	}
	if (pid == 0) {
		/* the resolver: getaddrinfo may block; it must hold no copy of
		 * any relayed socket meanwhile */
		struct addrinfo hints, *res = NULL, *ai;
		char port[8];
		int rc, flags = fcntl(pp[1], F_GETFL);

		pisb_close_from(3, pp[1]);
		fcntl(pp[1], F_SETFL, flags & ~O_NONBLOCK);
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		snprintf(port, sizeof(port), "%d", q->port);
		rc = getaddrinfo(q->host, port, &hints, &res);
		pisb_write_all(pp[1], &rc, sizeof(rc));
		for (ai = res; !rc && ai; ai = ai->ai_next) {
			struct sockaddr_storage ss;
			socklen_t l = ai->ai_addrlen;
			if (l > sizeof(ss))
				continue;
			memset(&ss, 0, sizeof(ss));
			memcpy(&ss, ai->ai_addr, l);
			pisb_write_all(pp[1], &l, sizeof(l));
			pisb_write_all(pp[1], &ss, sizeof(ss));
		}
		_exit(0);
	}
	/* the controller's SIGCHLD handler reaps it */
	close(pp[1]);
	q->rfd = pp[0];
	q->state = P_RESOLVE;
	q->deadline = pisb_mono_ms() + RESOLVE_TIMEOUT_MS;
}

static void resolved(struct pisb_proxy *p, struct pend *q)
{
	const char *s = q->rbuf.s;
	size_t off = sizeof(int), rec = sizeof(socklen_t) + sizeof(struct sockaddr_storage);
	int rc;

	close(q->rfd);
	q->rfd = -1;
	if (q->rbuf.len < sizeof(int)) {
		answer(p, q, 502, "Bad Gateway", "pisb egress proxy: the name lookup failed\n");
		return;
	}
	memcpy(&rc, s, sizeof(int));
	if (rc) {
		char *msg = xasprintf("pisb egress proxy: cannot resolve '%s': %s\n", q->host, gai_strerror(rc));
		plog(p, "egress: cannot resolve '%s': %s", q->host, gai_strerror(rc));
		answer(p, q, 502, "Bad Gateway", msg);
		free(msg);
		return;
	}
	q->naddr = 0;
	while (off + rec <= q->rbuf.len && q->naddr < MAX_ADDRS) {
		memcpy(&q->alen[q->naddr], s + off, sizeof(socklen_t));
		memcpy(&q->addr[q->naddr], s + off + sizeof(socklen_t), sizeof(struct sockaddr_storage));
		q->naddr++;
		off += rec;
	}
	try_connect(p, q);
}

static void connected(struct pisb_proxy *p, struct pend *q)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct pisb_relay_opts o;
	struct pisb_buf to_b = PISB_BUF_INIT;
	int one = 1;

	setsockopt(q->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&o, 0, sizeof(o));
	if (q->tunnel) {
		o.to_a = ok;
		o.to_a_len = sizeof(ok) - 1;
	} else {
		pisb_buf_add(&to_b, q->out, q->out_len);
	}
	/* what the client sent after its head goes first */
	pisb_buf_add(&to_b, q->buf + q->head_len, q->len - q->head_len);
	o.to_b = to_b.s;
	o.to_b_len = to_b.len;
	plog(p, "egress: %s %s:%d", q->tunnel ? "CONNECT" : "forward", q->host, q->port);
	pisb_relay_add(p->relay, q->fd, q->ufd, &o);
	q->fd = q->ufd = -1;
	pisb_buf_release(&to_b);
	pend_free(p, q, false);
}

/* Next address (q->ai), non-blocking.  The addresses are the ones the
 * name resolved to, once: each is checked here and connected to as
 * checked, so a name that answers differently the second time (DNS
 * rebinding) gains nothing. */
static void try_connect(struct pisb_proxy *p, struct pend *q)
{
	const char *refused = NULL;
	char shown[INET6_ADDRSTRLEN] = "";

	while (q->ai < q->naddr) {
		struct sockaddr_storage *ss = &q->addr[q->ai];
		const char *cls = addr_class(ss);
		int fd;

		q->ai++;
		if (cls && !addr_listed(p->allowed, p->nallowed, ss)) {
			refused = cls;
			if (ss->ss_family == AF_INET6)
				inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ss)->sin6_addr, shown, sizeof(shown));
			else
				inet_ntop(AF_INET, &((struct sockaddr_in *)ss)->sin_addr, shown, sizeof(shown));
			continue;
		}
		fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			q->last_err = errno;
			continue;
		}
		if (connect(fd, (struct sockaddr *)ss, q->alen[q->ai - 1]) == 0) {
			q->ufd = fd;
			connected(p, q);
			return;
		}
		if (errno == EINPROGRESS) {
			q->ufd = fd;
			q->state = P_CONNECT;
			q->deadline = pisb_mono_ms() + CONNECT_TIMEOUT_MS;
			return;
		}
		q->last_err = errno;
		close(fd);
	}
	if (refused && !q->last_err) {
		char *msg = xasprintf("pisb: egress to '%s' is denied: it resolves to %s, %s, which sandbox '%s' "
				      "may reach only if network.allowedHosts names that address literally\n",
				      q->host, shown, refused, p->sandbox);
		plog(p, "egress: denied %s:%d (resolves to %s, %s)", q->host, q->port, shown, refused);
		answer(p, q, 403, "Forbidden", msg);
		free(msg);
		return;
	}
	{
		char *msg = xasprintf("pisb egress proxy: cannot connect to %s:%d: %s\n", q->host, q->port,
				      strerror(q->last_err ? q->last_err : EHOSTUNREACH));
		plog(p, "egress: cannot connect to %s:%d: %s", q->host, q->port,
			     strerror(q->last_err ? q->last_err : EHOSTUNREACH));
		answer(p, q, 502, "Bad Gateway", msg);
		free(msg);
	}
}

static void read_head(struct pisb_proxy *p, struct pend *q)
{
	for (;;) {
		ssize_t n;
		char *end;

		if (q->len == HEAD_MAX) {
			answer(p, q, 431, "Request Header Fields Too Large",
			       "pisb egress proxy: request head too large\n");
			return;
		}
		n = read(q->fd, q->buf + q->len, HEAD_MAX - q->len);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			pend_free(p, q, true);
			return;
		}
		q->len += (size_t)n;
		/* the blank line ends the head */
		end = memmem(q->buf, q->len, "\r\n\r\n", 4);
		if (end) {
			q->head_len = (size_t)(end + 4 - q->buf);
		} else if ((end = memmem(q->buf, q->len, "\n\n", 2))) {
			q->head_len = (size_t)(end + 2 - q->buf);
		} else {
			continue;
		}
		parse_head(p, q);
		return;
	}
}

/* every turn of the controller's loop, idle too: beside it (relay.c) */
PISB_IDLE_PATH int pisb_proxy_pollfds(struct pisb_proxy *p, struct pollfd *pf, int max,
				      int *timeout_ms)
{
	int n = 0;
	int64_t now = pisb_mono_ms();

	p->lidx = -1;
	if (max < 1)
		return 0;
	if (p->lfd < 0) {
		/* fed by pisb_proxy_take only */
	} else if (now >= p->pause_until) {
		pf[n] = (struct pollfd){ p->lfd, POLLIN, 0 };
		p->lidx = n++;
	} else if (p->pause_until - now < *timeout_ms || *timeout_ms < 0) {
		*timeout_ms = (int)(p->pause_until - now);
	}
	for (struct pend *q = p->head; q; q = q->next) {
		int64_t left = q->deadline - now;

		q->idx = -1;
		if (n >= max)
			continue;
		if (q->state == P_HEAD)
			pf[n] = (struct pollfd){ q->fd, POLLIN, 0 };
		else if (q->state == P_RESOLVE)
			pf[n] = (struct pollfd){ q->rfd, POLLIN, 0 };
		else
			pf[n] = (struct pollfd){ q->ufd, POLLOUT, 0 };
		q->idx = n++;
		if (left < 0)
			left = 0;
		if (left < *timeout_ms || *timeout_ms < 0)
			*timeout_ms = (int)left;
	}
	return n;
}

void pisb_proxy_take(struct pisb_proxy *p, int fd)
{
	struct pend *q;

	if (p->npend >= MAX_PENDING) {
		static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
					   "Content-Length: 29\r\n\r\npisb egress proxy: too busy\r\n";
		pisb_relay_reject(p->relay, fd, busy, sizeof(busy) - 1, NULL);
		return;
	}
	q = xcalloc(1, sizeof(*q));
	q->fd = fd;
	q->rfd = q->ufd = -1;
	q->idx = -1;
	q->buf = xmalloc(HEAD_MAX);
	q->state = P_HEAD;
	q->deadline = pisb_mono_ms() + HEAD_TIMEOUT_MS;
	q->next = p->head;
	if (p->head)
		p->head->prev = q;
	p->head = q;
	p->npend++;
}

static void accept_all(struct pisb_proxy *p)
{
	for (int k = 0; k < 64; k++) {
		int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				p->pause_until = pisb_mono_ms() + 100;
			return;
		}
		pisb_proxy_take(p, fd);
	}
}

static void on_ready(struct pisb_proxy *p, struct pend *q, short rev)
{
	if (q->state == P_HEAD) {
		read_head(p, q);
	} else if (q->state == P_RESOLVE) {
		char tmp[4096];
		for (;;) {
			ssize_t n = read(q->rfd, tmp, sizeof(tmp));
			if (n > 0) {
				pisb_buf_add(&q->rbuf, tmp, (size_t)n);
				continue;
			}
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			resolved(p, q);
			return;
		}
	} else if (rev) {
		int err = 0;
		socklen_t l = sizeof(err);
		if (getsockopt(q->ufd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
			err = errno;
		if (err == EINPROGRESS)
			return;
		if (!err) {
			connected(p, q);
			return;
		}
		q->last_err = err;
		close(q->ufd);
		q->ufd = -1;
		try_connect(p, q);
	}
}

void pisb_proxy_poll(struct pisb_proxy *p, struct pollfd *pf, int n)
{
	int64_t now = pisb_mono_ms();
	struct pend *q, *next;

	for (q = p->head; q; q = next) {
		next = q->next;
		if (q->idx >= 0 && q->idx < n && pf[q->idx].revents) {
			on_ready(p, q, pf[q->idx].revents);
			continue;
		}
		if (now >= q->deadline) {
			if (q->state == P_HEAD) {
				answer(p, q, 408, "Request Timeout", "pisb egress proxy: no request\n");
			} else if (q->state == P_RESOLVE) {
				answer(p, q, 504, "Gateway Timeout", "pisb egress proxy: the name lookup timed out\n");
			} else {
				q->last_err = ETIMEDOUT;
				close(q->ufd);
				q->ufd = -1;
				try_connect(p, q);
			}
		}
	}
	if (p->lidx >= 0 && p->lidx < n && pf[p->lidx].revents)
		accept_all(p);
}
