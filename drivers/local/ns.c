#include "ns.h"
#include "err.h"
#include "instance.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>


void pisb_ids_for_caller(struct pisb_ids *ids)
{
	const char *env = getenv("PISB_UID_BASE");
	long long v;

	if (geteuid() != 0) {
		/* One id: the caller is root inside, nobody else exists. */
		ids->uid_base = geteuid();
		ids->gid_base = getegid();
		ids->count = 1;
		return;
	}
	/* Root maps a whole range to an unprivileged one, so that root inside
	 * owns nothing outside. */
	ids->uid_base = 1000000000u;
	if (env && pisb_parse_ll(env, 1, 4000000000LL, &v) == 0)
		ids->uid_base = (uid_t)v;
	ids->gid_base = ids->uid_base;
	ids->count = 65536;
}

/* ---- child side: runs inside the new namespaces ---- */

static void child_fail(int sock, const char *what)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "E%s: %s", what, strerror(errno));
	if (n > 0)
		pisb_write_all(sock, msg, (size_t)n);
	_exit(1);
}

static int mkdir_p(const char *path, mode_t mode)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(tmp, mode) < 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* Read-only bind, keeping the flags the kernel locked on the source. */
static int bind_ro(const char *src, const char *dst)
{
	struct statvfs sv;
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_RDONLY;

	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	if (statvfs(src, &sv) == 0) {
		if (sv.f_flag & ST_NOSUID) fl |= MS_NOSUID;
		if (sv.f_flag & ST_NODEV) fl |= MS_NODEV;
		if (sv.f_flag & ST_NOEXEC) fl |= MS_NOEXEC;
		if (sv.f_flag & ST_NOATIME) fl |= MS_NOATIME;
		if (sv.f_flag & ST_RELATIME) fl |= MS_RELATIME;
	}
	return mount(NULL, dst, NULL, fl, NULL);
}

static int touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -1;
	close(fd);
	return 0;
}

/* Host files that never show inside, even read-only. */
static const char *const masked_files[] = {
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
	"/etc/security/opasswd", NULL,
};
static const char *const masked_dirs[] = {
	"/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d", "/etc/docker",
	"/etc/pisb", NULL,
};

/* What host path p is to the view: 1 a masked file, 2 a masked directory,
 * 3 a directory holding a masked path, 0 none of these. */
static int mask_kind(const char *p)
{
	size_t n = strlen(p);

	for (int i = 0; masked_files[i]; i++)
		if (!strcmp(p, masked_files[i]))
			return 1;
	for (int i = 0; masked_dirs[i]; i++)
		if (!strcmp(p, masked_dirs[i]))
			return 2;
	for (int k = 0; k < 2; k++)
		for (int i = 0; (k ? masked_dirs : masked_files)[i]; i++) {
			const char *m = (k ? masked_dirs : masked_files)[i];
			if (!strncmp(m, p, n) && m[n] == '/')
				return 3;
		}
	return 0;
}

/* The host directory src at dst (relative to the cwd, dst exists on a
 * file system of the sandbox's own): each entry a read-only bind of the
 * host's, a symlink copied, masked files as empty files and masked
 * directories as empty directories, a directory that holds a masked path
 * rebuilt the same way.  The masks are not mounts over host files (root
 * inside could unmount those, its user namespace owns them): what they
 * hide is simply not in the view, so no unmount, move or remount inside
 * can show it.  A directory below the top that cannot be listed stays
 * empty. */
static bool view_setattr;   /* the view goes read-only at once, with mount_setattr */

/* A bind of the host's src at dst, read-only now or (view_setattr) at the
 * end, all at once. */
static int view_bind(const char *src, const char *dst)
{
	if (!view_setattr)
		return bind_ro(src, dst);
	return mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
}

