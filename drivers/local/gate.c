/* gate.c - the preview token check (gate.h). */
#include "gate.h"
#include "relay.h"
#include "util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct conn {
	int fd;
	int port;
	void *tag;
	char token[80];
	char buf[PISB_GATE_HEAD_MAX];
	size_t len;
	int64_t deadline;
	int idx;
	struct conn *next;
};

struct pisb_gate {
	struct pisb_relay *relay;
	pisb_gate_admit_fn *admit;
	void *arg;
	struct conn *head;
	size_t n;
};

struct pisb_gate *pisb_gate_new(struct pisb_relay *relay, pisb_gate_admit_fn *admit, void *arg)
{
	struct pisb_gate *g = xcalloc(1, sizeof(*g));

	g->relay = relay;
	g->admit = admit;
	g->arg = arg;
	return g;
}

static void unlink_conn(struct pisb_gate *g, struct conn *c)
{
	for (struct conn **pp = &g->head; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			g->n--;
			return;
		}
}

void pisb_gate_free(struct pisb_gate *g)
{
	if (!g)
		return;
	while (g->head) {
		struct conn *c = g->head;
		g->head = c->next;
		close(c->fd);
		free(c);
	}
	free(g);
}

static void reject(struct pisb_gate *g, struct conn *c, int code, const char *reason, const char *body)
{
	_cleanup_free_ char *msg = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
					     "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
					     code, reason, strlen(body), body);
	unlink_conn(g, c);
	pisb_relay_reject(g->relay, c->fd, msg, strlen(msg), c->tag);
	free(c);
}

void pisb_gate_add(struct pisb_gate *g, int fd, const char *token, int port, void *tag)
{
	struct conn *c;

	if (g->n >= PISB_GATE_MAX) {
		close(fd);
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->fd = fd;
	c->port = port;
	c->tag = tag;
	snprintf(c->token, sizeof(c->token), "%s", token);
	c->deadline = pisb_mono_ms() + PISB_GATE_TIMEOUT_MS;
	c->next = g->head;
	g->head = c;
	g->n++;
}

void pisb_gate_drop_tag(struct pisb_gate *g, const void *tag)
{
	for (struct conn **pp = &g->head; *pp;) {
		struct conn *c = *pp;
		if (c->tag != tag) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		g->n--;
		close(c->fd);
		free(c);
	}
}

static bool same(const char *a, size_t al, const char *b)
{
	size_t bl = strlen(b);
	unsigned char d = al != bl;

	for (size_t i = 0; i < al && i < bl; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* The value of NAME=VALUE in s[0..n) where pairs are split by any of seps. */
static bool find_pair(const char *s, size_t n, const char *name, const char *seps,
		      const char **val, size_t *vlen)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i + nl < n; i++) {
		if ((i == 0 || strchr(seps, s[i - 1])) && !memcmp(s + i, name, nl) && s[i + nl] == '=') {
			size_t j = i + nl + 1, k = j;
			while (k < n && !strchr(seps, s[k]) && s[k] != '\r' && s[k] != '\n' && s[k] != ' ')
				k++;
			*val = s + j;
			*vlen = k - j;
			return true;
		}
	}
	return false;
}

/* A header's value (case-insensitive name) in the head; the line's rest. */
static bool header(const char *h, size_t n, const char *name, const char **val, size_t *vlen)
{
	size_t nl = strlen(name);
	const char *p = memchr(h, '\n', n), *end = h + n;

	while (p && p + 1 < end) {
		const char *line = p + 1, *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			return false;
		if ((size_t)(eol - line) > nl && !strncasecmp(line, name, nl) && line[nl] == ':') {
			const char *v = line + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			*val = v;
			*vlen = (size_t)(eol - v) - (eol > v && eol[-1] == '\r');
			return true;
		}
		p = eol;
	}
	return false;
}

static void judge(struct pisb_gate *g, struct conn *c, size_t head_len)
{
	const char *line_end = memchr(c->buf, '\n', head_len), *sp1, *sp2, *q, *v;
	size_t vl;
	char cookie[32];

	sp1 = memchr(c->buf, ' ', (size_t)(line_end - c->buf));
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1)) : NULL;
	if (!sp1 || !sp2) {
		reject(g, c, 400, "Bad Request", "pisb preview: malformed request line\n");
		return;
	}
	/* ?pisb_token=T: set the cookie, send the browser back without it */
	q = memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1));
	if (q && find_pair(q + 1, (size_t)(sp2 - q - 1), "pisb_token", "&", &v, &vl)) {
		struct pisb_buf loc = PISB_BUF_INIT, msg = PISB_BUF_INIT;
		const char *qs = q + 1, *qe = sp2;

		if (!same(v, vl, c->token)) {
			reject(g, c, 403, "Forbidden", "pisb preview: wrong pisb_token\n");
			return;
		}
		pisb_buf_add(&loc, sp1 + 1, (size_t)(q - sp1 - 1));
		/* the query without pisb_token=... */
		{
			bool first = true;
			const char *s = qs;
			while (s < qe) {
				const char *amp = memchr(s, '&', (size_t)(qe - s));
				const char *e = amp ? amp : qe;
				if (!((size_t)(e - s) >= 11 && !memcmp(s, "pisb_token=", 11))) {
					pisb_buf_addc(&loc, first ? '?' : '&');
					pisb_buf_add(&loc, s, (size_t)(e - s));
					first = false;
				}
				s = amp ? amp + 1 : qe;
			}
		}
		pisb_buf_addf(&msg, "HTTP/1.1 303 See Other\r\nLocation: %.*s\r\n"
			      "Set-Cookie: pisb_token_%d=%s; Path=/; HttpOnly; SameSite=Strict\r\n"
			      "Content-Length: 0\r\nConnection: close\r\n\r\n",
			      (int)loc.len, loc.s, c->port, c->token);
		unlink_conn(g, c);
		pisb_relay_reject(g->relay, c->fd, msg.s, msg.len, c->tag);
		free(c);
		pisb_buf_release(&loc);
		pisb_buf_release(&msg);
		return;
	}
	snprintf(cookie, sizeof(cookie), "pisb_token_%d", c->port);
	if ((header(c->buf, head_len, "Cookie", &v, &vl) &&
	     find_pair(v, vl, cookie, "; ", &v, &vl) && same(v, vl, c->token)) ||
	    (header(c->buf, head_len, "X-Pisb-Token", &v, &vl) && same(v, vl, c->token))) {
		unlink_conn(g, c);
		g->admit(g->arg, c->tag, c->fd, c->buf, c->len);
		free(c);
		return;
	}
	reject(g, c, 403, "Forbidden",
	       "pisb preview: this preview needs its token (open the URL that 'pisb inspect' shows, "
	       "with ?pisb_token=..., or send the X-Pisb-Token header)\n");
}

