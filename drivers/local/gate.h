/* gate.h - the token check in front of a preview (preview.auth: token).
 *
 * With the token on, a connection accepted on a preview port is not
 * relayed at once: the gate reads the HTTP request head (at most
 * PISB_GATE_HEAD_MAX bytes, within PISB_GATE_TIMEOUT_MS) and looks for
 * the sandbox's token
 *   - in the query, "pisb_token=TOKEN": answered 303 to the same URL
 *     without it, with a cookie "pisb_token_PORT=TOKEN" (HttpOnly,
 *     SameSite=Strict; one cookie per port, as cookies ignore ports);
 *   - in that cookie, or in a header "X-Pisb-Token: TOKEN": admitted;
 *     the head goes to the service unchanged, then the connection is a
 *     plain relay (later requests on it are not looked at again);
 * and answers 403 otherwise, before anything reaches the service.
 * Tokens compare in constant time.  Who can reach a preview without a
 * token: every local user of this machine (it listens on 127.0.0.1).
 */
#ifndef PISB_GATE_H
#define PISB_GATE_H

#include <poll.h>
#include <stddef.h>

#define PISB_GATE_HEAD_MAX (16 * 1024)
#define PISB_GATE_TIMEOUT_MS 10000
#define PISB_GATE_MAX 256          /* connections waiting at once */

struct pisb_gate;
struct pisb_relay;

/* admit: the connection passed; fd is handed over with the bytes read so
 * far (borrowed for the call). */
typedef void pisb_gate_admit_fn(void *arg, void *tag, int fd, const char *head, size_t len);

struct pisb_gate *pisb_gate_new(struct pisb_relay *relay, pisb_gate_admit_fn *admit, void *arg);
void pisb_gate_free(struct pisb_gate *g);
/* Check fd (owned from now on) against token (copied) for port. */
void pisb_gate_add(struct pisb_gate *g, int fd, const char *token, int port, void *tag);
/* Forget the connections of tag (closed). */
void pisb_gate_drop_tag(struct pisb_gate *g, const void *tag);
int pisb_gate_pollfds(struct pisb_gate *g, struct pollfd *p, int max, int *timeout_ms);
void pisb_gate_poll(struct pisb_gate *g, struct pollfd *p, int n);

#endif
