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
 * setupError (full: the driver's backend is asked first, where it has one,
 * and the config is added). */
int pisb_inspect(struct pisb_state *st, const char *name, bool full,
		 struct pisb_jw *w, struct pisb_err *e);
/* An array of short objects, sorted by name.  REFRESH_MS > 0: the drivers
 * with a backend elsewhere ask it first (refresh_all), so that a sandbox a
 * server lost says so; each gives up after REFRESH_MS. */
int pisb_list(struct pisb_state *st, bool templates, int refresh_ms, struct pisb_jw *w,
	      struct pisb_err *e);
struct pisb_sandbox;
struct pisb_config;
struct pisb_runtime;
/* The "limits" key from the config and status.json's enforced flags (the
 * local and opensandbox drivers' limits slot). */
void pisb_inspect_limits(struct pisb_sandbox *sb, const struct pisb_config *cfg, bool running,
			 struct pisb_jw *w);
/* A sandbox whose driver keeps its state in status.json (opensandbox,
 * sbx): the state word, and "creating" told apart from a create that died
 * by op.lock, which create holds until the sandbox is ready. */
#include "instance.h"
enum pisb_status pisb_recorded_status(int idir, const struct pisb_runtime *rt);
/* The live status name of an instance ("running", ...). */
const char *pisb_status_of(struct pisb_state *st, const char *name);

struct pisb_buf;
struct pisb_strv;
/* A table from a JSON array of objects (len bytes): a header, then a
 * line per object, a column per entry of cols (until key NULL): the
 * key's string or number, none when it is null or missing, padded to
 * width (the last column: not padded).  quiet: the first column alone,
 * no header. */
struct pisb_table_col {
	const char *key, *header;
	int width;
	const char *none;
};
int pisb_json_table(const char *json, size_t len, bool quiet, const struct pisb_table_col *cols,
		    struct pisb_buf *out, struct pisb_err *e);
/* pisb list's table (NAME DRIVER STATUS IMAGE; quiet: the names alone)
 * from pisb_list's JSON (len bytes). */
int pisb_list_table(const char *json, size_t len, bool quiet, struct pisb_buf *out,
		    struct pisb_err *e);
/* A message for each service of sandbox NAME that is not ready. */
void pisb_inspect_unready(struct pisb_state *st, const char *name, struct pisb_strv *msgs);
/* The --json result of create, prepare, start, stop, connect and release,
 * one rule for every driver: the inspect object of sandbox NAME; when the
 * verb took the sandbox away (GONE non-NULL and no instance is left: stop
 * of a connected sandbox, release that destroyed it),
 * {"name":NAME,"status":GONE}. */
int pisb_lifecycle_result(struct pisb_state *st, const char *name, const char *gone,
			  struct pisb_jw *w, struct pisb_err *e);

#endif
