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

/* The keys "cpus" (a number, or null), "memory", "disk" and "docker" of
 * `docker resources` into W's open object, from OUT, the output of the
 * probe that printed them after __CPUS__, __MEMORY__, __DISK__ and
 * __DOCKER__ marker lines. */
void pisb_docker_resources(struct pisb_jw *w, const char *out);

#endif
