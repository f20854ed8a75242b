/* curl_lazy.h - libcurl, loaded only when a remote driver needs it.
 *
 * libcurl drags some 30 shared libraries (TLS, Kerberos, LDAP...) into
 * every process that links it, which costs milliseconds at each start:
 * too much for pisb exec and pisb read on the local driver, which never
 * speak HTTP.  So no binary links libcurl; the first curl_* call dlopen()s
 * libcurl.so.4 instead.  Include this right after <curl/curl.h>: it maps
 * the curl_* names used by pisb onto a table of resolved functions.  If
 * libcurl cannot be loaded, every call fails as libcurl itself would
 * (NULL handles, CURLE_FAILED_INIT), and pisb_curl_error() says why.
 */
#ifndef PISB_CURL_LAZY_H
#define PISB_CURL_LAZY_H

#include <curl/curl.h>

struct pisb_curl_api {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	CURLcode (*easy_perform)(CURL *);
	void (*easy_reset)(CURL *);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_perform)(CURLM *, int *);
	CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned, int, int *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	CURLMcode (*multi_cleanup)(CURLM *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	curl_mime *(*mime_init)(CURL *);
	curl_mimepart *(*mime_addpart)(curl_mime *);
	CURLcode (*mime_name)(curl_mimepart *, const char *);
	CURLcode (*mime_filename)(curl_mimepart *, const char *);
	CURLcode (*mime_type)(curl_mimepart *, const char *);
	CURLcode (*mime_data)(curl_mimepart *, const char *, size_t);
	void (*mime_free)(curl_mime *);
};

/* The table (resolved on first use; never NULL). */
const struct pisb_curl_api *pisb_curl(void);
/* Why libcurl could not be loaded, or NULL if it was. */
const char *pisb_curl_error(void);

#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_global_init(a) (pisb_curl()->global_init(a))
#define curl_easy_init() (pisb_curl()->easy_init())
#define curl_easy_setopt(h, o, v) (pisb_curl()->easy_setopt((h), (o), (v)))
#define curl_easy_getinfo(h, i, p) (pisb_curl()->easy_getinfo((h), (i), (p)))
#define curl_easy_perform(h) (pisb_curl()->easy_perform(h))
#define curl_easy_reset(h) (pisb_curl()->easy_reset(h))
#define curl_easy_cleanup(h) (pisb_curl()->easy_cleanup(h))
#define curl_easy_strerror(c) (pisb_curl()->easy_strerror(c))
#define curl_multi_init() (pisb_curl()->multi_init())
#define curl_multi_setopt(m, o, v) (pisb_curl()->multi_setopt((m), (o), (v)))
#define curl_multi_add_handle(m, h) (pisb_curl()->multi_add_handle((m), (h)))
#define curl_multi_remove_handle(m, h) (pisb_curl()->multi_remove_handle((m), (h)))
#define curl_multi_perform(m, n) (pisb_curl()->multi_perform((m), (n)))
#define curl_multi_poll(m, f, nf, t, n) (pisb_curl()->multi_poll((m), (f), (nf), (t), (n)))
#define curl_multi_info_read(m, n) (pisb_curl()->multi_info_read((m), (n)))
#define curl_multi_cleanup(m) (pisb_curl()->multi_cleanup(m))
#define curl_slist_append(l, s) (pisb_curl()->slist_append((l), (s)))
#define curl_slist_free_all(l) (pisb_curl()->slist_free_all(l))
#define curl_mime_init(h) (pisb_curl()->mime_init(h))
#define curl_mime_addpart(m) (pisb_curl()->mime_addpart(m))
#define curl_mime_name(p, n) (pisb_curl()->mime_name((p), (n)))
#define curl_mime_filename(p, n) (pisb_curl()->mime_filename((p), (n)))
#define curl_mime_type(p, t) (pisb_curl()->mime_type((p), (t)))
#define curl_mime_data(p, d, n) (pisb_curl()->mime_data((p), (d), (n)))
#define curl_mime_free(m) (pisb_curl()->mime_free(m))

#endif
