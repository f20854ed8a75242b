/* os_internal.h - shared inside the opensandbox driver (opensandbox.c,
 * os_client.c, os_exec.c, os_fs.c, renew.c); not a public interface. */
#ifndef PISB_OS_INTERNAL_H
#define PISB_OS_INTERNAL_H

#include <stdbool.h>
#include <signal.h>
#include <stdint.h>

#include "config.h"
#include "http.h"
#include "instance.h"
#include "util.h"

struct pisb_err;
struct pisb_state;

#define OS_EXECD_PORT 44772
/* How long create/resume/pause wait for the sandbox (and execd) to be
 * ready: 180 s, or $PISB_OS_READY_MS (tests shorten it). */
#define OS_READY_MS os_ready_ms()
int os_ready_ms(void);
#define OS_LC_TIMEOUT_MS 60000     /* one lifecycle request */
#define OS_CAP (64 * 1024)

/* ---- the client (os_client.c) ---- */

struct os_conn {
	char *lc_base;                 /* "http://domain/v1" */
	char *what;                    /* "the OpenSandbox server at http://domain" */
	char *sid;                     /* sandbox id, or NULL */
	char *execd;                   /* "http://endpoint", once resolved */
	struct curl_slist *lc_hdrs;    /* with the API key: never logged */
	struct curl_slist *ex_hdrs;    /* endpoint headers (execd token) */
	bool have_key;
	CURL *h;                       /* reused: keep-alive */
	const char *key_source;        /* for messages: "apiKeyFile '...'" */
};

/* The API key: apiKeyFile (must be 0600: else refused naming file and
 * mode) or $OPEN_SANDBOX_API_KEY; *key NULL if neither.  Caller frees
 * (and should wipe). */
int os_load_key(const struct pisb_os_config *os, char **key,
		const char **source, struct pisb_err *e);
int os_conn_init(struct os_conn *c, const struct pisb_os_config *os,
		 const char *sid, struct pisb_err *e);
/* The same with a key already loaded (renew: one key per file). */
void os_conn_init_key(struct os_conn *c, const struct pisb_os_config *os,
		      const char *sid, const char *key, const char *source);
void os_conn_release(struct os_conn *c);

/* One lifecycle request (path below /v1).  0 when an answer came, -1
 * (exit 5) when the server cannot be reached. */
int os_lc(struct os_conn *c, const char *method, const char *path,
	  const char *json, long timeout_ms, struct pisb_http_resp *r,
	  struct pisb_err *e);
/* An error for a non-2xx answer: "ACTION: STATUS CODE: message", with
 * hints for 401/403; exit 5 (3 for a missing sandbox or file). */
int os_fail(const struct os_conn *c, const struct pisb_http_resp *r,
	    const char *action, struct pisb_err *e);

/* The sandbox's state: 0 with state (the server's word, e.g. "Running")
 * and expires (RFC 3339 or "" for none) filled; 1 if the server says it
 * does not exist (404); -1 on error. */
int os_get(struct os_conn *c, char state[32], char expires[64], long timeout_ms,
	   struct pisb_err *e);
/* Wait until Running, resuming it when Paused (once).  *resumed set if
 * a resume was sent.  Gone: exit 5 "no longer exists". */
int os_ensure_running(struct os_conn *c, const char *name, bool *resumed,
		      struct pisb_err *e);
/* Resolve execd (endpoint 44772 + its headers) and wait for /ping. */
int os_execd_resolve(struct os_conn *c, struct pisb_err *e);
int os_execd_wait(struct os_conn *c, int timeout_ms, struct pisb_err *e);
/* One execd request; path includes the query.  body/ctype optional. */
int os_execd(struct os_conn *c, const char *method, const char *path,
	     const char *ctype, const void *body, size_t n, long timeout_ms,
	     struct pisb_http_resp *r, struct pisb_err *e);
/* Renew to now + seconds, never earlier than current (RFC 3339 or
 * NULL/"" when unknown): when current is already later, nothing is sent
 * (OS_RENEW_KEPT).  A 409 or 400 answer re-reads the sandbox: no
 * expiresAt there = OS_RENEW_NOEXP; one at least as late as ours =
 * OS_RENEW_KEPT; else an error naming both.  expires gets the expiry in
 * force afterwards. */
enum { OS_RENEWED, OS_RENEW_KEPT, OS_RENEW_NOEXP };
int os_renew(struct os_conn *c, long long seconds, const char *current, char expires[64],
	     int *outcome, struct pisb_err *e);
/* The JSON body of a renew request for the unix time ms. */
void os_renew_body_at(int64_t ms, char out[96]);
/* RFC 3339 -> unix milliseconds (0 if unparsable or empty). */
int64_t os_time_ms(const char *s);

/* ---- commands through execd (os_exec.c) ---- */

/* Where a foreground command's output goes. */
struct os_run {
	int out_fd, err_fd;            /* -1: collect into out/err */
	struct pisb_buf *out, *err;    /* may be NULL */
	size_t cap;                    /* collect at most (0 = 8 MiB) */
	bool interruptible;            /* SIGINT/TERM/HUP interrupt it */
	int timeout_ms;                /* execd timeout (kills it), 0 = none */
};
/* Run command (a bash -c string) in cwd with env "K=V"[nenv]; *code is its
 * exit status (128+N for signals).  -1 with exit 5 when the stream ends
 * without an exit status. */
