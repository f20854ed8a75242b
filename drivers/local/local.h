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
struct pisb_buf;
struct pisb_fs_how;

struct pisb_create_opts {
	const char *name;
	const char *template_;   /* --template */
	const char *config_text; /* the YAML as given (guest copy), or NULL */
	size_t config_len;
	pid_t owner_pid;
	const char *session_id;
	int wait_ms;             /* --wait */
	bool prepare;            /* prepare: save a template, no services */
	const char *project;     /* --project DIR: copied into the workspace
				  * before the first boot (project.h) */
	const char *spare_key;   /* a spare of the pool (pool.h) with this
				  * key, named o->name in pool/: booted, it
				  * waits to be claimed; NULL for a sandbox */
};

/* create / prepare.  On return the sandbox runs (create) or the template
 * exists (prepare).  setup_error (caller frees) is set when setup failed
 * but the instance started anyway. */
int pisb_local_create(struct pisb_state *st, const struct pisb_config *cfg,
		      const char *config_json, const struct pisb_create_opts *o,
		      char **setup_error, struct pisb_err *e);
struct pisb_sandbox;
int pisb_local_start(struct pisb_sandbox *sb, int wait_ms, struct pisb_err *e);
/* destroy --template: sb is templates/NAME */
int pisb_local_destroy_template(struct pisb_sandbox *sb, int wait_ms, struct pisb_err *e);
/* stop and destroy on the shared skeleton (pisb_lifecycle_end): stop sb
 * under its op.lock; destroy keeps that lock in sb->priv until sb is
 * released, after the skeleton's trash, and then frees the sandbox's id
 * range if its directory is gone. */
struct pisb_sandbox;
int pisb_local_end(struct pisb_sandbox *sb, int wait_ms, bool destroy, struct pisb_err *e);

/* Move the calling single-threaded process over the disk of the stopped
 * sandbox idir, with the sandbox's rights only: a user namespace mapped
 * as the sandbox's (its root is the sandbox's root outside), a mount
 * namespace of its own whose root holds the disk's workspace read-only at
 * ws.  Overlay whiteouts there read as what they are (character devices:
 * deleted files); what only the image has is not seen.  *root: "/". */
int pisb_local_disk_enter(int idir, const char *ws, int *root, struct pisb_err *e);

/* Wait until the controller ctl (its starter's socket sock, or -1) of
 * the sandbox in idir says want ("running", "stopped", "spare"), or dies:
 * 0, or -1 with its own fatal message. */
int pisb_local_wait_controller(int idir, const char *name, const char *want,
			       pid_t ctl, int sock, struct pisb_err *e);

/* The controller: `pisb-svc supervise NAME [--notify-fd FD]
 * [--own-namespaces]`.  Returns when stopped (driver.h's supervise slot). */
int pisb_controller_run(struct pisb_state *st, const char *name, int notify_fd, bool own_ns,
			struct pisb_err *e);

/* Our command line as the controller of NAME, where no exec gave it (a
 * forked controller, a claimed spare): an exec'd one's (BINARY supervise
 * NAME --state-dir DIR --notify-fd 3 [--own-namespaces]), or as much of
 * it as fits (pisb_proc_cmdline_set: an environment too small, env -i). */
void pisb_controller_title(const char *state_path, const char *name, bool own_ns);

/* Status of a local instance, for list/inspect. */
void pisb_local_inspect(struct pisb_state *st, int idir, const char *name,
			bool full, struct pisb_jw *w);

/* Read abs below root (symlinks resolved inside it), with the caller's
 * rights: a regular file of at most max bytes into b.  0, or the errno of
 * what failed (EISDIR not a regular file, EFBIG larger than max): for a
 * process already inside the sandbox (pisb_local_read_guest's child, the
 * init at the boot). */
int pisb_local_guest_read_in(int root, const char *abs, size_t max, struct pisb_buf *b);

/* local_fs.c: the file verbs' way in (the driver's fs_how) */
extern const struct pisb_fs_how pisb_local_fs_how;
/* Read the regular file abs inside the sandbox whose init is pid (with
 * start time start) with the rights of the sandbox's root, never the
 * caller's: a child enters the sandbox's user and mount namespaces (as
 * pisb_fs_enter) and opens abs with pisb_fs_resolve, so symlinks resolve
 * inside and a file root inside may not read stays unread.  For host-side
 * code (the controller) that must read what the sandbox wrote.  At most
 * max bytes into b.  0, or -1 with errno: ENOENT missing, EACCES, EISDIR
 * (not a regular file), EFBIG (larger than max), ESRCH (not running). */
int pisb_local_read_guest(pid_t pid, unsigned long long start, const char *abs, size_t max,
			  struct pisb_buf *b);

/* local_doctor.c: the driver's doctor slot */
struct pisb_doctor;
void pisb_local_doctor(struct pisb_doctor *d);

/* verify.c: the driver's verify slot: 0 every check passed, 1 one failed,
 * or -1 with e; the report (JSON with json) into out */
int pisb_local_verify(struct pisb_sandbox *sb, bool json, struct pisb_buf *out, struct pisb_err *e);

#endif
