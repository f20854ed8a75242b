/* cgroup.h - resource limits for a local sandbox (cgroup v1 or v2).
 *
 * One cgroup per running sandbox, "pisb/NAME.GEN" under each controller
 * (v1: memory, cpu, pids hierarchies, every hierarchy when delegated;
 * v2: the unified tree).  Limits are
 * read back after writing: a limit counts as enforced only if the kernel
 * holds it.
 */
#ifndef PISB_CGROUP_H
#define PISB_CGROUP_H

#include <stdbool.h>

struct pisb_err;
struct pisb_strv;

#define PISB_CG_MAX 11

struct pisb_cgroup {
	int version;            /* 1 or 2, 0 if none usable */
	char rel[128];          /* "pisb/NAME.GEN" */
	int dirfds[PISB_CG_MAX + 1];  /* joined by the init; -1 ends */
	bool mem, cpu, pids;    /* enforced */
	bool delegated;         /* pisb_cgroup_delegate handed it over */
	char note[512];         /* why something is not enforced */
};

/* Create and set limits (0 = no limit for that resource).  Fails only if
 * `required` and a limit cannot be enforced. */
int pisb_cgroup_create(struct pisb_cgroup *cg, const char *rel, int cpus,
		       long long mem_bytes, int pids, bool required,
		       struct pisb_err *e);
void pisb_cgroup_close(struct pisb_cgroup *cg);
/* docker: true - hand the sandbox's cgroups to its root (uid, gid on
 * the host), so that its daemon can make cgroups of its own below them:
 * rel is made in every other v1 hierarchy too (cpuset, cpuacct, devices,
 * freezer, blkio, net_cls, net_prio, perf_event, hugetlb, rdma, misc,
 * name=systemd; cpuset given its parent's cpus and mems) and joined by the
 * init; in each, the directory and its cgroup.procs and tasks (v2: the
 * directory, cgroup.procs, cgroup.threads, cgroup.subtree_control) are
 * chowned.  Its own limit files stay root's: it can divide them, never
 * raise them (a child's limits are within its parent's).  0, or -1 with
 * e when a hierarchy could not be handed over (the daemon then runs in
 * rootless mode, without cgroups of its own). */
int pisb_cgroup_delegate(struct pisb_cgroup *cg, unsigned uid, unsigned gid, struct pisb_err *e);
/* Remove the cgroup dirs of rel ("pisb/NAME.GEN", nothing else): a dir
 * still busy is emptied with SIGKILL and retried for up to 3 s (processes
 * of a stopped sandbox may still be exiting).  0, or -1 with errno. */
int pisb_cgroup_remove(const char *rel);
/* Remove the empty pisb/NAME.GEN dirs (every NAME when name is NULL) but
 * keep, older than min_age_s: leftovers of a crashed create or controller.
 * Never kills anything; what it removed is added to removed (may be NULL). */
void pisb_cgroup_sweep(const char *name, const char *keep, int min_age_s,
		       struct pisb_strv *removed);
/* Move the calling process into rel (every controller); silent no-op when
 * rel is NULL or empty.  A process with one thread is moved through v1's
 * tasks file, which does not wait for an RCU grace period as cgroup.procs
 * does (10-20 ms); otherwise, and on v2, through cgroup.procs.  limits_only
 * (v1): only the limits' hierarchies (memory, pids, cpu), the only ones a
 * sandbox that is not delegated (docker: true) has a cgroup in; the others
 * are not looked up (a dozen failed path walks less on each exec). */
int pisb_cgroup_join(const char *rel, bool limits_only, struct pisb_err *e);
/* The same for one cgroup directory (an fd of it): 0, or -1 with errno. */
int pisb_cgroup_enter(int dirfd);
/* Read a limit back for verify/inspect: memory bytes, pids, cpu quota. */
long long pisb_cgroup_read(const char *rel, const char *what);
/* cgroup version of this host (1, 2) and whether we may create groups. */
int pisb_cgroup_version(void);

#endif