static void view_dir(const char *src, const char *dst, bool top, int sock)
{
	DIR *d = opendir(src);
	struct dirent *de;

	if (!d && !top)
		return;
	if (!d)
		child_fail(sock, src);
	while ((de = readdir(d))) {
		char sp[4096], dp[4096], link[4096];
		struct stat sb;
		ssize_t n;
		int kind;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sp, sizeof(sp), "%s/%s", src, de->d_name);
		snprintf(dp, sizeof(dp), "%s/%s", dst, de->d_name);
		if (lstat(sp, &sb) < 0)
			continue;
		kind = mask_kind(sp);
		if (kind == 1 || (kind == 0 && S_ISREG(sb.st_mode))) {
			int fd = open(dp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kind ? 0640 : 0644);
			if (fd < 0)
				child_fail(sock, sp);
			close(fd);
			if (!kind && view_bind(sp, dp) < 0)
				child_fail(sock, sp);
		} else if (S_ISDIR(sb.st_mode)) {
			if (mkdir(dp, sb.st_mode & 07777) < 0)
				child_fail(sock, sp);
			if (kind == 3)
				view_dir(sp, dp, false, sock);
			else if (kind == 0 && view_bind(sp, dp) < 0)
				child_fail(sock, sp);
		} else if (S_ISLNK(sb.st_mode) && !kind) {
			n = readlink(sp, link, sizeof(link) - 1);
			if (n < 0)
				continue;
			link[n] = '\0';
			if (symlink(link, dp) < 0)
				child_fail(sock, sp);
		}
		/* sockets, fifos and devices of the host's /etc stay out */
	}
	closedir(d);
}

/* The host's system directories, read-only, into the new root (cwd).
 * /etc, where the masked paths are, is a read-only tmpfs of its own
 * holding the view of view_dir. */
