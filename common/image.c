#include "image.h"
#include "err.h"

#include <stddef.h>

char *pisb_image_path(struct pisb_state *st, const char *path,
		      const struct pisb_ids *ids, struct pisb_err *e)
{
	(void)st; (void)ids;
	pisb_err_set(e, PISB_EXIT_FAIL, "image '%s': rootfs images are not supported yet", path);
	return NULL;
}
