/* vm_net.c - a vm sandbox's previews: the host-side relay (vm_net.h).
 *
 * One process per running VM, a child of its supervisor (vm.c), that
 *  - holds the preview listeners on host 127.0.0.1 (the same host port
 *    for a guest port across stop and start: previews.json),
 *  - answers requests on control.sock (pisb_control_call: ping,
 *    svc.preview), as the local driver's controller does,
 *  - turns each connection accepted on a preview port (after the token
 *    gate, preview.auth: token) into a stream on the agent's net port
 *    (vm_mux.h), which the agent connects to 127.0.0.1:PORT in the guest,
 *  - with network.allowedHosts, runs the local driver's egress proxy
 *    (proxy.h) for the guest: each stream the guest opens (a connection
 *    to the agent's 127.0.0.1:3128, the guest's HTTP(S)_PROXY) becomes
 *    one end of a socketpair whose other end the proxy takes as a client,
 *    exactly as the local controller takes one accepted in the sandbox's
 *    namespace; the allowlist is checked here, never in the guest.
 * Everything the guest writes on the net port is hostile: vm_mux.c bounds
 * it (PISB_MUX_MAX_PEER_STREAMS guest-opened streams at once); the guest
 * names no host address, path or command: it answers for streams the host
 * opened, and what it opens reaches the proxy and nothing else (another
 * port, or any open without allowedHosts, is refused).  The relay ends
 * when QEMU closes the port.
 */
#include "vm_internal.h"
#include "vm_net.h"
#include "vm_mux.h"
#include "vm_proto.h"
#include "config.h"
#include "err.h"
#include "gate.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "proc.h"
#include "proxy.h"
#include "relay.h"
#include "services.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define NET_MAX_PREVIEWS 64
#define NET_MAX_CLIENTS 8
#define NET_REQ_MAX 65536
#define NET_PORT_LO 20000   /* as the local driver's: below the ephemeral range */
#define NET_PORT_HI 32767
#define NET_PROXY_FDS 256    /* the proxy's pollfds: its pending requests (it bounds them) */
#define NET_POLL_MAX (1 + NET_MAX_CLIENTS + NET_MAX_PREVIEWS + PISB_GATE_MAX + NET_PROXY_FDS + 512 + PISB_MUX_MAX_STREAMS + 1)
#define NET_LOG_MAX (1024 * 1024)   /* net.log, then net.log.1 */
#define NET_EGRESS_LINES 20  /* egress lines a second in net.log; the rest counted */

_Static_assert(PISB_VM_EGRESS_PORT == PISB_PROXY_PORT, "the guest's proxy port is the local sandbox's");

struct preview {
	int port, host_port, lfd;
	char *title, *description;
	char *lerr;                 /* why it does not listen */
};

struct client {
	int fd;
	struct pisb_buf in;
};

struct net {
	int idir;
	const char *name;
	int log;
	int ctl;                    /* control.sock */
	struct client cl[NET_MAX_CLIENTS];
	struct preview pv[NET_MAX_PREVIEWS];
	size_t npv;
	char *token;
	struct pisb_relay *relay;   /* the gate's and the proxy's answers, egress connections */
	struct pisb_gate *gate;
	struct pisb_proxy *proxy;   /* network.allowedHosts, or NULL */
	struct pisb_mux mux;
	uint64_t said_dropped, said_resets, said_refused, said_quiet;
	int64_t said_at;
	long long log_size;
	int64_t egress_sec;         /* the second egress lines are counted in */
	int egress_lines;
	uint64_t egress_quiet;      /* egress lines not written (over the rate) */
};

static void logf_(struct net *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct net *n, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int k;

	if (n->log < 0)
		return;
	va_start(ap, fmt);
	k = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	if ((size_t)k > sizeof(line) - 2)
		k = (int)sizeof(line) - 2;
	line[k++] = '\n';
	/* bounded: what the guest makes us say goes on at most
	 * 2 * NET_LOG_MAX bytes (net.log and net.log.1) */
	if (n->log_size + k > NET_LOG_MAX && n->log_size > 0) {
		int fd;
		renameat(n->idir, "net.log", n->idir, "net.log.1");
		fd = openat(n->idir, "net.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			dup3(fd, n->log, O_CLOEXEC);
			close(fd);
		}
		n->log_size = 0;
	}
	if (pisb_write_all(n->log, line, (size_t)k) == (ssize_t)k)
		n->log_size += k;
}

