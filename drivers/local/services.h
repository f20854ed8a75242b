/* services.h - supervised services, previews and the egress proxy of a
 * local sandbox.  They live inside the controller's event loop: the
 * controller asks for fds to poll and hands back what became ready.
 *
 * Services come from the sandbox's own copy of its config,
 * <workspace>/.sandbox.yaml (read through the sandbox's root), plus ad-hoc
 * ones (`svc start`) and bare preview links (`svc preview PORT`).  Each is
 * `/bin/sh -lc COMMAND` in its own session inside the sandbox, restarted
 * one second after any exit, its output in logs/SERVICE.log (rotated past
 * 1 MiB to SERVICE.log.1).  Guest ports and preview host ports are
 * assigned once and kept in services.json, so they survive restarts and
 * stop/start.  Previews listen on host 127.0.0.1 only and relay TCP into
 * the sandbox (relay.h); the egress proxy is proxy.h.
 *
 * Control requests (one JSON line each; ops other than ping/stop):
 *   {"op":"svc.status"[,"service":S]}
 *   {"op":"svc.ensure"[,"service":S]}     start what .sandbox.yaml declares
 *   {"op":"svc.restart"[,"service":S]}    with the latest definition
 *   {"op":"svc.stop"[,"service":S]}
 *   {"op":"svc.start","service":S,"command":C[,"port":N][,"preview":true]
 *        [,"title":T][,"description":D]}  ad-hoc
 *   {"op":"svc.preview","port":N[,"title":T][,"description":D]}
 * Reply: {"ok":bool[,"code":EXIT,"error":MSG],"services":[...],"previews":[...]}.
 * ensure, restart, start and stop answer once the services involved are
 * ready (or failed, or stopped): the reply may come after the call returns.
 */
#ifndef PISB_SERVICES_H
#define PISB_SERVICES_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_runtime;
struct pisb_json;
struct pisb_buf;

/* Enough for ~2000 relayed connections at once. */
#define PISB_SVC_MAX_FDS 4096

struct pisb_services;

/* Never NULL: ad-hoc services and previews may come later.  cfg and rt
 * are borrowed and must outlive the services (the controller's). */
struct pisb_services *pisb_services_new(struct pisb_state *st, int idir,
					const char *name,
					const struct pisb_config *cfg,
					const struct pisb_runtime *rt);
void pisb_services_free(struct pisb_services *s);
/* Start the proxy, the previews and every service; returns once each is
 * ready or failed (-1 then, naming the services that failed: the sandbox
 * runs on, their logs readable). */
int pisb_services_start_all(struct pisb_services *s, struct pisb_err *e);
/* Stop every service (TERM to its process group, KILL after 2 s), close
 * previews and the proxy. */
void pisb_services_stop_all(struct pisb_services *s);
/* Whether a service has a process (that stop_all waits for); s may be NULL. */
bool pisb_services_any_process(const struct pisb_services *s);
void pisb_services_reaped(struct pisb_services *s, pid_t pid, int status);
/* Fill at most max pollfds; may lower *timeout_ms for timers. */
int pisb_services_pollfds(struct pisb_services *s, struct pollfd *p, int max,
			  int *timeout_ms);
void pisb_services_poll(struct pisb_services *s, struct pollfd *p, size_t n);
/* A control request {"op":...} other than ping/stop, from client fd.  The
 * one-line JSON reply goes to fd, now or (for waiting ops) later through a
 * dup of fd: the caller may close its fd as soon as this returns. */
void pisb_services_request(struct pisb_services *s, const char *op,
			   const struct pisb_json *req, int fd);
/* Did anything shown in status.json change since the last call? */
bool pisb_services_changed(struct pisb_services *s);
/* fn(arg) saves status.json: called before a reply goes out whenever
 * something shown there changed, so that the reply never runs ahead of
 * the record. */
void pisb_services_on_change(struct pisb_services *s, void (*fn)(void *arg), void *arg);
/* The guest's config as read at the boot, inside, before anything of the
 * sandbox ran (pisb_boot's guest_config; text taken, err its errno or 0;
 * ENOENT: none, the creation config's services): the next start of all
 * services takes it instead of forking into the sandbox to read it again
 * (~0.6 ms of a start, issue #21). */