static void host_binds(int sock)
{
	static const char *const sys[] = {
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL,
	};
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
	struct mount_attr none = { 0 };
	struct stat sb;

	for (int i = 0; sys[i]; i++) {
		if (lstat(sys[i], &sb) < 0 || !S_ISDIR(sb.st_mode))
			continue; /* a merged-usr symlink is in the skeleton */
		if (mkdir_p(sys[i] + 1, 0755) < 0 || bind_ro(sys[i], sys[i] + 1) < 0)
			child_fail(sock, sys[i]);
	}
	if (mkdir_p("etc", 0755) < 0 ||
	    mount("tmpfs", "etc", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
		child_fail(sock, "mount /etc");
	/* one mount_setattr for the ~150 binds instead of a remount each
	 * (Linux 5.12 and later; else each bind is remounted) */
	view_setattr = syscall(SYS_mount_setattr, AT_FDCWD, "etc", 0, &none, sizeof(none)) == 0;
	view_dir("/etc", "etc", true, sock);
	if (view_setattr ? syscall(SYS_mount_setattr, AT_FDCWD, "etc", AT_RECURSIVE, &ro, sizeof(ro)) < 0
			 : mount(NULL, "etc", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		child_fail(sock, "make /etc read-only");
}

/* /dev of its own, relative to the new root (cwd). */
static void make_dev(const struct pisb_boot *b, int sock)
{
	char shm[64];
	static const char *const nodes[] = {
		"null", "zero", "full", "random", "urandom", "tty", NULL,
	};
	char p[256];

	mkdir("dev", 0755);
	if (mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		child_fail(sock, "mount /dev");
	for (int i = 0; nodes[i]; i++) {
		char src[64];
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		snprintf(p, sizeof(p), "dev/%s", nodes[i]);
		if (touch(p) < 0 || mount(src, p, NULL, MS_BIND, NULL) < 0)
			child_fail(sock, src);
	}
	mkdir("dev/pts", 0755);
	if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		child_fail(sock, "mount /dev/pts");
	if (symlink("pts/ptmx", "dev/ptmx") < 0)
		child_fail(sock, "/dev/ptmx");
	mkdir("dev/shm", 01777);
	snprintf(shm, sizeof(shm), b->tmp_mib ? "mode=1777,size=%um" : "mode=1777", b->tmp_mib);
	if (mount("tmpfs", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, shm) < 0)
		child_fail(sock, "mount /dev/shm");
	symlink("/proc/self/fd", "dev/fd");
	symlink("/proc/self/fd/0", "dev/stdin");
	symlink("/proc/self/fd/1", "dev/stdout");
	symlink("/proc/self/fd/2", "dev/stderr");
}

static void loopback_up(int sock)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		child_fail(sock, "socket");
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		child_fail(sock, "lo flags");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		child_fail(sock, "lo up");
	close(fd);
}

/* The overlay root at <disk>/merged.  Called as root inside the user ns;
 * lower and disk are fds opened earlier, in this mount ns, while we still
 * had the caller's uid (which can walk the state directory). */
static void mount_root(const struct pisb_boot *b, int lower, int disk, int sock)
{
	char opts[512], merged[64];

	snprintf(opts, sizeof(opts),
		 "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d/upper,workdir=/proc/self/fd/%d/work",
		 lower, disk, disk);
	snprintf(merged, sizeof(merged), "/proc/self/fd/%d/merged", disk);
	if (mount("overlay", merged, "overlay", MS_NOSUID, opts) < 0) {
		/* kernels that want it spelled out inside a user namespace */
		strncat(opts, ",userxattr", sizeof(opts) - strlen(opts) - 1);
		if (mount("overlay", merged, "overlay", MS_NOSUID, opts) < 0)
			child_fail(sock, "mount overlay root");
	}
	/* step into the mount (an fd of the mountpoint would be under it) */
	if (fchdir(disk) < 0 || chdir("merged") < 0)
		child_fail(sock, "enter the new root");
	if (b->host_image)
		host_binds(sock);
}

static volatile sig_atomic_t init_got_chld;
static void on_chld(int s) { (void)s; init_got_chld = 1; }

/* pid 1: reap, and obey the controller. */
static void init_loop(int sock)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;) {
		struct pollfd p = { sock, POLLIN, 0 };
		char c;
		int r = poll(&p, 1, 1000);

		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (r < 0 && errno != EINTR)
			_exit(1);
		if (r <= 0)
			continue;
		ssize_t n = read(sock, &c, 1);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			_exit(0); /* controller gone: the sandbox goes with it */
		if (n == 1 && c == 'K') {
			/* from pid 1, -1 means every other process in this pid ns */
			kill(-1, SIGKILL);
			for (int i = 0; i < 100000; i++) {
				pid_t w = waitpid(-1, NULL, 0);
				if (w < 0 && errno == ECHILD)
					break;
			}
			pisb_write_all(sock, "k", 1);
		}
	}
}

/* The init is a fork of the controller: blank the inherited command line
 * (it names host paths) so the sandbox sees only "pisb-init". */
static void blank_cmdline(void)
{
	char buf[1024], *p;
	unsigned long start = 0, end = 0;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* field 48 is arg_start, 49 arg_end; p + 2 is field 3 */
	for (int f = 3; p && f <= 48; f++) {
		p = strchr(p + 1, ' ');
	}
	if (!p || sscanf(p + 1, "%lu %lu", &start, &end) != 2 || end <= start)
		return;
	memset((void *)start, 0, end - start);
	snprintf((char *)start, end - start, "pisb-init");
}

/* The init, pid 1 of the new pid ns, cwd = the new root. */
static void __attribute__((noreturn)) init_main(const struct pisb_boot *b, int sock)
{
	char ws[4096];

	/* no PDEATHSIG here: our parent leaves at once (the controller adopts
	 * us); the controller's death closes sock, and init_loop exits then */
	mkdir("proc", 0555);
	if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		child_fail(sock, "mount /proc");
	make_dev(b, sock);
	mkdir("tmp", 01777);
	/* memory-backed: bounded, so filling it is an error inside, not a host problem */
	snprintf(ws, sizeof(ws), b->tmp_mib ? "mode=1777,size=%um" : "mode=1777", b->tmp_mib);
	if (mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, ws) < 0)
		child_fail(sock, "mount /tmp");
	mkdir("run", 0755);
	mount("tmpfs", "run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	mkdir("sys", 0555);
	/* sysfs needs the net ns we own; without it /sys just stays empty */
	mount("sysfs", "sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL);
	mkdir("root", 0700);
	snprintf(ws, sizeof(ws), ".%s", b->workspace);
	if (mkdir_p(ws, 0755) < 0)
		child_fail(sock, "mkdir workspace");
	/* pivot onto the cwd and drop the host's tree */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		child_fail(sock, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		child_fail(sock, "detach the host root");
	if (chdir("/") < 0)
		child_fail(sock, "chdir /");
	if (sethostname(b->hostname, strlen(b->hostname)) < 0)
		child_fail(sock, "sethostname");
	loopback_up(sock);
	pisb_close_from(3, sock);
	prctl(PR_SET_NAME, "pisb-init");
	blank_cmdline();
	if (pisb_write_all(sock, "R", 1) < 0)
		_exit(1);
	init_loop(sock);
	_exit(0);
}

/* Tell the controller we are ready for our id maps, and wait for them. */
static void want_maps(int sock)
{
	char c;
	if (pisb_write_all(sock, "U", 1) < 0 || read(sock, &c, 1) != 1 || c != 'M')
		_exit(1);
}

/* The first child.  It enters a new user ns (the controller writes the
 * id maps), then a mount ns owned by it, and builds the root filesystem
 * there while it still has the caller's own uid (the owner of the state
 * directory: it can walk to the disk).  Only then does it become root
 * inside, fork the init into the new pid ns, and leave; the controller, a
 * subreaper, inherits the init. */
static void __attribute__((noreturn)) boot_child(const struct pisb_boot *b, int sock)
{
	const int rest = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
			 CLONE_NEWUTS | CLONE_NEWCGROUP;
	pid_t init;
	int lower, disk, go[2];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (b->log_fd >= 0)
		dup2(b->log_fd, 2);
	if (unshare(CLONE_NEWUSER) < 0)
		child_fail(sock, "unshare user namespace (are user namespaces allowed?)");
	want_maps(sock);
	if (unshare(rest) < 0)
		child_fail(sock, "unshare namespaces");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(sock, "make / private");
	lower = open(b->lower_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	disk = open(b->disk_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (lower < 0 || disk < 0)
		child_fail(sock, "open the image or the disk");
	if (mkdirat(disk, "merged", 0755) < 0 && errno != EEXIST)
		child_fail(sock, "mkdir merged");
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		child_fail(sock, "become root inside");
	if (b->ids.count > 1)
		setgroups(0, NULL);
	mount_root(b, lower, disk, sock);
	close(lower);
	close(disk);
	/* The init and we share sock: it must not speak before our "P" + pid
	 * is on it, or the controller would read the two interleaved. */
	if (pipe2(go, O_CLOEXEC) < 0)
		child_fail(sock, "pipe");
	init = fork();
	if (init < 0)
		child_fail(sock, "fork init");
	if (init == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		close(go[0]);
		init_main(b, sock);
	}
	{
		char msg[1 + sizeof(init)];
		msg[0] = 'P';
		memcpy(msg + 1, &init, sizeof(init));
		pisb_write_all(sock, msg, sizeof(msg));
	}
	pisb_write_all(go[1], "g", 1);
	_exit(0);
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = pisb_write_all(fd, s, strlen(s));
	close(fd);
	return r < 0 ? -1 : 0;
}

static int read_msg(int fd, char *buf, size_t n, int timeout_ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	ssize_t r;

	if (poll(&p, 1, timeout_ms) <= 0)
		return -1;
	r = read(fd, buf, n - 1);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	return (int)r;
}

int pisb_sandbox_boot(const struct pisb_boot *b, pid_t *init, int *ctl,
		      struct pisb_err *e)
{
	int sp[2];
	char path[64], map[128], reply[1024];
	pid_t child, ipid = -1;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "socketpair");
	/* join the cgroups first, so the init (and all it forks) is inside */
	for (int i = 0; i < 8 && b->cgroup_dirfds[i] >= 0; i++) {
		char me[32];
		int fd = openat(b->cgroup_dirfds[i], "cgroup.procs", O_WRONLY | O_CLOEXEC);
		snprintf(me, sizeof(me), "%d", (int)getpid());
		if (fd < 0 || pisb_write_all(fd, me, strlen(me)) < 0) {
			pisb_err_sys(e, PISB_EXIT_FAIL, "join the sandbox cgroup (see 'pisb doctor')");
			if (fd >= 0)
				close(fd);
			goto fail_sp;
		}
		close(fd);
	}
	/* the init will be our grandchild: adopt it when its parent leaves */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	child = fork();
	if (child < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
		goto fail_sp;
	}
	if (child == 0) {
		close(sp[0]);
		boot_child(b, sp[1]);
	}
	close(sp[1]);
	sp[1] = -1;
	if (read_msg(sp[0], reply, sizeof(reply), 30000) < 0 || reply[0] != 'U') {
		if (reply[0] == 'E')
			pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: %s (see 'pisb doctor')", reply + 1);
		else
			pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: its first process died (see 'pisb doctor')");
		goto fail_child;
	}
	/* id maps: written from outside, as only a process outside may */
	if (b->ids.count == 1) {
		snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)child);
		write_file(path, "deny");
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)child);
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)b->ids.uid_base, b->ids.count);
	if (write_file(path, map) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "write uid_map (see 'pisb doctor')");
		goto fail_child;
	}
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)child);
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)b->ids.gid_base, b->ids.count);
	if (write_file(path, map) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "write gid_map (see 'pisb doctor')");
		goto fail_child;
	}
	if (pisb_write_all(sp[0], "M", 1) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "signal the sandbox");
		goto fail_child;
	}
	/* "P" + pid of the init, then "R" from the init once it is ready */
	{
		struct pollfd p = { sp[0], POLLIN, 0 };
		char c;
		if (poll(&p, 1, 30000) <= 0 || read(sp[0], &c, 1) != 1 || c != 'P' ||
		    pisb_read_all(sp[0], &ipid, sizeof(ipid)) != sizeof(ipid)) {
			if (c == 'E' && read_msg(sp[0], reply, sizeof(reply), 1000) > 0)
				pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: %s (see 'pisb doctor')", reply);
			else
				pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: no init was started (see 'pisb doctor')");
			goto fail_child;
		}
	}
	waitpid(child, NULL, 0);
	child = -1;
	if (read_msg(sp[0], reply, sizeof(reply), 30000) < 0 || reply[0] != 'R') {
		pisb_err_set(e, PISB_EXIT_FAIL, "boot the sandbox: %s (see 'pisb doctor')",
			     reply[0] == 'E' ? reply + 1 : "the init died while starting");
		kill(ipid, SIGKILL);
		waitpid(ipid, NULL, 0);
		goto fail_sp;
	}
	*init = ipid;
	*ctl = sp[0];
	return 0;
