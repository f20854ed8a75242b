/* compat.c - see compat.h: the musl build's shims that are not inline. */
#include "compat.h"

#ifndef __GLIBC__
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *fa, int from)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int r = 0;

	if (!d)
		return errno;
	while (!r && (de = readdir(d))) {
		int fd = atoi(de->d_name);

		if (de->d_name[0] != '.' && fd >= from && fd != dirfd(d))
			r = posix_spawn_file_actions_addclose(fa, fd);
	}
	closedir(d);
	return r;
}

/* Debian's libyaml.a and libpcre2-8.a, which the musl pisb links, were
 * compiled with glibc's _FORTIFY_SOURCE: the checked calls it made of
 * their sprintf and memcpy, each with the size of its destination
 * (glibc's ends the process when it is too small, as these do) */
int __sprintf_chk(char *s, int flag, size_t size, const char *fmt, ...);
void *__memcpy_chk(void *dst, const void *src, size_t n, size_t size);

int __sprintf_chk(char *s, int flag, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	(void)flag;
	va_start(ap, fmt);
	/* the size unknown to the compiler: (size_t)-1, more than musl's
	 * vsnprintf takes */
	n = size > INT_MAX ? vsprintf(s, fmt, ap) : vsnprintf(s, size, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n >= size)
		abort();
	return n;
}

void *__memcpy_chk(void *dst, const void *src, size_t n, size_t size)
{
	if (n > size)
		abort();
	return memcpy(dst, src, n);
}
#endif
