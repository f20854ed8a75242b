/* vm_mux.h - TCP streams multiplexed over one virtio-serial port (the net
 * port, vm_proto.h), with a credit window per stream.  The same code runs
 * on both ends: the host's preview relay (vm_net.c) and the guest agent
 * (agent/pisb-agent.c); libc only, no libpisb, no allocation that is not
 * bounded by the constants below.
 *
 * A stream joins a local socket (host: a connection accepted on a preview
 * port; guest: a connection to 127.0.0.1:PORT) with the peer's.  Its id
 * is picked by the side that opens it: odd ids by the host (previews: the
 * guest connects to the port the host names), even ids by the guest (the
 * egress proxy: a connection to the agent's 127.0.0.1:3128 in the guest,
 * which the host hands to its proxy, drivers/local/proxy.h).  Each side
 * opens its ids in increasing order and never reuses one while the mux
 * lives; an open of an id of the wrong parity, one not above the last, or
 * one already open is dropped.  The host takes at most
 * PISB_MUX_MAX_PEER_STREAMS guest-opened streams at once, and only to the
 * port its accept callback takes (the proxy's): more, or another port,
 * are answered RST (refused).  A frame for an id this side does not know
 * is dropped without an answer, so that noise from the peer never makes
 * us write (no amplification).
 *
 * Flow control: each side may send at most PISB_MUX_WINDOW bytes of data
 * on a stream that the other side has not given back with CREDIT; it
 * gives them back once they are written to its local socket.  So a
 * receiver holds at most PISB_MUX_WINDOW bytes per stream, a slow reader
 * stalls only its own stream, and a peer that sends more than its window
 * has the stream reset.  The frames waiting to go out on the port are
 * bounded too: local sockets are read only while fewer than
 * PISB_MUX_OUT_HIGH bytes wait (a peer that stops reading the port stops
 * our reading, not our memory).
 *
 * Half-close follows TCP: EOF on a local socket is sent as EOF once
 * everything before it went out; an EOF received is a shutdown(SHUT_WR)
 * once everything before it was written; the stream ends when both
 * directions are done, or at RST (either side; a local socket reset or a
 * connect that failed).  RST of stream 0: the peer (re)started its end
 * (the guest's server was respawned): every stream goes.
 */
#ifndef PISB_VM_MUX_H
#define PISB_VM_MUX_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PISB_MUX_WINDOW (256u * 1024)
#define PISB_MUX_CHUNK (64u * 1024)           /* largest DATA payload */
#define PISB_MUX_OUT_HIGH (1024u * 1024)      /* stop reading local sockets */
#define PISB_MUX_MAX_STREAMS 256
#define PISB_MUX_MAX_PEER_STREAMS 64          /* host: guest-opened at once */
/* the agent opens at most this many at once (the rest wait in its
 * listen backlog): below the host's bound, whose count lags by the
 * frames in flight */
#define PISB_MUX_GUEST_OPEN_MAX 48

/* RST's payload: u8 why */
enum { PISB_MUX_RST_RESET = 0, PISB_MUX_RST_REFUSED = 1, PISB_MUX_RST_PROTOCOL = 2 };

struct pisb_mux_stream {
	uint32_t id;
	int fd;                    /* the local socket, -1 once closed */
	bool connecting;           /* guest: connect() in progress */
	bool got_data;             /* some data came from the peer */
	bool rd_eof, eof_sent;     /* local -> peer: EOF read, EOF frame sent */
	bool peer_eof, wr_shut;    /* peer -> local: EOF frame received, shut */
	uint32_t credit;           /* what we may still send the peer */
	uint32_t owed;             /* written locally, not yet given back */
	unsigned char *in;         /* peer's bytes not yet written locally */
	size_t in_off, in_len;     /* (at most PISB_MUX_WINDOW; in_off + in_len <= WINDOW) */
	int pidx;                  /* pollfd slot, -1 none */
};

struct pisb_mux;
/* The guest's side: connect to 127.0.0.1:port (non-blocking); the fd, or
 * -1.  *pending: the connect is still in progress. */
typedef int pisb_mux_connect_fn(void *arg, unsigned port, bool *pending);
/* The host's side: the guest opened a stream to port (its 127.0.0.1:port
 * was connected to); the fd that stands for it here (non-blocking, owned
 * by the mux from now on), or -1 to refuse it. */
typedef int pisb_mux_accept_fn(void *arg, unsigned port);
/* A stream this side opened was reset by the peer before it sent any data (the host's
 * relay answers the client 502): why is PISB_MUX_RST_*; the fd is still
 * open and is closed after the call. */
typedef void pisb_mux_refused_fn(void *arg, struct pisb_mux_stream *s, int why);
/* Host: the guest said its connect for the stream succeeded (an empty
 * NDATA, vm_proto.h), once per stream at most. */
typedef void pisb_mux_opened_fn(void *arg, struct pisb_mux_stream *s);

struct pisb_mux {
	int port;                  /* the serial port's fd (non-blocking), -1 gone */
	bool host;                 /* opens odd ids */
	uint32_t next_id;
	unsigned char *rx;         /* frames read, not yet parsed */
	size_t rx_len;
	unsigned char *tx;         /* frames to write to the port */
	size_t tx_off, tx_len, tx_cap;
	struct pisb_mux_stream *s[PISB_MUX_MAX_STREAMS];
	size_t n;
	int port_idx;
	uint64_t dropped;          /* frames or bytes dropped as noise */
	uint64_t resets;           /* streams reset for breaking the protocol */
	uint64_t refused_opens;    /* host: guest opens refused (port, bound) */
	uint64_t peer_next;        /* the lowest id the peer may open next */
	pisb_mux_connect_fn *connect;
	pisb_mux_accept_fn *accept;
	pisb_mux_refused_fn *refused;
	pisb_mux_opened_fn *opened;
	void *arg;
};

/* port: the serial port (made non-blocking here); host: this is the host
 * side.  Allocates the buffers (aborts on OOM). */
void pisb_mux_init(struct pisb_mux *m, int port, bool host);
/* Close every stream and free the buffers (not the port). */
void pisb_mux_release(struct pisb_mux *m);
/* A stream for fd (owned from now on) to the peer: host, to the guest's
 * 127.0.0.1:port; guest, to the host's accept callback for port.  head
 * (may be NULL) is sent first.  NULL when PISB_MUX_MAX_STREAMS are
 * open (fd is then still the caller's). */
struct pisb_mux_stream *pisb_mux_open(struct pisb_mux *m, int fd, unsigned port,
				      const void *head, size_t hlen);
bool pisb_mux_full(const struct pisb_mux *m);
/* How many open streams this side opened. */
size_t pisb_mux_opened(const struct pisb_mux *m);
/* Say that this end (re)started: an RST of stream 0, on which the peer
 * drops every stream it had. */
void pisb_mux_hello(struct pisb_mux *m);
/* Close every stream, hard (the port went away and came back). */
void pisb_mux_reset_all(struct pisb_mux *m);
/* Fill pollfds (the port and every stream); returns how many. */
int pisb_mux_pollfds(struct pisb_mux *m, struct pollfd *p, int max);
/* After poll(): p and n as given to pisb_mux_pollfds.  Returns -1 when
 * the port hung up or failed (every stream is then closed), else 0. */
int pisb_mux_poll(struct pisb_mux *m, struct pollfd *p, int n);

#endif