fail_child:
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
fail_sp:
	close(sp[0]);
	if (sp[1] >= 0)
		close(sp[1]);
	return -1;
}

int pisb_sandbox_killall(int ctl, int timeout_ms, struct pisb_err *e)
{
	struct pollfd p = { ctl, POLLIN, 0 };
	char c;

	if (pisb_write_all(ctl, "K", 1) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "ask the sandbox init to kill");
	if (poll(&p, 1, timeout_ms) <= 0 || read(ctl, &c, 1) != 1 || c != 'k')
		return pisb_err_set(e, PISB_EXIT_TIMEOUT, "sandbox processes did not end in time");
	return 0;
}

int pisb_sandbox_enter(pid_t init, unsigned long long start, struct pisb_err *e)
{
	return pisb_sandbox_enter_ns(init, start, PISB_NS_ALL, e);
}

int pisb_sandbox_enter_ns(pid_t init, unsigned long long start, unsigned which,
			  struct pisb_err *e)
{
	/* user first: it gives us the capabilities to join the others */
	static const struct { const char *name; int type; unsigned bit; } nss[] = {
		{ "user", CLONE_NEWUSER, PISB_NS_USER }, { "ipc", CLONE_NEWIPC, PISB_NS_IPC },
		{ "uts", CLONE_NEWUTS, PISB_NS_UTS }, { "net", CLONE_NEWNET, PISB_NS_NET },
		{ "pid", CLONE_NEWPID, PISB_NS_PID }, { "cgroup", CLONE_NEWCGROUP, PISB_NS_CGROUP },
		{ "mnt", CLONE_NEWNS, PISB_NS_MNT },
	};
	int fds[7], rootfd;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/root", (int)init);
	rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "the sandbox is not running (init %d)", (int)init);
	for (int i = 0; i < 7; i++) {
		if (!(which & nss[i].bit)) {
			fds[i] = -1;
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)init, nss[i].name);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			pisb_err_sys(e, PISB_EXIT_BACKEND, "open %s", path);
			while (i-- > 0)
				if (fds[i] >= 0)
					close(fds[i]);
			close(rootfd);
			return -1;
		}
	}
	/* the fds pin the namespaces: now make sure they were the init's */
	if (pisb_proc_start(init) != start) {
		for (int i = 0; i < 7; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		close(rootfd);
		return pisb_err_set(e, PISB_EXIT_BACKEND, "the sandbox is not running (its init is gone)");
	}
	for (int i = 0; i < 7; i++) {
		if (fds[i] < 0)
			continue;
		/* joining our own user ns (root) is EINVAL: harmless */
		if (setns(fds[i], nss[i].type) < 0 && !(i == 0 && errno == EINVAL)) {
			pisb_err_sys(e, PISB_EXIT_BACKEND, "enter the sandbox %s namespace", nss[i].name);
			for (int k = i; k < 7; k++)
				if (fds[k] >= 0)
					close(fds[k]);
			close(rootfd);
			return -1;
		}
		close(fds[i]);
	}
	if (fchdir(rootfd) < 0 || chroot(".") < 0 || chdir("/") < 0) {
		close(rootfd);
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "enter the sandbox root");
	}
	close(rootfd);
	return 0;
}

