/* relay.c - plain TCP relay with careful half-close handling (relay.h). */
#include "relay.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Pipe size per direction: bigger pipes mean fewer wake-ups per byte.
 * Pages are only used while data sits in the pipe. */
#define RELAY_PIPE_BYTES (1024 * 1024)
/* Work done for one connection per wake-up, so others are not starved. */
#define RELAY_ROUNDS 8
/* Empty pipes kept for the next connections (creating and sizing two
 * pipes is six system calls). */
#define RELAY_PIPE_CACHE 64

struct dir {
	int p[2];           /* the pipe: p[0] read end, p[1] write end */
	size_t inpipe, cap; /* bytes in the pipe, its capacity */
	char *pre;          /* bytes to send before anything else */
	size_t pre_len, pre_off;
	bool eof;           /* nothing more will come from the source */
	bool shut;          /* done: EOF forwarded (or nowhere to forward it) */
	bool discard;       /* the destination is gone: read and drop */
	bool dirty;         /* the pipe may hold bytes that were dropped */
};

struct conn {
	int fd[2];          /* a, b (b is -1 once a connect failed) */
	struct dir d[2];    /* d[0]: a -> b, d[1]: b -> a */
	bool connecting;
	char *fail;
	size_t fail_len;
	int64_t linger_until;
	int idx[2];         /* pollfd slots at the last pisb_relay_pollfds */
	const void *tag;
	void (*on_fail)(void *arg, const void *tag);
	void *arg;
	struct conn *prev, *next;
};

struct cached_pipe {
	int p[2];
	size_t cap;
};

struct pisb_relay {
	struct conn *head;
	size_t n;
	struct cached_pipe cache[RELAY_PIPE_CACHE];
	size_t ncache;
};

static char scratch[65536];

struct pisb_relay *pisb_relay_new(void)
{
	return xcalloc(1, sizeof(struct pisb_relay));
}

/* Close d's pipe, or keep it for another connection (r not NULL) if it is
 * surely empty. */
static void dir_release(struct pisb_relay *r, struct dir *d)
{
	if (r && d->p[0] >= 0 && !d->dirty && d->inpipe == 0 && r->ncache < RELAY_PIPE_CACHE) {
		struct cached_pipe *cp = &r->cache[r->ncache++];
		cp->p[0] = d->p[0];
		cp->p[1] = d->p[1];
		cp->cap = d->cap;
	} else {
		if (d->p[0] >= 0)
			close(d->p[0]);
		if (d->p[1] >= 0)
			close(d->p[1]);
	}
	d->p[0] = d->p[1] = -1;
	free(d->pre);
	d->pre = NULL;
}

static void conn_close(struct pisb_relay *r, struct conn *c)
{
	for (int i = 0; i < 2; i++) {
		if (c->fd[i] >= 0)
			close(c->fd[i]);
		dir_release(r, &c->d[i]);
	}
	free(c->fail);
	if (c->prev)
		c->prev->next = c->next;
	else
		r->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	r->n--;
	free(c);
}

void pisb_relay_free(struct pisb_relay *r)
{
	if (!r)
		return;
	while (r->head)
		conn_close(r, r->head);
	while (r->ncache) {
		struct cached_pipe *cp = &r->cache[--r->ncache];
		close(cp->p[0]);
		close(cp->p[1]);
	}
	free(r);
}

size_t pisb_relay_count(const struct pisb_relay *r)
{
	return r ? r->n : 0;
}

void pisb_relay_close_tag(struct pisb_relay *r, const void *tag)
{
	struct conn *c = r->head, *next;

	for (; c; c = next) {
		next = c->next;
		if (c->tag == tag)
			conn_close(r, c);
	}
}

static int dir_pipe(struct pisb_relay *r, struct dir *d)
{
	int sz;

	if (r->ncache) {
		struct cached_pipe *cp = &r->cache[--r->ncache];
		d->p[0] = cp->p[0];
		d->p[1] = cp->p[1];
		d->cap = cp->cap;
		return 0;
	}
	if (pipe2(d->p, O_CLOEXEC | O_NONBLOCK) < 0) {
		d->p[0] = d->p[1] = -1;
		return -1;
	}
	/* may fail past the user's pipe quota: the default size still works */
	sz = fcntl(d->p[1], F_SETPIPE_SZ, RELAY_PIPE_BYTES);
	if (sz <= 0)
		sz = fcntl(d->p[1], F_GETPIPE_SZ);
	d->cap = sz > 0 ? (size_t)sz : 65536;
	return 0;
}

static struct conn *conn_new(struct pisb_relay *r, int a, int b, const void *tag)
{
	struct conn *c = xcalloc(1, sizeof(*c));