/* the proxy's "egress: ..." lines, NET_EGRESS_LINES a second at most */
static void egress_log(void *arg, const char *line)
{
	struct net *n = arg;
	int64_t sec = pisb_mono_ms() / 1000;

	if (sec != n->egress_sec) {
		n->egress_sec = sec;
		n->egress_lines = 0;
	}
	if (n->egress_lines++ >= NET_EGRESS_LINES) {
		n->egress_quiet++;
		return;
	}
	logf_(n, "%s", line);
}

/* ---- previews.json: sticky host ports, titles ---- */

static void persist(struct net *n)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_arr(&w);
	for (size_t i = 0; i < n->npv; i++) {
		pisb_jw_obj(&w);
		pisb_jw_kint(&w, "port", n->pv[i].port);
		pisb_jw_kint(&w, "hostPort", n->pv[i].host_port);
		pisb_jw_kstr(&w, "title", n->pv[i].title);
		pisb_jw_kstr(&w, "description", n->pv[i].description);
		pisb_jw_obj_end(&w);
	}
	pisb_jw_arr_end(&w);
	if (pisb_atomic_write(n->idir, "previews.json", b.s, b.len, 0600, &e) < 0)
		logf_(n, "previews: %s", e.msg);
	pisb_buf_release(&b);
}

static void load(struct net *n)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_json j;

	if (pisb_read_file_at(n->idir, "previews.json", &b, 1 << 20) < 0)
		goto out;
	if (pisb_json_parse(&j, b.s, b.len, &e) < 0 || j.tok[0].type != JSMN_ARRAY) {
		logf_(n, "previews.json: %s", e.msg[0] ? e.msg : "not an array");
		goto out;
	}
	for (int i = 0; i < j.tok[0].size && n->npv < NET_MAX_PREVIEWS; i++) {
		int o = pisb_json_at(&j, 0, i);
		long long port = 0, hp = 0;
		struct preview *p = &n->pv[n->npv];

		pisb_json_int(&j, pisb_json_get(&j, o, "port"), &port);
		pisb_json_int(&j, pisb_json_get(&j, o, "hostPort"), &hp);
		if (port < 1 || port > 65535 || hp < 0 || hp > 65535)
			continue;
		memset(p, 0, sizeof(*p));
		p->port = (int)port;
		p->host_port = (int)hp;
		p->lfd = -1;
		p->title = pisb_json_str(&j, pisb_json_get(&j, o, "title"));
		p->description = pisb_json_str(&j, pisb_json_get(&j, o, "description"));
		n->npv++;
	}
	pisb_json_release(&j);
out:
	pisb_buf_release(&b);
}

/* ---- listeners ---- */

static void open_listener(struct net *n, struct preview *p)
{
	if (p->lfd >= 0)
		return;
	if (!p->host_port) {
		for (int tries = 0; tries < 64 && p->lfd < 0; tries++) {
			bool used = false;
			char hex[9];
			int port;
			pisb_random_hex(hex, 8);
			hex[8] = '\0';
			port = NET_PORT_LO + (int)(strtoul(hex, NULL, 16) % (NET_PORT_HI - NET_PORT_LO + 1));
			for (size_t i = 0; i < n->npv; i++)
				used |= n->pv[i].host_port == port;
			if (!used && (p->lfd = pisb_preview_listen(port)) >= 0)
				p->host_port = port;
		}
		if (p->lfd >= 0)
			persist(n);
	} else {
		p->lfd = pisb_preview_listen(p->host_port);
	}
	free(p->lerr);
	p->lerr = NULL;
	if (p->lfd < 0)
		p->lerr = p->host_port
			? xasprintf("preview port 127.0.0.1:%d of service 'port-%d' is taken by another process (%s); "
				    "free it, then run 'pisb svc %s preview %d'", p->host_port, p->port,
				    strerror(errno), n->name, p->port)
			: xasprintf("no preview port for service 'port-%d': %s", p->port, strerror(errno));
	if (p->lerr)
		logf_(n, "previews: %s", p->lerr);
}

/* ---- JSON: the local driver's keys (pisb-svc(1)) ---- */

