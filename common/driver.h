/* driver.h - the driver layer: what a driver is, as the core sees it.
 *
 * A driver is one table of operations (struct pisb_driver) defined in its
 * own folder (drivers/NAME/driver.c) and one line in the registry
 * (pisb_drivers[], common/driver.c).  The core knows drivers only through
 * this header: it opens a sandbox (struct pisb_sandbox), looks at the
 * driver's table and calls the slot of the verb.  A NULL slot means the
 * driver cannot do that verb; pisb_driver_refuse() then gives the one
 * answer every such case gets (exit 1):
 *
 *   sandbox 'box' (driver vm) cannot 'svc': WHY; see pisb drivers
 *
 * where WHY comes from the driver's refusals[] (or is left out).
 * `pisb drivers` prints the verb x driver matrix from these tables.
 *
 * Adding a driver: make drivers/NAME/ with a driver.c that defines
 * `const struct pisb_driver pisb_driver_NAME`, declare it below, add it to
 * pisb_drivers[] in common/driver.c and its objects to the Makefile.
 *
 * Slots, as QEMU's accelerator ops say it: MANDATORY slots must be set in
 * every table (the core calls them without a check); every other slot is
 * optional, NULL = refused.  Each slot takes the opened sandbox (borrowed)
 * and returns 0, or -1 with e filled, unless said otherwise.
 */
#ifndef PISB_DRIVERS_H
#define PISB_DRIVERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"
#include "instance.h"

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_jw;
struct pisb_buf;
struct pisb_strv;
struct pisb_exec_req;
struct pisb_fs_text;
struct pisb_fs_src;
struct pisb_fs_edit;
struct pisb_fs_info;
struct pisb_fs_find;
struct pisb_fs_grep;
struct pisb_fs_grep_result;
struct pisb_fs_grep_line;
struct pisb_xfer;
struct pisb_pull_opts;
struct pisb_renew_opts;
struct pisb_gc_report;
struct pisb_fs_how;
struct pisb_doctor;

/* What the "ready" event the core sends after a create or connect says
 * besides the name and the driver: the driver fills it in (the strings
 * are the core's to free) before it returns 0. */
struct pisb_ready {
	char *sandbox_id;        /* the backend's id ("sandboxId"), or NULL */
	char *workspace;         /* the workspace inside, or NULL */
	bool resumed;            /* connect: a paused sandbox was resumed */
};

/* Options of the lifecycle verbs (create, connect, start, stop, destroy,
 * release).  Zero-initialise, then set events_fd = -1 unless given. */
struct pisb_lc_opts {
	const char *name;        /* the instance (create/connect) */
	pid_t owner_pid;         /* --owner-pid, 0 if none */
	const char *session_id;  /* --session-id: metadata pi-session-id */
	const char *on_ready;    /* --on-ready CMD: runs after the ready event */
	struct pisb_ready *ready; /* create/connect: set by the core (see above) */
	const char *policy;      /* release --policy remove|stop|keep, or NULL:
				  * the sandbox's own (pisb_lc_policy) */
	int events_fd;           /* --events-fd N, or -1 */
	bool json;               /* --json: the caller prints the inspect object */
	int wait_ms;             /* --wait: for op.lock (0 = busy fails at once) */
	/* create/prepare only */
	const char *template_;   /* --template */
	const char *config_text; /* the YAML as given (guest copy), or NULL */
	size_t config_len;
	bool prepare;            /* prepare: save a template, no services */
	char *setup_error;       /* out (caller frees): setup failed, the
	                          * sandbox runs anyway */
	char *note;              /* out (caller frees): create/start_note */
	const char *project;     /* --project DIR (absolute), or NULL */
	/* set by the opensandbox create itself: */
	const char *instance_id; /* the intent's id (record remote.instanceId,
				    metadata pisb-instance) */
	const struct pisb_state *state;
};

/* A sandbox opened once per command: pisb_sandbox_open reads record.json
 * (once); runtime and config are read when first asked for. */
