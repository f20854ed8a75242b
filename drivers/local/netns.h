/* netns.h - sockets inside a sandbox's network namespace ("socket factory").
 *
 * The controller lives in the host's network namespace; previews, readiness
 * probes and the egress proxy need sockets in the sandbox's.  An
 * unprivileged controller cannot setns() into a net ns owned by another
 * user namespace and come back, so a long-lived helper child enters the
 * sandbox's user and net namespaces once and then makes sockets on request:
 * the controller asks over a SOCK_SEQPACKET socketpair, the helper answers
 * with the fd (SCM_RIGHTS).  The fd works from the host side like any
 * other: it stays bound to the namespace it was created in.
 *
 * The helper is the controller's child: pisb_netns_pid() lets the reaper
 * recognise it.  It dies with the controller (PDEATHSIG).  Calls are
 * synchronous and short (loopback only); if the helper has died, the next
 * call starts a new one.
 */
#ifndef PISB_NETNS_H
#define PISB_NETNS_H

#include <stdbool.h>
#include <sys/types.h>

struct pisb_err;

#define PISB_NETNS_POOL 32

struct pisb_netns {
	pid_t init;                 /* the sandbox's init: whose namespaces */
	unsigned long long start;   /* its start time (pid reuse guard) */
	pid_t pid;                  /* the helper, 0 if none */
	int last_family;            /* of the last pisb_netns_connect() */
	int sock;                   /* our end of the socketpair, -1 if none */
	/* unconnected TCP sockets made inside, per family (0: IPv4, 1: IPv6):
	 * connect() uses the namespace a socket was made in, so the
	 * controller connects them itself, without a round trip */
	int pool[2][PISB_NETNS_POOL];
	int npool[2];
};

void pisb_netns_init(struct pisb_netns *n, pid_t init, unsigned long long start);
/* Kill and reap the helper. */
void pisb_netns_release(struct pisb_netns *n);
/* The helper's pid (0 if none), for the SIGCHLD reaper. */
pid_t pisb_netns_pid(const struct pisb_netns *n);
/* The reaper saw the helper exit: forget it (the next call starts another). */
void pisb_netns_reaped(struct pisb_netns *n, pid_t pid);

/* A non-blocking TCP socket connected (or connecting: *pending) to
 * 127.0.0.1:port inside the sandbox, falling back to [::1]:port.  Returns
 * the fd, or -1 with e->errnum set (ECONNREFUSED: nothing listens). */
int pisb_netns_connect(struct pisb_netns *n, int port, bool *pending,
		       struct pisb_err *e);
/* The same in one family (AF_INET: 127.0.0.1, AF_INET6: ::1), connected
 * by the caller with a socket from the pool: no round trip to the helper
 * except to refill the pool.  A refused connection may show only later,
 * as the pending connect's error. */
int pisb_netns_connect_fast(struct pisb_netns *n, int family, int port,
			    bool *pending, struct pisb_err *e);
/* The family the last pisb_netns_connect() succeeded with. */
int pisb_netns_last_family(const struct pisb_netns *n);
/* A non-blocking listening socket on 127.0.0.1:port inside the sandbox. */
int pisb_netns_listen(struct pisb_netns *n, int port, struct pisb_err *e);
/* Is 127.0.0.1:port free for a listener inside the sandbox?  1 yes, 0 no,
 * -1 on failure. */
int pisb_netns_port_free(struct pisb_netns *n, int port, struct pisb_err *e);

#endif
