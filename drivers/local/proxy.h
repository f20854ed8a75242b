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
 */
#ifndef PISB_PROXY_H
#define PISB_PROXY_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

struct pisb_relay;
struct pisb_proxy;

#define PISB_PROXY_PORT 3128

/* lfd: the listening socket (owned from now on).  allowed: exact host
 * names or "*.domain" (borrowed; must outlive the proxy). */
struct pisb_proxy *pisb_proxy_new(int lfd, char *const *allowed, size_t nallowed,
				  const char *sandbox, struct pisb_relay *relay);
void pisb_proxy_free(struct pisb_proxy *p);
int pisb_proxy_pollfds(struct pisb_proxy *p, struct pollfd *pf, int max,
		       int *timeout_ms);
void pisb_proxy_poll(struct pisb_proxy *p, struct pollfd *pf, int n);

/* Is host (a name or an IP literal, without brackets) allowed?  Names
 * compare case-insensitively, a trailing dot ignored; "*.example.com"
 * matches every name below example.com (not example.com itself). */
bool pisb_proxy_host_allowed(char *const *allowed, size_t n, const char *host);

#endif
