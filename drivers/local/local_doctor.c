/* local_doctor.c - the local driver's doctor checks: real probes rather than
 * configuration read back.  A child creates a user namespace the way the
 * driver does, mounts an overlay in it and boots a throwaway sandbox;
 * cgroup limits are created and read back; and, as root, sandboxes that
 * still share the host id range of older releases are named.
 */
#include "local.h"
#include "cgroup.h"
#include "config.h"
#include "doctor.h"
#include "err.h"
#include "instance.h"
#include "ns.h"
#include "proc.h"
#include "sbexec.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the checks share: the report, the caller's ids, and whether user
 * namespaces work (the later checks' fixes depend on it). */
struct ldoc {
	struct pisb_doctor *doc;
	struct pisb_ids ids;
	bool userns_ok;
};

/* --- user namespaces, the way the driver makes them --- */

typedef void (*userns_fn)(void *arg, int fd);

/* Fork a child that unshares a user namespace; write its id maps from
 * here, as the driver's controller does (root inside -> ids->uid_base);
 * the child then runs fn, which writes "ok DETAIL" or "fail DETAIL" to fd.
 * The verdict lands in out. */
static void in_userns(const struct pisb_ids *ids, userns_fn fn, void *arg,
		      char *out, size_t n)
{
	int sp[2], status;
	char path[64], map[64];
	pid_t pid;
	ssize_t r;
	struct pollfd pf;

	snprintf(out, n, "fail could not start the probe");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return;
	pid = fork();
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return;
	}
	if (pid == 0) {
		char c;
		close(sp[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (unshare(CLONE_NEWUSER) < 0) {
			dprintf(sp[1], "fail unshare(CLONE_NEWUSER): %s", strerror(errno));
			_exit(0);
		}
		if (pisb_write_all(sp[1], "U", 1) < 0 || read(sp[1], &c, 1) != 1 || c != 'M')
			_exit(0);
		fn(arg, sp[1]);
		_exit(0);
	}
	close(sp[1]);
	pf = (struct pollfd){ sp[0], POLLIN, 0 };
	if (poll(&pf, 1, 10000) <= 0 || (r = read(sp[0], out, n - 1)) <= 0) {
		snprintf(out, n, "fail the probe process died before reporting");
		goto done;
	}
	out[r] = '\0';
	if (out[0] != 'U')
		goto done;
	if (ids->count == 1) {
		snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			pisb_write_all(fd, "deny", 4);
			close(fd);
		}
	}
	for (int i = 0; i < 2; i++) {
		int fd;
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, i ? "gid_map" : "uid_map");
		snprintf(map, sizeof(map), "0 %u %u\n",
			 i ? (unsigned)ids->gid_base : (unsigned)ids->uid_base, ids->count);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || pisb_write_all(fd, map, strlen(map)) < 0) {
			snprintf(out, n, "fail write %s ('%.*s'): %s", path, (int)strlen(map) - 1, map,
				 strerror(errno));
			if (fd >= 0)
				close(fd);
			goto done;
		}
		close(fd);
	}
	pisb_write_all(sp[0], "M", 1);
	{
		size_t got = 0;
		int64_t deadline = pisb_mono_ms() + 20000;
		out[0] = '\0';
		for (;;) {
			int64_t left = deadline - pisb_mono_ms();
			pf = (struct pollfd){ sp[0], POLLIN, 0 };
			if (left <= 0 || got >= n - 1 || poll(&pf, 1, (int)left) <= 0)
				break;
			r = read(sp[0], out + got, n - 1 - got);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		out[got] = '\0';
		if (!got)
			snprintf(out, n, "fail the probe process died before reporting");
	}
done:
	close(sp[0]);
	if (pisb_wait_timeout(pid, &status, 5000) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
}

static void userns_probe(void *arg, int fd)
{
	(void)arg;
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
		dprintf(fd, "fail become root in the new user namespace: %s", strerror(errno));
		return;
	}
	/* a capability inside: Ubuntu's AppArmor restriction lets the unshare
	 * through but takes these away */
	if (unshare(CLONE_NEWNS) < 0) {
		dprintf(fd, "fail unshare(CLONE_NEWNS) inside the user namespace: %s", strerror(errno));
		return;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		dprintf(fd, "fail mount inside the user namespace: %s", strerror(errno));
		return;
	}
	dprintf(fd, "ok");
}