void pisb_services_guest_config(struct pisb_services *s, struct pisb_buf *text, int err);
/* Owned JSON arrays for status.json, or NULL. */
char *pisb_services_status_json(struct pisb_services *s);
char *pisb_services_previews_json(struct pisb_services *s);

/* A timestamped line in the controller's log (its stderr, controller.log):
 * the controller's own record, the one place besides reports that prints. */
/* The preview token of the instance (preview.token, 0600, made once so
 * that preview URLs stay the same across stop and start; the vm driver's
 * previews use it too), or NULL (errno set). */
char *pisb_preview_token(int idir);
/* A preview's listener: host 127.0.0.1:port (0: any free port),
 * non-blocking, close-on-exec; the fd, or -1 with errno. */
int pisb_preview_listen(int port);
void pisb_svc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));


/* ---- the seam: what the supervision asks of a driver ----
 * The state machine, restart policy, readiness checks, logs, sticky ports,
 * previews and the JSON above are driver-neutral; pisb_services_new uses
 * the local driver's namespaces (netns.h, sbexec.h), another driver hands
 * its own operations to pisb_services_new_ops (the vm driver's guest
 * agent, vm_svc.c).  ctx is the driver's. */
struct pisb_svc_ops {
	/* Start `/bin/sh -lc command` in the sandbox, in a session of its
	 * own, its environment the sandbox's plus extra (KEY=VALUE), in cwd
	 * (the service's cwd: option, NULL: the workspace), stdout and stderr
	 * on out_fd.  The pid is a child of this process: its exit is the
	 * service's (pisb_services_reaped), a signal to its process group
	 * reaches the service.  -1 with e; *exec_err: the command could not
	 * be executed. */
	pid_t (*spawn)(void *ctx, const char *command, char *const *extra, size_t nextra,
		       const char *cwd, int out_fd, int *exec_err, struct pisb_err *e);
	/* A non-blocking connection to the sandbox's loopback port (family
	 * 0: find out, *family_out then says which worked).  *pending:
	 * finish it with connect_done once fd polls connect_events. */
	int (*connect)(void *ctx, int family, int port, bool *pending, int *family_out,
		       struct pisb_err *e);
	/* 0 connected, EINPROGRESS, or why it failed */
	int (*connect_done)(void *ctx, int fd);
	short connect_events;
	/* optional: hand a preview's client fd (owned from now on; head
	 * first) straight to port; -1 (fd still the caller's) when it cannot */
	int (*stream)(void *ctx, int fd, int port, const char *head, size_t hlen);
	/* 1 when nothing listens on port in the sandbox, 0 taken, -1 error */
	int (*port_free)(void *ctx, int port, struct pisb_err *e);
	/* optional: the pid inside the sandbox; -1: not found (the host's
	 * pid is shown); 0, or absent: not known (yet), status.json's pid is
	 * null (hostPid is) */
	long (*inner_pid)(void *ctx, pid_t pid);
	/* optional: the sandbox's own .sandbox.yaml (*out NULL: none);
	 * absent: the record's config */
	int (*read_config)(void *ctx, struct pisb_config **out, struct pisb_err *e);
	/* optional: the egress proxy's listener inside the sandbox */
	int (*proxy_listen)(void *ctx, int port, struct pisb_err *e);
};
/* The egress proxy (network.allowedHosts) now, before the services
 * start (a vm's setup reaches it); NULL, or the proxy, for a driver that
 * hands it the sandbox's connections (pisb_proxy_take). */
struct pisb_proxy;
void pisb_services_start_proxy(struct pisb_services *s);
struct pisb_proxy *pisb_services_proxy(struct pisb_services *s);
struct pisb_services *pisb_services_new_ops(struct pisb_state *st, int idir, const char *name,
					    const struct pisb_config *cfg,
					    const struct pisb_svc_ops *ops, void *ctx);
/* pisb_services_start_all without blocking: start what it starts, and
 * answer fd (as svc.ensure does) once each is ready or failed.  For a
 * driver whose loop must go on serving the sandbox meanwhile (vm). */
void pisb_services_begin(struct pisb_services *s, int fd);
/* Is pid a service's process (for the driver's SIGCHLD handling)? */
bool pisb_services_owns(const struct pisb_services *s, pid_t pid);

#endif
