/* state.h - the state directory (pisb-state(5)).
 *
 * Resolution: --state-dir, else $PI_SANDBOX_HOME, else
 * $XDG_STATE_HOME/pi-sandbox, else ~/.local/state/pi-sandbox.  The directory
 * is created 0700; one that group or others can access is refused.
 *
 * Layout (all relative to the state dir fd):
 *   instances/NAME/   one sandbox: record.json, status.json, disk/, logs
 *   templates/NAME/   prepared disks
 *   images/           content-addressed rootfs cache
 *   staging/          instances being created (renamed into place)
 *   trash/            instances being deleted (renamed here, then removed)
 *   locks/            global lock files
 *
 * Write protocol: every file is written to a temp file in the same
 * directory, fsync'd, renamed over the target, and the directory fsync'd.
 * Readers therefore see the old or the new file, never a mix.
 */
#ifndef PISB_STATE_H
#define PISB_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct pisb_err;

struct pisb_state {
	int fd;       /* O_PATH|O_DIRECTORY fd of the state dir */
	char *path;   /* absolute path */
};

#define PISB_STATE_INIT { -1, NULL }

/* Resolve the state dir path (no I/O).  Caller frees. */
char *pisb_state_path(const char *override, struct pisb_err *e);
/* Open (creating with 0700 if missing) and check permissions. */
int pisb_state_open(struct pisb_state *st, const char *override,
		    struct pisb_err *e);
void pisb_state_release(struct pisb_state *st);

/* Create dir (and parents) relative to dirfd with mode; ok if it exists. */
int pisb_mkdirs_at(int dirfd, const char *path, mode_t mode, struct pisb_err *e);

/* Atomically replace dirfd/name with data (mode applied to the new file). */
int pisb_atomic_write(int dirfd, const char *name, const void *data, size_t n,
		      mode_t mode, struct pisb_err *e);
/* The same without the fsyncs (still atomic for readers), for a file that
 * only says what runs now: a power loss ends that anyway. */
int pisb_atomic_write_volatile(int dirfd, const char *name, const void *data, size_t n,
			       mode_t mode, struct pisb_err *e);

/* Deferred durability, for files that become visible only through a
 * later rename (a staged instance): between pisb_sync_defer() and
 * pisb_sync_flush(), pisb_atomic_write does not fsync but keeps the file
 * and its directory; the flush starts the writeback of every one, then
 * fsyncs each (one journal commit for all instead of two per file).
 * Flush before the rename that publishes them (and before unmounting a
 * filesystem they are on: the flush closes them); deferring goes on
 * until pisb_sync_discard(), which drops what is left unflushed (a failed
 * create removes its files).  Returns 0 or -1 (errno). */
void pisb_sync_defer(void);
int pisb_sync_flush(void);
void pisb_sync_discard(void);

/* Remove a tree relative to dirfd (no symlink following). */
int pisb_rm_rf_at(int dirfd, const char *path, struct pisb_err *e);

/* Move state/<dir>/<name> to trash/ atomically, then remove it. */
int pisb_state_trash(struct pisb_state *st, const char *dir, const char *name,
		     struct pisb_err *e);

/* The lock of image cache images/NAME: "images/NAME.lock" (caller frees);
 * a user holds it shared, an import and `pisb gc`'s removal exclusively. */
char *pisb_image_lock_path(const char *name);

/* fsync a directory fd. */
int pisb_fsync_dir(int dirfd);
/* fsync the directory that holds path (relative to dirfd): where a rename
 * put or took an entry.  0, or -1 (errno). */
int pisb_fsync_parent(int dirfd, const char *path);

#endif
