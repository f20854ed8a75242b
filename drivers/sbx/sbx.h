/* sbx.h - the sbx driver: a Docker Sandboxes microVM (its own kernel and
 * its own docker daemon), driven only through the `sbx` CLI.
 *
 * pisb starts `sbx` with posix_spawn, an argv array (never a shell
 * string) and a scrubbed environment: HOME PATH USER LOGNAME TMPDIR SHELL
 * LANG TERM plus the names in sbx.envAllowlist; every DOCKER_* and
 * COMPOSE_* variable is always left out.  Nothing here reads DOCKER_HOST
 * or talks to the host's docker socket: the docker client that runs is
 * the one inside the sandbox, pinned to the sandbox's own daemon with
 * `-H unix:///var/run/docker.sock`.
 *
 * The sbx sandbox is named pi-sbx-<pid>-<n>: pid is --owner-pid (0 for a
 * sandbox without an owner, which pisb gc never takes for a dead
 * session's), n the first number not in use.  Its workspace is the host
 * directory instances/NAME/workspace, which sbx mounts at the same
 * absolute path inside (with sbx.workspaceReadOnly: read-only, beside a
 * writable scratch directory instances/NAME/scratch as the primary
 * workspace, as sbx requires one).
 *
 * Files in instances/NAME/ (besides record.json, status.json):
 *   op.lock     held by create/start/stop/destroy and by the watchdog's
 *               teardown (busy -> 4)
 *   watch.lock  held by the watchdog while it lives
 *   poke.lock   held by a keepalive poke, and by start/stop/destroy after
 *               op.lock (a poke never restarts a sandbox being stopped)
 *   exec/H/     detached commands (handles), see pisb_sbx_exec_handle
 *   sbx.log     one line per sbx lifecycle command and its status, and
 *               setup output
 *   workspace/  (scratch/) the mounted directories
 *
 * record.json's "remote": {"sbxName","createdByPisb","workspace",
 * "teardown","keepalive"}.  status.json's state: creating, running,
 * stopped or gone; its "extra" (inspect: "remote"): {"sbxName","state"
 * (sbx's word), "checkedAt"}.
 *
 * Fail closed: sbx missing or failing is exit 5; nothing ever runs on the
 * host instead.
 */
#ifndef PISB_SBX_H
#define PISB_SBX_H

#include <stdbool.h>
#include <stddef.h>

#include "instance.h"

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_lc_opts;
struct pisb_exec_req;
struct pisb_jw;
struct pisb_strv;
struct pisb_buf;
/* The verbs below that take a struct pisb_sandbox (driver.h) use its
 * record and config as the command read them: record.json is read once. */
struct pisb_sandbox;
struct pisb_ready;


/* create: `sbx create --quiet --name SBX [--cpus N] [--memory M]
 * [--template T] shell WORKSPACE`, checked with `sbx ls --json`; then
 * setup[] through `sbx exec` (a failure is kept in setupError; the
 * sandbox stays); a watchdog when there is an owner (teardown policy at
 * its death) or keepalive; "ready" event.  Services and
 * network.allowedHosts are refused (sbx has its own network policy).
 * Any failure removes the sbx sandbox (if made) and the instance. */
int pisb_sbx_create(struct pisb_state *st, const struct pisb_config *cfg,
		    const char *config_json, const struct pisb_lc_opts *o,
		    struct pisb_err *e);
/* start: `sbx exec SBX true` (sbx starts a stopped sandbox on exec). */
int pisb_sbx_start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
/* stop and destroy, as lifecycle.h's pisb_lifecycle_end runs them: stop:
 * `sbx stop SBX` (state kept); destroy: `sbx rm --force SBX` (already
 * gone is fine; the core then removes the instance). */
int pisb_sbx_end(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, bool destroy,
		 struct pisb_ready *ev, struct pisb_err *e);

/* For inspect: `sbx ls --json` and status.json updated (gone when sbx
 * no longer lists it). */
int pisb_sbx_refresh(struct pisb_sandbox *sb, struct pisb_err *e);
/* The host path of the workspace (caller frees), from the record. */
char *pisb_sbx_workspace(const struct pisb_record *rec);
/* The sbx CLI's name of the sandbox a record describes (caller frees). */
char *pisb_sbx_name(const struct pisb_record *rec);
/* pisb gc: the sbx CLI's stopped pi-sbx-<pid>-<n> session sandboxes whose
 * owner pid is gone and that no pisb sandbox is (KNOWN: the sbx names of
 * the records), removed with sbx rm --force unless dry_run (sbx_gc.c). */
struct pisb_gc_report;
void pisb_sbx_gc_leftovers(struct pisb_state *st, const struct pisb_strv *known, bool dry_run,
			   struct pisb_gc_report *r);

/* Files (pisb-fs): sbx shares the workspace with the VM at the same
 * absolute path, so the file verbs work on that host directory, confined
 * to it.  pisb_sbx_fs_workspace: the record's workspace (caller frees),
 * NULL + e if the record has none.  pisb_sbx_fs_enter: a new user and
 * mount namespace whose root is a tmpfs holding only the workspace, bound
 * at its own path; then chroot there.  Paths outside the workspace do not
 * exist (3): they are the VM's, reachable with pisb exec only. */
char *pisb_sbx_fs_workspace(int idir, struct pisb_err *e);
int pisb_sbx_fs_enter(const char *workspace, struct pisb_err *e);

/* exec attached: `sbx exec -i -w CWD [-e K=V]... SBX -- CMD...`, with
 * stdio streamed and SIGINT/TERM/HUP/QUIT forwarded; *code is the
 * command's status.  cwd relative = under the workspace.  env: the
 * config's env, sbx.envPassthrough's host values, then r->env.  A
 * failure of sbx itself (the sandbox cannot start, is gone) is -1 with
 * exit 5, recognised by its messages on stderr. */
int pisb_sbx_exec_attached(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			   int *code, struct pisb_err *e);
/* Handles (exec --timeout-ms, exec-status, exec-kill): the protocol,
 * contract and JSON of handle.h and exec.h.  A handle "sbx-XXXXXXXX" runs
 * `sbx exec`; kill TERMs the command inside (its pid is kept in
 * /tmp/.pisb-exec-HANDLE there), KILL after 2 s, then its sbx client.  A
 * supervisor that died without a status: running false, exitCode null,
 * *code 5 and e->msg set (the call still returns 0). */
int pisb_sbx_exec_handle(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			 struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
int pisb_sbx_exec_status(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			 struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
int pisb_sbx_exec_kill(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
		       int *code, struct pisb_err *e);
/* An interactive terminal: `sbx exec -i -t [-u USER] SBX -- bash -l`. */
int pisb_sbx_shell(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e);

/* pisb docker NAME VERB ARGS... (a sandbox of another driver has no
 * docker slot: the core refuses it).  status, verify and resources write one JSON object to w
 * (*json_out set); every other verb runs `docker -H
 * unix:///var/run/docker.sock VERB ARGS...` inside through `sbx exec`,
 * streaming, and *code is docker's status.  notes gets lines for the
 * caller to show on stderr (ports published after run). */
int pisb_sbx_docker(struct pisb_sandbox *sb, const char *verb, char *const *args, size_t nargs,
		    struct pisb_jw *w, bool *json_out, int *code, struct pisb_strv *notes,
		    struct pisb_err *e);

#endif
