/* opensandbox.h - the opensandbox driver: sandboxes on a remote OpenSandbox
 * server, reached over its lifecycle API (/v1, header OPEN-SANDBOX-API-KEY)
 * and each sandbox's execd (commands and files).  libcurl does the HTTP.
 *
 * Every command that meets an instance whose record.driver is
 * "opensandbox" calls the function here instead of the local driver's.
 * The signatures mirror the local ones (exec.h, local.h), and the JSON they
 * write is the same (DESIGN §9).
 *
 * Files in instances/NAME/ (besides record.json, status.json):
 *   op.lock      held by create/connect/start/stop/destroy (busy -> 4)
 *   renew.lock   held while any request changes the sandbox's lifecycle
 *                state (renew, pause, resume, kill, disconnect): renewals
 *                never overlap, and stop/destroy wait for one in flight
 *   remote.log   one line per lifecycle step and renewal (ok or failed)
 *   exec/H       the log cursor of detached command H (handles)
 *
 * record.json's "remote" object: {"sandboxId","createdByPisb","domain",
 * "protocol","timeoutSeconds","policy"}.  status.json's state is
 * "creating", "running", "paused" or "gone"; its "extra" object (shown by
 * inspect under "remote"): {"sandboxId","createdByPisb","state" (the
 * server's word), "expiresAt","renewedAt","nextRenewAt","lastRenewError",
 * "lastRenewErrorAt","renewFailures","checkedAt"}.
 *
 * The API key comes from opensandbox.apiKeyFile (refused unless mode 0600)
 * or $OPEN_SANDBOX_API_KEY.  It is never written to state, logs, inspect
 * or error messages, and is shown as <redacted> in -v traces.  The key is
 * only sent to the lifecycle API, never to execd.
 *
 * Fail closed: a server or sandbox that cannot be reached is exit 5
 * (PISB_EXIT_BACKEND); nothing ever runs on the host instead.
 */
#ifndef PISB_OPENSANDBOX_H
#define PISB_OPENSANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "fs.h"
#include "instance.h"

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_record;
struct pisb_sandbox;
struct pisb_jw;
struct pisb_buf;
struct pisb_exec_req;
struct pisb_xfer;
struct pisb_pull_opts;

/* struct pisb_lc_opts: the options of the lifecycle verbs, driver.h. */
#include "driver.h"


/* ---- lifecycle (pisb-create) ----
 *
 * create NAME -f remote.yaml: cfg->os.image or snapshotId.  POSTs the
 * sandbox (timeoutSeconds, resourceLimits, entrypoint, env, metadata +
 * pi-extension/pi-session-id, volumes, networkAllowlist as default-deny
 * egress with allow rules), waits until it runs and execd answers, makes
 * the workspace, runs setup[] (and <workspace>/.agents/setup) there as
 * the local driver does (a failure is kept in status.json's setupError;
 * the sandbox stays), emits "ready", runs --on-ready.
 * Any failure kills the remote sandbox (if it exists) and removes the
 * local state.  Existing NAME: exit 4.  config_json is the normalised
 * config (pisb_config_json) stored in the record (ossfs secrets redacted).
 */
int pisb_os_create(struct pisb_state *st, const struct pisb_config *cfg,
		   const char *config_json, const struct pisb_lc_opts *o,
		   struct pisb_err *e);
/* connect NAME -f remote.yaml with cfg->os.sandbox_id: resumes it if
 * paused, renews it once (now + timeoutSeconds), waits for execd, writes
 * the instance (createdByPisb false), emits "ready", runs --on-ready.
 * On failure only the local state is removed; the sandbox is never killed. */
int pisb_os_connect(struct pisb_state *st, const struct pisb_config *cfg,
		    const char *config_json, const struct pisb_lc_opts *o,
		    struct pisb_err *e);
/* start: resume a paused sandbox (no-op when running).  Gone: exit 5. */
int pisb_os_start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
/* stop: created -> pause (instance kept, status paused); connected ->
 * disconnect (local state removed, the sandbox untouched).  Waits for an
 * in-flight renewal first.  Emits "released" (mode pause|disconnect). */
