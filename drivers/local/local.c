/* local.c - the local driver's lifecycle and its controller. */
#include "local.h"
#include "pool.h"
#include "cgroup.h"
#include "config.h"
#include "dl.h"
#include "driver.h"
#include "err.h"
#include "gc.h"
#include "image.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "ns.h"
#include "proc.h"
#include "project.h"
#include "sbexec.h"
#include "services.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define SETUP_DEADLINE_MS (20 * 60 * 1000)
#define RESUME_WAIT_MS 10000
#define BOOT_WAIT_MS (25 * 60 * 1000)

static const char *kind_of(bool tmpl) { return tmpl ? "templates" : "instances"; }

/* ---------- disk and staging ---------- */

static int chown_base(int dirfd, const char *path, const struct pisb_ids *ids)
{
	if (geteuid() != 0)
		return 0;
	return fchownat(dirfd, path, ids->uid_base, ids->gid_base, AT_SYMLINK_NOFOLLOW);
}

/* Put the guest copy of the config at <workspace>/.sandbox.yaml in upper. */
static int write_guest_config(int idir, const struct pisb_config *cfg,
			      const char *text, size_t len,
			      const struct pisb_ids *ids, struct pisb_err *e)
{
	_cleanup_free_ char *dir = xasprintf("disk/upper%s", cfg->workspace);
	_cleanup_free_ char *file = xasprintf("%s/.sandbox.yaml", dir);
	char *p;

	if (pisb_mkdirs_at(idir, dir, 0755, e) < 0)
		return -1;
	/* every directory we made must belong to root inside */
	for (p = dir + strlen("disk/upper"); p && *p; p = strchr(p + 1, '/')) {
		char save = p[0];
		if (p != dir + strlen("disk/upper")) {
			*p = '\0';
			chown_base(idir, dir, ids);
			*p = save;
		}
	}
	chown_base(idir, dir, ids);
	if (pisb_atomic_write(idir, file, text, len, 0644, e) < 0)
		return -1;
	chown_base(idir, file, ids);
	return 0;
}

static int make_disk(int idir, const struct pisb_ids *ids, struct pisb_err *e)
{
	if (pisb_mkdirs_at(idir, "disk/upper", 0755, e) < 0 ||
	    pisb_mkdirs_at(idir, "disk/work", 0700, e) < 0)
		return -1;
	if (chown_base(idir, "disk/upper", ids) < 0 || chown_base(idir, "disk/work", ids) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "chown the disk to the sandbox's root (see 'pisb doctor')");
	return 0;
}

/* Copy a template's disk with cp -a (keeps owners, modes, xattrs and
 * overlay whiteouts; reflinks where the filesystem can). */