int os_run_cmd(struct os_conn *c, const char *command, const char *cwd,
	       char *const *env, size_t nenv, const struct os_run *o,
	       int *code, struct pisb_err *e);
/* Shell-quote s ('...') into b. */
void os_sq(struct pisb_buf *b, const char *s);

/* ---- instances (opensandbox.c) ---- */

struct os_extra {
	char *sandbox_id;
	bool created;
	char *remote_state;            /* the server's word */
	char *expires_at;              /* RFC 3339, NULL = none/unknown */
	bool no_expiry;                /* server: no automatic expiration */
	int64_t renewed_at, next_renew_at, checked_at;
	char *last_error;              /* last renewal error */
	int64_t last_error_at;
	int failures;                  /* consecutive renewal failures */
	char *unreachable;             /* the last ask failed: why (NULL: answered) */
};
void os_extra_release(struct os_extra *x);
void os_extra_parse(const char *json, struct os_extra *x);
char *os_extra_json(const struct os_extra *x);

struct os_inst {
	int idir;
	char *name;
	struct pisb_record rec;
	struct pisb_runtime rt;
	struct pisb_config *cfg;
	struct os_extra x;
	char *sid;
	bool created;                  /* pisb created it (vs connected) */
	struct os_conn c;
	bool borrowed;                 /* idir, rec and cfg are a pisb_sandbox's */
};
/* An opened sandbox (driver.h) of this driver with its client (key
 * loaded): its record and config borrowed, not read again; status.json
 * read anew. */
struct pisb_sandbox;
int os_inst_of(struct pisb_sandbox *sb, struct os_inst *t, struct pisb_err *e);
void os_inst_release(struct os_inst *t);
/* Make it usable: GET, resume when paused (under renew.lock), execd
 * resolved and answering.  Gone: status.json says so, exit 5. */
int os_inst_ready(struct os_inst *t, struct pisb_err *e);
/* The same, but a sandbox the server does not run (paused, pausing,
 * resuming) is refused (exit 5) rather than resumed: for reads that must
 * start nothing (the project's diff). */
int os_inst_running(struct os_inst *t, struct pisb_err *e);
/* Resolve a sandbox path: absolute stays, relative is under the workspace. */
char *os_path(const struct os_inst *t, const char *p);
/* Save status.json with state and t->x (sync: fsync as every state file;
 * the renewal pass passes false for its many small updates). */
int os_status_save(int idir, struct pisb_runtime *rt, const char *state,
		   const struct os_extra *x, bool sync, struct pisb_err *e);
/* Append a line to remote.log ("<time> <msg>"). */
void os_log(int idir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Metadata pisb puts on every sandbox it creates (label values):
 * the state directory (os_state_label), the create's intent id (record
 * remote.instanceId), the policy for a dead owner, the instance name. */
#define OS_MD_STATE "pisb-state"
#define OS_MD_INSTANCE "pisb-instance"
#define OS_MD_POLICY "pisb-policy"
#define OS_MD_NAME "pisb-name"
/* A Kubernetes label value for s: s itself if it is one, else a hash. */
void os_label_value(const char *s, char out[64]);
/* Who this state directory is, as a label value: a hash of the host name
 * and the state directory's path, so that gc never takes another pisb's
 * sandboxes for its own. */
void os_state_label(const struct pisb_state *st, char out[64]);
/* SIGINT/SIGTERM/SIGHUP during create: the handler only records the
 * signal (os_stop_sig); the waits check it, and create undoes what it
 * made.  os_stop_catch returns with the old handlers saved in *old. */
extern volatile sig_atomic_t os_stop_sig;
struct os_sigsave { struct sigaction old[3]; };
void os_stop_catch(struct os_sigsave *sv);
void os_stop_restore(struct os_sigsave *sv);
/* 0, or -1 with e ("interrupted by SIGTERM", exit 128+N) after a signal. */
int os_stop_check(struct pisb_err *e);

/* One sandbox of ours as the server's list gives it (os_gc.c). */
struct os_remote {
	char *id, *iid, *policy, *name;   /* metadata pisb-instance, -policy, -name */
	char *state, *expires;            /* status.state, expiresAt (or NULL) */
};
void os_remotes_free(struct os_remote *v, size_t n);
/* Every sandbox on c's server carrying this state directory's metadata
 * (and pisb-name=name when name is given), all pages (200 each). */
int os_list_ours(struct os_conn *c, const struct pisb_state *st, const char *name,
		 int timeout_ms, struct os_remote **out, size_t *n, struct pisb_err *e);
/* The same server and key? */
bool os_same_server(const struct pisb_os_config *a, const struct pisb_os_config *b);

/* create NAME's sweep (os_gc.c): on os's server, the sandboxes of ours
 * named NAME that no live record owns get what gc would do to them. */
void os_gc_name(struct pisb_state *st, const struct pisb_os_config *os, const char *name);

/* Interval between renewals: min(timeout/2, 1 h), at least 1 s. */
int64_t os_renew_interval(long long timeout_seconds);

#endif