struct pisb_sandbox {
	struct pisb_state *st;          /* borrowed */
	char *name;                     /* owned */
	int idir;                       /* instances/NAME, O_PATH (owned) */
	struct pisb_record rec;         /* see pisb_sandbox_record */
	bool rec_loaded;
	struct pisb_err rec_err;        /* why rec did not load */
	const struct pisb_driver *drv;  /* from rec.driver */
	struct pisb_runtime rt;         /* see pisb_sandbox_runtime */
	bool rt_loaded;
	struct pisb_config *cfg;        /* see pisb_sandbox_config */
	void *priv;                     /* the driver's own state, or NULL */
	void (*priv_free)(void *priv);
};
#define PISB_SANDBOX_INIT { .idir = -1 }

/* Open instances/NAME: 3 when there is none, 1 when its record names a
 * driver this build does not have.  A record that does not load (empty,
 * truncated, mistyped, huge) still opens: its driver is the one it names
 * in its first 64 KiB (pisb_driver_salvage), else local, so that destroy
 * can always remove the sandbox; what needs the record asks
 * pisb_sandbox_record, which reports what is wrong with it. */
int pisb_sandbox_open(struct pisb_sandbox *sb, struct pisb_state *st, const char *name,
		      struct pisb_err *e);
/* The same for kind "templates" (or "instances"). */
int pisb_sandbox_open_kind(struct pisb_sandbox *sb, struct pisb_state *st, const char *kind,
			   const char *name, struct pisb_err *e);
void pisb_sandbox_release(struct pisb_sandbox *sb);
#define _cleanup_sandbox_ __attribute__((cleanup(pisb_sandbox_release)))
/* The record, or NULL with e saying why it did not load. */
const struct pisb_record *pisb_sandbox_record(struct pisb_sandbox *sb, struct pisb_err *e);
/* The driver a record that does not load still names, else local. */
const struct pisb_driver *pisb_driver_salvage(int idir);
/* status.json and the record's config, loaded once and kept in sb. */
const struct pisb_runtime *pisb_sandbox_runtime(struct pisb_sandbox *sb, struct pisb_err *e);
const struct pisb_config *pisb_sandbox_config(struct pisb_sandbox *sb, struct pisb_err *e);

/* For a driver's own view of sb: *rec and *cfg are sb's (borrowed: sb
 * keeps and frees them, the driver only reads them), *rt is status.json
 * read anew (caller releases: the state may change under a lock). */
int pisb_sandbox_borrow(struct pisb_sandbox *sb, struct pisb_record *rec,
			struct pisb_config **cfg, struct pisb_runtime *rt, struct pisb_err *e);

/* The verbs of the matrix: one per user-facing verb a driver may lack. */
enum pisb_verb_id {
	PISB_V_CREATE, PISB_V_PREPARE, PISB_V_START, PISB_V_STOP, PISB_V_DESTROY,
	PISB_V_CONNECT, PISB_V_RELEASE, PISB_V_INSPECT,
	PISB_V_EXEC, PISB_V_EXEC_HANDLE, PISB_V_EXEC_STATUS, PISB_V_EXEC_KILL, PISB_V_SHELL,
	PISB_V_READ, PISB_V_WRITE, PISB_V_EDIT, PISB_V_LS, PISB_V_STAT, PISB_V_MKDIR,
	PISB_V_FIND, PISB_V_GREP, PISB_V_LOGS, PISB_V_PUSH, PISB_V_PULL,
	PISB_V_SVC, PISB_V_PREVIEW, PISB_V_DOCKER, PISB_V_VERIFY, PISB_V_GC, PISB_V_RENEW,
	PISB_V_DIFF,  /* create --project, diff, apply (project.h) */
	PISB_V_POOL,
	PISB_V__COUNT
};
/* "create", ... "exec --timeout-ms", "svc" ... as `pisb drivers` shows them */
extern const char *const pisb_verb_names[PISB_V__COUNT];

/* A verb the driver lacks, and why (shown in the refusal and the matrix). */
struct pisb_refusal {
	enum pisb_verb_id verb;
	const char *why;
};

/* Capability bits: what the core does for the driver besides the slots. */
#define PISB_DRV_REMOTE    (1u << 0)  /* lives on another machine */
#define PISB_DRV_GC_SWEEP  (1u << 1)  /* pisb gc's own sweep handles its instances:
				       * liveness by controller.lock, stop and
				       * destroy slots, gc_drop */
