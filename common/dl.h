/* dl.h - dlopen() for the lazy loaders (curl_lazy.c, archive_lazy.c), in
 * a file of its own: the static dispatcher defines its own pisb_dlopen
 * and pisb_dl_needed (cmd/pisb_static.c), so these, and the C library's
 * dlopen, which a static binary cannot use, stay out of it. */
#ifndef PISB_DL_H
#define PISB_DL_H

/* dlopen(file, mode), or NULL with dlerror() set */
void *pisb_dlopen(const char *file, int mode);

/* Called before a code path that may load a library (or ask NSS) changes
 * anything: a no-op here; in the static pisb it hands the whole command
 * to the binary that owns its verb, and does not return.  why: what
 * would be loaded, for the message when that cannot be done. */
void pisb_dl_needed(const char *why);

#endif
