/* vm_project.c - project.mode bind and bind-ro on the vm driver: the host
 * project served to the guest by a virtiofsd of its own (tag pisb-proj),
 * mounted by the agent at the workspace (vm_internal.h).
 *
 * The view virtiofsd serves is built in a mount namespace only it lives
 * in, under <instance>/pview (a tmpfs there):
 *   root/              the project, an idmapped mount (open_tree clone of
 *                      the project directory alone: no mount below it
 *                      comes along), nosuid, nodev, read-only for bind-ro;
 *                      the project owner's uid and gid are 0 in it and no
 *                      other id is mapped
 *   pisb-hidden-file   the sources of the secrets' covers
 *   pisb-hidden-dir    (project.h's pisb_project_mask)
 * virtiofsd pivots into root/ (sandbox=namespace): nothing outside the
 * project is reachable through it, whatever a symlink says (the guest
 * resolves links in its own tree).
 *
 * Why the id mapping: virtiofsd runs as host root and creates files with
 * the guest caller's uid and gid.  Through this mount the guest's root
 * is the project's owner: what it creates is the owner's on the host, a
 * chown to 0 gives the file to the owner, and a chown to any other id
 * fails (unmapped).  A setuid bit the guest sets is the owner's, never
 * host root's; so a project owned by uid or gid 0 is refused in bind mode
 * (pisb_project_bind_owner).  Files of other host users show as the overflow id
 * (nobody) and virtiofsd's root gets no capability over them (the kernel
 * grants capabilities only over mapped ids): the guest has the owner's
 * rights, and "other"'s over the rest.  virtiofsd runs without
 * CAP_MKNOD and CAP_SETFCAP (-o modcaps): no device node can be made, and
 * with xattrs off (its default) no file capability either.
 *
 * Secrets and .git that appear while the VM runs: root/ is a shared
 * mount, and virtiofsd's own namespace (sandbox=namespace makes all of it
 * a slave) gets what is mounted below it; pisb-watch, a child of
 * virtiofsd made before its exec, in this namespace, covers them as they
 * appear (project.h, pisb_project_watch_*) and ends with virtiofsd
 * (PR_SET_PDEATHSIG).  A cover it cannot make ends virtiofsd: the guest
 * loses the project rather than see the secret. */
#include "vm_internal.h"
#include "vm_proto.h"
#include "config.h"
#include "err.h"
#include "proc.h"
#include "project.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

void vm_project_release(struct vm_project *p)
{
	free(p->dir);
	memset(p, 0, sizeof(*p));
}


int vm_project_record(int sdir, const char *dir, const struct pisb_config *cfg, struct pisb_err *e)
{
	bool ro = cfg->project.mode == PISB_PROJECT_BIND_RO;
	unsigned u;
	unsigned g;

	if (pisb_project_bind_owner(dir, ro, &u, &g, e) < 0)
		return -1;
	return pisb_project_bind_record(sdir, dir, ro, e);
}

int vm_project_load(int idir, struct vm_project *p, struct pisb_err *e)
{
	memset(p, 0, sizeof(*p));
	if (pisb_project_bound(idir, &p->dir, &p->ro) <= 0)
		return 0;
	if (pisb_project_bind_owner(p->dir, p->ro, &p->uid, &p->gid, e) < 0) {
		vm_project_release(p);
		return -1;
	}
	return 0;
}

/* pisb-watch for the view (the top of this file), forked by the process
 * that is to exec virtiofsd.  A kernel without locked live covers
 * (pisb_project_watch_supported) gets none: the covers of the start stay
 * (logged). */
static void watch(int top, int vfd, const struct pisb_project_config *pc)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct pisb_project_watch *w;
	pid_t parent = getpid();

	if (!pisb_project_watch_supported(vfd)) {
		dprintf(2, "pisb: warning: this kernel cannot cover secrets made while the VM runs (Linux 6.15 or later); they are covered at the next start\n");
		return;
	}
	if (fork() != 0)
		return;
	prctl(PR_SET_NAME, "pisb-watch");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	/* only what it needs: not virtiofsd's socket */
	pisb_close_except((const int[]){ top, vfd }, 2);
	w = pisb_project_watch_new(top, vfd, pc, &e);
	if (w)
		pisb_project_watch_serve(w, -1, &e);
	dprintf(2, "pisb: fatal: the project's watcher: %s; the project's share is ended (its new secrets would show)\n",
		e.msg);
	kill(parent, SIGKILL);
	_exit(1);
}

/* In virtiofsd's child, its own mount namespace made: the view at
 * <inst>/pview (see the top of this file).  0, or -1 with e. */
static int build_view(const char *inst, const struct vm_project *p,
		      const struct pisb_project_config *pc, struct pisb_err *e)
{
	_cleanup_free_ char *view = xasprintf("%s/pview", inst);
	_cleanup_close_ int vfd = -1, uns = -1, tree = -1, top = -1;
	struct mount_attr a = { 0 };
	char um[64], gm[64];

	if (mount("tmpfs", view, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "mount a tmpfs on '%s'", view);
	vfd = open(view, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (vfd < 0 || mkdirat(vfd, "root", 0755) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "make '%s/root'", view);
	if (pisb_project_mask_sources(vfd, e) < 0)
		return -1;
	/* on disk the owner's ids; through the mount 0 (see the top) */
	snprintf(um, sizeof(um), "%u 0 1\n", (unsigned)p->uid);
	snprintf(gm, sizeof(gm), "%u 0 1\n", (unsigned)p->gid);
	if ((uns = pisb_idmap_userns(um, gm)) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "a user namespace for the project's id mapping");
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, p->dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open the project '%s'", p->dir);
	a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
		     (p->ro ? MOUNT_ATTR_RDONLY : 0);
	a.userns_fd = (unsigned)uns;
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "map the project's ids (idmapped mount of '%s')", p->dir);
	if (syscall(SYS_move_mount, tree, "", vfd, "root", MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "mount the project");
	{
		_cleanup_free_ char *root = xasprintf("%s/root", view);
		if (mount(NULL, root, NULL, MS_SHARED, NULL) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "share the project's mount");
	}
	top = openat(vfd, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (top < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open the project's mount");
	if (pisb_project_mask(top, vfd, pc, e) < 0)
		return -1;
	watch(top, vfd, pc);
	return 0;
}

struct view_args {
	const char *inst;
	const struct vm_project *p;
	const struct pisb_project_config *pc;
};

static int view_prep(void *arg, struct pisb_err *e)
{
	const struct view_args *v = arg;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "a mount namespace for the project");
	return build_view(v->inst, v->p, v->pc, e);
}

pid_t vm_project_virtiofsd(const char *virtiofsd, const char *inst, int idir, int sock,
			   const struct vm_project *p, const struct pisb_project_config *pc)
{
	struct view_args v = { inst, p, pc };
	_cleanup_free_ char *src = xasprintf("%s/pview/root", inst);

	return vm_virtiofsd(virtiofsd, idir, VM_PROJECT_LOG, sock, src, true, view_prep, &v);
}

void vm_project_qemu_args(struct pisb_strv *av, const char *bus)
{
	pisb_strv_push(av, "-chardev");
	pisb_strv_push(av, "socket,id=vfs1,path=" VM_PROJECT_SOCK);
	pisb_strv_push(av, "-device");
	pisb_strv_pushf(av, "vhost-user-fs-%s,chardev=vfs1,tag=" PISB_PROJECT_TAG ",queue-size=1024", bus);
}
