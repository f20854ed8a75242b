/* ns.h - the local driver's sandbox: namespaces, rootfs, init, entry.
 *
 * pisb_sandbox_boot() clones the sandbox's init (pid 1 of a new user, mount,
 * pid, net, ipc, uts and cgroup namespace), maps root inside to an
 * unprivileged id outside, builds the root filesystem (overlayfs: the image
 * below, the instance disk above; /proc, /dev, /tmp of its own), brings up
 * loopback only, and pivots into it.  The init then reaps children and
 * obeys its controller over a socketpair; it dies with the controller.
 *
 * pisb_sandbox_enter() moves the calling (single-threaded) process into a
 * running sandbox's namespaces and root; its children run inside.
 */
#ifndef PISB_NS_H
#define PISB_NS_H

#include <stdbool.h>
#include <sys/types.h>

struct pisb_err;
struct pisb_project_config;

struct pisb_ids {
	uid_t uid_base;      /* host uid of root inside */
	gid_t gid_base;
	unsigned count;      /* ids mapped: 65536 as root, 1 unprivileged */
};

/* The id mapping pisb uses for the calling user: the shared range
 * (PISB_UID_BASE, default 1000000000) as root, the caller's own id
 * otherwise. */
void pisb_ids_for_caller(struct pisb_ids *ids);

/* Host id ranges of their own, one per sandbox or template made by root,
 * so that one that escapes to the host holds no file or process of
 * another.  Range k (k >= 1) starts at the shared base + k * 65536 (the
 * shared range itself stays with records older than this); ranges never
 * overlap and end below 2^32 - 1.
 *
 * State: a host-wide registry, $PISB_ID_REGISTRY or /var/lib/pisb (0700,
 * root's): idranges/BASE (0600) names its holder ("NAME PID START
 * STATEDIR\n": the sandbox, the process that allocated it, the state dir
 * of its record); idranges.lock (exclusive) around every allocation.  A
 * state dir's own idranges/ ("NAME PID START\n") is read too (ranges
 * given before the host-wide registry), and is the registry when the
 * host-wide one cannot be written (a read-only /var/lib).  An entry whose
 * allocating process is gone and that no record of NAME (instances/,
 * templates/, staging/NAME.prep of its state dir) claims is stale: its
 * range is handed out again once no range is left without an entry (the
 * lowest such first), and pisb gc removes it (pisb_ids_sweep).
 *
 * pisb_ids_alloc: as root, a free range into ids (for owner); otherwise
 * pisb_ids_for_caller's.  pisb_ids_free: give range base back (0 and the
 * shared base are no-ops).  pisb_ids_for_record: the ids of a record
 * (its uidBase, else the caller's shared range). */
struct pisb_state;
struct pisb_record;
struct pisb_strv;
int pisb_ids_alloc(struct pisb_state *st, const char *owner, struct pisb_ids *ids,
		   struct pisb_err *e);
void pisb_ids_free(struct pisb_state *st, uid_t base);
/* The same for a range whose entry names owner, a name only its own
 * create takes (a spare's random one): freed even while that create's
 * process is still alive, once no record claims the range. */
void pisb_ids_free_owned(struct pisb_state *st, uid_t base, const char *owner);
/* pisb gc: remove the stale entries (a create does only when no range is
 * left without one), their paths appended to out; dry_run: only named. */
void pisb_ids_sweep(struct pisb_state *st, bool dry_run, struct pisb_strv *out);
/* Range base is owner's now (a spare of the pool claimed as owner,
 * pool.h): its entry names owner and no process (pid 0): owner's record
 * claims it. */
int pisb_ids_adopt(struct pisb_state *st, uid_t base, const char *owner, struct pisb_err *e);
void pisb_ids_for_record(const struct pisb_record *rec, struct pisb_ids *ids);

/* diskGiB as root: the instance disk (upper/, work/) on an ext4 image of
 * its own, DIR/disk.img (sparse), loop-mounted on DIR/disk while the
 * sandbox runs, so that writing past the size fails with ENOSPC inside
 * and the host filesystem gives at most that much.
 * pisb_disk_image_make: create and format it (gib GiB).
 * pisb_disk_image_mount: mount DIR/disk.img on disk_path (nosuid, nodev);
 * 0 when there is no image, 1 when mounted (already mounted counts).
 * pisb_disk_image_mount_ro: mount DIR/disk.img (a template's) read-only
 * on at (also noexec, no journal replay), to copy from; 0 when there is
 * no image, 1 when mounted.
 * pisb_disk_image_umount: detach it (the loop device goes with its last
 * user). */
int pisb_disk_image_make(int dirfd, const char *dir, int gib, struct pisb_err *e);
int pisb_disk_image_mount(int dirfd, const char *dir, const char *disk_path,
			  struct pisb_err *e);
int pisb_disk_image_mount_ro(int dirfd, const char *dir, const char *at, struct pisb_err *e);
void pisb_disk_image_umount(const char *disk_path);

/* Namespaces made ahead of a boot (issue #21): a child of the controller
 * makes the user (no ids mapped yet), mount, network, IPC and UTS
 * namespaces while the controller takes the lock, reads the record, makes
 * the cgroup and the image layers; the boot's child joins them (setns)
 * instead of making them, ~0.7 ms of kernel work off the critical path
 * (the network namespace alone is ~0.5 ms).  The mount namespace is a copy
 * of the controller's as it was then: only for a boot that mounts nothing
 * there before it (no disk image, no bound project). */
struct pisb_preboot {
	pid_t pid;           /* the child that holds them, or -1 */
	int sock;            /* its end: it leaves when ours is closed */
	/* the child also names the UTS namespace (hostname), brings the
	 * network namespace's loopback up and copies the init program
	 * (init_path) into a sealed memfd, which comes back with the
	 * namespaces: ~0.1 ms more off the boot's path */
	const char *hostname;
	const char *init_path;
};

