/* services.h - supervised services, previews and the egress proxy of a
 * local sandbox.  They live inside the controller's event loop: the
 * controller asks for fds to poll and hands back what became ready. */
#ifndef PISB_SERVICES_H
#define PISB_SERVICES_H

#include <poll.h>
#include <stddef.h>
#include <sys/types.h>

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_runtime;
struct pisb_json;
struct pisb_buf;

#define PISB_SVC_MAX_FDS 512

struct pisb_services;

/* NULL if the sandbox has nothing to supervise, relay or proxy. */
struct pisb_services *pisb_services_new(struct pisb_state *st, int idir,
					const char *name,
					const struct pisb_config *cfg,
					const struct pisb_runtime *rt);
void pisb_services_free(struct pisb_services *s);
int pisb_services_start_all(struct pisb_services *s, struct pisb_err *e);
void pisb_services_stop_all(struct pisb_services *s);
void pisb_services_reaped(struct pisb_services *s, pid_t pid, int status);
/* Fill at most max pollfds; may lower *timeout_ms for timers. */
int pisb_services_pollfds(struct pisb_services *s, struct pollfd *p, int max,
			  int *timeout_ms);
void pisb_services_poll(struct pisb_services *s, struct pollfd *p, size_t n);
/* A control request {"op":...} other than ping/stop; reply is one JSON line. */
void pisb_services_request(struct pisb_services *s, const char *op,
			   const struct pisb_json *req, struct pisb_buf *reply);
/* Owned JSON arrays for status.json, or NULL. */
char *pisb_services_status_json(struct pisb_services *s);
char *pisb_services_previews_json(struct pisb_services *s);

#endif
