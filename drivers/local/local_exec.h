/* exec.h - the local driver's exec slots (common/exec.h's contract): the
 * command runs in the sandbox's namespaces and cgroup, spawned by this
 * process (attached, shell) or by a detached runner that records its
 * handle (handles: GEN-XXXXXXXX, GEN the controller generation, so that
 * handles of an earlier run are recognised and refused after stop/start).
 * sb is the sandbox the command opened; it must be running.
 */
#ifndef PISB_LOCAL_EXEC_H
#define PISB_LOCAL_EXEC_H

#include "exec.h"

#include <stdbool.h>

struct pisb_buf;
struct pisb_err;
struct pisb_jw;
struct pisb_sandbox;

/* Attached: streams on our stdio (a pty of the sandbox for those that are
 * terminals, relayed pipes for stdout/stderr otherwise; returns when the
 * command's own process ends); *code is the command's exit status
 * (128+N for a signal).  Forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT to the
 * command's process group and kills it if our caller dies. */
int pisb_local_exec(struct pisb_sandbox *sb, const struct pisb_exec_req *r, int *code,
		    struct pisb_err *e);
/* Detached: start, wait up to timeout_ms, write the result object. */
int pisb_local_exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			   struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
int pisb_local_exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			   struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
int pisb_local_exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
			 int *code, struct pisb_err *e);
/* Interactive login shell on a pty inside the sandbox. */
int pisb_local_shell(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e);

#endif
