/* vm_mux.c - TCP streams over the net port, both ends (vm_mux.h). */
#include "vm_mux.h"
#include "vm_proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <fcntl.h>

#define RX_CAP (2 * (PISB_VM_HDR + PISB_MUX_CHUNK))

static void *mux_alloc(size_t n)
{
	void *p = calloc(1, n);

	if (!p)
		abort();
	return p;
}

void pisb_mux_init(struct pisb_mux *m, int port, bool host)
{
	memset(m, 0, sizeof(*m));
	m->port = port;
	m->host = host;
	m->next_id = host ? 1 : 2;
	m->rx = mux_alloc(RX_CAP);
	m->tx_cap = PISB_MUX_OUT_HIGH + PISB_VM_HDR + PISB_MUX_CHUNK;
	m->tx = mux_alloc(m->tx_cap);
	if (port >= 0)
		fcntl(port, F_SETFL, fcntl(port, F_GETFL) | O_NONBLOCK);
}

/* ---- the port's output: frames, bounded (vm_mux.h) ---- */

static size_t tx_pending(const struct pisb_mux *m)
{
	return m->tx_len - m->tx_off;
}

/* Room for n more bytes at the end of tx.  Data is only queued below
 * PISB_MUX_OUT_HIGH; control frames (at most a few per stream) may go
 * past it, so tx grows for them. */
static unsigned char *tx_room(struct pisb_mux *m, size_t n)
{
	if (m->tx_off && m->tx_len + n > m->tx_cap) {
		memmove(m->tx, m->tx + m->tx_off, tx_pending(m));
		m->tx_len -= m->tx_off;
		m->tx_off = 0;
	}
	if (m->tx_len + n > m->tx_cap) {
		size_t cap = m->tx_cap * 2 > m->tx_len + n ? m->tx_cap * 2 : m->tx_len + n;
		unsigned char *t = realloc(m->tx, cap);
		if (!t)
			abort();
		m->tx = t;
		m->tx_cap = cap;
	}
	return m->tx + m->tx_len;
}

static void frame(struct pisb_mux *m, int type, uint32_t id, const void *p, size_t n)
{
	unsigned char *d = tx_room(m, PISB_VM_HDR + n);

	pisb_vm_hdr(d, type, id, (uint32_t)n);
	if (n)
		memcpy(d + PISB_VM_HDR, p, n);
	m->tx_len += PISB_VM_HDR + n;
}

static void flush_port(struct pisb_mux *m)
{
	while (m->port >= 0 && tx_pending(m)) {
		ssize_t n = write(m->port, m->tx + m->tx_off, tx_pending(m));
		if (n <= 0)
			break;
		m->tx_off += (size_t)n;
	}
	if (m->tx_off == m->tx_len)
		m->tx_off = m->tx_len = 0;
}

/* ---- streams ---- */

static struct pisb_mux_stream *find(const struct pisb_mux *m, uint32_t id)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->s[i]->id == id)
			return m->s[i];
	return NULL;
}

static struct pisb_mux_stream *stream_new(struct pisb_mux *m, uint32_t id, int fd)
{
	struct pisb_mux_stream *s;

	if (m->n >= PISB_MUX_MAX_STREAMS)
		return NULL;
	s = mux_alloc(sizeof(*s));
	s->id = id;
	s->fd = fd;
	s->credit = PISB_MUX_WINDOW;
	s->pidx = -1;
	m->s[m->n++] = s;
	return s;
}

static void stream_free(struct pisb_mux *m, struct pisb_mux_stream *s)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->s[i] == s) {
			m->s[i] = m->s[--m->n];
			break;
		}
	if (s->fd >= 0)
		close(s->fd);
	free(s->in);
	free(s);
}

static void rst(struct pisb_mux *m, struct pisb_mux_stream *s, int why)
{
	unsigned char w = (unsigned char)why;

	frame(m, PISB_VM_NRST, s->id, &w, 1);
	stream_free(m, s);
}

bool pisb_mux_full(const struct pisb_mux *m)
{
	return m->n >= PISB_MUX_MAX_STREAMS;
}

struct pisb_mux_stream *pisb_mux_open(struct pisb_mux *m, int fd, unsigned port,
				      const void *head, size_t hlen)
{
	struct pisb_mux_stream *s;
	unsigned char p[2] = { (unsigned char)port, (unsigned char)(port >> 8) };

	if (hlen > PISB_MUX_CHUNK || !(s = stream_new(m, m->next_id, fd)))
		return NULL;
	m->next_id += 2;
	frame(m, PISB_VM_NOPEN, s->id, p, 2);
	if (hlen) {
		frame(m, PISB_VM_NDATA, s->id, head, hlen);
		s->credit -= (uint32_t)hlen;
	}
	flush_port(m);
	return s;
}