/* Start making them (never fails: p->pid -1 when no child could start);
 * p->hostname and p->init_path set (or NULL) before. */
void pisb_preboot_start(struct pisb_preboot *p);
/* Let the child go (the boot has joined, or will not) and reap it. */
void pisb_preboot_drop(struct pisb_preboot *p);

struct pisb_boot {
	/* namespaces made ahead (pisb_preboot_start), or NULL: the boot
	 * makes its own; either way the caller drops them after the boot */
	struct pisb_preboot *pre;
	const char *hostname;
	const char *lower_path;  /* image root directory (absolute) */
	bool host_image;     /* bind the host's system directories read-only */
	/* host_image: the mask layers of its /etc (pisb_etc_mask_prepare,
	 * absolute), or NULL: /etc a view of per-entry binds instead */
	const char *etc_mask;
	const char *disk_path;   /* the instance disk: upper/, work/, merged/ */
	/* where disk_path is once the create that stages it published it
	 * (a rename, at any moment of the boot), or NULL */
	const char *disk_path_published;
	const char *workspace;
	unsigned tmp_mib;    /* size of /tmp and /dev/shm (tmpfs), 0 = kernel default */
	struct pisb_ids ids;
	bool docker;         /* docker: true: <disk>/docker at /var/lib/docker,
	                      * the cgroup hierarchies under /sys/fs/cgroup */
	int log_fd;          /* init's stderr, or -1 */
	/* the init program (pisb-init, absolute), exec'ed as pid 1 so that
	 * the sandbox does not keep a copy of the controller's memory; NULL,
	 * or one that cannot be run: the fork of the controller stays init */
	const char *init_path;
	int cgroup_dirfds[16];/* cgroup dirs the init starts in (-1 ends) */
	/* project.mode bind / bind-ro: the host project (absolute) at the
	 * workspace, live; its secrets (project.h) under empty read-only
	 * files or directories, every .git read-only; NULL: none */
	const char *project;
	bool project_ro;
	const struct pisb_project_config *project_cfg;
	/* out: the pid of the project's watcher (pisb-watch, a child of the
	 * caller once the boot is done: ns.c), 0 for none; or NULL */
	pid_t *watch_pid;
	/* the guest's config (absolute, inside), read by the init with the
	 * sandbox root's rights once the root is made, before anything of the
	 * sandbox runs, into *guest_config_out (at most PISB_CONFIG_MAX bytes,
	 * a regular file) or its errno into *guest_config_err; NULL: not */
	const char *guest_config;
	struct pisb_buf *guest_config_out;
	int *guest_config_err;
};

/* The mask layers of a host-image sandbox's /etc, shared by the state
 * directory's sandboxes: images/etc-mask-HASH/top holds an empty file at
 * each masked file (hostmask.h) and an empty directory at each masked
 * directory (the directories above them with the host's modes); wh/ a
 * whiteout at each masked directory, so that nothing of the host's shows
 * through top's empty one, and at each socket, fifo and device in the
 * host's /etc (added at each start).  HASH names the masked paths: a
 * layer in use is never changed but for whiteouts added.  Its absolute
 * path (caller frees), or NULL with e (the boot then binds entry by
 * entry). */
char *pisb_etc_mask_prepare(struct pisb_state *st, struct pisb_err *e);

/* Boot; on success *init is the init's pid and *ctl the controller end of
 * the init's socketpair (closing it kills the sandbox). */
int pisb_sandbox_boot(const struct pisb_boot *b, pid_t *init, int *ctl,
		      struct pisb_err *e);

/* The init says "R" when it is ready, before it execs pisb-init (which
 * takes the exec off the boot's path), and "r" once it bears that name:
 * until then a command inside reads the memfd's name in /proc/1/comm.
 * Wait for the "r" (at most timeout_ms); the controller does before it
 * says "running" or "spare", or lets anything of the guest run.  0, or -1
 * when the init did not say it. */
int pisb_sandbox_init_named(int ctl, int timeout_ms);

/* Ask the init to SIGKILL every other process in the sandbox, and wait
 * until they are gone (at most timeout_ms). */
int pisb_sandbox_killall(int ctl, int timeout_ms, struct pisb_err *e);

/* Enter the namespaces and root of the sandbox whose init is pid with
 * start time start.  Then fork: the child is in the sandbox's pid ns.
 * become_root: setgid/setuid to 0 inside (after the fork, in the child). */
int pisb_sandbox_enter(pid_t init, unsigned long long start, struct pisb_err *e);
/* Only some namespaces (PISB_NS_* bits); user and mnt suffice for files. */
enum {
	PISB_NS_USER = 1, PISB_NS_IPC = 2, PISB_NS_UTS = 4, PISB_NS_NET = 8,
	PISB_NS_PID = 16, PISB_NS_CGROUP = 32, PISB_NS_MNT = 64, PISB_NS_ALL = 127,
};
int pisb_sandbox_enter_ns(pid_t init, unsigned long long start, unsigned which,
			  struct pisb_err *e);
int pisb_sandbox_become_root(bool privileged, struct pisb_err *e);
/* The hostname inside the sandbox (its UTS namespace), set from a child
 * of ours that joins it: a spare of the pool claimed under its name. */
int pisb_sandbox_sethostname(pid_t init, unsigned long long start, const char *name,
			     struct pisb_err *e);

/* Make the host-image skeleton (lower layer) for ids under dirfd/path. */
int pisb_host_skeleton(int dirfd, const char *path, const struct pisb_ids *ids,
		       struct pisb_err *e);

#endif
