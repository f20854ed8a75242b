/* dl.c - see dl.h. */
#include "dl.h"

#include <dlfcn.h>

void *pisb_dlopen(const char *file, int mode)
{
	return dlopen(file, mode);
}

void pisb_dl_needed(const char *why)
{
	(void)why;
}
