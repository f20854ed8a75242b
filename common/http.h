/* http.h - libcurl helpers for the remote drivers.
 *
 * One request is described by a struct pisb_http_call and answered into a
 * struct pisb_http_resp.  pisb_http_setup() prepares an easy handle for
 * it (so the multi interface can run many at once); pisb_http_run() does
 * one blocking exchange.  A transport failure (no connection, timeout,
 * reset) is an error with exit 5: the backend cannot be reached.  An HTTP
 * error status is not: the caller reads resp->status.
 *
 * Traces (-v: pisb_verbose(), util.h): request line, headers and status on
 * stderr; the values of headers that carry secrets (OPEN-SANDBOX-API-KEY,
 * X-EXECD-ACCESS-TOKEN, Authorization, Cookie) are printed as <redacted>.
 * Bodies are never printed, only their sizes.
 */
#ifndef PISB_HTTP_H
#define PISB_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include "curl_lazy.h"  /* libcurl is loaded on first use, not linked */

#include "util.h"

struct pisb_err;

struct pisb_http_resp {
	long status;              /* 0: no answer */
	struct pisb_buf body;
	char *want_value;         /* value of call->want_header, owned */
	char errbuf[CURL_ERROR_SIZE];
};

/* Streaming sink: called with each piece of the body as it arrives
 * (instead of collecting it).  Return false to abort the transfer. */
typedef bool (*pisb_http_sink)(const char *p, size_t n, void *arg);

struct pisb_http_call {
	const char *method;           /* GET, POST, ... */
	const char *url;
	struct curl_slist *headers;   /* borrowed */
	const void *body;             /* request body, or NULL */
	size_t nbody;
	curl_mime *mime;              /* multipart body instead (borrowed) */
	long timeout_ms;              /* whole exchange; 0 = none */
	long connect_timeout_ms;      /* 0 = 10 s */
	long stall_ms;                /* abort when nothing arrives this long
					 (not for streams); 0 = off */
	pisb_http_sink sink;          /* NULL: collect into resp->body */
	void *sink_arg;
	const char *want_header;      /* capture this response header */
	size_t max_body;              /* collected body cap; 0 = 256 MiB */
};

/* curl_global_init once (not thread-safe: call from main's thread). */
void pisb_http_init(void);

/* Prepare h for call (answer into r).  Borrowed pointers must outlive
 * the transfer. */
void pisb_http_setup(CURL *h, const struct pisb_http_call *call,
		     struct pisb_http_resp *r);
/* After a transfer: 0 if an answer came (r->status set), else -1 with an
 * exit-5 error naming what (e.g. "the OpenSandbox server at URL"). */
int pisb_http_done(CURL *h, CURLcode rc, struct pisb_http_resp *r,
		   const char *what, struct pisb_err *e);
/* setup + curl_easy_perform + done, on a reused handle (keep-alive). */
int pisb_http_run(CURL *h, const struct pisb_http_call *call,
		  struct pisb_http_resp *r, const char *what, struct pisb_err *e);

void pisb_http_resp_init(struct pisb_http_resp *r);
void pisb_http_resp_release(struct pisb_http_resp *r);

/* URL-escape s (any bytes) into b. */
void pisb_http_escape(struct pisb_buf *b, const char *s);

#endif
