/* inspect.h - list and inspect, for every driver: what a sandbox is and
 * its live status (lock probe and ping, never a status file alone). */
#ifndef PISB_INSPECT_H
#define PISB_INSPECT_H

#include <stdbool.h>

struct pisb_err;
struct pisb_state;
struct pisb_jw;

/* One object: name, driver, status, image, workspace, createdAt, template,
 * owner, limits, ports, previews, services, resumePid, controller,
 * setupError (full adds the config). */
int pisb_inspect(struct pisb_state *st, const char *name, bool full,
		 struct pisb_jw *w, struct pisb_err *e);
/* An array of short objects, sorted by name. */
int pisb_list(struct pisb_state *st, bool templates, struct pisb_jw *w,
	      struct pisb_err *e);
/* The live status name of an instance ("running", ...). */
const char *pisb_status_of(struct pisb_state *st, const char *name);

#endif