int pisb_gate_pollfds(struct pisb_gate *g, struct pollfd *p, int max, int *timeout_ms)
{
	int n = 0;
	int64_t now = pisb_mono_ms();

	for (struct conn *c = g->head; c; c = c->next) {
		c->idx = -1;
		if (n >= max)
			continue;
		p[n] = (struct pollfd){ c->fd, POLLIN, 0 };
		c->idx = n++;
		if (*timeout_ms < 0 || c->deadline - now < *timeout_ms)
			*timeout_ms = c->deadline > now ? (int)(c->deadline - now) : 0;
	}
	return n;
}

void pisb_gate_poll(struct pisb_gate *g, struct pollfd *p, int n)
{
	int64_t now = pisb_mono_ms();
	struct conn *next;

	for (struct conn *c = g->head; c; c = next) {
		next = c->next;
		if (c->idx >= 0 && c->idx < n && p[c->idx].fd == c->fd && p[c->idx].revents) {
			ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
			char *end;
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0) {
				unlink_conn(g, c);
				close(c->fd);
				free(c);
				continue;
			}
			c->len += (size_t)r;
			end = memmem(c->buf, c->len, "\r\n\r\n", 4);
			if (end) {
				judge(g, c, (size_t)(end - c->buf) + 4);
				continue;
			}
			if (c->len == sizeof(c->buf)) {
				reject(g, c, 431, "Request Header Fields Too Large", "pisb preview: request head too large\n");
				continue;
			}
		} else if (now >= c->deadline) {
			reject(g, c, 408, "Request Timeout", "pisb preview: no request head in time\n");
		}
	}
}