static int copy_tree(const char *from, const char *to, struct pisb_err *e)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
	if (pid == 0) {
		execlp("cp", "cp", "-a", "--reflink=auto", from, to, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return pisb_err_set(e, PISB_EXIT_FAIL, "copy '%s' to '%s' failed", from, to);
	return 0;
}

/* The create's disk on a filesystem image of its own (diskGiB given, as
 * root), which the controller mounts at each start. */
static bool disk_on_image(const struct pisb_config *cfg)
{
	return geteuid() == 0 && cfg->disk_explicit;
}

/* The host's project bound as the workspace (bind, bind-ro), not copied. */
static bool project_bound(const struct pisb_config *cfg)
{
	return cfg->project.mode == PISB_PROJECT_BIND || cfg->project.mode == PISB_PROJECT_BIND_RO;
}

/* The project into the staged disk's workspace, before anything of the
 * sandbox runs (a template's workspace is followed through no symlink). */
static int seed_project(int sdir, const struct pisb_config *cfg, const char *dir,
			const struct pisb_ids *ids, struct pisb_err *e)
{
	_cleanup_free_ char *ws = xasprintf("disk/upper%s", cfg->workspace);
	_cleanup_close_ int wsfd = -1;
	struct pisb_project_stats s;

	if (project_bound(cfg)) {
		bool ro = cfg->project.mode == PISB_PROJECT_BIND_RO;
		unsigned u, g;
		/* as root (ids.count > 1) the sandbox's root is the project's
		 * owner through an idmapped mount (ns.c); else it is the
		 * calling user, who owns what it writes anyway */
		if (ids->count > 1 && pisb_project_bind_owner(dir, ro, &u, &g, e) < 0)
			return -1;
		return pisb_project_bind_record(sdir, dir, ro, e);
	}
	if (pisb_mkdirs_at(sdir, ws, 0755, e) < 0)
		return -1;
	chown_base(sdir, ws, ids);
	wsfd = pisb_open_beneath(sdir, ws, O_RDONLY | O_DIRECTORY);
	if (wsfd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open the workspace of the new disk");
	return pisb_project_seed(sdir, wsfd, dir, &cfg->project, ids->uid_base, ids->gid_base,
				 ids->count, &s, e);
}

/* A template's disk copied for a sandbox of another id range: every
 * owner in the template's range moves to the same offset in the new one
 * (lchown, never following a link); the setuid/setgid bits and file
 * capabilities that chown drops are put back, a v3 capability's root id
 * moved too.  The copy is pisb's alone (staging/, no sandbox runs on it),
 * so paths cannot change under the walk.  POSIX ACL entries naming a user
 * or group of the template's range move too (shift_acl). */
static const struct pisb_ids *shift_from, *shift_to;

static uid_t shifted(unsigned id, unsigned from, unsigned to)
{
	return id >= from && id - from < shift_from->count ? to + (id - from) : id;
}

/* The access or default ACL xattr of path with its named users and groups
 * moved to the new range.  Its layout: a 4-byte version, then entries of
 * tag (2 bytes), permissions (2), id (4), little-endian; read as host root,
 * the ids are host ids. */
static int shift_acl(const char *path, const char *name)
{
	static unsigned char a[65536];   /* XATTR_SIZE_MAX; the walk is single-threaded */
	ssize_t n = lgetxattr(path, name, a, sizeof(a));
	bool changed = false;

	if (n < 0)
		return errno == ENODATA || errno == EOPNOTSUPP ? 0 : -1;
	for (ssize_t off = 4; off + 8 <= n; off += 8) {
		unsigned tag = a[off] | a[off + 1] << 8;
		unsigned id = a[off + 4] | a[off + 5] << 8 | a[off + 6] << 16 | (unsigned)a[off + 7] << 24;
		unsigned to;

		if (tag == 0x02)        /* ACL_USER */
			to = shifted(id, shift_from->uid_base, shift_to->uid_base);
		else if (tag == 0x08)   /* ACL_GROUP */
			to = shifted(id, shift_from->gid_base, shift_to->gid_base);
		else
			continue;
		if (to == id)
			continue;
		a[off + 4] = to & 0xff, a[off + 5] = (to >> 8) & 0xff;
		a[off + 6] = (to >> 16) & 0xff, a[off + 7] = to >> 24;
		changed = true;
	}
	return changed ? lsetxattr(path, name, a, (size_t)n, 0) : 0;
}

static int shift_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	uid_t u = shifted(sb->st_uid, shift_from->uid_base, shift_to->uid_base);
	gid_t g = shifted(sb->st_gid, shift_from->gid_base, shift_to->gid_base);
	unsigned char cap[64];
	ssize_t ncap = -1;

	(void)type;
	(void)ftw;
	if (!S_ISLNK(sb->st_mode) &&
	    (shift_acl(path, "system.posix_acl_access") < 0 ||
	     (S_ISDIR(sb->st_mode) && shift_acl(path, "system.posix_acl_default") < 0)))
		return -1;
	if (u == sb->st_uid && g == sb->st_gid)
		return 0;
	if (S_ISREG(sb->st_mode))
		ncap = lgetxattr(path, "security.capability", cap, sizeof(cap));
	if (lchown(path, u, g) < 0)
		return -1;
	if (S_ISREG(sb->st_mode) && (sb->st_mode & (S_ISUID | S_ISGID)) &&
	    chmod(path, sb->st_mode & 07777) < 0)
		return -1;
	if (ncap == 24 && (cap[3] & 0xff) == 0x03) {
		/* VFS_CAP_REVISION_3: rootid, little-endian, at byte 20 */
		unsigned r = cap[20] | cap[21] << 8 | cap[22] << 16 | (unsigned)cap[23] << 24;
		r = shifted(r, shift_from->uid_base, shift_to->uid_base);
		cap[20] = r & 0xff, cap[21] = (r >> 8) & 0xff, cap[22] = (r >> 16) & 0xff, cap[23] = r >> 24;
	}
	if (ncap > 0 && lsetxattr(path, "security.capability", cap, (size_t)ncap, 0) < 0)
		return -1;
	return 0;
}

static int shift_tree(const char *root, const struct pisb_ids *from, const struct pisb_ids *to,
		      struct pisb_err *e)
{
	if (from->uid_base == to->uid_base && from->gid_base == to->gid_base)
		return 0;
	shift_from = from;
	shift_to = to;
	if (nftw(root, shift_one, 64, FTW_PHYS | FTW_MOUNT) != 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "move the copy of '%s' to the sandbox's id range", root);
	return 0;
}

/* The disk of a sandbox made from the template TNAME (open on tdir), with
 * the limit a direct create would get: diskGiB given, as root, an image of
 * that size (the template's own image copied when it has that size, else
 * a fresh one the template's tree is copied into); otherwise a directory
 * (copied out of the template's image, mounted read-only, when it has
 * one).  Then moved into the new sandbox's id range.  *disk_mnt: the
 * image mounted on the staged disk, for the caller to unmount. */
static int stage_template_disk(struct pisb_state *st, int sdir, int tdir, const char *stage,
			       const char *tname, const struct pisb_config *cfg,
			       const struct pisb_ids *ids, char **disk_mnt, struct pisb_err *e)
{
	_cleanup_free_ char *tpath = xasprintf("%s/templates/%s", st->path, tname);
	_cleanup_free_ char *sd = xasprintf("%s/%s", st->path, stage);
	_cleanup_free_ char *to = xasprintf("%s/disk", sd);
	_cleanup_free_ char *src = NULL, *src_mnt = NULL;
	struct pisb_record trec;
	struct pisb_ids tids;
	struct stat ti;
	bool timg = fstatat(tdir, "disk.img", &ti, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ti.st_mode);
	bool want = disk_on_image(cfg);
	int ret = -1;

	if (pisb_record_load(tdir, &trec, e) < 0)
		return -1;
	pisb_ids_for_record(&trec, &tids);
	pisb_record_release(&trec);
	if (want && timg && ti.st_size == (off_t)cfg->disk_gib << 30) {
		/* the same size: the image itself (holes kept, a reflink
		 * where the filesystem can) */
		_cleanup_free_ char *fi = xasprintf("%s/disk.img", tpath);
		_cleanup_free_ char *ni = xasprintf("%s/disk.img", sd);
		if (copy_tree(fi, ni, e) < 0 || pisb_disk_image_mount(sdir, sd, to, e) < 0)
			return -1;
		*disk_mnt = xstrdup(to);
		return shift_tree(to, &tids, ids, e);
	}
	if (timg) {
		src_mnt = xasprintf("%s/template-disk", sd);
		if (pisb_disk_image_mount_ro(tdir, tpath, src_mnt, e) < 0)
			goto out;
		src = xstrdup(src_mnt);
	} else {
		src = xasprintf("%s/disk", tpath);
	}
	if (want) {
		_cleanup_free_ char *contents = xasprintf("%s/.", src);
		if (pisb_disk_image_make(sdir, sd, cfg->disk_gib, e) < 0 ||
		    pisb_disk_image_mount(sdir, sd, to, e) < 0)
			goto out;
		*disk_mnt = xstrdup(to);
		if (copy_tree(contents, to, e) < 0)
			goto out;
	} else if (copy_tree(src, to, e) < 0) {
		goto out;
	}
	ret = shift_tree(to, &tids, ids, e);
out:
	if (src_mnt) {
		pisb_disk_image_umount(src_mnt);
		unlinkat(sdir, "template-disk", AT_REMOVEDIR);
	}
	return ret;
}

/* ---------- talking to / waiting for the controller ---------- */

/* A controller forked from the static pisb (spawn_controller): what its
 * supervise verb (cmd/svc_supervise.c) runs after an exec.  Its strings
 * are on the heap: the stack it was forked from is dropped in it. */
struct forked_ctl {
	char *state, *name;
	bool own_ns;
};

static int controller_forked(void *arg)
{
	const struct forked_ctl *f = arg;
	struct pisb_state st;
	struct pisb_err e = PISB_ERR_INIT;

	pisb_controller_title(f->state, f->name, f->own_ns);
	memset(&st, 0, sizeof(st));
	st.fd = -1;
	if (pisb_state_open(&st, f->state, &e) < 0 ||
	    pisb_controller_run(&st, f->name, 3, f->own_ns, &e) < 0) {
		/* as the verb's "fatal:" line, which a failed start quotes */
		pisb_svc_log("fatal: %s", e.msg);
		return e.code ? e.code : PISB_EXIT_FAIL;
	}
	return 0;
}

/* Start the controller of NAME (its log: idir's controller.log; idir -1:
 * none yet, a create's), with a socket to it in *sock: a byte written
 * there tells it to begin (it waits for one: a create spawns it first,
 * so that its start-up overlaps the create's own work, issue #21; it
 * then sends the staged directory, where the controller opens its log
 * and boots the sandbox), and it writes one when the sandbox runs, or
 * stopped, or failed (wait_controller).  own_ns: the boot will make the
 * sandbox's namespaces itself (a disk image, a bound project: ns.h), so
 * the controller makes none ahead of it. */
static pid_t spawn_controller(struct pisb_state *st, int idir, const char *name,
			      const struct pisb_config *cfg, bool own_ns, int *sock,
			      struct pisb_err *e)
{
	char bin[4096];
	_cleanup_close_ int log = idir < 0 ? -1 : openat(idir, "controller.log",
							 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	char *argv[] = { bin, "supervise", (char *)name, "--state-dir", st->path, "--notify-fd", "3",
			 own_ns ? "--own-namespaces" : NULL, NULL };
	/* The controller is pisb-svc's verb; the static pisb runs it too.  A
	 * create or start that the static pisb runs forks it (no exec, and
	 * no second start of the C library, whose CPU probe a hypervisor may
	 * trap: 0.6-0.7 ms here, issue #21) for a sandbox that needs no
	 * library: of the host image (another may have to be imported again:
	 * libarchive) and with no egress proxy (it resolves the allowed
	 * hosts: getaddrinfo and its NSS modules).  Else pisb-svc's. */
	bool lean = cfg && !strcmp(cfg->image, "host") && !cfg->nallowed_hosts;
	ssize_t k = lean ? readlink("/proc/self/exe", bin, sizeof(bin) - 1) : -1;
	bool forked;
	int sv[2];
	pid_t pid;

	if (idir >= 0 && log < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open controller.log");
	if (k > 0)
		bin[k] = '\0';
	forked = k > 0 && !strcmp(strrchr(bin, '/') + 1, "pisb");
	if (!forked && pisb_find_binary("pisb-svc", bin, sizeof(bin), e) < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "socketpair");
	if (forked) {
		struct forked_ctl *f = xmalloc(sizeof(*f));
		*f = (struct forked_ctl){ xstrdup(st->path), xstrdup(name), own_ns };
		pid = pisb_spawn_detached_fn(bin, controller_forked, f, log, sv[1], e);
		free(f->state);
		free(f->name);
		free(f);
	} else {
		pid = pisb_spawn_detached(argv, log, sv[1], e);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return -1;
	}
	*sock = sv[0];
	return pid;
}

/* The word to begin (spawn_controller). */
static int tell_controller(int sock, const char *name, struct pisb_err *e)
{
	/* no SIGPIPE from a controller that is already gone */
	if (send(sock, "g", 1, MSG_NOSIGNAL) != 1)
		return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' failed to start: its controller exited (see 'pisb logs')", name);
	return 0;
}

/* Last line of controller.log that says "fatal:", for error messages. */
static void last_fatal(int idir, char *out, size_t n)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *p, *last = NULL;

	out[0] = '\0';
	if (pisb_read_file_at(idir, "controller.log", &b, 64 << 20) < 0 || !b.s)
		return;
	for (p = b.s; (p = strstr(p, "fatal: ")); p++)
		last = p;
	if (!last)
		return;
	last += 7;
	p = strchr(last, '\n');
	snprintf(out, n, "%.*s", p ? (int)(p - last) : (int)strlen(last), last);
}

/* Wait until the controller says running (or stopped, for prepare), or
 * dies.  Returns 0, or -1 with the controller's own fatal message. */
static int wait_controller(int idir, const char *name, const char *want,
			   pid_t ctl, int sock, struct pisb_err *e)
{
	int64_t deadline = pisb_mono_ms() + BOOT_WAIT_MS;
	bool seen_alive = false;
	int64_t spawned = pisb_mono_ms();

	for (;;) {
		struct pisb_runtime rt;
		struct pisb_err le = PISB_ERR_INIT;
		bool held = pisb_lock_is_held(idir, "controller.lock");

		if (held)
			seen_alive = true;
		/* only what this controller wrote counts, not an old file */
		if (faccessat(idir, "status.json", F_OK, 0) == 0 &&
		    pisb_runtime_load(idir, &rt, &le) == 0) {
			bool match = !strcmp(rt.state, want) && rt.controller.pid == ctl;
			bool failed = !strcmp(rt.state, "failed");
			pisb_runtime_release(&rt);
			if (match && (!strcmp(want, "stopped") ? !held : held))
				return 0;
			if (failed && !held && rt.controller.pid == ctl) {
				char msg[1024];
				last_fatal(idir, msg, sizeof(msg));
				return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' failed to start: %s",
						    name, msg[0] ? msg : "see 'pisb logs'");
			}
		}
		if (!held && (seen_alive || pisb_mono_ms() - spawned > 5000)) {
			char msg[1024];
			/* re-check: it may have finished between the two reads */
			if (pisb_runtime_load(idir, &rt, &le) == 0) {
				bool match = !strcmp(rt.state, want) && rt.controller.pid == ctl;
				pisb_runtime_release(&rt);
				if (match && !strcmp(want, "stopped"))
					return 0;
			}
			last_fatal(idir, msg, sizeof(msg));
			return pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' failed to start: %s",
					    name, msg[0] ? msg : "its controller exited (see 'pisb logs')");
		}
		if (pisb_mono_ms() > deadline)
			return pisb_err_set(e, PISB_EXIT_TIMEOUT, "sandbox '%s' did not become ready in time", name);
		if (sock >= 0) {
			/* its word (or EOF), else a look every 100 ms: a controller
			 * killed -9 may leave the socket to a child of its own */
			struct pollfd p = { sock, POLLIN, 0 };
			char b[16];
			if (poll(&p, 1, 100) > 0 && read(sock, b, sizeof(b)) <= 0) {
				/* its end, no word: the controller is gone (what it
				 * left says why), not one that never began */
				sock = -1;
				seen_alive = true;
			}
		} else {
			struct timespec ts = { 0, 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

int pisb_local_wait_controller(int idir, const char *name, const char *want,
			       pid_t ctl, int sock, struct pisb_err *e)
{
	return wait_controller(idir, name, want, ctl, sock, e);
}

static int op_lock(int idir, const char *name, int wait_ms, struct pisb_err *e)
{
	char what[96];
	snprintf(what, sizeof(what), "sandbox '%s'", name);
	return pisb_lock_acquire(idir, "op.lock", true, wait_ms, what, e);
}

/* ---------- create / prepare ---------- */

/* A create's controller, spawned first (spawn_controller). */
struct starting {
	pid_t pid;
	int sock;   /* its socket */
	int pidfd;  /* or -1 */
};

/* Close the controller's socket; a create that failed before publishing
 * (wait) waits for it to exit: told so by the socket's end, it stops
 * what it booted in the staged directory and removes its cgroup, and
 * nothing of it outlives the create or sees the directory go */
static void starting_end(struct starting *c, bool wait)
{
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
	if (c->pidfd >= 0 && wait)
		pisb_pidfd_wait(c->pidfd, 5000);
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->pidfd = -1;
}

/* Stage, publish and start sandbox (or template) o->name with controller
 * ctl. */
static int create_in(struct pisb_state *st, const struct pisb_config *cfg,
		     const char *config_json, const struct pisb_create_opts *o,
		     const struct pisb_ids *idsp, struct starting *ctl,
		     char **setup_error, struct pisb_err *e)
{
	struct pisb_ids ids = *idsp;
	struct pisb_record rec;
	_cleanup_free_ char *stage = NULL, *dest = NULL, *cache = NULL, *disk_mnt = NULL;
	_cleanup_close_ int sdir = -1, lock = -1, tdir = -1;
	bool tmpl = o->prepare;
	int ret = -1;

	*setup_error = NULL;
	pisb_trace("create: local driver");
	if (pisb_mkdirs_at(st->fd, "instances", 0700, e) < 0 ||
	    pisb_mkdirs_at(st->fd, "templates", 0700, e) < 0 ||
	    pisb_mkdirs_at(st->fd, "staging", 0700, e) < 0 ||
	    (o->spare_key && pisb_mkdirs_at(st->fd, "pool", 0700, e) < 0))
		return -1;
	/* a create killed with its disk image mounted left it in staging/ */
	if (geteuid() == 0)
		pisb_gc_staging_mounted(st);
	dest = xasprintf("%s/%s", o->spare_key ? "pool" : kind_of(tmpl), o->name);
	if (faccessat(st->fd, dest, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return pisb_err_set(e, PISB_EXIT_BUSY, "%s '%s' already exists",
				    tmpl ? "template" : "sandbox", o->name);
	if (o->template_) {
		tdir = pisb_instance_open(st, "templates", o->template_, e);
		if (tdir < 0)
			return -1;
	}
	if (strcmp(cfg->image, "host")) {
		/* import here, where a terminal can show progress; the controller
		 * then finds it in the cache, and the record names the cache */
		char *p = pisb_image_get(st, cfg->image, &ids, &cache, e);
		if (!p)
			return -1;
		free(p);
	}
	/* stage everything, then publish with one rename */
	pisb_trace("create: state directories and image");
	sdir = pisb_instance_stage(st, o->name, &stage, &lock, e);
	if (sdir < 0)
		return -1;
	pisb_trace("create: staging directory");
	if (o->template_) {
		if (stage_template_disk(st, sdir, tdir, stage, o->template_, cfg, &ids, &disk_mnt, e) < 0)
			goto fail;
	} else {
		/* diskGiB given, as root: the disk on an image of that size
		 * (a template's too: prepare runs on it, and it is copied) */
		if (disk_on_image(cfg)) {
			_cleanup_free_ char *sd = xasprintf("%s/%s", st->path, stage);
			disk_mnt = xasprintf("%s/disk", sd);
			if (pisb_disk_image_make(sdir, sd, cfg->disk_gib, e) < 0 ||
			    pisb_disk_image_mount(sdir, sd, disk_mnt, e) < 0)
				goto fail;
		}
		if (make_disk(sdir, &ids, e) < 0)
			goto fail;
	}
	pisb_trace("create: disk");
	if (o->config_text && write_guest_config(sdir, cfg, o->config_text, o->config_len, &ids, e) < 0)
		goto fail;
	pisb_trace("create: guest config written");
	if (o->project && seed_project(sdir, cfg, o->project, &ids, e) < 0)
		goto fail;
	if (o->project)
		pisb_trace("create: project copied");
	if (disk_mnt) {
		/* the controller mounts it again at every start; the files
		 * written on it are flushed (and closed) first */
		_cleanup_close_ int d = openat(sdir, "disk", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pisb_sync_flush() < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "sync the staged disk of '%s'", o->name);
			goto fail;
		}
		if (d >= 0)
			syncfs(d);
		pisb_disk_image_umount(disk_mnt);
		free(disk_mnt);
		disk_mnt = NULL;
	}
	memset(&rec, 0, sizeof(rec));
	rec.name = (char *)o->name;
	rec.driver = "local";
	rec.created_at = pisb_now_ms() / 1000;
	rec.template_ = (char *)o->template_;
	rec.config_json = (char *)config_json;
	rec.owner.pid = o->owner_pid;
	rec.owner.start = o->owner_pid > 0 ? pisb_proc_start(o->owner_pid) : 0;
	rec.session_id = (char *)o->session_id;
	rec.image_cache = cache;
	rec.uid_base = geteuid() == 0 ? ids.uid_base : 0;
	if (pisb_record_save(sdir, &rec, e) < 0)
		goto fail;
	/* the pool's key of a spare: what a create must match to take it */
	if (o->spare_key && pisb_atomic_write(sdir, "pool.key", o->spare_key, strlen(o->spare_key), 0600, e) < 0)
		goto fail;
	pisb_trace("create: record written");
	/* setup runs on the first boot of a fresh disk, never on a template copy */
	if (!o->template_) {
		const char *intent = tmpl ? "{\"setup\":true,\"prepare\":true}\n" : "{\"setup\":true}\n";
		if (pisb_atomic_write(sdir, "intent.json", intent, strlen(intent), 0600, e) < 0)
			goto fail;
	}
	/* the controller takes the staged directory (lock, record, cgroup)
	 * and boots the sandbox in it while the staged files are flushed */
	if (pisb_send_byte_fd(ctl->sock, 's', sdir) < 0) {
		pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' failed to start: its controller exited (see 'pisb logs')",
			     o->name);
		goto fail;
	}
	/* everything staged (and the id range) durable before it is published */
	if (pisb_sync_flush() < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "sync the staged files of '%s'", o->name);
		goto fail;
	}
	pisb_trace("create: staged files synced");
	if (tmpl) {
		/* a template is prepared under a hidden instance name and only
		 * published once its setup succeeded */
		_cleanup_free_ char *work = xasprintf("staging/%s.prep", o->name);
		if (renameat2(st->fd, stage, st->fd, work, RENAME_NOREPLACE) < 0) {
			pisb_err_sys(e, errno == EEXIST ? PISB_EXIT_BUSY : PISB_EXIT_FAIL,
				     "template '%s' is being prepared", o->name);
			goto fail;
		}
		free(stage);
		stage = PISB_STEAL(work);
	} else if (renameat2(st->fd, stage, st->fd, dest, RENAME_NOREPLACE) < 0) {
		pisb_err_sys(e, errno == EEXIST ? PISB_EXIT_BUSY : PISB_EXIT_FAIL,
			     "sandbox '%s' already exists", o->name);
		if (errno == EEXIST)
			pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", o->name);
		goto fail;
	} else {
		free(stage);
		stage = NULL;
	}
	pisb_trace("create: published (rename)");
	{
		const char *where = tmpl ? stage : dest;
		_cleanup_close_ int idir = openat(st->fd, where, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct pisb_runtime rt;

		if (idir < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", where);
			goto fail_published;
		}
		/* the controller begins on the renamed directory while the
		 * rename is made durable: the create reports only after both.
		 * One that failed in the staged directory (a limit it cannot
		 * enforce) is gone and said why there: wait_controller reads it */
		/* a spare ("p") waits, booted, to be claimed (pool.h) */
		if (o->spare_key ? send(ctl->sock, "p", 1, MSG_NOSIGNAL) != 1
				 : tell_controller(ctl->sock, o->name, e) < 0) {
			struct pisb_err we = PISB_ERR_INIT;
			if (wait_controller(idir, o->name, "running", ctl->pid, ctl->sock, &we) < 0)
				*e = we;
			goto fail_published;
		}
		if (pisb_fsync_parent(st->fd, where) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "sync the rename of '%s'", o->name);
			goto fail_published;
		}
		pisb_trace("create: rename synced");
		if (wait_controller(idir, o->name, tmpl ? "stopped" : o->spare_key ? "spare" : "running",
				    ctl->pid, ctl->sock, e) < 0)
			goto fail_published;
		pisb_trace("create: controller running");
		if (pisb_runtime_load(idir, &rt, e) < 0)
			goto fail_published;
		if (rt.setup_error)
			*setup_error = xstrdup(rt.setup_error);
		pisb_runtime_release(&rt);
		if (tmpl) {
			if (*setup_error) {
				pisb_err_set(e, PISB_EXIT_FAIL,
					     "prepare '%s': setup failed, no template was saved: %s",
					     o->name, *setup_error);
				goto fail_published;
			}
			if (renameat2(st->fd, stage, st->fd, dest, RENAME_NOREPLACE) < 0) {
				pisb_err_sys(e, errno == EEXIST ? PISB_EXIT_BUSY : PISB_EXIT_FAIL,
					     "publish template '%s'", o->name);
				goto fail_published;
			}
			/* a template never boots by itself: drop runtime files */
			{
				_cleanup_close_ int t = openat(st->fd, dest, O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (t >= 0) {
					unlinkat(t, "status.json", 0);
					unlinkat(t, "intent.json", 0);
					unlinkat(t, "control.sock", 0);
				}
			}
			free(stage);
			stage = NULL;
		}
	}
	return 0;

fail_published:
	{
		/* creation failed after publishing: leave nothing behind */
		struct pisb_err ig = PISB_ERR_INIT;
		const char *where = tmpl ? stage : dest;
		_cleanup_close_ int idir = openat(st->fd, where, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (idir >= 0 && pisb_lock_is_held(idir, "controller.lock")) {
			_cleanup_buf_ struct pisb_buf r = PISB_BUF_INIT;
			pisb_control_call(idir, "{\"op\":\"stop\"}", &r, 30000, &ig);
		}
		close(lock);
		lock = -1;
		if (tmpl)
			pisb_rm_rf_at(st->fd, stage, &ig);
		else
			pisb_state_trash(st, o->spare_key ? "pool" : "instances", o->name, &ig);
		free(stage);
		stage = NULL;
		return -1;
	}
fail:
	/* no deferred fd may keep the disk image busy */
	pisb_sync_discard();
	if (disk_mnt)
		pisb_disk_image_umount(disk_mnt);
	starting_end(ctl, true);
	if (stage) {
		struct pisb_err ig = PISB_ERR_INIT;
		pisb_rm_rf_at(st->fd, stage, &ig);
	}
	return ret;
}

int pisb_local_create(struct pisb_state *st, const struct pisb_config *cfg,
		      const char *config_json, const struct pisb_create_opts *o,
		      char **setup_error, struct pisb_err *e)
{
	struct pisb_ids ids;
	_cleanup_free_ char *cname = o->prepare ? xasprintf("@prep/%s", o->name)
				   : o->spare_key ? xasprintf("@spare/%s", o->name) : xstrdup(o->name);
	struct starting ctl = { 0, -1, -1 };
	int rc;

	/* the modes we give are the ones meant (the sandbox's root traverses
	 * disk/ and merged/), not narrowed by the caller's umask: under 077
	 * no sandbox could boot ("mount overlay root: Permission denied").
	 * The controller inherits it */
	umask(022);
	/* a spare of the pool booted for this config takes a create to
	 * where a sandbox runs in a fraction of a boot (pool.h) */
	if (!o->spare_key && !o->prepare && !o->template_ && !o->project && !disk_on_image(cfg)) {
		rc = pisb_pool_claim(st, config_json, o, setup_error, e);
		if (rc != 0)
			return rc < 0 ? -1 : 0;
	}
	/* an image other than the host's may need libarchive to import:
	 * the static pisb hands the create over before it changes anything */
	if (strcmp(cfg->image, "host"))
		pisb_dl_needed("libarchive (to import the image)");
	/* the controller starts first, beside all that follows, and waits
	 * for the staged directory (create_in); a create that fails before
	 * closes its socket, and it exits.  Its boot makes its own
	 * namespaces when the disk is an image or the project is bound. */
	bool own_ns = disk_on_image(cfg) || (o->project && project_bound(cfg));
	ctl.pid = spawn_controller(st, -1, cname, cfg, own_ns, &ctl.sock, e);
	if (ctl.pid < 0)
		return -1;
	ctl.pidfd = pisb_pidfd_open(ctl.pid);
	pisb_trace("create: controller spawned");
	/* the state files' fsyncs at once, before the publishing rename */
	pisb_sync_defer();
	/* as root, a host id range of the sandbox's own (ns.h) */
	if (pisb_ids_alloc(st, o->name, &ids, e) < 0) {
		pisb_sync_discard();
		starting_end(&ctl, true);
		return -1;
	}
	rc = create_in(st, cfg, config_json, o, &ids, &ctl, setup_error, e);
	starting_end(&ctl, false);
	if (rc < 0) {
		pisb_sync_discard();
		pisb_ids_free(st, ids.uid_base);
		return -1;
	}
	pisb_sync_discard();
	return 0;
}

/* ---------- start / stop / destroy ---------- */

int pisb_local_start(struct pisb_sandbox *sb, int wait_ms, struct pisb_err *e)
{
	struct pisb_state *st = sb->st;
	const char *name = sb->name;
	int idir = sb->idir;
	_cleanup_close_ int lock = -1;

	pisb_trace("start: record opened");
	lock = op_lock(idir, name, wait_ms, e);
	if (lock < 0)
		return -1;
	if (pisb_lock_is_held(idir, "controller.lock"))
		return pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' is already running", name);
	pisb_trace("start: locked");
	_cleanup_close_ int sock = -1;
	struct pisb_err ce = PISB_ERR_INIT;
	const struct pisb_config *cfg = pisb_sandbox_config(sb, &ce);
	_cleanup_free_ char *pdir = NULL;
	bool pro;
	/* the boot makes its own namespaces for a disk image or a bound project */
	bool own_ns = faccessat(idir, "disk.img", F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
		      pisb_project_bound(idir, &pdir, &pro) > 0;
	/* the controller's umask: as a create's (pisb_local_create) */
	umask(022);
	pid_t ctl = spawn_controller(st, idir, name, cfg, own_ns, &sock, e);
	if (ctl < 0 || tell_controller(sock, name, e) < 0)
		return -1;
	pisb_trace("start: controller spawned");
	if (wait_controller(idir, name, "running", ctl, sock, e) < 0)
		return -1;
	pisb_trace("start: controller running");
	return 0;
}

/* Record that sandbox NAME (no controller) is stopped: state stopped, its
 * cgroup gone.  A status.json that does not load is replaced by a fresh
 * one (the next start writes everything again).  -1 with e when the
 * record cannot be written: a stop that did not record its result fails.
 * clean: its controller stopped it and said so; else the cgroups of the
 * name that earlier runs left are swept too (pisb gc sweeps them anyway). */
static int mark_stopped(int idir, const char *name, bool clean, struct pisb_err *e)
{
	struct pisb_runtime rt;
	struct pisb_err le = PISB_ERR_INIT;

	if (pisb_runtime_load(idir, &rt, &le) < 0)
		memset(&rt, 0, sizeof(rt));
	pisb_cgroup_remove(rt.cgroup);
	if (!clean || rt.cgroup || strcmp(rt.state, "stopped"))
		pisb_cgroup_sweep(name, NULL, 10, NULL);
	if (!strcmp(rt.state, "stopped") && !le.msg[0]) {
		pisb_runtime_release(&rt);
		return 0;
	}
	snprintf(rt.state, sizeof(rt.state), "stopped");
	rt.controller.pid = rt.init.pid = rt.resume.pid = 0;
	rt.stopped_at = pisb_now_ms() / 1000;
	free(rt.cgroup);
	rt.cgroup = NULL;
	if (pisb_runtime_save(idir, &rt, e) < 0) {
		pisb_runtime_release(&rt);
		return pisb_err_prefix(e, "the sandbox stopped, but recording it failed");
	}
	pisb_runtime_release(&rt);
	return 0;
}

/* Send sig to the process of pidfd; without one (-1), to pid (> 0). */
static void signal_proc(int pidfd, pid_t pid, int sig)
{
	if (pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
	else if (pid > 0)
		kill(pid, sig);
}

/* A pidfd of the controller status.json names while it still runs (its
 * start time checked after the pidfd is made: never a process that took
 * its pid since); -1 otherwise. */
static int controller_pidfd(int idir)
{
	struct pisb_runtime rt;
	struct pisb_err ig = PISB_ERR_INIT;
	int fd;

	if (pisb_runtime_load(idir, &rt, &ig) < 0)
		return -1;
	fd = pisb_pidfd_open(rt.controller.pid);
	if (fd >= 0 && !pisb_proc_id_alive(&rt.controller)) {
		close(fd);
		fd = -1;
	}
	pisb_runtime_release(&rt);
	return fd;
}

/* controller.lock within wait_ms: first sleep on the pidfds (-1: none)
 * until those processes have ended (the lock is free the moment the
 * last holder is gone; polling the lock, every 20 ms, was most of a
 * stop), then take it, polling only for what else may still hold it. */
static int lock_when_gone(int idir, const int *pidfds, int n, int wait_ms, struct pisb_err *e)
{
	int64_t deadline = pisb_mono_ms() + wait_ms, left;

	for (int i = 0; i < n; i++) {
		left = deadline - pisb_mono_ms();
		if (pidfds[i] >= 0 && left > 0)
			pisb_pidfd_wait(pidfds[i], (int)left);
	}
	left = deadline - pisb_mono_ms();
	return pisb_lock_acquire(idir, "controller.lock", true, left > 0 ? (int)left : 0,
				 "the sandbox controller", e);
}

/* Signal every process that holds controller.lock (the controller named
 * by status.json, and whatever /proc/locks says holds the lock: a
 * status.json may be stale or corrupt); wait up to wait_ms for the lock
 * to be free.  Returns the lock fd (held), or -1. */
static int end_controller(int idir, int sig, int wait_ms, struct pisb_err *e)
{
	pid_t pids[16];
	int fds[17], n = pisb_instance_lock_holders(idir, "controller.lock", pids, 16), r;

	/* pidfds first, then the signals: each names the process found */
	fds[0] = controller_pidfd(idir);
	for (int i = 0; i < n; i++)
		fds[i + 1] = pids[i] != getpid() ? pisb_pidfd_open(pids[i]) : -1;
	signal_proc(fds[0], 0, sig);
	for (int i = 0; i < n; i++)
		if (pids[i] != getpid())
			signal_proc(fds[i + 1], pids[i], sig);
	r = lock_when_gone(idir, fds, n + 1, wait_ms, e);
	for (int i = 0; i < n + 1; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

/* Stop sandbox NAME under its op.lock (held by the caller): ask the
 * controller, then TERM, then KILL what holds its lock; then make sure
 * status.json says stopped.  record: fail when that cannot be written
 * (stop); destroy passes false, it removes the files anyway. */
static int stop_locked(int idir, const char *name, bool record, struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf reply = PISB_BUF_INIT;
	_cleanup_close_ int cl = -1;
	struct pisb_err ce = PISB_ERR_INIT, le = PISB_ERR_INIT;
	_cleanup_free_ char *why = NULL;
	bool clean = false;

	if (pisb_lock_is_held(idir, "controller.lock")) {
		/* made before the stop is asked for: the controller still runs */
		_cleanup_close_ int pidfd = controller_pidfd(idir);

		if (pisb_control_call(idir, "{\"op\":\"stop\"}", &reply, 120000, &ce) == 0) {
			struct pisb_json j;
			if (pisb_json_parse(&j, reply.s, strcspn(reply.s, "\n"), &le) == 0) {
				bool ok = true;
				pisb_json_bool(&j, pisb_json_get(&j, 0, "ok"), &ok);
				if (!ok)
					why = pisb_json_str(&j, pisb_json_get(&j, 0, "error"));
				clean = ok;
				pisb_json_release(&j);
			}
			/* it answers once it let go of the lock (an older controller:
			 * before its end, so wait for that) */
			cl = pisb_lock_acquire(idir, "controller.lock", true, 0, "the sandbox controller", &le);
			if (cl < 0) {
				le = (struct pisb_err)PISB_ERR_INIT;
				cl = lock_when_gone(idir, &pidfd, 1, 30000, &le);
			}
			clean = clean && cl >= 0;
		}
		/* no answer, or it did not exit: TERM, then KILL, what holds the lock */
		if (cl < 0)
			cl = end_controller(idir, SIGTERM, 10000, &le);
		if (cl < 0)
			cl = end_controller(idir, SIGKILL, 5000, &le);
		if (cl < 0)
			return pisb_err_set(e, PISB_EXIT_FAIL, "its controller did not exit: %s", le.msg);
	}
	if (mark_stopped(idir, name, clean, e) < 0) {
		if (record)
			return -1;
		*e = (struct pisb_err)PISB_ERR_INIT;
	}
	if (why && record)
		return pisb_err_set(e, PISB_EXIT_FAIL, "%s", why);
	return 0;
}

/* The disk image a controller killed with SIGKILL left mounted (no
 * controller holds the sandbox now): detached, by a stop as by a destroy
 * (a start would mount it a second time over the first). */
static void drop_disk_mount(struct pisb_state *st, int idir, const char *kind, const char *name)
{
	_cleanup_free_ char *disk = xasprintf("%s/%s/%s/disk", st->path, kind, name);
	struct stat a, b;

	if (!pisb_lock_is_held(idir, "controller.lock") &&
	    fstatat(idir, "disk", &a, AT_SYMLINK_NOFOLLOW) == 0 && fstatat(idir, "", &b, AT_EMPTY_PATH) == 0 &&
	    S_ISDIR(a.st_mode) && a.st_dev != b.st_dev)
		pisb_disk_image_umount(disk);
}

/* What a destroy holds from its stop until the skeleton's trash is done:
 * the op.lock (no start slips in between) and the id range, freed once
 * the instance directory is gone. */
struct end_hold {
	struct pisb_state *st;
	int lock, idir;
	uid_t base;
};

static void end_hold_free(void *p)
{
	struct end_hold *h = p;
	struct stat sb;

	if (fstat(h->idir, &sb) == 0 && sb.st_nlink == 0)
		pisb_ids_free(h->st, h->base);
	close(h->lock);
	close(h->idir);
	free(h);
}

int pisb_local_end(struct pisb_sandbox *sb, int wait_ms, bool destroy, struct pisb_err *e)
{
	_cleanup_close_ int lock = op_lock(sb->idir, sb->name, wait_ms, e);
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_record *rec;
	struct end_hold *h;

	if (lock < 0)
		return -1;
	pisb_trace("stop: locked");
	if (stop_locked(sb->idir, sb->name, !destroy, e) < 0)
		return -1;
	pisb_trace("stop: controller gone");
	if (sb->priv)
		return 0;
	drop_disk_mount(sb->st, sb->idir, "instances", sb->name);
	if (!destroy)
		return 0;
	h = xmalloc(sizeof(*h));
	rec = pisb_sandbox_record(sb, &ig);
	*h = (struct end_hold){ sb->st, lock, fcntl(sb->idir, F_DUPFD_CLOEXEC, 3), rec ? rec->uid_base : 0 };
	if (h->idir < 0) {
		free(h);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "keep the directory of '%s'", sb->name);
	}
	lock = -1;
	sb->priv = h;
	sb->priv_free = end_hold_free;
	return 0;
}

int pisb_local_destroy_template(struct pisb_sandbox *sb, int wait_ms, struct pisb_err *e)
{
	struct pisb_err ig = PISB_ERR_INIT;
	const struct pisb_record *rec;
	_cleanup_close_ int lock = -1;
	uid_t base;

	lock = op_lock(sb->idir, sb->name, wait_ms, e);
	if (lock < 0)
		return -1;
	drop_disk_mount(sb->st, sb->idir, "templates", sb->name);
	rec = pisb_sandbox_record(sb, &ig);
	base = rec ? rec->uid_base : 0;
	/* the lock fd keeps others out until the rename into the trash */
	if (pisb_state_trash(sb->st, "templates", sb->name, e) < 0)
		return -1;
	/* its files are gone: the id range is free again */
	pisb_ids_free(sb->st, base);
	return 0;
}

/* ---------- the disk of a stopped sandbox ---------- */

static int write_file(const char *path, const char *text)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	return fd < 0 || pisb_write_all(fd, text, strlen(text)) < 0 ? -1 : 0;
}

/* A user namespace mapped as the sandbox's, as an fd: a child makes it,
 * we (its parent, with the rights to) write its maps. */
static int sandbox_userns(const struct pisb_ids *ids, struct pisb_err *e)
{
	int ready[2], go[2], fd = -1, st;
	char path[64], map[64];
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "pipe");
	if (pipe2(go, O_CLOEXEC) < 0) {
		close(ready[0]);
		close(ready[1]);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "pipe");
	}
	pid = fork();
	if (pid == 0) {
		char c = unshare(CLONE_NEWUSER) == 0 ? 'u' : 'x';
		close(ready[0]);
		close(go[1]);
		if (pisb_write_all(ready[1], &c, 1) < 0 || c != 'u')
			_exit(1);
		(void)!read(go[0], &c, 1);  /* until the parent holds the ns */
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	if (pid > 0) {
		char c = 0;
		if (pisb_read_all(ready[0], &c, 1) == 1 && c == 'u') {
			bool priv = geteuid() == 0;
			snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
			if (!priv)
				write_file(path, "deny");
			snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
			snprintf(map, sizeof(map), "0 %u %u", (unsigned)ids->uid_base, ids->count);
			if (write_file(path, map) == 0) {
				snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
				snprintf(map, sizeof(map), "0 %u %u", (unsigned)ids->gid_base, ids->count);
				if (write_file(path, map) == 0) {
					snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
					fd = open(path, O_RDONLY | O_CLOEXEC);
				}
			}
		}
		if (fd < 0)
			pisb_err_sys(e, PISB_EXIT_BACKEND, "make a user namespace mapped as the sandbox's");
	} else {
		pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
	}
	close(ready[0]);
	close(go[1]);
	if (pid > 0)
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	return fd;
}

int pisb_local_disk_enter(int idir, const char *ws, int *root, struct pisb_err *e)
{
	struct pisb_ids ids;
	_cleanup_close_ int ns = -1, wfd = -1, ifd = -1;
	_cleanup_free_ char *rel = xasprintf("disk/upper%s", ws), *ipath = NULL;
	_cleanup_free_ char *dst = xasprintf("/tmp%s", ws);
	char src[64];
	bool priv = geteuid() == 0;

	pisb_ids_for_caller(&ids);
	snprintf(src, sizeof(src), "/proc/self/fd/%d", idir);
	ipath = realpath(src, NULL);
	if ((ns = sandbox_userns(&ids, e)) < 0)
		return -1;
	/* as the sandbox's root from here on: no right over host files that
	 * the sandbox lacks (our host uid stays until become_root below, only
	 * to reach the disk through the 0700 state directory) */
	if (setns(ns, CLONE_NEWUSER) < 0 || unshare(CLONE_NEWNS) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "enter a user namespace mapped as the sandbox's");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "make mounts private");
	/* the instance directory again, by its path: a bind source must be a
	 * mount of this namespace, and idir's is the host's (the same
	 * directory, checked) */
	{
		struct stat a, b;
		if (!ipath || (ifd = open(ipath, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		    fstat(ifd, &a) < 0 || fstat(idir, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "reopen the sandbox's directory");
	}
	wfd = pisb_open_beneath(ifd, rel, O_PATH | O_DIRECTORY);
	if (wfd < 0)
		return pisb_err_sys(e, errno == ENOENT ? PISB_EXIT_NOTFOUND : PISB_EXIT_FAIL,
				    "the workspace on the sandbox's disk");
	if (pisb_sandbox_become_root(priv, e) < 0)
		return -1;
	/* a tmpfs root of our own holding the workspace, read-only, at ws */
	if (mount("pisb-disk", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "mount a tmpfs root");
	{
		_cleanup_close_ int top = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (top < 0 || pisb_mkdirs_at(top, ws + 1, 0755, e) < 0)
			return pisb_err_sys(e, PISB_EXIT_BACKEND, "make '%s' in the tmpfs root", ws);
	}
	snprintf(src, sizeof(src), "/proc/self/fd/%d", wfd);
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "bind the workspace read-only");
	if (chdir("/tmp") < 0 || chroot(".") < 0 || chdir("/") < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "chroot into the workspace's root");
	prctl(PR_SET_DUMPABLE, 0);
	*root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	return *root < 0 ? pisb_err_sys(e, PISB_EXIT_BACKEND, "open the root") : 0;
}
