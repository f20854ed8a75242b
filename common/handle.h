/* handle.h - the exec-handle protocol of the drivers whose commands a
 * host-side process runs (sbx: the sbx CLI, vm: the guest agent's client).
 *
 * A handle "PREFIX-XXXXXXXX" (8 hex digits) is a detached supervisor (its
 * own session, no fds of the caller's) and its directory
 * instances/NAME/exec/HANDLE/, with the files exec.h describes: output
 * (the first PISB_EXEC_OUTPUT_MAX bytes, stdout and stderr merged, then
 * the marker), dropped (bytes past that, while it runs), offset (how far
 * exec-status has read), pid (the supervisor), lock (held by the
 * supervisor while it lives) and status.json ({"exitCode":N,
 * "droppedBytes":N}, at the end).
 *
 * The supervisor runs the driver's `run` in a child of its own (the
 * runner, killed if the supervisor dies) with the write end of a pipe as
 * stdout and stderr, copies the pipe into output up to the cap, forwards
 * SIGTERM, SIGINT, SIGHUP and SIGUSR2 to the runner, and writes status.json
 * with the runner's status.  A supervisor that died without status.json is
 * "lost": exit 5, exitCode null.
 *
 * exec-kill: the driver's kill_inside (if any), SIGTERM to the supervisor,
 * after 2 s hard_signal (if any, 3 s more), then SIGKILL.
 */
#ifndef PISB_HANDLE_H
#define PISB_HANDLE_H

#include <stdbool.h>

struct pisb_err;
struct pisb_jw;

struct pisb_handle_ops {
	const char *prefix;     /* "sbx": handles are "sbx-XXXXXXXX" */
	/* In the runner: run the command with stdin empty and stdout and
	 * stderr into out; *code its exit status (128+N for a signal).  -1
	 * with e: it could not run (status 5, e's message in the output). */
	int (*run)(void *arg, const char *handle, int out, int *code, struct pisb_err *e);
	/* exec-kill, before the signals: end the command from the driver's
	 * side (NULL: the signals the runner gets do it). */
	void (*kill_inside)(void *arg, const char *handle);
	int hard_signal;        /* sent 2 s after SIGTERM (0: none, SIGKILL next) */
	const char *lost;       /* what a lost supervisor means, in the message */
	int keep_fd;            /* an fd run needs open in the runner, or -1 */
	void *arg;
};

/* Start a handle in instance dir idir (sandbox name, for messages), wait up
 * to timeout_ms for it to end, write exec.h's result object. */
int pisb_handle_start(int idir, const char *name, const struct pisb_handle_ops *ops,
		      int timeout_ms, struct pisb_jw *w, int *code, bool *running,
		      struct pisb_err *e);
/* exec-status: wait up to timeout_ms, then the new output and the state.
 * 3 when handle is not one of ops->prefix's handles in idir. */
int pisb_handle_status(int idir, const char *name, const struct pisb_handle_ops *ops,
		       const char *handle, int timeout_ms, struct pisb_jw *w, int *code,
		       bool *running, struct pisb_err *e);
/* exec-kill: end the command (see above), then as exec-status. */
int pisb_handle_kill(int idir, const char *name, const struct pisb_handle_ops *ops,
		     const char *handle, struct pisb_jw *w, int *code, struct pisb_err *e);

#endif
