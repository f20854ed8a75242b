/* local.h - the local driver: lifecycle (create, prepare, start, stop,
 * destroy) and the controller that keeps a running sandbox.
 */
#ifndef PISB_LOCAL_H
#define PISB_LOCAL_H

#include <stdbool.h>
#include <sys/types.h>

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_jw;

struct pisb_create_opts {
	const char *name;
	const char *template_;   /* --template */
	const char *config_text; /* the YAML as given (guest copy), or NULL */
	size_t config_len;
	pid_t owner_pid;
	const char *session_id;
	int wait_ms;             /* --wait */
	bool prepare;            /* prepare: save a template, no services */
};

/* create / prepare.  On return the sandbox runs (create) or the template
 * exists (prepare).  setup_error (caller frees) is set when setup failed
 * but the instance started anyway. */
int pisb_local_create(struct pisb_state *st, const struct pisb_config *cfg,
		      const char *config_json, const struct pisb_create_opts *o,
		      char **setup_error, struct pisb_err *e);
int pisb_local_start(struct pisb_state *st, const char *name, int wait_ms,
		     struct pisb_err *e);
int pisb_local_stop(struct pisb_state *st, const char *name, int wait_ms,
		    struct pisb_err *e);
int pisb_local_destroy(struct pisb_state *st, const char *kind, const char *name,
		       int wait_ms, struct pisb_err *e);

/* The controller: `pisb-svc supervise NAME`.  Returns when stopped. */
int pisb_controller_run(struct pisb_state *st, const char *name,
			struct pisb_err *e);

/* Status of a local instance, for list/inspect. */
void pisb_local_inspect(struct pisb_state *st, int idir, const char *name,
			bool full, struct pisb_jw *w);

#endif
