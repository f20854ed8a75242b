/* archive_lazy.c - see archive_lazy.h. */
#define PISB_ARCHIVE_LAZY_IMPL
#include "archive_lazy.h"
#include "dl.h"
#include "err.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct pisb_archive_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char why[512];

static void load(void)
{
	void *h = pisb_dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		h = pisb_dlopen("libarchive.so", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, sizeof(why), "cannot load libarchive (%s): install libarchive13", dlerror());
		return;
	}
#define PISB_ARCHIVE_RESOLVE(f) \
	*(void **)&api.f = dlsym(h, #f); \
	if (!api.f && !why[0]) \
		snprintf(why, sizeof(why), "libarchive lacks %s", #f);
	PISB_ARCHIVE_FUNCS(PISB_ARCHIVE_RESOLVE)
#undef PISB_ARCHIVE_RESOLVE
}

int pisb_archive_load(struct pisb_err *e)
{
	pthread_once(&once, load);
	return why[0] ? pisb_err_set(e, PISB_EXIT_FAIL, "%s", why) : 0;
}

const struct pisb_archive_api *pisb_archive(void)
{
	pthread_once(&once, load);
	if (why[0]) {
		/* like out-of-memory: nothing sensible is left to do */
		char m[600];
		int n = snprintf(m, sizeof(m), "fatal: %s\n", why);
		if (n > 0 && write(2, m, (size_t)n) < 0) { /* nothing more to do */ }
		_exit(125);
	}
	return &api;
}
