/* instance.h - one sandbox's files in the state directory.
 *
 *   instances/NAME/record.json      what it is: name, driver, config, created
 *   instances/NAME/status.json      what the controller last said (a hint:
 *                                   liveness comes from controller.lock)
 *   instances/NAME/op.lock          held by mutating commands (create, start,
 *                                   stop, destroy): busy -> exit 4
 *   instances/NAME/controller.lock  held by the controller while it lives
 *   instances/NAME/control.sock     the controller's request socket
 *   instances/NAME/controller.log   controller and setup output
 *   instances/NAME/disk/            the persistent disk (overlay upper+work)
 *   instances/NAME/exec/HANDLE/     detached commands (output, status)
 *   instances/NAME/logs/            service logs
 *
 * Templates have the same layout under templates/NAME (record + disk).
 */
#ifndef PISB_INSTANCE_H
#define PISB_INSTANCE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct pisb_err;
struct pisb_state;
struct pisb_config;
struct pisb_jw;
struct pisb_buf;

enum pisb_status {
	PISB_ST_MISSING,
	PISB_ST_STOPPED,
	PISB_ST_STARTING,
	PISB_ST_RUNNING,
	PISB_ST_STOPPING,
	PISB_ST_INTERRUPTED,   /* died before stop completed */
	PISB_ST_UNAVAILABLE,   /* controller alive but not answering */
	PISB_ST_CONNECTED,     /* remote, attached */
	PISB_ST_PAUSED,
	PISB_ST_GONE,          /* remote sandbox no longer exists */
	PISB_ST_UNREACHABLE,   /* remote: its server could not be asked */
};
const char *pisb_status_name(enum pisb_status s);

/* A process identified by pid and start time (survives pid reuse). */
struct pisb_proc_id {
	pid_t pid;
	unsigned long long start;   /* /proc/PID/stat field 22 */
};
unsigned long long pisb_proc_start(pid_t pid);  /* 0 if gone */
bool pisb_proc_id_alive(const struct pisb_proc_id *p);

/* status.json, written by the controller. */
struct pisb_runtime {
	char state[16];             /* running, starting, stopping, stopped */
	struct pisb_proc_id controller;
	struct pisb_proc_id init;
	char generation[40];        /* new at every start: exec handles carry it */
	struct pisb_proc_id resume;
	int64_t started_at, stopped_at;
	char *setup_error;          /* owned */
	char *cgroup;               /* owned: relative cgroup path, or NULL */
	uid_t uid_base;             /* host uid of root inside */
	gid_t gid_base;
	bool mem_enforced, cpu_enforced, pids_enforced, disk_enforced;
	char *limits_note;          /* owned: why a limit is not enforced */
	char *services_json;        /* owned: raw JSON array, or NULL */
	char *previews_json;        /* owned */
	char *extra_json;           /* owned: driver-specific object, or NULL */
};
void pisb_runtime_release(struct pisb_runtime *r);
int pisb_runtime_load(int idir, struct pisb_runtime *r, struct pisb_err *e);
int pisb_runtime_save(int idir, const struct pisb_runtime *r, struct pisb_err *e);
/* status.json's setupError := why (taken, freed in any case), kept
 * durably: setup failed, the sandbox runs anyway. */
int pisb_runtime_note_setup_error(int idir, char *why, struct pisb_err *e);
/* Without fsync: for the states a power loss ends anyway (starting,
 * running); stopped and failed are saved with pisb_runtime_save. */
int pisb_runtime_save_volatile(int idir, const struct pisb_runtime *r, struct pisb_err *e);

/* record.json */
struct pisb_record {
	char *name;
	char *driver;
	int64_t created_at;
	char *template_;            /* created from, or NULL */
	char *config_json;          /* the normalised config (raw JSON) */
	struct pisb_proc_id owner;  /* --owner-pid, pid 0 if none */
	char *session_id;
	char *remote_json;          /* driver-specific, e.g. opensandbox ids */
	char *image_cache;          /* images/ entry of its rootfs image
				     * ("KEY-UIDBASE"), or NULL: image: host,
				     * a remote driver, or a record older
				     * than the field */
	uid_t uid_base;             /* local driver as root: the host id range
				     * of its own (ns.h's pisb_ids_alloc), or
				     * 0: the caller's shared one (a record
				     * older than the field, or unprivileged) */
};
void pisb_record_release(struct pisb_record *r);
/* The largest record.json read (a bigger one is an error naming it). */
#define PISB_RECORD_MAX (8 << 20)
/* Errors name the file's full path; code 3 if it is missing, 1 if it is
 * bad (too large, a NUL, not a JSON object, a key missing or mistyped). */
int pisb_record_load(int idir, struct pisb_record *r, struct pisb_err *e);

/* Start creating sandbox NAME: staging/NAME.RND made (instances/ and
 * staging/ too), its op.lock taken.  Returns the staging dir's fd (O_PATH)
 * with *stage ("staging/NAME.RND", caller frees) and *lock set; -1 with e,
 * having removed what it made. */
int pisb_instance_stage(struct pisb_state *st, const char *name, char **stage, int *lock,
			struct pisb_err *e);

int pisb_record_save(int idir, const struct pisb_record *r, struct pisb_err *e);
/* Parse record->config_json into a config (caller frees). */
int pisb_record_config(const struct pisb_record *r, struct pisb_config **out,
		       struct pisb_err *e);

/* Open instances/NAME (or templates/NAME): O_PATH dir fd, or -1 with code 3. */
int pisb_instance_open(const struct pisb_state *st, const char *kind,
		       const char *name, struct pisb_err *e);

/* The live status: lock probe + control-socket ping, never the file alone:
 * running needs the lock held, the controller status.json names alive and
 * answering, and its init alive; a lock held by anything else is
 * unavailable (or starting while a start holds op.lock). */
enum pisb_status pisb_instance_status(int idir, const struct pisb_runtime *r);

/* The pids holding an flock on dirfd/file, at most max: the one
 * /proc/locks names, and every other process that has the file open (a
 * forked child shares the lock).  How destroy finds a controller that its
 * status.json does not name.  Scans /proc: for the fallback path only. */
int pisb_instance_lock_holders(int dirfd, const char *file, pid_t *pids, int max);

/* Listen on idir/control.sock (replacing a stale one), mode 0600,
 * nonblocking; -1 on failure (errno set). */
int pisb_control_listen(int idir, int backlog);
/* Connect to the controller's socket; -1 on failure (errno set). */
int pisb_control_connect(int idir);
/* Send one JSON request line, read one JSON reply line (timeout_ms). */
int pisb_control_call(int idir, const char *req, struct pisb_buf *reply,
		      int timeout_ms, struct pisb_err *e);
/* Send idir's controller a ping now, if it listens; the next
 * pisb_instance_status of idir reads its answer (the controllers of a
 * list answer side by side).  pisb_ping_ahead_end closes those not read. */
void pisb_ping_ahead(int idir);
void pisb_ping_ahead_end(void);

#endif