void pisb_mux_reset_all(struct pisb_mux *m)
{
	while (m->n)
		stream_free(m, m->s[m->n - 1]);
	m->rx_len = 0;
	m->tx_off = m->tx_len = 0;
	m->peer_next = 0;
}

void pisb_mux_hello(struct pisb_mux *m)
{
	unsigned char w = PISB_MUX_RST_RESET;

	frame(m, PISB_VM_NRST, 0, &w, 1);
	flush_port(m);
}

void pisb_mux_release(struct pisb_mux *m)
{
	pisb_mux_reset_all(m);
	free(m->rx);
	free(m->tx);
	m->rx = m->tx = NULL;
}

/* Give back what was written locally, in batches. */
static void give_credit(struct pisb_mux *m, struct pisb_mux_stream *s)
{
	unsigned char c[4];

	if (!s->owed || (s->owed < PISB_MUX_CHUNK && s->in_len))
		return;
	pisb_vm_put32(c, s->owed);
	frame(m, PISB_VM_NCREDIT, s->id, c, 4);
	s->owed = 0;
}

/* A stream whose two directions are done goes.  1 when freed. */
static int maybe_done(struct pisb_mux *m, struct pisb_mux_stream *s)
{
	if (s->eof_sent && s->wr_shut && !s->in_len) {
		give_credit(m, s);
		stream_free(m, s);
		return 1;
	}
	return 0;
}

/* peer -> local: write what is buffered; 1 when the stream went */
static int write_local(struct pisb_mux *m, struct pisb_mux_stream *s)
{
	while (s->in_len && s->fd >= 0) {
		ssize_t n = send(s->fd, s->in + s->in_off, s->in_len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			rst(m, s, PISB_MUX_RST_RESET);
			return 1;
		}
		s->in_off += (size_t)n;
		s->in_len -= (size_t)n;
		s->owed += (uint32_t)n;
	}
	if (!s->in_len)
		s->in_off = 0;
	give_credit(m, s);
	if (s->peer_eof && !s->in_len && !s->wr_shut) {
		shutdown(s->fd, SHUT_WR);
		s->wr_shut = true;
	}
	return maybe_done(m, s);
}

/* local -> peer: read within the credit while the port's queue is short */
static int read_local(struct pisb_mux *m, struct pisb_mux_stream *s)
{
	while (!s->rd_eof && s->credit && tx_pending(m) < PISB_MUX_OUT_HIGH) {
		size_t want = s->credit < PISB_MUX_CHUNK ? s->credit : PISB_MUX_CHUNK;
		unsigned char *d = tx_room(m, PISB_VM_HDR + want);
		ssize_t n = recv(s->fd, d + PISB_VM_HDR, want, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			rst(m, s, PISB_MUX_RST_RESET);
			return 1;
		}
		if (n == 0) {
			s->rd_eof = s->eof_sent = true;
			frame(m, PISB_VM_NEOF, s->id, NULL, 0);
			return maybe_done(m, s);
		}
		pisb_vm_hdr(d, PISB_VM_NDATA, s->id, (uint32_t)n);
		m->tx_len += PISB_VM_HDR + (size_t)n;
		s->credit -= (uint32_t)n;
	}
	return 0;
}

/* guest: a connect in progress finished (POLLOUT) */
static int connected(struct pisb_mux *m, struct pisb_mux_stream *s)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == EINPROGRESS || err == EALREADY)
		return 0;
	if (err) {
		rst(m, s, PISB_MUX_RST_REFUSED);
		return 1;
	}
	s->connecting = false;
	frame(m, PISB_VM_NDATA, s->id, NULL, 0);   /* connected */
	return write_local(m, s);
}

/* ---- frames from the peer: hostile input ---- */

size_t pisb_mux_opened(const struct pisb_mux *m)
{
	size_t k = 0;

	for (size_t i = 0; i < m->n; i++)
		k += (m->s[i]->id & 1) == (m->host ? 1u : 0u);
	return k;
}

/* how many open streams the peer opened (ids of its parity) */
static size_t peer_streams(const struct pisb_mux *m)
{
	return m->n - pisb_mux_opened(m);
}

