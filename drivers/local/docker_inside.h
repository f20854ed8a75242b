/* docker_inside.h - pisb docker NAME VERB for a sandbox with docker: true
 * (docker.c): the docker slot (driver.h) of every driver that runs the
 * host image's dockerd inside its sandbox as the built-in service
 * PISB_DOCKER_SERVICE (PISB_DRV_DOCKER_OPT: local, vm).  It reaches the
 * sandbox only through the driver's own slots: exec to run the docker
 * client inside, svc for the previews of published ports.
 */
#ifndef PISB_DOCKER_INSIDE_H
#define PISB_DOCKER_INSIDE_H

#include "err.h"

#include <stdbool.h>
#include <stddef.h>

struct pisb_sandbox;
struct pisb_jw;
struct pisb_strv;

int pisb_docker_inside(struct pisb_sandbox *sb, const char *verb, char *const *args, size_t nargs,
		       struct pisb_jw *w, bool *json_out, int *code, struct pisb_strv *notes,
		       struct pisb_err *e);

#endif