int pisb_os_stop(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
/* destroy: created -> kill (DELETE; already gone is fine) + local state
 * removed; connected -> disconnect only.  Waits for an in-flight renewal.
 * Emits "released" (mode kill|disconnect). */
int pisb_os_destroy(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
/* Session shutdown: apply lifecycle.onSessionShutdown to a sandbox pisb
 * created (kill = destroy, pause = stop, keep = leave it running and
 * keep the instance); a connected one is only disconnected.  Emits
 * "released" with the effective mode (kill|pause|keep|disconnect). */
int pisb_os_release(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);

/* For inspect: GET the sandbox (timeout_ms, e.g. 2000) and update
 * status.json (state, expiresAt, checkedAt; gone on 404).  Returns 0, or
 * -1 with e when the server cannot be reached (status.json keeps the last
 * state and records e's message: pisb_os_unreachable). */
int pisb_os_refresh(struct pisb_sandbox *sb, int timeout_ms, struct pisb_err *e);

/* For list: pisb_os_refresh of every opensandbox instance (a server that
 * cannot be reached is asked once, its other sandboxes marked too). */
void pisb_os_refresh_all(struct pisb_state *st, int timeout_ms);
/* For inspect: the opensandbox keys in place of the local driver's
 * (limits: {resourceLimits, note}; remoteState: the server's word). */
void pisb_os_inspect(struct pisb_jw *w, const struct pisb_config *cfg, const char *extra_json);
/* inspect's "config" of an opensandbox sandbox: the stored config without
 * the local driver's keys (image, diskGiB). */
void pisb_os_config_json(struct pisb_jw *w, const char *config_json);
/* Why the last ask (pisb_os_refresh) failed, or NULL if it was answered:
 * status "unreachable" with this as "error".  Caller frees. */
char *pisb_os_unreachable(const char *extra_json);

/* ---- exec (pisb-exec): same contract as exec.h ----
 *
 * Commands run as `bash -c` by execd: argv is shell-quoted behind `exec`,
 * --sh STRING runs as /bin/sh -lc STRING; cwd relative = under the
 * workspace (default the workspace); env "K=V" go to the request.
 * A paused sandbox is resumed first.
 */
/* Attached: streams stdout/stderr (line-exact: execd sends lines) on fds
 * 1 and 2; *code = the command's status (128+N for a signal).  SIGINT,
 * SIGTERM, SIGHUP interrupt the remote command (execd interrupt API) and
 * give 128+N.  A stream that ends without a terminal event: -1, exit 5,
 * "exit status unknown" (never 0). */
struct pisb_sandbox;
int pisb_os_exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			  int *code, struct pisb_err *e);
/* Detached (--timeout-ms): runs it as an execd background command; waits
 * up to r->timeout_ms; writes {"pid": HANDLE, "running", "output",
 * "exitCode", "truncated"} (output: new since the last call, 64 KiB cap,
 * stdout and stderr merged).  *code = exit status once done, else 0.
 * A command whose end cannot be known (sandbox restarted, record lost):
 * running false, exitCode null, *code = 5, and e->msg says why (the call
 * still returns 0 so the JSON is printed). */
int pisb_os_exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			struct pisb_jw *w, int *code, bool *running,
			struct pisb_err *e);
int pisb_os_exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
/* Interrupt (execd: SIGTERM to the group, SIGKILL after 3 s), then
 * collect as exec-status does. */
int pisb_os_exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
		      int *code, struct pisb_err *e);

/* ---- files (pisb-fs): the local driver's types (fs.h) ----
 *
 * The same contracts as pisb_fs_* in fs.h, so that pisb-fs prints one
 * way for both drivers.  path: absolute, or relative to the workspace
 * (NULL or "." = the workspace); *abs (caller frees, may be NULL on
 * error) gets the absolute path inside, as pisb_fs_abspath gives it.
 * Missing: exit 3; a directory where a file is wanted: exit 1.  execd
 * gives no symlink targets (info->target stays NULL) and acts as root
 * (readable/writable follow the mode bits).
 */
/* The absolute path inside for path, from the record alone (no network):
 * what *abs will say, for output written before the call.  Caller frees. */
char *pisb_os_abspath(struct pisb_state *st, const char *name, const char *path,
		      struct pisb_err *e);
int pisb_os_read_text(struct pisb_sandbox *sb, const char *path,
		      long long offset, long long limit, size_t cap, char **abs,
		      struct pisb_fs_text *t, struct pisb_err *e);
/* The whole file, byte-exact, to outfd. */
int pisb_os_read_raw(struct pisb_sandbox *sb, const char *path,
		     int outfd, long long *bytes, struct pisb_err *e);
/* Atomic replace: uploaded beside the target, renamed inside the sandbox. */
int pisb_os_write(struct pisb_sandbox *sb, const char *path,
		  const struct pisb_fs_src *src, int mode, bool mkdirs, char **abs,
		  long long *bytes, struct pisb_err *e);