static long sysctl_val(const char *path)
{
	_cleanup_free_ char *s = pisb_read_small(path);
	return s ? strtol(s, NULL, 10) : -1;
}

static void check_userns(struct ldoc *d)
{
	long clone_ok = sysctl_val("/proc/sys/kernel/unprivileged_userns_clone");
	long max = sysctl_val("/proc/sys/user/max_user_namespaces");
	long aa = sysctl_val("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	char verdict[1024], knobs[256];
	struct pisb_buf fix = PISB_BUF_INIT;

	snprintf(knobs, sizeof(knobs),
		 "kernel.unprivileged_userns_clone=%s, user.max_user_namespaces=%ld, kernel.apparmor_restrict_unprivileged_userns=%s",
		 clone_ok < 0 ? "absent" : clone_ok ? "1" : "0", max,
		 aa < 0 ? "absent" : aa ? "1" : "0");
	in_userns(&d->ids, userns_probe, NULL, verdict, sizeof(verdict));
	if (!strncmp(verdict, "ok", 2)) {
		d->userns_ok = true;
		pisb_doctor_add(d->doc, "userns", PISB_DOC_PASS, NULL,
		     "created a user namespace as uid %u; root inside maps to uid %u outside (%u id%s); %s",
		     (unsigned)geteuid(), (unsigned)d->ids.uid_base, d->ids.count,
		     d->ids.count == 1 ? "" : "s", knobs);
		return;
	}
	if (clone_ok == 0)
		pisb_buf_adds(&fix, "sudo sysctl -w kernel.unprivileged_userns_clone=1; ");
	if (max == 0)
		pisb_buf_adds(&fix, "sudo sysctl -w user.max_user_namespaces=28633 (a namespace that sets it to 0 for its children cannot be undone from inside it); ");
	if (aa > 0)
		pisb_buf_addf(&fix,
			      "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or allow only pisb with an AppArmor profile: printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile pisb-svc %s flags=(unconfined) {\\n  userns,\\n}\\n' | sudo tee /etc/apparmor.d/pisb-svc && sudo apparmor_parser -r /etc/apparmor.d/pisb-svc (the same for pisb-create, which runs these probes); ",
			      d->doc->svc_bin[0] ? d->doc->svc_bin : "/usr/local/libexec/pisb/pisb-svc");
	if (!fix.len)
		pisb_buf_adds(&fix, "user namespaces are blocked by something other than the usual sysctls: inside a container, unshare(2) is often filtered by seccomp (docker: --security-opt seccomp=unconfined, or run pisb on the host); make the persistent change in /etc/sysctl.d/ ; ");
	fix.len -= 2;
	fix.s[fix.len] = '\0';
	pisb_doctor_add(d->doc, "userns", PISB_DOC_FAIL, fix.s, "%s (as uid %u); %s", verdict + 5, (unsigned)geteuid(), knobs);
	pisb_buf_release(&fix);
}

/* --- overlayfs inside a user namespace --- */

struct ovl_arg {
	const char *dir;
};

static void overlay_probe(void *arg, int fd)
{
	struct ovl_arg *a = arg;
	char opts[512], merged[64];
	int dir, f;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		dprintf(fd, "fail mount namespace: %s", strerror(errno));
		return;
	}
	/* opened with the caller's own uid, which can walk to it */
	dir = open(a->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		dprintf(fd, "fail open '%s': %s", a->dir, strerror(errno));
		return;
	}
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
		dprintf(fd, "fail become root in the user namespace: %s", strerror(errno));
		return;
	}
	snprintf(opts, sizeof(opts),
		 "lowerdir=/proc/self/fd/%d/lower,upperdir=/proc/self/fd/%d/upper,workdir=/proc/self/fd/%d/work",
		 dir, dir, dir);
	snprintf(merged, sizeof(merged), "/proc/self/fd/%d/merged", dir);
	if (mount("overlay", merged, "overlay", MS_NOSUID, opts) < 0) {
		int first = errno;
		strncat(opts, ",userxattr", sizeof(opts) - strlen(opts) - 1);
		if (mount("overlay", merged, "overlay", MS_NOSUID, opts) < 0) {
			dprintf(fd, "fail mount overlay in a user namespace: %s (with userxattr: %s)",
				strerror(first), strerror(errno));
			return;
		}
	}
	f = openat(dir, "merged/probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (f < 0 || pisb_write_all(f, "x", 1) < 0) {
		dprintf(fd, "fail write into the overlay: %s", strerror(errno));
		return;
	}
	close(f);
	if (faccessat(dir, "upper/probe", F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		dprintf(fd, "fail a file written through the overlay did not reach its upper layer");
		return;
	}
	dprintf(fd, "ok");
}

