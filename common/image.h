/* image.h - `image: PATH`: a rootfs directory or tarball (any compression
 * libarchive reads), imported once into a content-addressed cache under
 * images/, owned by the ids root inside maps to. */
#ifndef PISB_IMAGE_H
#define PISB_IMAGE_H

struct pisb_err;
struct pisb_state;
struct pisb_ids;

/* Absolute path of the cached rootfs for path (importing it if needed);
 * caller frees.  NULL with e on failure. */
char *pisb_image_path(struct pisb_state *st, const char *path,
		      const struct pisb_ids *ids, struct pisb_err *e);

#endif
