/* exec.h - the exec contract every driver's exec slots keep: the request,
 * attached (streaming, the command's status passed through), detached
 * with handles (collected output, 64 KiB per call), and what a handle
 * directory holds.
 *
 * Handles: instances/NAME/exec/HANDLE/ holds `output` (the first
 * PISB_EXEC_OUTPUT_MAX bytes the command wrote, stdout and stderr merged),
 * `dropped` (bytes past that, while it runs), `offset` (bytes already
 * returned), `pid` (the command's host pid), `status.json` (exit code and
 * droppedBytes, once done) and `lock` (held by the runner while the
 * command lives).
 * A handle is "GEN-XXXXXXXX": GEN is the controller generation, so handles
 * of an earlier run are recognised and refused after stop/start.
 */
#ifndef PISB_EXEC_H
#define PISB_EXEC_H

#include <stdbool.h>
#include <stddef.h>

struct pisb_err;
struct pisb_jw;

#define PISB_EXEC_CAP (64 * 1024)
/* A handle keeps the first 8 MiB of output; the rest is counted, dropped */
#define PISB_EXEC_OUTPUT_MAX (8LL * 1024 * 1024)
#define PISB_EXEC_OUTPUT_MAX_TEXT "8 MiB"
#define PISB_EXEC_KEEP 128

struct pisb_exec_req {
	const char *name;
	char *const *argv;      /* or NULL with sh */
	size_t argc;
	const char *sh;         /* run through /bin/sh -c, the login environment */
	bool bash;              /* sh through /bin/bash when the sandbox has it */
	const char *cwd;
	char *const *env;       /* "K=V" */
	size_t nenv;
	int timeout_ms;         /* handle mode: wait at most this long */
	bool events;            /* --events-fd: write the "shell" event to events_fd */
	int events_fd;
};

struct pisb_sandbox;
/* --sh and --bash on a driver without PISB_DRV_EXEC_BASH (the others
 * decide in their exec slots and call pisb_exec_shell_event there).
 * --bash without r->events: r becomes one argv (in av, 6 slots) that runs
 * /bin/bash when the sandbox has it, else /bin/sh, decided inside.  With
 * r->events: one detached exec of `[ -x /bin/bash ]` in the sandbox (its
 * exit status is all that is read), r becomes the argv SHELL -lc STRING,
 * and the "shell" event names SHELL.
 * --sh: r unchanged (the driver runs /bin/sh -lc), the event says so.
 * Returns 0, -1 when that probe failed (e filled). */
int pisb_exec_shell(struct pisb_sandbox *sb, struct pisb_exec_req *r, char *av[6],
		    struct pisb_err *e);
/* The "shell" event of a --sh or --bash request when r->events: one JSON
 * line {"event":"shell","name","driver","asked":"bash"|"sh","shell":PATH}
 * on r->events_fd, PATH the shell the command runs under.  Best effort: a
 * failed write is not the command's failure. */
void pisb_exec_shell_event(const struct pisb_exec_req *r, const char *driver, const char *shell);

/* For the drivers' handles (a directory with output, offset, status.json):
 * write the result object {pid, running, output, exitCode, truncated} with
 * the output since the last call (at most PISB_EXEC_CAP bytes, never
 * ending inside a UTF-8 sequence while more follows) and advance offset.
 * done/ec: whether and how the command ended, as the driver knows it. */
int pisb_exec_report(int hdir, const char *handle, bool done, int ec, bool running,
		     struct pisb_jw *w, struct pisb_err *e);
/* Keep the newest PISB_EXEC_KEEP - 1 finished handles (those with a
 * status.json) in directory edir, making room for one more; is_handle
 * (NULL: any name) says which entries are handles. */
void pisb_exec_prune(int edir, bool (*is_handle)(const char *name));
/* status.json's exit code in handle directory hdir; *done whether it is
 * there (0 while the command runs). */
int pisb_exec_status_code(int hdir, bool *done);

#endif
