/* image.h - `image: PATH`: a rootfs directory or tarball (any compression
 * libarchive reads), imported once into a content-addressed cache under
 * images/, owned by the ids root inside maps to. */
#ifndef PISB_IMAGE_H
#define PISB_IMAGE_H

#include "state.h"

struct pisb_err;
struct pisb_state;
struct pisb_ids;

/* Absolute path of the cached rootfs for path (importing it if needed);
 * caller frees.  NULL with e on failure.  When cache is not NULL it gets
 * the cache's name in images/ ("KEY-UIDBASE", caller frees): what a
 * sandbox's record.json keeps as imageCache, so that `pisb gc` knows
 * which caches are still referenced.
 *
 * The cache is pinned for the rest of the calling process's life: a
 * shared flock(2) on images/KEY-UIDBASE.lock, which `pisb gc` must take
 * exclusively to remove the cache (and an import holds exclusively while
 * it builds it).  A controller that mounted a cache thus keeps it for as
 * long as the sandbox runs. */
char *pisb_image_get(struct pisb_state *st, const char *path,
		     const struct pisb_ids *ids, char **cache, struct pisb_err *e);
/* The rootfs of cache images/CACHE (a record's imageCache), pinned like
 * pisb_image_get's; NULL with e (PISB_EXIT_NOTFOUND when it is gone).  A
 * sandbox keeps the image it was created from even if the file at its
 * image path changes later, and a start does not hash the image again. */
char *pisb_image_cached(struct pisb_state *st, const char *cache, struct pisb_err *e);
/* pisb_image_get without the cache's name. */
char *pisb_image_path(struct pisb_state *st, const char *path,
		      const struct pisb_ids *ids, struct pisb_err *e);

#endif