static void on_open(struct pisb_mux *m, uint32_t id, const unsigned char *p, uint32_t len)
{
	struct pisb_mux_stream *s;
	bool pending = false;
	unsigned port;
	int fd = -1;

	/* only the other side's ids, each once, in increasing order */
	if (len != 2 || (id & 1) != (m->host ? 0u : 1u) || id < m->peer_next || find(m, id) ||
	    !(m->host ? (void *)m->accept : (void *)m->connect)) {
		m->dropped++;
		return;
	}
	m->peer_next = (uint64_t)id + 2;
	port = (unsigned)p[0] | (unsigned)p[1] << 8;
	if (m->host) {
		/* the guest opens: bounded, and only what accept takes */
		if (peer_streams(m) < PISB_MUX_MAX_PEER_STREAMS && !pisb_mux_full(m))
			fd = m->accept(m->arg, port);
		if (fd < 0)
			m->refused_opens++;
	} else if (port) {
		fd = m->connect(m->arg, port, &pending);
	}
	if (fd < 0 || !(s = stream_new(m, id, fd))) {
		unsigned char w = PISB_MUX_RST_REFUSED;
		if (fd >= 0)
			close(fd);
		frame(m, PISB_VM_NRST, id, &w, 1);
		return;
	}
	s->connecting = pending;
	/* the guest's connect for a stream the host opened is done: news
	 * for the host's checks (a guest-opened stream needs none) */
	if (!pending && !m->host)
		frame(m, PISB_VM_NDATA, id, NULL, 0);
}

static void on_data(struct pisb_mux *m, struct pisb_mux_stream *s, const unsigned char *p, uint32_t len)
{
	if (s->peer_eof || (size_t)s->in_len + s->owed + len > PISB_MUX_WINDOW) {
		/* more than the window, or data after EOF */
		m->resets++;
		rst(m, s, PISB_MUX_RST_PROTOCOL);
		return;
	}
	if (!len) {
		/* the guest's connect succeeded (only ever news to the host) */
		if (m->host && !s->got_data && m->opened)
			m->opened(m->arg, s);
		s->got_data = true;
		return;
	}
	s->got_data = true;
	/* nothing waits before these bytes: straight to the local socket,
	 * and only what it does not take now is copied in */
	if (!s->in_len && !s->connecting && s->fd >= 0) {
		ssize_t n = send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			rst(m, s, PISB_MUX_RST_RESET);
			return;
		}
		if (n > 0) {
			s->owed += (uint32_t)n;
			p += n;
			len -= (uint32_t)n;
		}
		if (!len) {
			write_local(m, s);   /* the credit */
			return;
		}
	}
	if (!s->in)
		s->in = mux_alloc(PISB_MUX_WINDOW);
	if (s->in_off + s->in_len + len > PISB_MUX_WINDOW) {
		memmove(s->in, s->in + s->in_off, s->in_len);
		s->in_off = 0;
	}
	memcpy(s->in + s->in_off + s->in_len, p, len);
	s->in_len += len;
	if (!s->connecting)
		write_local(m, s);
}

static void on_frame(struct pisb_mux *m, int type, uint32_t id, const unsigned char *p, uint32_t len)
{
	struct pisb_mux_stream *s;

	if (type == PISB_VM_NOPEN) {
		on_open(m, id, p, len);
		return;
	}
	if (type == PISB_VM_NRST && id == 0) {
		/* the peer (re)started its end: none of our streams is known
		 * there, and its ids start again */
		while (m->n)
			stream_free(m, m->s[m->n - 1]);
		m->peer_next = 0;
		return;
	}
	if (!(s = find(m, id))) {
		m->dropped++;
		return;
	}
	switch (type) {
	case PISB_VM_NDATA:
		on_data(m, s, p, len);
		break;
	case PISB_VM_NEOF:
		s->peer_eof = true;
		if (!s->connecting)
			write_local(m, s);
		break;
	case PISB_VM_NRST:
		if (!s->got_data && m->refused && (id & 1) == (m->host ? 1u : 0u))
			m->refused(m->arg, s, len ? p[0] : PISB_MUX_RST_RESET);
		stream_free(m, s);
		break;
	case PISB_VM_NCREDIT: {
		uint32_t c = len == 4 ? pisb_vm_get32(p) : 0;
		if (!c || (uint64_t)s->credit + c > PISB_MUX_WINDOW) {
			m->resets++;
			rst(m, s, PISB_MUX_RST_PROTOCOL);
			break;
		}
		s->credit += c;
		break;
	}
	default:
		m->dropped++;
	}
}

/* The most a frame of type may carry; anything longer is noise. */
static uint32_t max_len(int type)
{
	switch (type) {
	case PISB_VM_NOPEN: return 2;
	case PISB_VM_NCREDIT: return 4;
	case PISB_VM_NRST: return 1;
	case PISB_VM_NEOF: return 0;
	default: return PISB_MUX_CHUNK;
	}
}

/* Parse what rx holds: every complete frame is handled, noise skipped
 * (to the next magic: each byte looked at a bounded number of times). */