/* as the local driver's: the preview's URL ends in '/', the service's
 * not (PUBLIC_URL); the token, when on, after a '/' */
static char *url_of(const struct net *n, const struct preview *p, bool slash)
{
	if (!p->host_port || p->lfd < 0)
		return NULL;
	return n->token ? xasprintf("http://127.0.0.1:%d/?pisb_token=%s", p->host_port, n->token)
			: xasprintf("http://127.0.0.1:%d%s", p->host_port, slash ? "/" : "");
}

static void previews_json(const struct net *n, struct pisb_jw *w)
{
	pisb_jw_arr(w);
	for (size_t i = 0; i < n->npv; i++) {
		const struct preview *p = &n->pv[i];
		_cleanup_free_ char *url = url_of(n, p, true), *svc = xasprintf("port-%d", p->port);
		_cleanup_free_ char *title = p->title ? NULL : xasprintf("Port %d", p->port);

		pisb_jw_obj(w);
		pisb_jw_kstr(w, "service", svc);
		pisb_jw_kstr(w, "url", url);
		pisb_jw_kstr(w, "title", p->title ? p->title : title);
		pisb_jw_kstr(w, "description", p->description);
		pisb_jw_kstr(w, "folder", NULL);
		pisb_jw_kint(w, "hostPort", p->host_port);
		pisb_jw_kstr(w, "error", p->lerr);
		pisb_jw_obj_end(w);
	}
	pisb_jw_arr_end(w);
}

static void svc_json(const struct net *n, const struct preview *p, struct pisb_jw *w)
{
	_cleanup_free_ char *url = url_of(n, p, false), *svc = xasprintf("port-%d", p->port);

	pisb_jw_obj(w);
	pisb_jw_kstr(w, "name", svc);
	pisb_jw_kstr(w, "kind", "link");
	pisb_jw_kstr(w, "state", "linked");
	pisb_jw_key(w, "pid");
	pisb_jw_null(w);
	pisb_jw_kint(w, "port", p->port);
	pisb_jw_key(w, "hostPort");
	if (p->lfd >= 0)
		pisb_jw_int(w, p->host_port);
	else
		pisb_jw_null(w);
	pisb_jw_kstr(w, "url", url);
	pisb_jw_kint(w, "restarts", 0);
	pisb_jw_kstr(w, "error", p->lerr);
	pisb_jw_obj_end(w);
}

/* status.json's previews (pisb inspect) */
static void publish(struct net *n)
{
	struct pisb_runtime rt;
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	if (pisb_runtime_load(n->idir, &rt, &e) < 0) {
		logf_(n, "status.json: %s", e.msg);
		return;
	}
	pisb_jw_init(&w, &b);
	previews_json(n, &w);
	free(rt.previews_json);
	rt.previews_json = pisb_buf_detach(&b);
	if (pisb_runtime_save(n->idir, &rt, &e) < 0)
		logf_(n, "status.json: %s", e.msg);
	pisb_runtime_release(&rt);
}

/* ---- control.sock ---- */

static void reply(int fd, struct pisb_buf *b)
{
	pisb_buf_addc(b, '\n');
	pisb_write_all(fd, b->s, b->len);
}

static void reply_error(int fd, int code, const char *msg)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kbool(&w, "ok", false);
	pisb_jw_kint(&w, "code", code);
	pisb_jw_kstr(&w, "error", msg);
	pisb_jw_obj_end(&w);
	reply(fd, &b);
	pisb_buf_release(&b);
}