	c->fd[0] = a;
	c->fd[1] = b;
	c->idx[0] = c->idx[1] = -1;
	for (int i = 0; i < 2; i++)
		c->d[i].p[0] = c->d[i].p[1] = -1;
	c->tag = tag;
	c->next = r->head;
	if (r->head)
		r->head->prev = c;
	r->head = c;
	r->n++;
	return c;
}

static void set_pre(struct dir *d, const void *p, size_t n)
{
	if (!n)
		return;
	d->pre = xmalloc(n);
	memcpy(d->pre, p, n);
	d->pre_len = n;
	d->pre_off = 0;
}

/* Finish a connect in progress: 0 connected, 1 still waiting, -1 failed. */
static int finish_connect(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == EINPROGRESS || err == EALREADY)
		return 1;
	if (err)
		return -1;
	c->connecting = false;
	return 0;
}

static void become_reject(struct conn *c, const char *msg, size_t n);
static void pump(struct conn *c, int j, bool readable);

int pisb_relay_add(struct pisb_relay *r, int a, int b,
		   const struct pisb_relay_opts *o)
{
	struct conn *c = conn_new(r, a, b, o->tag);

	if (dir_pipe(r, &c->d[0]) < 0 || dir_pipe(r, &c->d[1]) < 0) {
		conn_close(r, c);
		return -1;
	}
	set_pre(&c->d[0], o->to_b, o->to_b_len);
	set_pre(&c->d[1], o->to_a, o->to_a_len);
	c->connecting = o->b_connecting;
	c->on_fail = o->on_fail;
	c->arg = o->arg;
	if (o->fail) {
		c->fail = xstrdup(o->fail);
		c->fail_len = strlen(o->fail);
	}
	/* A loopback connect is often complete already, and the peer's first
	 * bytes (a request) waiting: move them now, not one wake-up later. */
	if (c->connecting) {
		struct pollfd p = { b, POLLOUT, 0 };
		if (poll(&p, 1, 0) != 1 || finish_connect(c) > 0)
			return 0;
		if (c->connecting) {
			if (c->on_fail)
				c->on_fail(c->arg, c->tag);
			if (!c->fail) {
				conn_close(r, c);
				return 0;
			}
			become_reject(c, c->fail, c->fail_len);
		}
	}
	/* b has said nothing yet, as far as we know: poll tells */
	pump(c, 0, true);
	pump(c, 1, false);
	return 0;
}

/* b is gone before it ever answered: a gets msg (or nothing), then EOF. */
static void become_reject(struct conn *c, const char *msg, size_t n)
{
	if (c->fd[1] >= 0)
		close(c->fd[1]);
	c->fd[1] = -1;
	c->connecting = false;
	dir_release(NULL, &c->d[0]);
	dir_release(NULL, &c->d[1]);
	c->d[0].discard = true;
	c->d[0].inpipe = c->d[1].inpipe = 0;
	c->d[1].eof = true;
	set_pre(&c->d[1], msg, n);
}

void pisb_relay_reject(struct pisb_relay *r, int a, const char *msg, size_t n,
		       const void *tag)
{
	struct conn *c = conn_new(r, a, -1, tag);

	become_reject(c, msg, n);
}

/* Direction j can no longer write (its destination closed or reset):
 * what its source still sends is read and dropped. */
static void dst_gone(struct conn *c, int j)
{
	c->d[j].discard = true;
	c->d[j].dirty |= c->d[j].inpipe > 0;
	c->d[j].inpipe = 0;
}

/* Move what can be moved in direction j without blocking.  readable: poll
 * said the source has something (or was not asked: a full pipe); else it
 * is not read (what comes after the poll wakes us again: a request
 * relayed took two reads of a source with nothing).  A source is read
 * until it has nothing, not until a short read: the rest of a response is
 * often its end (the server's close), forwarded in the same turn. */