int pisb_os_edit(struct pisb_sandbox *sb, const char *path,
		 const struct pisb_fs_edit *ed, size_t n, char **abs, long long *bytes,
		 struct pisb_err *e);
int pisb_os_ls(struct pisb_sandbox *sb, const char *path, char **abs,
	       struct pisb_fs_info **out, size_t *n, struct pisb_err *e);
int pisb_os_stat(struct pisb_sandbox *sb, const char *path, char **abs,
		 struct pisb_fs_info *out, struct pisb_err *e);
int pisb_os_mkdir(struct pisb_sandbox *sb, const char *path, char **abs,
		  bool *created, struct pisb_err *e);
/* o->dir as path above.  The tree is listed with one request
 * (directories/list), then walked here as pisb_walk walks a local one:
 * .git and node_modules skipped, .gitignore files (the search dir's, its
 * subdirectories', and its checkout's above it) honoured unless
 * o->no_ignore. */
int pisb_os_find(struct pisb_sandbox *sb, const struct pisb_fs_find *o,
		 char **abs, pisb_fs_find_fn fn, void *arg, bool *truncated,
		 struct pisb_err *e);
/* o->path as path above.  Files as find lists them; the regex runs as
 * `grep -E` (or -F) inside the sandbox, binary files skipped. */
int pisb_os_grep(struct pisb_sandbox *sb, const struct pisb_fs_grep *o,
		 char **abs, pisb_fs_grep_fn fn, void *arg,
		 struct pisb_fs_grep_result *r, struct pisb_err *e);

/* ---- push / pull (pisb-fs): archive.h's contracts ----
 *
 * One tar archive each way: made on the host by libarchive and unpacked
 * by tar inside the sandbox (push), or the reverse (pull), its SHA-256
 * compared at the receiving end before anything is replaced.  push
 * swaps the new tree in whole (or entry by entry where the target cannot
 * move) and leaves the old one on any failure; pull stages on the host.
 * The sandbox needs tar and sha256sum (or busybox, shasum, openssl):
 * without them, exit 5 and nothing changed. */
int pisb_os_push(struct pisb_sandbox *sb, const char *hostdir,
		 const char *to, bool all, struct pisb_xfer *x, struct pisb_err *e);
int pisb_os_pull(struct pisb_sandbox *sb, const char *path,
		 const char *hostdir, const struct pisb_pull_opts *o, struct pisb_xfer *x,
		 struct pisb_err *e);
/* The workspace as one tar archive onto fd, its SHA-256 as the sandbox
 * computed it into sha (driver.h's project_archive). */
int pisb_os_project_archive(struct pisb_sandbox *sb, int fd, char sha[65], struct pisb_err *e);

/* ---- gc (pisb-gc): see os_gc.c ----
 *
 * The opensandbox sweep: published instances (an interrupted create is
 * undone; a dead owner's sandbox gets its recorded policy), then on every
 * server that a record names, the sandboxes carrying this state
 * directory's metadata that no live record owns (staged creates whose
 * creator died: killed, the staging entry removed; no record at all: the
 * pisb-policy metadata applied).  dry_run changes nothing.  Results go
 * into r; returns 0. */
struct pisb_gc_report;
int pisb_os_gc(struct pisb_state *st, bool dry_run, struct pisb_gc_report *r,
	       struct pisb_err *e);
/* Is this staging entry a staged opensandbox create (left to pisb_os_gc,
 * which keeps it while its server cannot be asked)? */
bool pisb_os_gc_staged(int dirfd);

/* ---- renewal (pisb-renew) ---- */

/* One pass over every opensandbox instance: renew those that are due
 * (interval min(timeoutSeconds/2, 1 h) since the last renewal; new expiry
 * = request time + timeoutSeconds, never earlier than the one in force),
 * in parallel (libcurl multi), each under its renew.lock (busy ->
 * skipped).  Not renewed: gone sandboxes, paused ones (use has ended;
 * start resumes renewal), those whose owner process is gone (so they
 * expire), those not due, those whose known expiry is already later.
 * A 409 or 400 answer re-reads the sandbox: only a sandbox without
 * expiresAt stops being renewed; else the failure is retried.
 * Writes {"renewed":[names],"failed":[{"name","error"}],
 * "skipped":[{"name","reason"}]}.  Failures are recorded in status.json
 * (inspect) and remote.log, and retried at the next pass.  Returns the
 * number of failures (>= 0), or -1 with e when the pass itself failed. */
int pisb_os_renew_pass(struct pisb_state *st, const struct pisb_renew_opts *o,
		       struct pisb_jw *w, struct pisb_err *e);

#endif
