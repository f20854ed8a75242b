/* dl.h - dlopen() for the lazy loaders (curl_lazy.c, archive_lazy.c), in
 * a file of its own: the static dispatcher defines its own pisb_dlopen
 * (cmd/pisb_static.c), so this one, and the C library's dlopen, which a
 * static binary cannot use, stay out of it. */
#ifndef PISB_DL_H
#define PISB_DL_H

/* dlopen(file, mode), or NULL with dlerror() set */
void *pisb_dlopen(const char *file, int mode);

#endif
