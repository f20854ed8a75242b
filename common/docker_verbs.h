/* docker_verbs.h - the parts of `pisb docker` verbs that no driver changes.
 *
 * A driver's docker slot decides which ports a sandbox published and how
 * a command runs inside it; what happens on the host once that is known
 * lives here, once for every driver.
 */
#ifndef PISB_DOCKER_VERBS_H
#define PISB_DOCKER_VERBS_H

#include "err.h"
#include "json.h"
#include "util.h"

/* The most of an answer `docker curl` reads and hands back. */
#define PISB_DOCKER_CURL_CAP (64 * 1024)

/* `docker curl`'s exchange: METHOD PATH over HTTP/1.0 to 127.0.0.1:PORT
 * (BODY, when not NULL, as application/json), the answer read into RESP
 * for 10 s at the most, until the peer closes or PISB_DOCKER_CURL_CAP
 * bytes came.  *BODY_OUT and *BODY_LEN: the answer's body inside RESP (capped
 * at PISB_DOCKER_CURL_CAP); *CODE: 0 for a 2xx or 3xx status, else
 * PISB_EXIT_FAIL.  The caller checks that PORT is one the sandbox
 * published.  Fails with exit 5 (no connection, no HTTP answer) or 6 (no
 * complete answer in time).  TOKEN (NULL: none) goes in an X-Pisb-Token
 * header, for a preview behind preview.auth: token. */
int pisb_docker_curl_exchange(int port, const char *method, const char *path, const char *body,
			      const char *token, struct pisb_buf *resp, const char **body_out, size_t *body_len, int *code,
			      struct pisb_err *e);

/* The text between "MARKER\n" and the next line that starts with "__" in
 * S, the output of a probe run inside a sandbox, trailing newlines cut;
 * NULL where S has no MARKER line.  The caller frees it. */
char *pisb_docker_section(const char *s, const char *marker);

/* One `docker verify` check: {"check": NAME, "pass": PASS, "evidence":
 * EVIDENCE} into W's open array; *ALL stays true only while every check
 * passes. */
void pisb_docker_check(struct pisb_jw *w, const char *name, bool pass, const char *evidence, bool *all);

/* A verify report (JSON: {"checks":[{check, pass, evidence}], "pass"}) as
 * text, a "[PASS] check" line and its evidence a check, then the verdict,
 * into OUT (nothing when JSON does not parse). */
void pisb_docker_verify_text(const char *json, size_t n, struct pisb_buf *out);

/* The keys "cpus" (a number, or null), "memory", "disk" and "docker" of
 * `docker resources` into W's open object, from OUT, the output of the
 * probe that printed them after __CPUS__, __MEMORY__, __DISK__ and
 * __DOCKER__ marker lines. */
void pisb_docker_resources(struct pisb_jw *w, const char *out);

/* A port a sandbox published: HOST on the host's IP (as the driver lists
 * it), CPORT inside, PROTO "tcp", "udp" ... */
struct pisb_docker_pub {
	char ip[64];
	int host, cport;
	char proto[8];
};

/* The ports `docker port REF` printed in OUT ("80/tcp -> 0.0.0.0:8080",
 * a line a port): *P (the caller frees it) and *N, those with a container
 * port and a host port above 0.  PROTO is "" where a line names none. */
void pisb_docker_port_lines(const char *out, struct pisb_docker_pub **p, size_t *n);

/* The key "ports" of `docker status` into W's open object: N entries of P
 * as {hostIp, hostPort, sandboxPort, protocol}. */
void pisb_docker_ports_json(struct pisb_jw *w, const struct pisb_docker_pub *p, size_t n);

/* What `docker status` reports after the keys that name the sandbox. */
struct pisb_docker_status {
	const char *status, *workspace;
	const char *socket;             /* where the daemon listens, as shown */
	bool reachable;
	const char *id, *version;       /* NULL: null */
	bool storage;                   /* report "storageDriver" (its value: storage_driver) */
	const char *storage_driver;
	const char *error;              /* NULL: no "error" key */
	const struct pisb_docker_pub *ports;
	size_t nports;
	const char *env;                /* "strict" or "allowlist" */
};

/* `docker status`'s keys from "status" on into W's open object, which it
 * closes. */
void pisb_docker_status(struct pisb_jw *w, const struct pisb_docker_status *s);

/* The argv tail of a docker VERB ARGS... command after `docker -H SOCK`:
 * VERB (prune: `system prune --all --force`), then ARGS, pushed on AV. */
void pisb_docker_verb_argv(struct pisb_strv *av, const char *verb, char *const *args, size_t n);

/* A probe's output OUT ends with its __END__ line (and OK holds): 0; else
 * -1 and E (exit 5): "WHAT 'NAME': the probe inside the sandbox failed
 * (status CODE)", then ": DETAIL" where DETAIL is not NULL. */