static void op_preview(struct net *n, const struct pisb_json *j, int fd)
{
	long long port = 0;
	_cleanup_free_ char *title = pisb_json_str(j, pisb_json_get(j, 0, "title"));
	_cleanup_free_ char *desc = pisb_json_str(j, pisb_json_get(j, 0, "description"));
	struct preview *p = NULL;
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_json_int(j, pisb_json_get(j, 0, "port"), &port);
	if (port < 1 || port > 65535) {
		reply_error(fd, PISB_EXIT_USAGE, "preview: PORT must be 1-65535");
		return;
	}
	for (size_t i = 0; i < n->npv && !p; i++)
		if (n->pv[i].port == port)
			p = &n->pv[i];
	if (!p) {
		if (n->npv == NET_MAX_PREVIEWS) {
			char msg[128];
			snprintf(msg, sizeof(msg), "sandbox '%s' has %d previews already", n->name, NET_MAX_PREVIEWS);
			reply_error(fd, PISB_EXIT_BUSY, msg);
			return;
		}
		p = &n->pv[n->npv++];
		memset(p, 0, sizeof(*p));
		p->port = (int)port;
		p->lfd = -1;
	}
	if (title) {
		free(p->title);
		p->title = xstrdup(title);
	}
	if (desc) {
		free(p->description);
		p->description = xstrdup(desc);
	}
	open_listener(n, p);
	persist(n);
	/* on the record before the answer: an inspect right after sees it */
	publish(n);
	logf_(n, "previews: guest port %d on 127.0.0.1:%d", p->port, p->host_port);
	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kbool(&w, "ok", !p->lerr);
	if (p->lerr) {
		pisb_jw_kint(&w, "code", PISB_EXIT_FAIL);
		pisb_jw_kstr(&w, "error", p->lerr);
	}
	pisb_jw_key(&w, "services");
	pisb_jw_arr(&w);
	svc_json(n, p, &w);
	pisb_jw_arr_end(&w);
	pisb_jw_key(&w, "previews");
	previews_json(n, &w);
	pisb_jw_obj_end(&w);
	reply(fd, &b);
	pisb_buf_release(&b);
}

static void request(struct net *n, struct client *c)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_json j;
	_cleanup_free_ char *op = NULL;
	size_t len = strcspn(c->in.s, "\n");

	if (pisb_json_parse(&j, c->in.s, len, &e) < 0) {
		reply_error(c->fd, PISB_EXIT_USAGE, e.msg);
		return;
	}
	op = pisb_json_str(&j, pisb_json_get(&j, 0, "op"));
	if (op && !strcmp(op, "ping")) {
		struct pisb_buf b = PISB_BUF_INIT;
		pisb_buf_adds(&b, "{\"ok\":true}");
		reply(c->fd, &b);
		pisb_buf_release(&b);
	} else if (op && !strcmp(op, "svc.preview")) {
		op_preview(n, &j, c->fd);
	} else {
		char msg[160];
		snprintf(msg, sizeof(msg), "unknown op '%.80s' (a vm sandbox's relay takes svc.preview)", op ? op : "");
		reply_error(c->fd, PISB_EXIT_USAGE, msg);
	}
	pisb_json_release(&j);
}

static void client_close(struct client *c)
{
	close(c->fd);
	c->fd = -1;
	pisb_buf_release(&c->in);
}

static void client_read(struct net *n, struct client *c)
{
	ssize_t r;

	pisb_buf_grow(&c->in, 4096);
	r = read(c->fd, c->in.s + c->in.len, c->in.cap - c->in.len - 1);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		client_close(c);
		return;
	}
	c->in.len += (size_t)r;
	c->in.s[c->in.len] = '\0';
	if (memchr(c->in.s, '\n', c->in.len)) {
		request(n, c);
		client_close(c);
	} else if (c->in.len > NET_REQ_MAX) {
		reply_error(c->fd, PISB_EXIT_USAGE, "request too long");
		client_close(c);
	}
}