#define PISB_DRV_TEMPLATES (1u << 2)  /* create --template, prepare */
#define PISB_DRV_EXEC_BASH (1u << 4)  /* exec runs --bash itself (r->bash);
				       * else the core passes an argv that
				       * runs bash if there, else sh */
#define PISB_DRV_CONFIG_SECTION (1u << 3)  /* the config needs a section named
					    * as the driver (opensandbox:) */
#define PISB_DRV_PROJECT_BIND (1u << 5)  /* project.mode bind and bind-ro: the
					  * host's directory mounted in */
#define PISB_DRV_DOCKER_OPT (1u << 6)    /* docker: true runs a daemon inside */
#define PISB_DRV_DOCKER_ALWAYS (1u << 7) /* every sandbox has its own daemon */
#define PISB_DRV_NO_LOADER (1u << 8)     /* create, start and stop load no library
					  * (libcurl, libarchive) and ask no NSS
					  * (a driver that may, for some config,
					  * calls pisb_dl_needed first): the static
					  * pisb runs them itself (cmd/pisb_serve.c) */
#define PISB_DRV_OWN_KERNEL (1u << 9)    /* the sandbox runs a kernel of its own:
					  * no host file or socket is inside by
					  * device and inode, only by a share */

struct pisb_driver {
	const char *name;               /* MANDATORY: the record's "driver" */
	const char *summary;            /* MANDATORY: one line for pisb drivers */
	unsigned caps;                  /* PISB_DRV_* */
	const struct pisb_refusal *refusals;  /* why of NULL slots; ends with why NULL */
	/* for the file verbs of fs_verbs.h: how the files are reached */
	const struct pisb_fs_how *fs_how;

