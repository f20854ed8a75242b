/* proxy.h - the egress proxy of a local sandbox.
 *
 * A sandbox's network namespace has only loopback: nothing goes out.  When
 * network.allowedHosts is not empty, the controller listens on
 * 127.0.0.1:3128 *inside* that namespace (a socket made by the netns
 * helper) and serves it from the host's namespace:
 *   - CONNECT host:port (HTTPS and anything else tunnelled): checked, then
 *     a plain tunnel (no TLS interception);
 *   - absolute-URI requests (GET http://host/...): checked, forwarded to
 *     the origin with the request line in origin form and Connection:
 *     close (one request per upstream connection);
 *   - a host that is not allowed gets 403 naming the host and the setting
 *     (network.allowedHosts).
 * Names resolve with getaddrinfo() in a short-lived child, so a slow DNS
 * server never blocks the controller's loop.  Established connections are
 * handed to the relay (relay.h).
 *
 * The vm driver's relay (drivers/vm/vm_net.c) runs the same proxy without
 * a listening socket: each stream the guest opens to its own
 * 127.0.0.1:3128 arrives as one end of a socketpair (pisb_proxy_take), and
 * the allowlist is checked here, on the host, as for a local sandbox.
 */
#ifndef PISB_PROXY_H
#define PISB_PROXY_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

struct pisb_relay;
struct pisb_proxy;

#define PISB_PROXY_PORT 3128

/* lfd: the listening socket (owned from now on), or -1: connections come
 * from pisb_proxy_take only.  allowed: exact host
 * names or "*.domain" (borrowed; must outlive the proxy). */
struct pisb_proxy *pisb_proxy_new(int lfd, char *const *allowed, size_t nallowed,
				  const char *sandbox, struct pisb_relay *relay);
void pisb_proxy_free(struct pisb_proxy *p);
/* A client connection (non-blocking; owned from now on), as if accepted
 * on lfd: at most 256 wait for their request at once, the rest get 503. */
void pisb_proxy_take(struct pisb_proxy *p, int fd);
/* Where the "egress: ..." lines go (one line, no newline); by default
 * the controller's log (pisb_svc_log). */
void pisb_proxy_set_log(struct pisb_proxy *p, void (*log)(void *arg, const char *line), void *arg);
int pisb_proxy_pollfds(struct pisb_proxy *p, struct pollfd *pf, int max,
		       int *timeout_ms);
void pisb_proxy_poll(struct pisb_proxy *p, struct pollfd *pf, int n);

/* Is host (a name or an IP literal, without brackets) on port allowed?
 * Names compare case-insensitively, a trailing dot ignored;
 * "*.example.com" matches every name below example.com (not example.com
 * itself).  An entry without a port allows 80 and 443; "host:port" (or
 * "[v6]:port") that port only.
 *
 * Then the address: whatever a name resolves to (once: the addresses
 * checked are the addresses connected to) must be a public address, or
 * be named literally by an entry.  Loopback, unspecified, private
 * (RFC 1918, fc00::/7), CGNAT, link-local (the cloud metadata address
 * 169.254.169.254 among them), multicast and reserved ranges, and their
 * IPv4-mapped forms, are refused otherwise: an allowed name cannot lead
 * to the host's own services or its networks. */
bool pisb_proxy_host_allowed(char *const *allowed, size_t n, const char *host, int port);

#endif
