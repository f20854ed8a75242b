/* curl_lazy.c - see curl_lazy.h. */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "curl_lazy.h"
#include "dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Stand-ins that fail the way libcurl does when it cannot start. */
static CURLcode f_global_init(long f) { (void)f; return CURLE_FAILED_INIT; }
static CURL *f_easy_init(void) { return NULL; }
static CURLcode f_easy_setopt(CURL *h, CURLoption o, ...) { (void)h; (void)o; return CURLE_FAILED_INIT; }
static CURLcode f_easy_getinfo(CURL *h, CURLINFO i, ...) { (void)h; (void)i; return CURLE_FAILED_INIT; }
static CURLcode f_easy_perform(CURL *h) { (void)h; return CURLE_FAILED_INIT; }
static void f_easy_void(CURL *h) { (void)h; }
static const char *f_easy_strerror(CURLcode c) { (void)c; return "libcurl is not available"; }
static CURLM *f_multi_init(void) { return NULL; }
static CURLMcode f_multi_setopt(CURLM *m, CURLMoption o, ...) { (void)m; (void)o; return CURLM_INTERNAL_ERROR; }
static CURLMcode f_multi_handle(CURLM *m, CURL *h) { (void)m; (void)h; return CURLM_INTERNAL_ERROR; }
static CURLMcode f_multi_perform(CURLM *m, int *n) { (void)m; if (n) *n = 0; return CURLM_INTERNAL_ERROR; }
static CURLMcode f_multi_poll(CURLM *m, struct curl_waitfd *f, unsigned nf, int t, int *n)
{ (void)m; (void)f; (void)nf; (void)t; if (n) *n = 0; return CURLM_INTERNAL_ERROR; }
static CURLMsg *f_multi_info_read(CURLM *m, int *n) { (void)m; if (n) *n = 0; return NULL; }
static CURLMcode f_multi_cleanup(CURLM *m) { (void)m; return CURLM_OK; }
static struct curl_slist *f_slist_append(struct curl_slist *l, const char *s) { (void)l; (void)s; return NULL; }
static void f_slist_free_all(struct curl_slist *l) { (void)l; }
static curl_mime *f_mime_init(CURL *h) { (void)h; return NULL; }
static curl_mimepart *f_mime_addpart(curl_mime *m) { (void)m; return NULL; }
static CURLcode f_mime_str(curl_mimepart *p, const char *s) { (void)p; (void)s; return CURLE_FAILED_INIT; }
static CURLcode f_mime_data(curl_mimepart *p, const char *d, size_t n) { (void)p; (void)d; (void)n; return CURLE_FAILED_INIT; }
static void f_mime_free(curl_mime *m) { (void)m; }

static const struct pisb_curl_api failing = {
	f_global_init, f_easy_init, f_easy_setopt, f_easy_getinfo, f_easy_perform,
	f_easy_void, f_easy_void, f_easy_strerror, f_multi_init, f_multi_setopt,
	f_multi_handle, f_multi_handle, f_multi_perform, f_multi_poll,
	f_multi_info_read, f_multi_cleanup, f_slist_append, f_slist_free_all,
	f_mime_init, f_mime_addpart, f_mime_str, f_mime_str, f_mime_str, f_mime_data,
	f_mime_free,
};

static struct pisb_curl_api api;
static const struct pisb_curl_api *table;
static char why[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	static const char *const names[] = { "libcurl.so.4", "libcurl.so", "libcurl-gnutls.so.4", NULL };
	void *h = NULL;

	for (int i = 0; names[i] && !h; i++)
		h = pisb_dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, sizeof(why), "cannot load libcurl (%s): install libcurl4", dlerror());
		table = &failing;
		return;
	}
#define SYM(field, name) \
	do { \
		*(void **)&api.field = dlsym(h, name); \
		if (!api.field) { \
			snprintf(why, sizeof(why), "libcurl lacks %s", name); \
			table = &failing; \
			return; \
		} \
	} while (0)
	SYM(global_init, "curl_global_init");
	SYM(easy_init, "curl_easy_init");
	SYM(easy_setopt, "curl_easy_setopt");
	SYM(easy_getinfo, "curl_easy_getinfo");
	SYM(easy_perform, "curl_easy_perform");
	SYM(easy_reset, "curl_easy_reset");
	SYM(easy_cleanup, "curl_easy_cleanup");
	SYM(easy_strerror, "curl_easy_strerror");
	SYM(multi_init, "curl_multi_init");
	SYM(multi_setopt, "curl_multi_setopt");
	SYM(multi_add_handle, "curl_multi_add_handle");
	SYM(multi_remove_handle, "curl_multi_remove_handle");
	SYM(multi_perform, "curl_multi_perform");
	SYM(multi_poll, "curl_multi_poll");
	SYM(multi_info_read, "curl_multi_info_read");
	SYM(multi_cleanup, "curl_multi_cleanup");
	SYM(slist_append, "curl_slist_append");
	SYM(slist_free_all, "curl_slist_free_all");
	SYM(mime_init, "curl_mime_init");
	SYM(mime_addpart, "curl_mime_addpart");
	SYM(mime_name, "curl_mime_name");
	SYM(mime_filename, "curl_mime_filename");
	SYM(mime_type, "curl_mime_type");
	SYM(mime_data, "curl_mime_data");
	SYM(mime_free, "curl_mime_free");
#undef SYM
	table = &api;
}

const struct pisb_curl_api *pisb_curl(void)
{
	pthread_once(&once, load);
	return table;
}

const char *pisb_curl_error(void)
{
	pisb_curl();
	return why[0] ? why : NULL;
}