/* A fresh directory for probes under d->doc->base; "" on failure. */
static void probe_dir(struct ldoc *d, char *out, size_t n)
{
	int r = snprintf(out, n, "%s/pisb-doctor-XXXXXX", d->doc->base);
	if (r < 0 || (size_t)r >= n || !mkdtemp(out))
		out[0] = '\0';
}

static int chown_ids(const char *path, const struct pisb_ids *ids)
{
	if (geteuid() != 0)
		return 0;
	return chown(path, ids->uid_base, ids->gid_base);
}

static void check_overlay(struct ldoc *d)
{
	char dir[4096], verdict[1024];
	struct ovl_arg a;
	struct pisb_err ig = PISB_ERR_INIT;
	static const char *const sub[] = { "lower", "upper", "work", "merged" };
	const char *fs = pisb_doctor_fs_name(d->doc->base);

	probe_dir(d, dir, sizeof(dir));
	if (!dir[0]) {
		pisb_doctor_add(d->doc, "overlayfs", PISB_DOC_FAIL, "make the state directory (or $TMPDIR) writable",
		     "cannot make a probe directory under '%s': %s", d->doc->base, strerror(errno));
		return;
	}
	/* root inside (maybe another uid outside) walks through it */
	chmod(dir, 0755);
	for (int i = 0; i < 4; i++) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", dir, sub[i]);
		mkdir(p, 0755);
		if (i)
			chown_ids(p, &d->ids);
	}
	a.dir = dir;
	in_userns(&d->ids, overlay_probe, &a, verdict, sizeof(verdict));
	pisb_rm_rf_at(AT_FDCWD, dir, &ig);
	if (!strncmp(verdict, "ok", 2))
		pisb_doctor_add(d->doc, "overlayfs", PISB_DOC_PASS, NULL,
		     "mounted an overlay inside a user namespace, upper layer on %s ('%s')", fs, d->doc->base);
	else
		pisb_doctor_add(d->doc, "overlayfs", PISB_DOC_FAIL,
		     !d->userns_ok ? "fix the userns check first"
		     : !strcmp(fs, "overlayfs")
		     ? "the state directory is itself on overlayfs (a container's root?), which cannot be an upper layer: put it on a volume (ext4, xfs, btrfs or tmpfs) with --state-dir or PI_SANDBOX_HOME"
		     : "overlayfs in user namespaces needs Linux >= 5.11 (or a distribution kernel that allows it) and the overlay module: sudo modprobe overlay; put the state directory on ext4, xfs, btrfs or tmpfs",
		     "%s (upper layer on %s, '%s')", verdict + 5, fs, d->doc->base);
}

/* --- a whole throwaway sandbox --- */

