/* lifecycle.h - create, prepare, connect, start, stop, destroy and
 * release, whatever the sandbox's driver (through its table, driver.h),
 * and the one way lifecycle events leave pisb. */
#ifndef PISB_LIFECYCLE_H
#define PISB_LIFECYCLE_H

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_event;
struct pisb_lc_opts;

enum pisb_lc_verb { PISB_LC_START, PISB_LC_STOP, PISB_LC_DESTROY, PISB_LC_RELEASE };
enum pisb_lc_make { PISB_LC_CREATE, PISB_LC_PREPARE, PISB_LC_CONNECT };

/* create / prepare / connect o->name with the driver cfg->driver names.
 * A driver without the verb: pisb_driver_refuse's message (1); --template
 * on a driver without templates: 2. */
int pisb_lifecycle_make(struct pisb_state *st, enum pisb_lc_make verb,
			const struct pisb_config *cfg, const char *config_json,
			struct pisb_lc_opts *o, struct pisb_err *e);
/* start / stop / destroy / release sandbox NAME.  *note (caller frees, may
 * be NULL): something the user should know after a start. */
int pisb_lifecycle(struct pisb_state *st, enum pisb_lc_verb verb, const char *name,
		   const struct pisb_lc_opts *o, char **note, struct pisb_err *e);
/* An event: one JSON line on o->events_fd (if >= 0) and, for "ready",
 * o->on_ready run with it (its failure is the caller's to roll back). */
int pisb_lifecycle_event(const struct pisb_lc_opts *o, const struct pisb_event *ev,
			 struct pisb_err *e);

#endif