int pisb_sandbox_become_root(bool privileged, struct pisb_err *e)
{
	if (privileged)
		setgroups(0, NULL);
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return pisb_err_sys(e, PISB_EXIT_PISB, "become root inside the sandbox");
	return 0;
}

int pisb_host_skeleton(int dirfd, const char *path, const struct pisb_ids *ids,
		       struct pisb_err *e)
{
	static const char *const dirs[] = {
		"usr", "etc", "var", "var/tmp", "var/lib", "var/cache", "var/log", "opt",
		"root", "home", "srv", "mnt", "media", "run", "tmp", "proc", "dev",
		"sys", "usr/local", NULL,
	};
	static const char *const links[] = {
		"bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL,
	};
	_cleanup_close_ int fd = -1;
	bool root = geteuid() == 0;

	if (pisb_mkdirs_at(dirfd, path, 0755, e) < 0)
		return -1;
	fd = openat(dirfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", path);
	for (int i = 0; dirs[i]; i++) {
		mode_t m = !strcmp(dirs[i], "tmp") || !strcmp(dirs[i], "var/tmp") ? 01777 :
			   !strcmp(dirs[i], "root") ? 0700 : 0755;
		if (mkdirat(fd, dirs[i], m) < 0 && errno != EEXIST)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir '%s/%s'", path, dirs[i]);
		fchmodat(fd, dirs[i], m, 0);
		if (root && fchownat(fd, dirs[i], ids->uid_base, ids->gid_base, AT_SYMLINK_NOFOLLOW) < 0)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "chown '%s/%s'", path, dirs[i]);
	}
	for (int i = 0; links[i]; i++) {
		char target[256], host[64];
		ssize_t n;
		snprintf(host, sizeof(host), "/%s", links[i]);
		n = readlink(host, target, sizeof(target) - 1);
		if (n <= 0)
			continue; /* a real directory (bound at boot) or absent */
		target[n] = '\0';
		if (symlinkat(target, fd, links[i]) < 0 && errno != EEXIST)
			return pisb_err_sys(e, PISB_EXIT_FAIL, "symlink '%s/%s'", path, links[i]);
	}
	if (root && fchownat(dirfd, path, ids->uid_base, ids->gid_base, AT_SYMLINK_NOFOLLOW) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "chown '%s'", path);
	return 0;
}
