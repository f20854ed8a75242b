/* archive_lazy.c - see archive_lazy.h. */
#define PISB_ARCHIVE_LAZY_IMPL
#include "archive_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct pisb_archive_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void __attribute__((noreturn)) fail(const char *what)
{
	char m[512];
	int n = snprintf(m, sizeof(m), "fatal: cannot load libarchive (%s): install libarchive13\n", what);
	if (n > 0 && write(2, m, (size_t)n) < 0) { /* nothing more to do */ }
	_exit(125);
}

static void load(void)
{
	void *h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		h = dlopen("libarchive.so", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail(dlerror());
#define PISB_ARCHIVE_RESOLVE(f) \
	*(void **)&api.f = dlsym(h, #f); \
	if (!api.f) \
		fail(#f);
	PISB_ARCHIVE_FUNCS(PISB_ARCHIVE_RESOLVE)
#undef PISB_ARCHIVE_RESOLVE
}

const struct pisb_archive_api *pisb_archive(void)
{
	pthread_once(&once, load);
	return &api;
}