static void parse(struct pisb_mux *m)
{
	size_t off = 0;

	while (m->rx_len - off >= PISB_VM_HDR) {
		const unsigned char *h = m->rx + off;
		uint32_t len = pisb_vm_get32(h + 12);

		if (memcmp(h, PISB_VM_MAGIC, 4) || len > max_len(h[4])) {
			const unsigned char *nx = memmem(h + 1, m->rx_len - off - 1, PISB_VM_MAGIC, 4);
			size_t to = nx ? (size_t)(nx - m->rx) : m->rx_len - 3;
			m->dropped += to - off;
			off = to;
			continue;
		}
		if (m->rx_len - off < PISB_VM_HDR + len)
			break;
		on_frame(m, h[4], pisb_vm_get32(h + 8), h + PISB_VM_HDR, len);
		off += PISB_VM_HDR + len;
	}
	if (off) {
		memmove(m->rx, m->rx + off, m->rx_len - off);
		m->rx_len -= off;
	}
}

/* Read what the port has into rx.  The guest's virtio port hands out
 * one of its page-sized buffers a read(); readv calls its read once an
 * iovec, on while each comes back full: page-sized iovecs take every
 * full buffer that waits in one call (on the host's socket it is one
 * read). */
static ssize_t read_rx(struct pisb_mux *m)
{
	struct iovec v[RX_CAP / 4096 + 1];
	size_t room = RX_CAP - m->rx_len, k = 0;

	for (size_t off = 0; off < room && k < sizeof(v) / sizeof(v[0]); k++) {
		size_t n = room - off < 4096 ? room - off : 4096;
		v[k] = (struct iovec){ m->rx + m->rx_len + off, n };
		off += n;
	}
	return readv(m->port, v, (int)k);
}

/* 0, or -1: the port is gone (host: QEMU; guest: no host connected) */
static int read_port(struct pisb_mux *m)
{
	for (int round = 0; round < 16; round++) {
		ssize_t n = read_rx(m);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		if (n == 0)
			return -1;
		m->rx_len += (size_t)n;
		parse(m);
		/* stop reading while the queue to the peer is long: what the
		 * peer sends makes us send (credit) */
		if (tx_pending(m) > 2 * PISB_MUX_OUT_HIGH)
			break;
	}
	return 0;
}

int pisb_mux_pollfds(struct pisb_mux *m, struct pollfd *p, int max)
{
	int n = 0;

	if (max < 1 || m->port < 0)
		return 0;
	p[n] = (struct pollfd){ m->port, POLLIN, 0 };
	if (tx_pending(m))
		p[n].events |= POLLOUT;
	if (tx_pending(m) > 2 * PISB_MUX_OUT_HIGH)
		p[n].events &= (short)~POLLIN;
	m->port_idx = n++;
	for (size_t i = 0; i < m->n; i++) {
		struct pisb_mux_stream *s = m->s[i];
		short ev = 0;

		s->pidx = -1;
		if (n >= max || s->fd < 0)
			continue;
		if (s->connecting)
			ev = POLLOUT;
		else {
			if (!s->rd_eof && s->credit && tx_pending(m) < PISB_MUX_OUT_HIGH)
				ev |= POLLIN;
			if (s->in_len)
				ev |= POLLOUT;
		}
		if (!ev)
			continue;
		p[n] = (struct pollfd){ s->fd, ev, 0 };
		s->pidx = n++;
	}
	return n;
}

int pisb_mux_poll(struct pisb_mux *m, struct pollfd *p, int n)
{
	struct pisb_mux_stream *ready[PISB_MUX_MAX_STREAMS];
	size_t nr = 0;

	if (m->port < 0)
		return -1;
	if (m->port_idx < n && (p[m->port_idx].revents & (POLLIN | POLLHUP | POLLERR))) {
		if (read_port(m) < 0) {
			pisb_mux_reset_all(m);
			return -1;
		}
	}
	/* the streams that polled ready (a frame above may have freed some:
	 * look them up by fd slot again) */
	for (size_t i = 0; i < m->n; i++) {
		struct pisb_mux_stream *s = m->s[i];
		if (s->pidx >= 0 && s->pidx < n && p[s->pidx].fd == s->fd && p[s->pidx].revents)
			ready[nr++] = s;
	}
	for (size_t k = 0; k < nr; k++) {
		struct pisb_mux_stream *s = ready[k];
		bool alive = false;
		for (size_t i = 0; i < m->n && !alive; i++)
			alive = m->s[i] == s;
		if (!alive)
			continue;
		if (s->connecting) {
			connected(m, s);
			continue;
		}
		if (s->in_len && write_local(m, s))
			continue;
		read_local(m, s);
	}
	flush_port(m);
	return 0;
}
