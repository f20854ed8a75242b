/* relay.h - a plain TCP relay for the controller's event loop.
 *
 * Each relayed connection joins two non-blocking sockets: a (the peer that
 * connected to us: a browser, a guest program using the proxy) and b (the
 * socket we opened: the service inside, the upstream server).  Bytes move
 * both ways through a pipe per direction (splice: no copies through user
 * space), whatever the protocol: HTTP with any framing, uploads, WebSockets.
 *
 * Closing follows TCP, so close-delimited responses are never cut short:
 *  - EOF from one side is forwarded with shutdown(SHUT_WR) only after every
 *    byte read before it has been written; the other direction goes on;
 *  - a socket that reports POLLHUP is still read until EOF (what it had
 *    buffered is delivered);
 *  - when one side cannot take more (it closed or reset), what the other
 *    side still sends is read and dropped, so that it never stalls on a
 *    full window and still receives the answer (an upload the service
 *    refused early); at most RELAY_LINGER_MS after that answer is through;
 *  - the connection closes when both directions are done.
 */
#ifndef PISB_RELAY_H
#define PISB_RELAY_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#define PISB_RELAY_LINGER_MS 2000

struct pisb_relay;

struct pisb_relay_opts {
	const void *to_a;    /* sent to a before anything from b (copied) */
	size_t to_a_len;
	const void *to_b;    /* sent to b before anything from a (copied) */
	size_t to_b_len;
	bool b_connecting;   /* b's connect() is still in progress */
	const char *fail;    /* sent to a if b's connect fails (copied), or NULL */
	const void *tag;     /* owner, for pisb_relay_close_tag() */
	/* called (before fail is sent) when b's connect fails */
	void (*on_fail)(void *arg, const void *tag);
	void *arg;
};

struct pisb_relay *pisb_relay_new(void);
/* Close every connection and free. */
void pisb_relay_free(struct pisb_relay *r);

/* Relay between a and b (both non-blocking; the relay owns them from now
 * on, and closes them even on failure).  Returns 0, or -1 (no pipes). */
int pisb_relay_add(struct pisb_relay *r, int a, int b,
		   const struct pisb_relay_opts *o);
/* Answer a with msg, then EOF, and close (a's input is read and dropped
 * meanwhile, so that it sees msg).  The relay owns a. */
void pisb_relay_reject(struct pisb_relay *r, int a, const char *msg, size_t n,
		       const void *tag);

/* Fill at most max pollfds (an fd of -1 for an idle side); may lower
 * *timeout_ms.  Returns how many were used. */
int pisb_relay_pollfds(struct pisb_relay *r, struct pollfd *p, int max,
		       int *timeout_ms);
/* After poll(): p and n as given to the last pisb_relay_pollfds(). */
void pisb_relay_poll(struct pisb_relay *r, struct pollfd *p, int n);

size_t pisb_relay_count(const struct pisb_relay *r);
/* Close every connection of tag (hard: both sides). */
void pisb_relay_close_tag(struct pisb_relay *r, const void *tag);

#endif