	/* ---- lifecycle ----
	 * create, prepare, connect make the instance (no sandbox is open yet):
	 * cfg is the parsed config, config_json its normalised form for the
	 * record.  They fill in o->ready (when set); the core then sends the
	 * "ready" event and runs o->on_ready, and when that fails destroys
	 * what they made (pisb_lifecycle_make): no driver does either. */
	int (*create)(struct pisb_state *st, const struct pisb_config *cfg,
		      const char *config_json, struct pisb_lc_opts *o, struct pisb_err *e);
	int (*prepare)(struct pisb_state *st, const struct pisb_config *cfg,
		       const char *config_json, struct pisb_lc_opts *o, struct pisb_err *e);
	int (*connect)(struct pisb_state *st, const struct pisb_config *cfg,
		       const char *config_json, struct pisb_lc_opts *o, struct pisb_err *e);
	/* start, stop: MANDATORY.  destroy: MANDATORY (a record must be
	 * removable).  stop and destroy emit "released" on o->events_fd. */
	int (*start)(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
	int (*stop)(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
	int (*destroy)(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
	/* pisb release: session shutdown with the sandbox's own policy, or
	 * o->policy (pisb_lc_policy); pisb_lifecycle_release_as does the rest */
	int (*release)(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
	/* destroy --template: sb is templates/NAME (PISB_DRV_TEMPLATES) */
	int (*destroy_template)(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e);
	/* pisb-svc supervise NAME (internal): the process that stays with a
	 * running sandbox (local: its controller), started by the driver's
	 * own start; returns when the sandbox stops.  notify_fd (>= 0: its
	 * starter's socket, --notify-fd) first gives the word to begin (EOF:
	 * the start was abandoned, return 0 having touched nothing), then
	 * hears when the sandbox runs or failed.  own_ns (--own-namespaces):
	 * its starter knows that the boot will make the sandbox's namespaces
	 * itself; none are made ahead of it. */
	int (*supervise)(struct pisb_state *st, const char *name, int notify_fd, bool own_ns,
			 struct pisb_err *e);
	/* after pisb start: a note for the user (caller frees), or NULL */
	char *(*start_note)(struct pisb_sandbox *sb);

	/* ---- inspect / list ----
	 * status: MANDATORY, the live status.  refresh: ask the backend before
	 * inspect (failures keep the last known state).  describe: "image" and
	 * "workspace" keys.  limits: the "limits" key (running: the sandbox
	 * runs).  extra_key: the key under which status.json's extra object
	 * is shown ("remote", "vm").  config_out: the "config" key of a full
	 * inspect, when the driver shows less than the normalised config
	 * (NULL: config_json as it is). */
	enum pisb_status (*status)(struct pisb_sandbox *sb);
	int (*refresh)(struct pisb_sandbox *sb, int timeout_ms, struct pisb_err *e);
	/* pisb list: refresh every instance of the driver's at once (one
	 * request per server where the backend allows); failures are kept in
	 * each instance's state, as refresh's are */
	void (*refresh_all)(struct pisb_state *st, int timeout_ms);
	void (*describe)(struct pisb_sandbox *sb, const struct pisb_config *cfg, struct pisb_jw *w);
	void (*limits)(struct pisb_sandbox *sb, const struct pisb_config *cfg, bool running,
		       struct pisb_jw *w);
	const char *extra_key;
	void (*config_out)(struct pisb_sandbox *sb, struct pisb_jw *w);

	/* ---- exec (exec.h's contract and JSON).  A driver whose commands a
	 * host-side process runs gets exec_handle/status/kill from handle.h
	 * (one supervisor protocol) by giving it how to run one command. ---- */
	int (*exec)(struct pisb_sandbox *sb, const struct pisb_exec_req *r, int *code,
		    struct pisb_err *e);
	int (*exec_handle)(struct pisb_sandbox *sb, const struct pisb_exec_req *r,
			   struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
	int (*exec_status)(struct pisb_sandbox *sb, const char *handle, int timeout_ms,
			   struct pisb_jw *w, int *code, bool *running, struct pisb_err *e);
	int (*exec_kill)(struct pisb_sandbox *sb, const char *handle, struct pisb_jw *w,
			 int *code, struct pisb_err *e);
	int (*shell)(struct pisb_sandbox *sb, const char *user, int *code, struct pisb_err *e);

	/* ---- files (fs.h's contracts) ----
	 * path: absolute, or relative to the workspace (NULL = the
	 * workspace); *abs (caller frees) the absolute path inside.  Host
	 * files (--from, --old-file) are opened by the caller before. */
	int (*read_text)(struct pisb_sandbox *sb, const char *path, long long offset,
			 long long limit, size_t cap, char **abs, struct pisb_fs_text *t,
			 struct pisb_err *e);
	int (*read_raw)(struct pisb_sandbox *sb, const char *path, int outfd, long long *bytes,
			struct pisb_err *e);
	int (*write)(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_src *src,
		     int mode, bool mkdirs, char **abs, long long *bytes, struct pisb_err *e);
	int (*edit)(struct pisb_sandbox *sb, const char *path, const struct pisb_fs_edit *ed,
		    size_t n, char **abs, long long *bytes, struct pisb_err *e);
	int (*ls)(struct pisb_sandbox *sb, const char *path, char **abs,
		  struct pisb_fs_info **out, size_t *n, struct pisb_err *e);
	int (*stat)(struct pisb_sandbox *sb, const char *path, char **abs,
		    struct pisb_fs_info *out, struct pisb_err *e);
	int (*mkdir)(struct pisb_sandbox *sb, const char *path, char **abs, bool *created,
		     struct pisb_err *e);
	/* o->dir / o->path as path above */
	int (*find)(struct pisb_sandbox *sb, const struct pisb_fs_find *o, char **abs,
		    void (*fn)(void *, const char *), void *arg, bool *truncated,
		    struct pisb_err *e);
	int (*grep)(struct pisb_sandbox *sb, const struct pisb_fs_grep *o, char **abs,
		    void (*fn)(void *, const struct pisb_fs_grep_line *), void *arg,
		    struct pisb_fs_grep_result *r, struct pisb_err *e);
	int (*logs)(struct pisb_sandbox *sb, const char *service, long long lines, size_t cap,
		    struct pisb_buf *out, long long *nlines, bool *truncated, struct pisb_err *e);
	int (*push)(struct pisb_sandbox *sb, const char *hostdir, const char *to, bool all,
		    struct pisb_xfer *x, struct pisb_err *e);
	int (*pull)(struct pisb_sandbox *sb, const char *path, const char *hostdir,
		    const struct pisb_pull_opts *o, struct pisb_xfer *x, struct pisb_err *e);

	/* ---- the project (project.h): create copies o->project into the
	 * workspace (its base saved by pisb_project_seed) when this slot is
	 * set.  project_enter moves the calling single-threaded process (a
	 * child that never returns to the host's view) to where it sees the
	 * sandbox's files with no more rights than the sandbox, whether the
	 * sandbox runs or not; *root an O_PATH fd of that view's "/", *ws
	 * (caller frees) the workspace in it. ---- */
	int (*project_enter)(struct pisb_sandbox *sb, int *root, char **ws, struct pisb_err *e);
	/* Optional, for reading only (diff): the same, where a cheaper view
	 * holds the same files (the local driver: the disk's own upper
	 * directory, running or not, rather than through the sandbox's
	 * overlay).  Unset: project_enter. */
	int (*project_view)(struct pisb_sandbox *sb, int *root, char **ws, struct pisb_err *e);
	/* A driver whose files no host process can enter (a remote sandbox)
	 * sets project_archive instead: the workspace as one tar archive onto
	 * fd (a temp file), *sha the SHA-256 the sandbox computed of it.  The
	 * core reads that archive as data, never extracting it on the host.
	 * The copy of create goes in through push (the driver's create calls
	 * pisb_project_seed_remote once its sandbox runs), sync's writes
	 * through write and exec_handle.  Its errors do not name the
	 * sandbox: diff's message does ("sandbox 'NAME': ..."). */
	int (*project_archive)(struct pisb_sandbox *sb, int fd, char sha[65], struct pisb_err *e);

	/* ---- services and previews: one request to the sandbox's
	 * controller, one JSON reply (pisb-svc) ---- */
	int (*svc)(struct pisb_sandbox *sb, const char *req, struct pisb_buf *reply,
		   int timeout_ms, struct pisb_err *e);
	int (*preview)(struct pisb_sandbox *sb, const char *req, struct pisb_buf *reply,
		       int timeout_ms, struct pisb_err *e);

	/* ---- docker inside the sandbox (sbx.h's pisb_sbx_docker) ---- */
	int (*docker)(struct pisb_sandbox *sb, const char *verb, char *const *args,
		      size_t nargs, struct pisb_jw *w, bool *json_out, int *code,
		      struct pisb_strv *notes, struct pisb_err *e);

	/* ---- pool: spares of a config booted ahead of its creates, which
	 * take one instead of booting (pisb pool).  pool: keep n of cfg (its
	 * text, from file, NULL for the default config); 0 ends the pool,
	 * -1 is a replacement (as many as the pool asks).  pool_list: every
	 * pool of the state dir, as objects (key, spares, ready, file) into
	 * w's open array. ---- */
	int (*pool)(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		    const char *text, size_t len, const char *file, int n, struct pisb_err *e);
	void (*pool_list)(struct pisb_state *st, struct pisb_jw *w);
	/* pisb gc: spares whose controller is gone (a reboot, a kill),
	 * removed with what they hold, into r */
	void (*pool_gc)(struct pisb_state *st, bool dry_run, struct pisb_gc_report *r);

	/* ---- doctor: this host's readiness for the driver, as checks added
	 * to d (doctor.h), after the core's own ---- */
	void (*doctor)(struct pisb_doctor *d);

	/* ---- verify: the live isolation audit, its report (JSON or text)
	 * into out; returns 0 when every check passed, 1 when one failed ---- */
	int (*verify)(struct pisb_sandbox *sb, bool json, struct pisb_buf *out,
		      struct pisb_err *e);

	/* ---- gc: the name the driver's own tool knows the sandbox by, so
	 * that pisb gc can tell its leftovers from pisb's (caller frees), or
	 * NULL.  The sweep itself: PISB_DRV_GC_SWEEP. ---- */
	char *(*gc_name)(const struct pisb_record *rec);
	/* A sweep of the driver's own (remote sandboxes that a killed create
	 * or a dead owner left: the driver finds them on its backend), into
	 * r; and whether a staging/ entry is a staged create of the driver's,
	 * which that sweep decides about.  Instances of a driver with a sweep
	 * are left to it by the generic one. */
	int (*gc_sweep)(struct pisb_state *st, bool dry_run, struct pisb_gc_report *r,
			struct pisb_err *e);
	bool (*gc_staged)(int dirfd);
	/* After the instances: what the driver's backend holds that no
	 * instance is (local: empty cgroups of crashed sandboxes, stale host
	 * id ranges; sbx: the sbx CLI's stopped session sandboxes whose owner
	 * is gone), into r.  KNOWN: what gc_name said of every instance, of
	 * any driver. */
	void (*gc_leftovers)(struct pisb_state *st, const struct pisb_strv *known, bool dry_run,
			     struct pisb_gc_report *r);
	/* PISB_DRV_GC_SWEEP: what a stopped sandbox still holds outside its
	 * instance directory (local: its cgroups), dropped by pisb gc under
	 * the sandbox's op.lock just before it trashes the directory.  The
	 * sweep stops and destroys through the stop and destroy slots. */
	void (*gc_drop)(struct pisb_sandbox *sb);

	/* ---- renew: one pass over the driver's instances (pisb-renew);
	 * returns the number of failures, or -1 with e ---- */
	int (*renew)(struct pisb_state *st, const struct pisb_renew_opts *o,
		     struct pisb_jw *w, struct pisb_err *e);
};

/* pisb renew's options, for the renew slots */
struct pisb_renew_opts {
	int parallel;            /* concurrent requests; 0 = 256 */
	int timeout_ms;          /* per request; 0 = 30000 */
	/* only these instances (each must exist: else exit 3), renewed now
	 * whether due or not; the other rules hold */
	char *const *names;
	size_t nnames;
};

/* The registry: every driver this build has, NULL-terminated. */
extern const struct pisb_driver *const pisb_drivers[];
extern const struct pisb_driver pisb_driver_local, pisb_driver_vm,
	pisb_driver_opensandbox, pisb_driver_sbx;

/* The driver called name, or NULL. */
const struct pisb_driver *pisb_driver_find(const char *name);
/* "local, vm, opensandbox, sbx" (sep between names), into b. */
void pisb_driver_names(struct pisb_buf *b, const char *sep);
/* "the local driver", "the local and vm drivers", ...: the drivers with
 * every bit of CAPS, in words, into b; how many. */
int pisb_driver_names_with(struct pisb_buf *b, unsigned caps);
/* Whether the driver called name has every bit of CAPS. */
bool pisb_driver_can(const char *name, unsigned caps);
/* Whether d has verb v (its slot is set). */
bool pisb_driver_has(const struct pisb_driver *d, enum pisb_verb_id v);
/* Why d lacks v (NULL: no reason given). */
const char *pisb_driver_why(const struct pisb_driver *d, enum pisb_verb_id v);
/* The one refusal: exit 1, "sandbox 'NAME' (driver D) cannot 'VERB'[: WHY];
 * see pisb drivers".  Returns -1. */
int pisb_driver_refuse(const struct pisb_sandbox *sb, enum pisb_verb_id v, struct pisb_err *e);
/* The same for a driver chosen by config (no sandbox yet). */
int pisb_driver_refuse_name(const char *name, const struct pisb_driver *d,
			    enum pisb_verb_id v, struct pisb_err *e);
/* The matrix as JSON: {"verbs":[...],"drivers":[{"name","summary",
 * "verbs":{VERB:{"supported":bool,"why":str|null}}}]}. */
void pisb_drivers_json(struct pisb_jw *w);
/* The matrix as text (names_only: one driver name a line), into b
 * without its last newline. */
void pisb_drivers_text(struct pisb_buf *b, bool names_only);
/* pisb-svc supervise NAME --driver D (default local): D's supervise slot. */
int pisb_driver_supervise(struct pisb_state *st, const char *driver, const char *name,
			  int notify_fd, bool own_ns, struct pisb_err *e);
/* pisb verify NAME: the driver's audit report into out; 0 passed, 1 a
 * check failed, -1 with e (a driver without verify: the refusal). */
int pisb_verify_sandbox(struct pisb_state *st, const char *name, bool json, struct pisb_buf *out,
			struct pisb_err *e);
/* pisb renew: one pass of the driver that renews (today one does:
 * opensandbox; its JSON object into w), the number of failures or -1. */
int pisb_drivers_renew(struct pisb_state *st, const struct pisb_renew_opts *o,
		       struct pisb_jw *w, struct pisb_err *e);

#endif