int pisb_docker_probe_end(const char *out, bool ok, const char *what, const char *name, int code,
			  const char *detail, struct pisb_err *e);

/* The canaries `docker verify` sets in pisb's own environment before its
 * probe runs: DOCKER_HOST=SENTINEL, PROBE=1 and, with COMPOSE,
 * COMPOSE_PROJECT_NAME.  The sandbox must see none of them. */
struct pisb_docker_canary {
	char rnd[9], sentinel[80], probe[64];
	bool compose;
};
void pisb_docker_canary_set(struct pisb_docker_canary *c, bool compose);
void pisb_docker_canary_unset(const struct pisb_docker_canary *c);

/* `docker verify`'s checks on OUT, the output of its probe inside, into
 * W's open array.  env-scrub and env-forwarding: the variables the probe
 * printed after __ENV__ hold none of C (NOTE, "" or " (not allowlisted)",
 * follows "PROBE set for pisb" in the evidence). */
void pisb_docker_verify_env(struct pisb_jw *w, const struct pisb_docker_canary *c, const char *out,
			    const char *note, bool *all);
/* daemon: `docker -H SOCK info` answered (__DAEMON__) with status 0
 * (__RC__). */
void pisb_docker_verify_daemon(struct pisb_jw *w, const char *sock, const char *out, bool *all);
/* host-mounts by device and inode, for a sandbox on this host's kernel
 * (the local driver): the probe part that prints, after __MOUNTS__, "DEV
 * INO PATH" for each of its arguments as the sandbox sees it (stat -L)
 * and for every mount point inside (/proc/self/mountinfo, its octal
 * escapes decoded). */
#define PISB_DOCKER_MOUNTS_PROBE \
	"echo __MOUNTS__; for p in \"$@\"; do stat -L -c '%d %i %n' -- \"$p\" 2>/dev/null; done; " \
	"while read -r _ _ _ _ m _; do m=$(printf '%b' \"$m\"); stat -c '%d %i %n' -- \"$m\" 2>/dev/null; done < /proc/self/mountinfo; "
/* The check on that probe's output OUT: it fails when a line's device and
 * inode are those of one of the N host PATHS (stat(2) here: a symlink,
 * "//" or "/./" in its spelling changes nothing) or of a directory above
 * one (a bind of it reaches the path too), naming both.  A path the host
 * does not have is skipped. */
void pisb_docker_verify_host_mounts(struct pisb_jw *w, char *const *paths, size_t n, const char *out,
				    bool *all);

/* host-mounts: none of WHAT (the host paths probed, in words) is visible
 * inside (__MOUNTS__: those that are). */
void pisb_docker_verify_mounts(struct pisb_jw *w, const char *what, const char *out, bool *all);
/* contexts: the docker contexts inside (__CONTEXTS__) are "default" alone. */
void pisb_docker_verify_contexts(struct pisb_jw *w, const char *out, bool *all);
/* port-binds: the N ports P a sandbox published are bound on the host's
 * loopback only, as LOOPBACK says of each (it appends the port's evidence
 * to B); ERR, where the ports could not be listed, fails the check. */
void pisb_docker_verify_ports(struct pisb_jw *w, const struct pisb_docker_pub *p, size_t n, const char *err,
			      bool (*loopback)(const struct pisb_docker_pub *p, struct pisb_buf *b), bool *all);

/* Closes `docker verify`'s array of checks and its object with "pass":
 * ALL; *CODE: 0 when ALL, else PISB_EXIT_FAIL. */
void pisb_docker_verify_end(struct pisb_jw *w, bool all, int *code);

/* How a driver words, checks and serves `docker curl`'s TARGET. */
struct pisb_docker_curl_ops {
	const char *target;     /* the forms TARGET takes, for the usage errors */
	const char *only;       /* what it may be, for "only ONLY, not 'TARGET'" */
	/* The port on the host's 127.0.0.1 that serves PORT, the one asked
	 * for, into *HPORT; -1 with E where the sandbox published none.
	 * TOKEN: what goes in X-Pisb-Token (left empty: none). */
	int (*serve)(void *ctx, long long port, int *hport, struct pisb_buf *token, struct pisb_err *e);
};

/* `docker curl -- [-X METHOD] [-d BODY] TARGET`: ARGS parsed (exit 2 on a
 * bad one), OPS->serve asked for the port, then the exchange
 * (pisb_docker_curl_exchange): the answer's body added to BODY, *CODE. */
int pisb_docker_curl(const struct pisb_docker_curl_ops *ops, void *ctx, char *const *args, size_t n,
		     struct pisb_buf *body, int *code, struct pisb_err *e);

#endif
