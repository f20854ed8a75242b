/* http.c - libcurl helpers (see http.h). */
#include "http.h"
#include "err.h"
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool inited;

void pisb_http_init(void)
{
	if (!inited) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		inited = true;
	}
}

void pisb_http_resp_init(struct pisb_http_resp *r)
{
	memset(r, 0, sizeof(*r));
}

void pisb_http_resp_release(struct pisb_http_resp *r)
{
	pisb_buf_release(&r->body);
	free(r->want_value);
	memset(r, 0, sizeof(*r));
}

void pisb_http_escape(struct pisb_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
			pisb_buf_addc(b, (char)c);
		} else {
			pisb_buf_addc(b, '%');
			pisb_buf_addc(b, hex[c >> 4]);
			pisb_buf_addc(b, hex[c & 15]);
		}
	}
}

/* ---- tracing with secrets redacted ---- */

static const char *const secret_headers[] = {
	"open-sandbox-api-key", "x-execd-access-token", "authorization",
	"proxy-authorization", "cookie", "set-cookie", "opensandbox-egress-auth",
	"opensandbox-secure-access", NULL,
};

static bool is_secret(const char *line, size_t n)
{
	const char *colon = memchr(line, ':', n);

	if (!colon)
		return false;
	for (int i = 0; secret_headers[i]; i++) {
		size_t k = strlen(secret_headers[i]);
		if ((size_t)(colon - line) == k && !strncasecmp(line, secret_headers[i], k))
			return true;
	}
	return false;
}

/* Print each line of a header block with prefix, secrets redacted. */
static void trace_lines(const char *prefix, const char *p, size_t n)
{
	struct pisb_buf b = PISB_BUF_INIT;

	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t len = nl ? (size_t)(nl - p) + 1 : n, l = len;

		while (l && (p[l - 1] == '\n' || p[l - 1] == '\r'))
			l--;
		if (l) {
			pisb_buf_adds(&b, prefix);
			if (is_secret(p, l)) {
				const char *colon = memchr(p, ':', l);
				pisb_buf_add(&b, p, (size_t)(colon - p) + 1);
				pisb_buf_adds(&b, " <redacted>");
			} else {
				/* control bytes out, the rest as is */
				for (size_t i = 0; i < l; i++)
					pisb_buf_addc(&b, (unsigned char)p[i] < 0x20 ? '?' : p[i]);
			}
			pisb_buf_addc(&b, '\n');
		}
		p += len;
		n -= len;
	}
	if (b.len)
		fwrite(b.s, 1, b.len, stderr);
	pisb_buf_release(&b);
}

static int debug_cb(CURL *h, curl_infotype type, char *data, size_t size, void *arg)
{
	(void)h;
	(void)arg;
	switch (type) {
	case CURLINFO_TEXT:
		if (pisb_verbose() > 1)
			trace_lines("pisb: http * ", data, size);
		break;
	case CURLINFO_HEADER_OUT:
		trace_lines("pisb: http > ", data, size);
		break;
	case CURLINFO_HEADER_IN:
		trace_lines("pisb: http < ", data, size);
		break;
	case CURLINFO_DATA_OUT:
		fprintf(stderr, "pisb: http > [%zu bytes of body]\n", size);
		break;
	case CURLINFO_DATA_IN:
		if (pisb_verbose() > 1)
			fprintf(stderr, "pisb: http < [%zu bytes of body]\n", size);
		break;
	default:
		break;
	}
	return 0;
}

/* ---- callbacks ---- */

struct ctx {
	const struct pisb_http_call *call;
	struct pisb_http_resp *r;
	bool too_big;
};

/* One ctx per response: kept in the response's private slot.  The
 * response struct is the caller's and outlives the transfer; the ctx is
 * allocated here and freed in pisb_http_done(). */
static size_t write_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct ctx *c = arg;
	size_t n = size * nmemb;
	size_t max = c->call->max_body ? c->call->max_body : (256u << 20);

	if (c->call->sink)
		return c->call->sink(p, n, c->call->sink_arg) ? n : 0;
	if (c->r->body.len + n > max) {
		c->too_big = true;
		return 0;
	}
	pisb_buf_add(&c->r->body, p, n);
	return n;
}

static size_t header_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct ctx *c = arg;
	size_t n = size * nmemb, k;
	const char *want = c->call->want_header;

	/* a new status line (redirect, 100-continue) starts a new header set */
	if (n > 5 && !strncmp(p, "HTTP/", 5)) {
		free(c->r->want_value);
		c->r->want_value = NULL;
		return n;
	}
	if (!want)
		return n;
	k = strlen(want);
	if (n > k && p[k] == ':' && !strncasecmp(p, want, k)) {
		const char *v = p + k + 1;
		size_t l = n - k - 1;
		while (l && (*v == ' ' || *v == '\t')) {
			v++;
			l--;
		}
		while (l && (v[l - 1] == '\r' || v[l - 1] == '\n' || v[l - 1] == ' '))
			l--;
		free(c->r->want_value);
		c->r->want_value = xstrndup(v, l);
	}
	return n;
}

void pisb_http_setup(CURL *h, const struct pisb_http_call *call,
		     struct pisb_http_resp *r)
{
	struct ctx *c = xcalloc(1, sizeof(*c));

	c->call = call;
	c->r = r;
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_PRIVATE, c);
	curl_easy_setopt(h, CURLOPT_URL, call->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "pisb/0.1");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 call->connect_timeout_ms ? call->connect_timeout_ms : 10000L);
	if (call->timeout_ms)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, call->timeout_ms);
	if (call->stall_ms) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (call->stall_ms + 999) / 1000);
	}
	/* no proxies from the environment: the key must go where configured */
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	if (call->headers)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, call->headers);
	if (call->mime) {
		curl_easy_setopt(h, CURLOPT_MIMEPOST, call->mime);
	} else if (call->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, call->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->nbody);
	}
	if (!strcmp(call->method, "GET"))
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	else if (!strcmp(call->method, "POST") && (call->body || call->mime))
		; /* POSTFIELDS/MIMEPOST made it a POST */
	else if (!strcmp(call->method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
	} else
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, call->method);
	if (pisb_verbose() > 0) {
		curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, debug_cb);
		curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
	}
}

int pisb_http_done(CURL *h, CURLcode rc, struct pisb_http_resp *r,
		   const char *what, struct pisb_err *e)
{
	struct ctx *c = NULL;
	bool too_big;

	curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&c);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	too_big = c && c->too_big;
	free(c);
	curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
	if (pisb_verbose() > 0)
		fprintf(stderr, "pisb: http = %ld (%s)\n", r->status,
			rc == CURLE_OK ? "ok" : curl_easy_strerror(rc));
	if (rc == CURLE_OK)
		return 0;
	if (too_big)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "%s: the answer is too large", what);
	if (rc == CURLE_WRITE_ERROR && r->status)
		return 0; /* the sink stopped it on purpose: the answer came */
	return pisb_err_set(e, PISB_EXIT_BACKEND, "cannot reach %s: %s", what,
			    r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc));
}

int pisb_http_run(CURL *h, const struct pisb_http_call *call,
		  struct pisb_http_resp *r, const char *what, struct pisb_err *e)
{
	CURLcode rc;

	pisb_http_setup(h, call, r);
	rc = curl_easy_perform(h);
	return pisb_http_done(h, rc, r, what, e);
}
