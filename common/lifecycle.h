/* lifecycle.h - create, prepare, connect, start, stop, destroy and
 * release, whatever the sandbox's driver (through its table, driver.h),
 * and the one way lifecycle events leave pisb. */
#ifndef PISB_LIFECYCLE_H
#define PISB_LIFECYCLE_H

#include "config.h"

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_event;
struct pisb_lc_opts;
struct pisb_sandbox;
struct pisb_jw;

enum pisb_lc_verb { PISB_LC_START, PISB_LC_STOP, PISB_LC_DESTROY, PISB_LC_RELEASE,
		    PISB_LC_DESTROY_TEMPLATE /* destroy --template: templates/NAME */ };
enum pisb_lc_make { PISB_LC_CREATE, PISB_LC_PREPARE, PISB_LC_CONNECT };

/* create / prepare / connect o->name with the driver cfg->driver names.
 * A driver without the verb: pisb_driver_refuse's message (1); --template
 * on a driver without templates: 2. */
int pisb_lifecycle_make(struct pisb_state *st, enum pisb_lc_make verb,
			const struct pisb_config *cfg, const char *config_json,
			struct pisb_lc_opts *o, struct pisb_err *e);
/* A config's key (pisb pool): the first 16 hex digits of the SHA-256 of
 * the normalised config, a NUL and the text a create gives the guest. */
void pisb_config_key(const char *config_json, const char *text, size_t len, char out[17]);
/* pisb pool: keep n spares of the config in file (NULL: the default
 * config; driver: overrides it) booted for its creates, through the
 * driver's pool slot; n 0 ends that pool, -1 is a replacement (as many as
 * the pool asks).  A driver without pools: pisb_driver_refuse's message.
 * *key: the pool's key (17 bytes), when not NULL. */
int pisb_pool(struct pisb_state *st, const char *file, const char *driver, int n,
	      char *key, struct pisb_err *e);
/* Every pool of the state dir (of every driver that has pools), as a JSON
 * array of objects: key, driver, spares (asked), ready, file. */
void pisb_pools_json(struct pisb_state *st, struct pisb_jw *w);
/* pisb pool's table of that array into out (quiet: the keys only). */
struct pisb_buf;
int pisb_pools_table(const char *json, size_t len, bool quiet, struct pisb_buf *out,
		     struct pisb_err *e);
/* The most spares a pool keeps. */
#define PISB_POOL_MAX 64

/* start / stop / destroy / release sandbox NAME (destroy --template:
 * template NAME).  *note (caller frees, may
 * be NULL): something the user should know after a start. */
int pisb_lifecycle(struct pisb_state *st, enum pisb_lc_verb verb, const char *name,
		   const struct pisb_lc_opts *o, char **note, struct pisb_err *e);
/* Release (the session's end) by policy p: PISB_POLICY_KILL destroys,
 * PAUSE stops, KEEP leaves the sandbox as it is; each sends "released"
 * (mode remove, stop, keep).  For the drivers' release slots. */
int pisb_lifecycle_release_as(struct pisb_sandbox *sb, const struct pisb_lc_opts *o,
			      enum pisb_policy p, struct pisb_err *e);
/* stop and destroy of a driver whose backend one call ends (sbx, vm):
 * end() takes the sandbox's lock, stops (destroy: removes) what runs on
 * the backend, releases the lock and fills in what the "released" event
 * names; then destroy moves the instance to the trash; then "released"
 * (mode stop or remove) goes out.  An error says which verb failed. */
struct pisb_ready;
typedef int (*pisb_lc_end_fn)(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, bool destroy,
			      struct pisb_ready *ev, struct pisb_err *e);
int pisb_lifecycle_end(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, bool destroy,
		       pisb_lc_end_fn end, struct pisb_err *e);
/* The policy release --policy asks for (o->policy), else own. */
enum pisb_policy pisb_lc_policy(const struct pisb_lc_opts *o, enum pisb_policy own);
/* An event: one JSON line on o->events_fd (if >= 0) and, for "ready",
 * o->on_ready run with it (its failure is the caller's to roll back). */
int pisb_lifecycle_event(const struct pisb_lc_opts *o, const struct pisb_event *ev,
			 struct pisb_err *e);

struct pisb_buf;
/* The config of create, prepare and connect: NAME checked, FILE parsed
 * (else the defaults; NEED_FILE, when set, is the error for no FILE),
 * DRIVER (--driver, or NULL) over its driver; *text the file as given
 * (text may be NULL), *json the normalised config.  *cfg: caller frees. */
int pisb_lc_config(const char *name, const char *file, const char *need_file, const char *driver,
		   struct pisb_config **cfg, struct pisb_buf *text, struct pisb_buf *json,
		   struct pisb_err *e);
/* The project of create: ARG (--project) or the config's project.dir,
 * resolved (caller frees *out; NULL when there is none or mode is none);
 * the bind modes only on a driver that has them. */
int pisb_lc_project_dir(const struct pisb_config *cfg, const char *arg, char **out,
			struct pisb_err *e);

#endif