static void accept_client(struct net *n)
{
	int fd = accept4(n->ctl, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	for (size_t i = 0; i < NET_MAX_CLIENTS; i++)
		if (n->cl[i].fd < 0) {
			n->cl[i].fd = fd;
			return;
		}
	close(fd);
}

/* ---- streams ---- */

/* the guest refused a stream before any answer: nothing listens there */
static void refused(void *arg, struct pisb_mux_stream *s, int why)
{
	struct net *n = arg;
	char body[256], msg[512];
	int k;

	if (why != PISB_MUX_RST_REFUSED)
		return;
	snprintf(body, sizeof(body), "pisb: nothing accepts connections on that port in sandbox '%s' "
		 "(see 'pisb inspect %s')\n", n->name, n->name);
	k = snprintf(msg, sizeof(msg), "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n"
		     "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
	if (k > 0)
		(void)!send(s->fd, msg, (size_t)k, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* A stream the guest opened (vm_mux.h): to the proxy's port, with
 * network.allowedHosts, a socketpair whose other end the proxy takes as
 * a client; anything else is refused (-1). */
static int egress_accept(void *arg, unsigned port)
{
	struct net *n = arg;
	int sv[2];

	if (!n->proxy || port != PISB_PROXY_PORT)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pisb_proxy_take(n->proxy, sv[1]);
	return sv[0];
}

static void stream_to(struct net *n, struct preview *p, int fd, const char *head, size_t len)
{
	if (!pisb_mux_open(&n->mux, fd, (unsigned)p->port, head, len))
		close(fd);
}

static void gate_admit(void *arg, void *tag, int fd, const char *head, size_t len)
{
	struct net *n = arg;

	for (size_t i = 0; i < n->npv; i++)
		if (&n->pv[i] == tag) {
			stream_to(n, &n->pv[i], fd, head, len);
			return;
		}
	close(fd);
}

static void accept_preview(struct net *n, struct preview *p)
{
	for (int k = 0; k < 64 && !pisb_mux_full(&n->mux); k++) {
		int a = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;

		if (a < 0)
			return;
		setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (n->gate)
			/* the token first: nothing reaches the guest before it */
			pisb_gate_add(n->gate, a, n->token, p->host_port, p);
		else
			stream_to(n, p, a, NULL, 0);
	}
}

/* What the guest sent that the mux dropped, said at most every 5 s. */
static void say_drops(struct net *n)
{
	int64_t now = pisb_mono_ms();

	if ((n->mux.dropped == n->said_dropped && n->mux.resets == n->said_resets &&
	     n->mux.refused_opens == n->said_refused && n->egress_quiet == n->said_quiet) ||
	    now - n->said_at < 5000)
		return;
	logf_(n, "net: dropped from the guest: %llu bytes of noise and frames for streams it was not given, "
	      "%llu streams reset for breaking the window, %llu streams it opened refused (not the proxy's "
	      "port, no network.allowedHosts, or more than %d at once); %llu egress lines not logged",
	      (unsigned long long)n->mux.dropped, (unsigned long long)n->mux.resets,
	      (unsigned long long)n->mux.refused_opens, PISB_MUX_MAX_PEER_STREAMS,
	      (unsigned long long)n->egress_quiet);
	n->said_dropped = n->mux.dropped;
	n->said_resets = n->mux.resets;
	n->said_refused = n->mux.refused_opens;
	n->said_quiet = n->egress_quiet;
	n->said_at = now;
}

/* ---- the process ---- */

static int net_loop(struct net *n)
{
	static struct pollfd p[NET_POLL_MAX];

	for (;;) {
		int k = 0, tmo = 1000, ctl_at, cl_at, pv_at, gate_at, proxy_at, relay_at, mux_at, r;

		ctl_at = k;
		p[k++] = (struct pollfd){ n->ctl, POLLIN, 0 };
		cl_at = k;
		for (size_t i = 0; i < NET_MAX_CLIENTS; i++)
			p[k++] = (struct pollfd){ n->cl[i].fd, POLLIN, 0 };
		pv_at = k;
		for (size_t i = 0; i < n->npv; i++)
			p[k++] = (struct pollfd){ pisb_mux_full(&n->mux) ? -1 : n->pv[i].lfd, POLLIN, 0 };
		gate_at = k;
		if (n->gate)
			k += pisb_gate_pollfds(n->gate, p + k, NET_POLL_MAX - k, &tmo);
		proxy_at = k;
		if (n->proxy)
			k += pisb_proxy_pollfds(n->proxy, p + k, NET_PROXY_FDS, &tmo);
		relay_at = k;
		k += pisb_relay_pollfds(n->relay, p + k, 512, &tmo);
		mux_at = k;
		k += pisb_mux_pollfds(&n->mux, p + k, NET_POLL_MAX - k);
		r = poll(p, (nfds_t)k, tmo);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r <= 0) {
			/* the proxy's deadlines (a request that never came) */
			if (n->proxy)
				pisb_proxy_poll(n->proxy, p + proxy_at, 0);
			say_drops(n);
			continue;
		}
		if (pisb_mux_poll(&n->mux, p + mux_at, k - mux_at) < 0) {
			logf_(n, "net: the VM closed the net port: the relay ends");
			return 0;
		}
		pisb_relay_poll(n->relay, p + relay_at, mux_at - relay_at);
		if (n->proxy)
			pisb_proxy_poll(n->proxy, p + proxy_at, relay_at - proxy_at);
		if (n->gate)
			pisb_gate_poll(n->gate, p + gate_at, relay_at - gate_at);
		for (size_t i = 0; i < n->npv; i++)
			if (p[pv_at + (int)i].revents & POLLIN)
				accept_preview(n, &n->pv[i]);
		for (size_t i = 0; i < NET_MAX_CLIENTS; i++)
			if (n->cl[i].fd >= 0 && p[cl_at + (int)i].revents)
				client_read(n, &n->cl[i]);
		if (p[ctl_at].revents & POLLIN)
			accept_client(n);
		say_drops(n);
	}
}

/* The child: its own fds only (idir, the log, the ready pipe). */
static void __attribute__((noreturn)) net_main(int idir, const char *name, const struct pisb_config *cfg,
					       int ready)
{
	static struct net n;
	int port = -1, lock;
	struct pisb_err e = PISB_ERR_INIT;

	struct stat sb;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	/* the proxy's resolvers (proxy.c) are reaped by the kernel */
	signal(SIGCHLD, SIG_IGN);
	memset(&n, 0, sizeof(n));
	n.idir = idir;
	n.name = name;
	n.log = openat(idir, "net.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (n.log >= 0 && fstat(n.log, &sb) == 0)
		n.log_size = sb.st_size;
	for (size_t i = 0; i < NET_MAX_CLIENTS; i++)
		n.cl[i].fd = -1;
	/* the net port is ours alone while the VM runs */
	lock = pisb_lock_acquire(idir, "agent5.lock", true, 5000, "the VM's net port", &e);
	for (int tries = 0; lock >= 0 && port < 0 && tries < 50; tries++) {
		port = vm_agent_connect(idir, PISB_VM_NET_PORT);
		if (port < 0)
			pisb_sleep_ms(100);
	}
	if (lock < 0 || port < 0 || (n.ctl = pisb_control_listen(idir, 16)) < 0) {
		logf_(&n, "net: cannot start: %s", lock < 0 ? e.msg : strerror(errno));
		_exit(1);
	}
	pisb_mux_init(&n.mux, port, true);
	n.mux.refused = refused;
	n.mux.accept = egress_accept;
	n.mux.arg = &n;
	pisb_mux_hello(&n.mux);
	n.relay = pisb_relay_new();
	if (cfg->nallowed_hosts) {
		n.proxy = pisb_proxy_new(-1, cfg->allowed_hosts, cfg->nallowed_hosts, name, n.relay);
		pisb_proxy_set_log(n.proxy, egress_log, &n);
	}
	if (cfg->preview_token) {
		n.token = pisb_preview_token(idir);
		if (!n.token) {
			logf_(&n, "net: no preview token (%s): previews stay closed", strerror(errno));
			_exit(1);
		}
		n.gate = pisb_gate_new(n.relay, gate_admit, &n);
	}
	load(&n);
	for (size_t i = 0; i < n.npv; i++)
		open_listener(&n, &n.pv[i]);
	publish(&n);
	(void)!write(ready, "r", 1);
	close(ready);
	logf_(&n, "net: relay up, %zu previews%s", n.npv,
	      n.proxy ? ", the egress proxy on the guest's 127.0.0.1:3128" : "");
	_exit(net_loop(&n) < 0 ? 1 : 0);
}

pid_t vm_net_start(int idir, const char *name, const struct pisb_config *cfg)
{
	int p[2];
	pid_t pid, parent = getpid();
	char c;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		/* only the instance dir and the pipe: the supervisor's
		 * controller.lock and QEMU's sockets stay the supervisor's */
		int d = fcntl(idir, F_DUPFD_CLOEXEC, 3);
		if (d != 3) {
			dup3(d, 3, O_CLOEXEC);
			close(d);
		}
		dup3(p[1], 4, O_CLOEXEC);
		pisb_close_from(5, -1);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		net_main(3, name, cfg, 4);
	}
	close(p[1]);
	/* ready once status.json shows the previews (or it died) */
	{
		struct pollfd w = { p[0], POLLIN, 0 };
		if (poll(&w, 1, 10000) == 1)
			(void)!read(p[0], &c, 1);
	}
	close(p[0]);
	return pid;
}

void vm_net_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}