static void check_boot(struct ldoc *d)
{
	char dir[4096], lower[4200], disk[4200], p[4300];
	struct pisb_err e = PISB_ERR_INIT, ig = PISB_ERR_INIT;
	struct pisb_boot b;
	pid_t init = -1;
	int ctl = -1, status;

	probe_dir(d, dir, sizeof(dir));
	if (!dir[0]) {
		pisb_doctor_add(d->doc, "local-boot", PISB_DOC_FAIL, "make the state directory (or $TMPDIR) writable",
		     "cannot make a probe directory under '%s': %s", d->doc->base, strerror(errno));
		return;
	}
	snprintf(lower, sizeof(lower), "%s/lower", dir);
	snprintf(disk, sizeof(disk), "%s/disk", dir);
	if (pisb_host_skeleton(AT_FDCWD, lower, &d->ids, &e) < 0)
		goto fail;
	for (int i = 0; i < 3; i++) {
		static const char *const sub[] = { "", "/upper", "/work" };
		snprintf(p, sizeof(p), "%s%s", disk, sub[i]);
		if (mkdir(p, 0755) < 0 || (i && chown_ids(p, &d->ids) < 0)) {
			pisb_err_sys(&e, PISB_EXIT_FAIL, "mkdir '%s'", p);
			goto fail;
		}
	}
	memset(&b, 0, sizeof(b));
	b.hostname = "pisb-doctor";
	b.lower_path = lower;
	b.host_image = true;
	b.disk_path = disk;
	b.workspace = "/workspace";
	b.ids = d->ids;
	b.log_fd = -1;
	for (int i = 0; i < 8; i++)
		b.cgroup_dirfds[i] = -1;
	if (pisb_sandbox_boot(&b, &init, &ctl, &e) < 0)
		goto fail;
	pisb_sandbox_killall(ctl, 2000, &ig);
	close(ctl);
	if (pisb_wait_timeout(init, &status, 5000) == 0) {
		kill(init, SIGKILL);
		waitpid(init, &status, 0);
	}
	pisb_rm_rf_at(AT_FDCWD, dir, &ig);
	pisb_doctor_add(d->doc, "local-boot", PISB_DOC_PASS, NULL,
	     "booted and stopped a throwaway sandbox (user, mount, pid, net, ipc, uts, cgroup namespaces; overlay root with the host image; /proc, /dev, loopback)");
	return;
fail:
	pisb_rm_rf_at(AT_FDCWD, dir, &ig);
	pisb_doctor_add(d->doc, "local-boot", PISB_DOC_FAIL,
	     d->userns_ok ? "see the other checks; run 'pisb create test' with -v and read 'pisb logs test'"
			  : "fix the userns check first",
	     "%s", e.msg);
}

/* --- cgroups --- */

static void check_cgroups(struct ldoc *d)
{
	struct pisb_cgroup cg;
	struct pisb_err e = PISB_ERR_INIT;
	char rel[64], fix[512];
	int ver = pisb_cgroup_version();

	if (!ver) {
		pisb_doctor_add(d->doc, "cgroups", PISB_DOC_WARN,
		     "mount cgroup2 at /sys/fs/cgroup (systemd does this at boot); inside a container, run it with --cgroupns=private and a writable cgroup",
		     "no usable cgroup hierarchy at /sys/fs/cgroup: sandboxes run without memory, cpu and pids limits, and a config that asks for limits fails");
		return;
	}
	snprintf(rel, sizeof(rel), "pisb/doctor-%d", (int)getpid());
	pisb_cgroup_create(&cg, rel, 1, 64LL << 20, 64, false, &e);
	pisb_cgroup_close(&cg);
	pisb_cgroup_remove(rel);
	if (cg.mem && cg.cpu && cg.pids) {
		pisb_doctor_add(d->doc, "cgroups", PISB_DOC_PASS, NULL,
		     "cgroup v%d: created /sys/fs/cgroup%s/pisb/doctor-* with memory, cpu and pids limits and read them back",
		     ver, ver == 1 ? "/{memory,cpu,pids}" : "");
		return;
	}
	if (ver == 2)
		snprintf(fix, sizeof(fix),
			 "run pisb as root, or delegate pisb's subtree to uid %u: sudo mkdir -p /sys/fs/cgroup/pisb && echo '+memory +pids +cpu' | sudo tee /sys/fs/cgroup/cgroup.subtree_control && sudo chown -R %u /sys/fs/cgroup/pisb",
			 (unsigned)geteuid(), (unsigned)geteuid());
	else
		snprintf(fix, sizeof(fix),
			 "run pisb as root, or delegate pisb's groups to uid %u: for c in memory cpu pids; do sudo mkdir -p /sys/fs/cgroup/$c/pisb && sudo chown -R %u /sys/fs/cgroup/$c/pisb; done",
			 (unsigned)geteuid(), (unsigned)geteuid());
	pisb_doctor_add(d->doc, "cgroups", PISB_DOC_WARN, fix,
	     "cgroup v%d, but uid %u cannot create limits under /sys/fs/cgroup (memory %s, cpu %s, pids %s): sandboxes run without limits, and a config that asks for limits (profile or resources) fails",
	     ver, (unsigned)geteuid(), cg.mem ? "ok" : "no", cg.cpu ? "ok" : "no", cg.pids ? "ok" : "no");
}

