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

struct pisb_ids {
	uid_t uid_base;      /* host uid of root inside */
	gid_t gid_base;
	unsigned count;      /* ids mapped: 65536 as root, 1 unprivileged */
};

/* The id mapping pisb uses for the calling user. */
void pisb_ids_for_caller(struct pisb_ids *ids);

struct pisb_boot {
	const char *hostname;
	const char *lower_path;  /* image root directory (absolute) */
	bool host_image;     /* bind the host's system directories read-only */
	const char *disk_path;   /* the instance disk: upper/, work/, merged/ */
	const char *workspace;
	unsigned tmp_mib;    /* size of /tmp and /dev/shm (tmpfs), 0 = kernel default */
	struct pisb_ids ids;
	int log_fd;          /* init's stderr, or -1 */
	int cgroup_dirfds[8];/* cgroup dirs to join before the namespaces (-1 ends) */
};

/* Boot; on success *init is the init's pid and *ctl the controller end of
 * the init's socketpair (closing it kills the sandbox). */
int pisb_sandbox_boot(const struct pisb_boot *b, pid_t *init, int *ctl,
		      struct pisb_err *e);

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

/* Make the host-image skeleton (lower layer) for ids under dirfd/path. */
int pisb_host_skeleton(int dirfd, const char *path, const struct pisb_ids *ids,
		       struct pisb_err *e);

#endif
