/* gc.h - `pisb gc`: sweep what nobody will come back for.
 *
 * One pass, under the global lock locks/gc.lock (taken without waiting: a
 * second gc finds it held and does nothing), over:
 *
 *   - session sandboxes whose owner (create --owner-pid: pid + start time)
 *     is gone: stopped and destroyed (local driver); for other drivers only
 *     reported, their driver releases them
 *   - interrupted sandboxes (the controller died before a clean stop): the
 *     disk is marked stopped and the stale cgroup removed (pisb_local_stop)
 *   - with hours >= 0: stopped sandboxes whose stoppedAt is older than that
 *   - exec handles of an earlier run (generation prefix) or of a stopped
 *     sandbox, whose runner no longer holds the handle's lock
 *   - rootfs image caches images/KEY-UID (not host-UID skeletons) older
 *     than an hour that no record names (record.json imageCache) and no
 *     process uses or imports (images/KEY-UID.lock, taken exclusively to
 *     remove; see image.h); records removed in the same pass (or that a
 *     dry run would remove) name nothing.  A record that uses a rootfs
 *     image but predates imageCache keeps every cache
 *   - images/.import-KEY-PID directories older than an hour whose
 *     importing process is gone
 *   - staging/ entries older than an hour that no create/prepare holds;
 *     at any age, one with a mount under it (a disk image: the create was
 *     killed) that no create, prepare or controller holds: the mounts are
 *     detached, then the entry removed
 *   - trash/ entries whose destroying process is gone
 *   - `pi-sbx-*` sandboxes of the sbx CLI (only if `sbx` is on PATH) that
 *     are stopped and whose owner pid (in the name) is gone
 *
 * Never: a running sandbox (except a dead owner's), a busy one (op.lock
 * held: reported as kept), templates.  dry_run decides the same, changes
 * nothing.  Library code: the report is returned, the caller prints it.
 */
#ifndef PISB_GC_H
#define PISB_GC_H

#include <stdbool.h>
#include <stddef.h>

struct pisb_err;
struct pisb_state;
struct pisb_jw;

struct pisb_gc_opts {
	int hours;          /* < 0: stale stopped sandboxes are kept */
	bool dry_run;
};

struct pisb_gc_item {
	char *kind;         /* sandbox, handle, staging, trash, image, sbx */
	char *name;         /* sandbox name, or a path relative to the state dir */
	char *reason;
};

struct pisb_gc_list {
	struct pisb_gc_item *v;
	size_t n;
};

struct pisb_gc_report {
	bool dry_run;
	bool busy;                    /* another gc held the lock: nothing done */
	struct pisb_gc_list removed;  /* sandboxes destroyed */
	struct pisb_gc_list cleaned;  /* everything else removed or repaired */
	struct pisb_gc_list kept;     /* looked at and left alone, with why */
	struct pisb_gc_list failed;   /* an action that did not succeed */
	char *note;                   /* e.g. why the sbx sweep was skipped */
};

/* Sweep.  Returns 0 (the report says what happened; failures are in
 * r->failed), or -1 with e when the state dir itself cannot be read. */
int pisb_gc_run(struct pisb_state *st, const struct pisb_gc_opts *o,
		struct pisb_gc_report *r, struct pisb_err *e);
void pisb_gc_report_release(struct pisb_gc_report *r);
/* Only the staging/ entries left mounted by a killed create or prepare
 * (as in the pass above), silently: a create calls it before it stages. */
void pisb_gc_staging_mounted(struct pisb_state *st);
/* Add an item to one of r's lists (a driver's sweep reports through it). */
void pisb_gc_report_add(struct pisb_gc_list *l, const char *kind, const char *name,
			const char *reason);
/* {"removed":[{"kind","name","reason"}],"cleaned":[…],"kept":[…],
 *  "failed":[…],"dryRun":bool,"busy":bool,"note":str|null} */
void pisb_gc_report_json(const struct pisb_gc_report *r, struct pisb_jw *w);

#endif