static void pump(struct conn *c, int j, bool readable)
{
	struct dir *d = &c->d[j];
	int src = c->fd[j], dst = c->fd[1 - j];
	bool drained = !readable && d->inpipe < d->cap;

	for (int round = 0; round < RELAY_ROUNDS; round++) {
		bool progress = false;
		ssize_t n;

		while (!d->discard && d->pre_off < d->pre_len) {
			n = send(dst, d->pre + d->pre_off, d->pre_len - d->pre_off, MSG_NOSIGNAL);
			if (n > 0) {
				d->pre_off += (size_t)n;
				progress = true;
			} else {
				if (n < 0 && errno != EAGAIN && errno != EINTR)
					dst_gone(c, j);
				break;
			}
		}
		if (!d->eof && src >= 0 && !drained) {
			if (d->discard) {
				n = read(src, scratch, sizeof(scratch));
				if (n > 0)
					progress = true;
				else if (n == 0 || (errno != EAGAIN && errno != EINTR))
					d->eof = true;
				drained = n < 0;
			} else if (d->inpipe < d->cap) {
				n = splice(src, NULL, d->p[1], NULL, d->cap - d->inpipe,
					   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
				if (n > 0) {
					d->inpipe += (size_t)n;
					progress = true;
				} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
					/* EOF, or a reset: what came before it still goes out */
					d->eof = true;
				}
				drained = n < 0;
			}
		}
		if (!d->discard && d->pre_off == d->pre_len && d->inpipe > 0) {
			n = splice(d->p[0], NULL, dst, NULL, d->inpipe,
				   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
			if (n > 0) {
				d->inpipe -= (size_t)n;
				progress = true;
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				dst_gone(c, j);
			}
		}
		if (!progress)
			break;
	}
	/* forward EOF only once everything read before it is written */
	if (d->eof && !d->shut && (d->discard || (d->inpipe == 0 && d->pre_off == d->pre_len))) {
		if (!d->discard && dst >= 0)
			shutdown(dst, SHUT_WR);
		d->shut = true;
	}
}

/* run at every turn of an idle controller's loop, after its trim too:
 * beside the rest of that loop (PISB_IDLE_PATH), not on a page of its own
 * that the fault would map with 15 neighbours */
PISB_IDLE_PATH int pisb_relay_pollfds(struct pisb_relay *r, struct pollfd *p, int max,
				      int *timeout_ms)
{
	int n = 0;
	int64_t now = 0;

	for (struct conn *c = r->head; c; c = c->next) {
		c->idx[0] = c->idx[1] = -1;
		if (n + 2 > max)
			continue;
		for (int i = 0; i < 2; i++) {
			short ev = 0;
			const struct dir *in = &c->d[i], *out = &c->d[1 - i];

			if (c->fd[i] < 0) {
				ev = 0;
			} else if (c->connecting) {
				ev = i == 1 ? POLLOUT : 0;
			} else {
				if (!in->eof && (in->discard || in->inpipe < in->cap))
					ev |= POLLIN;
				if (!out->discard && !out->shut &&
				    (out->pre_off < out->pre_len || out->inpipe > 0))
					ev |= POLLOUT;
			}
			/* an fd with nothing wanted is left out: POLLHUP would
			 * otherwise wake us for nothing, over and over */
			p[n] = (struct pollfd){ ev ? c->fd[i] : -1, ev, 0 };
			c->idx[i] = n++;
		}
		if (c->linger_until) {
			if (!now)
				now = pisb_mono_ms();
			int64_t left = c->linger_until - now;
			if (left < 0)
				left = 0;
			if (left < *timeout_ms || *timeout_ms < 0)
				*timeout_ms = (int)left;
		}
	}
	return n;
}

void pisb_relay_poll(struct pisb_relay *r, struct pollfd *p, int n)
{
	struct conn *c, *next;
	int64_t now = pisb_mono_ms();

	for (c = r->head; c; c = next) {
		short rev[2] = { 0, 0 };
		/* a was not polled while b connected: it may hold a request */
		bool connected = false;

		next = c->next;
		for (int i = 0; i < 2; i++)
			if (c->idx[i] >= 0 && c->idx[i] < n && p[c->idx[i]].fd == c->fd[i] && c->fd[i] >= 0)
				rev[i] = p[c->idx[i]].revents;
		if (c->connecting && rev[1]) {
			int st = finish_connect(c);
			connected = true;
			if (st < 0) {
				if (c->on_fail)
					c->on_fail(c->arg, c->tag);
				if (!c->fail) {
					conn_close(r, c);
					continue;
				}
				become_reject(c, c->fail, c->fail_len);
			}
		}
		if (!c->connecting && (rev[0] || rev[1])) {
			pump(c, 0, connected || (rev[0] & (POLLIN | POLLHUP | POLLERR)));
			pump(c, 1, rev[1] & (POLLIN | POLLHUP | POLLERR));
		}
		if (c->d[0].shut && c->d[1].shut) {
			conn_close(r, c);
			continue;
		}
		if (c->d[0].discard && c->d[1].discard) {
			/* neither side can take anything: nothing left to do */
			conn_close(r, c);
			continue;
		}
		if (!c->linger_until && ((c->d[0].shut && c->d[1].discard) ||
					 (c->d[1].shut && c->d[0].discard)))
			c->linger_until = now + PISB_RELAY_LINGER_MS;
		if (c->linger_until && now >= c->linger_until)
			conn_close(r, c);
	}
}