/* --- devices --- */

static void check_loop(struct ldoc *d)
{
	int fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		pisb_doctor_add(d->doc, "loop", PISB_DOC_PASS, NULL, "/dev/loop-control can be opened read-write");
		return;
	}
	pisb_doctor_add(d->doc, "loop", PISB_DOC_WARN,
	     errno == ENOENT ? "sudo modprobe loop" : "loop devices are root's: run as root if you need disk images (the local driver does not)",
	     "/dev/loop-control: %s (optional: no driver of this build needs loop devices; diskGiB is not enforced with them)",
	     strerror(errno));
}

/* As root: sandboxes and templates made before id ranges were per
 * sandbox (no uidBase in the record) whose disk belongs to the shared
 * range: one that escapes holds the files of all of them. */
static void check_ranges(struct ldoc *d)
{
	static const char *const kinds[] = { "instances", "templates" };
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_free_ char *path = pisb_state_path(d->doc->state_dir, &e);
	_cleanup_buf_ struct pisb_buf names = PISB_BUF_INIT;
	_cleanup_close_ int sfd = -1;
	int n = 0;

	if (geteuid() != 0 || !path || (sfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	for (size_t k = 0; k < 2; k++) {
		_cleanup_close_ int kfd = openat(sfd, kinds[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		DIR *dir = kfd >= 0 ? fdopendir(kfd) : NULL;
		struct dirent *de;

		if (!dir)
			continue;
		kfd = -1;   /* the DIR owns it */
		while ((de = readdir(dir))) {
			_cleanup_close_ int idir = -1;
			struct pisb_record rec;
			struct stat sb;
			bool shared;

			if (de->d_name[0] == '.' || !pisb_name_valid(de->d_name))
				continue;
			idir = openat(dirfd(dir), de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (idir < 0 || fstatat(idir, "disk/upper", &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
			    sb.st_uid != d->ids.uid_base || pisb_record_load(idir, &rec, &e) < 0)
				continue;
			shared = !rec.uid_base;
			pisb_record_release(&rec);
			if (!shared)
				continue;
			pisb_buf_addf(&names, "%s%s '%s'", n++ ? ", " : "", k ? "template" : "sandbox", de->d_name);
		}
		closedir(dir);
	}
	if (!n) {
		pisb_doctor_add(d->doc, "id-ranges", PISB_DOC_PASS, NULL, "every sandbox and template has a host id range of its own");
		return;
	}
	pisb_doctor_add(d->doc, "id-ranges", PISB_DOC_WARN,
	     "recreate each: copy out what you need (pisb pull NAME /workspace DIR), pisb destroy NAME --confirm NAME, pisb create NAME --project DIR (a template: pisb prepare it again)",
	     "%s, made before per-sandbox id ranges, share%s the host id range at %u: one that escapes to the host holds the files of every other in it",
	     names.s, n == 1 ? "s" : "", (unsigned)d->ids.uid_base);
}

void pisb_local_doctor(struct pisb_doctor *doc)
{
	struct ldoc d = { .doc = doc };

	pisb_ids_for_caller(&d.ids);
	check_ranges(&d);
	check_userns(&d);
	check_overlay(&d);
	check_boot(&d);
	check_cgroups(&d);
	check_loop(&d);
}
