/* pisb-agent - the guest side of the vm driver: PID 1 of the VM.
 *
 * Built static (Makefile: bin/pisb-agent); pisb puts it in the initramfs
 * it builds at every boot, as /init, beside the kernel modules that the
 * guest needs (listed in /modules/order).  It is not a user verb.
 *
 * Stage 1 (in the initramfs, /pisb-initramfs exists): mount /proc /sys
 * /dev, load the modules, mount the persistent disk /dev/vda (ext4) and
 * the host's read-only userland (virtiofs, tag pisb-host) or, with
 * pisb.root=pisb-image (image: PATH), the read-only ext4 disk of that
 * serial, and make the root an overlay of the two (lower: the host's or
 * the image's, upper: the disk's upper/); bind itself at /run/pisb/agent
 * (tmpfs; what runs it as a command finds it there), move the disk and
 * the share under /run/pisb/ and switch root.  (Loopback up and /dev/pts
 * come before the boot snapshot's point.)
 * Stage 2 (the same process, PID 1 on the overlay root): hostname,
 * /dev/shm, the pids cgroup, with docker the daemon's cgroups and data
 * root (docker_setup), the workspace, then one server per virtio-serial
 * port org.pisb.agent.N (vm_proto.h), respawned if it dies; then, niced,
 * with docker the modules of /modules/docker, and those of /modules/late;
 * PID 1 reaps orphans.
 *
 * Kernel command line: pisb.name=NAME pisb.ws=/workspace pisb.pids=N
 * [pisb.root=pisb-image] [pisb.proj=rw|ro (a bound project, virtiofs tag
 * pisb-proj, mounted at the workspace)] [pisb.egress=1] [pisb.docker=1];
 * or pisb.snap=1 for the boot snapshot's template (see await_boot), whose
 * restores get those arguments from the host in a BOOT frame instead.
 */
#include "vm_proto.h"
#include "agent_fs.h"
#include "vm_mux.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logmsg(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int fd, n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	/* the serial console (console.log on the host) */
	fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "pisb-agent: ", 12) < 0 || write(fd, buf, (size_t)n) < 0) {
		}
		close(fd);
	}
}

#define HUP_GRACE_MS 1500

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static void mkdirs(const char *path, mode_t mode)
{
	char p[512];
	size_t n = strlen(path);

	if (n >= sizeof(p))
		return;
	memcpy(p, path, n + 1);
	for (char *s = p + 1; *s; s++) {
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	}
	mkdir(p, mode);
}

#define PISB_BOOT_ARGS "/run/pisb/args"

/* pisb.KEY=VALUE from the kernel command line (static buffer) */
static const char *cmdline_arg(const char *key)
{
	static char line[4096], val[512];
	char want[64];
	/* a guest restored from the boot snapshot got its arguments from the
	 * host at restore (await_boot): they replace the template's */
	int fd = open(PISB_BOOT_ARGS, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);

	val[0] = '\0';
	if (fd < 0)
		return NULL;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	line[n] = '\0';
	snprintf(want, sizeof(want), "pisb.%s=", key);
	for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n")) {
		if (!strncmp(t, want, strlen(want))) {
			snprintf(val, sizeof(val), "%s", t + strlen(want));
			return val;
		}
	}
	return NULL;
}

/* ---- stage 1: the initramfs ---- */

/* the initramfs's /modules (O_PATH) for stage 2, or -1 */
static int late_modules = -1;

/* the modules a list in dir names (order: before the boot snapshot's
 * point; late: after it), in its order */
static int load_modules(int dir, const char *list)
{
	int lfd = openat(dir, list, O_RDONLY | O_CLOEXEC);
	FILE *f = lfd < 0 ? NULL : fdopen(lfd, "re");
	char line[256];
	int failed = 0;

	if (!f) {
		if (lfd >= 0)
			close(lfd);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		int fd;
		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || strchr(line, '/'))
			continue;
		fd = openat(dir, line, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			logmsg("module %s: %s", line, strerror(errno));
			failed++;
			continue;
		}
		if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST) {
			logmsg("load module %s: %s", line, strerror(errno));
			failed++;
		}
		close(fd);
	}
	fclose(f);
	return failed;
}

static void __attribute__((noreturn)) die(const char *what)
{
	logmsg("fatal: %s: %s", what, strerror(errno));
	sync();
	reboot(RB_AUTOBOOT);
	_exit(1);
}

/* Mount the virtiofs share tag at at; the device may still be probing. */
static int mount_tag(const char *tag, const char *at, unsigned long flags)
{
	for (int i = 0; i < 400; i++) {
		if (mount(tag, at, "virtiofs", flags, NULL) == 0)
			return 0;
		if (errno != ENOENT && errno != ENODEV && errno != ENXIO && errno != EINVAL)
			return -1;
		sleep_ms(25);
	}
	return -1;
}

/* The /dev/vdX whose virtio serial is serial, into dev; false if none
 * (yet). */
static bool find_serial(const char *serial, char *dev, size_t cap)
{
	for (char c = 'a'; c <= 'd'; c++) {
		char p[64], buf[64];
		ssize_t n;
		int fd;
		snprintf(p, sizeof(p), "/sys/block/vd%c/serial", c);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (!strcmp(buf, serial)) {
			snprintf(dev, cap, "/dev/vd%c", c);
			return true;
		}
	}
	return false;
}

static size_t await_boot(char *args, size_t cap);

/* A restored guest's /dev/vda held the boot snapshot template's
 * placeholder until the host put the instance's disk behind the same
 * device: wait for the capacity the host announced (pisb.disk, bytes;
 * its resize reaches the guest as a config interrupt), then drop what
 * the template read of the placeholder (the partition scan's pages). */
static void restored_disk(const char *dev)
{
	const char *want = cmdline_arg("disk");
	long long bytes = want ? atoll(want) : 0, have = -1;
	int fd, i;

	if (bytes <= 0) {
		errno = EINVAL;
		die("pisb.disk missing from a restore's arguments");
	}
	for (i = 0; i < 1000; i++) {
		char buf[32];
		ssize_t n;
		fd = open("/sys/block/vda/size", O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = '\0';
			have = atoll(buf) * 512;
			if (have == bytes)
				break;
		}
		sleep_ms(2);
	}
	if (have != bytes) {
		errno = EIO;
		logmsg("the disk's capacity: %lld bytes, want %lld", have, bytes);
		die("the restored disk's capacity");
	}
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, BLKFLSBUF, 0) < 0)
		die("drop the placeholder's cached blocks (BLKFLSBUF)");
	close(fd);
}

/* pisb.proj=rw|ro: the host's project (virtiofs tag pisb-proj) at the
 * workspace of the new root, read-only for ro (the host enforces it
 * too); without it the guest does not come up: the workspace is never
 * silently the disk's instead. */
static void mount_project(void)
{
	const char *proj = cmdline_arg("proj");
	char at[600];
	unsigned long fl = MS_NOSUID | MS_NODEV;

	if (!proj)
		return;
	fl |= !strcmp(proj, "ro") ? MS_RDONLY : 0;
	{
		const char *ws = cmdline_arg("ws");
		if (!ws || ws[0] != '/') {
			errno = EINVAL;
			die("pisb.proj without pisb.ws");
		}
		snprintf(at, sizeof(at), "/newroot%s", ws);
	}
	mkdirs(at, 0755);
	if (mount_tag(PISB_PROJECT_TAG, at, fl) < 0)
		die("mount the project (virtiofs '" PISB_PROJECT_TAG "')");
}

static void lo_up(void);
static void __attribute__((noreturn)) stage2(void);

static void __attribute__((noreturn)) stage1(void)
{
	static char args[2048];
	size_t nargs = 0;
	int i;

	mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	late_modules = open("/modules", O_PATH | O_DIRECTORY | O_CLOEXEC);
	load_modules(late_modules, "order");
	/* what every guest has, made before the boot snapshot's point (the
	 * mounts move into the new root with /dev) */
	mkdirs("/dev/pts", 0755);
	mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=620,ptmxmode=666");
	/* the links a userland expects of /dev (udev's, elsewhere): without
	 * them `cmd < /dev/stdin`, bash's process substitution and many
	 * scripts fail */
	symlink("/proc/self/fd", "/dev/fd");
	symlink("/proc/self/fd/0", "/dev/stdin");
	symlink("/proc/self/fd/1", "/dev/stdout");
	symlink("/proc/self/fd/2", "/dev/stderr");
	lo_up();
	/* the boot snapshot's template (pisb.snap=1): the host saves the VM
	 * here, before it has a disk or a share; every restore continues
	 * from this point once the host has sent its BOOT frame, with the
	 * disk and the share hot-plugged */
	{
		const char *snap = cmdline_arg("snap");
		if (snap && !strcmp(snap, "1"))
			nargs = await_boot(args, sizeof(args));
	}
	/* a restore's arguments, for cmdline_arg in stage 1 too */
	if (nargs) {
		int fd;
		mkdirs("/run/pisb", 0755);
		fd = open(PISB_BOOT_ARGS, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || write_all(fd, args, nargs) < 0 || close(fd) < 0)
			die("write " PISB_BOOT_ARGS);
	}
	for (i = 0; i < 3000 && access("/dev/vda", F_OK) < 0; i++)
		sleep_ms(10);
	if (nargs)
		restored_disk("/dev/vda");
	/* the root: an overlay of the host's userland, or with pisb.root=
	 * PISB_VM_IMAGE_SERIAL the sandbox's rootfs image (read-only, lower),
	 * and the persistent disk (ext4: upper/ and work/) */
	{
		const char *root = cmdline_arg("root");
		char img[16] = "", disk[16] = "/dev/vda";
		if (root && !strcmp(root, PISB_VM_IMAGE_SERIAL)) {
			for (i = 0; i < 600 && !find_serial(PISB_VM_IMAGE_SERIAL, img, sizeof(img)); i++)
				sleep_ms(50);
			if (!img[0]) {
				errno = ENODEV;
				die("find the image's disk (serial " PISB_VM_IMAGE_SERIAL ")");
			}
			if (!strcmp(img, "/dev/vda"))
				snprintf(disk, sizeof(disk), "/dev/vdb");
		}
		if (mount(disk, "/disk", "ext4", 0, "noinit_itable") < 0)
			die("mount the disk");
		if (img[0] ? mount(img, "/lower", "ext4", MS_RDONLY | MS_NODEV, NULL) < 0
			   : mount_tag(PISB_HOST_TAG, "/lower", MS_RDONLY | MS_NODEV) < 0)
			die(img[0] ? "mount the image's disk" : "mount the host's userland (virtiofs '" PISB_HOST_TAG "')");
	}
	mkdir("/disk/upper", 0755);
	mkdir("/disk/work", 0700);
	if (mount("overlay", "/newroot", "overlay", 0,
		  "lowerdir=/lower,upperdir=/disk/upper,workdir=/disk/work") < 0)
		die("mount the overlay root");
	static const char *const dirs[] = { "dev", "proc", "sys", "run", "root", "var/tmp", "home", NULL };
	for (i = 0; dirs[i]; i++) {
		char p[64];
		snprintf(p, sizeof(p), "/newroot/%s", dirs[i]);
		mkdirs(p, 0755);
	}
	mkdir("/newroot/tmp", 01777);
	chmod("/newroot/tmp", 01777);
	chmod("/newroot/root", 0700);
	/* /run: the agent itself, and where the disk and the share are */
	if (mount("tmpfs", "/newroot/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
		die("mount /run");
	mkdirs("/newroot/run/pisb/disk", 0700);
	mkdirs("/newroot/run/pisb/host", 0755);
	/* the agent itself, bound from the initramfs (which stays beneath
	 * the new root): nothing copied */
	{
		int fd = open("/newroot/run/pisb/agent", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
		if (fd < 0 || close(fd) < 0 ||
		    mount("/init", "/newroot/run/pisb/agent", NULL, MS_BIND, NULL) < 0)
			die("put the agent in /run");
	}
	mount_project();
	if (nargs) {
		int fd = open("/newroot" PISB_BOOT_ARGS, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || write_all(fd, args, nargs) < 0 || close(fd) < 0)
			die("write " PISB_BOOT_ARGS);
	}
	if (mount("/disk", "/newroot/run/pisb/disk", NULL, MS_MOVE, NULL) < 0 ||
	    mount("/lower", "/newroot/run/pisb/host", NULL, MS_MOVE, NULL) < 0 ||
	    mount("/dev", "/newroot/dev", NULL, MS_MOVE, NULL) < 0 ||
	    mount("/proc", "/newroot/proc", NULL, MS_MOVE, NULL) < 0 ||
	    mount("/sys", "/newroot/sys", NULL, MS_MOVE, NULL) < 0)
		die("move the mounts");
	if (chdir("/newroot") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
	    chdir("/") < 0)
		die("switch to the root");
	/* stage 2 in this same process: an exec of the agent would cost a
	 * fresh image's page faults for nothing */
	stage2();
}

/* ---- stage 2 ---- */

static void lo_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
}

/* resources.pids: every command runs in the cgroup /sys/fs/cgroup/pisb
 * whose pids.max is the limit; a command whose move into it fails does not
 * run (see session), so the limit is never silently dropped. */
#define PISB_CG "/sys/fs/cgroup/pisb"
static bool pids_wanted, docker_wanted;

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int r;

	if (fd < 0)
		return -1;
	r = write_all(fd, s, strlen(s));
	if (close(fd) < 0)
		r = -1;
	return r;
}

static void pids_setup(const char *pids)
{
	if (!pids || !*pids)
		return;
	pids_wanted = true;
	mkdirs("/sys/fs/cgroup", 0755);
	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 &&
	    errno != EBUSY)
		logmsg("mount cgroup2: %s", strerror(errno));
	if (write_str("/sys/fs/cgroup/cgroup.subtree_control", "+pids") < 0)
		logmsg("enable the pids controller: %s", strerror(errno));
	mkdir(PISB_CG, 0755);
	if (write_str(PISB_CG "/pids.max", pids) < 0)
		logmsg("pids.max %s: %s", pids, strerror(errno));
}

/* docker: true (pisb.docker=1, vm.c's docker_arg): the cgroup controllers
 * runc sets a container's limits with; with a pids limit the commands
 * move to the leaf pisb/cmd, so that the daemon's containers
 * (dockerd --cgroup-parent=/pisb/docker, docker_init.c) count under the
 * same pids.max; the disk's docker/ at /var/lib/docker (overlay2 needs an
 * ext4 upper, not the root's overlay).  The bridge's modules load later,
 * beside the servers (docker_modules). */
static const char *cg_procs = PISB_CG "/cgroup.procs";
#define DOCKER_CTRL "+cpu +memory +io +pids"
#define DOCKER_READY "/run/pisb/docker.ready"

static void docker_setup(void)
{
	mkdirs("/sys/fs/cgroup", 0755);
	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 &&
	    errno != EBUSY)
		logmsg("mount cgroup2: %s", strerror(errno));
	if (write_str("/sys/fs/cgroup/cgroup.subtree_control", DOCKER_CTRL) < 0)
		logmsg("docker: enable the controllers %s: %s", DOCKER_CTRL, strerror(errno));
	if (pids_wanted) {
		if ((mkdir(PISB_CG "/cmd", 0755) < 0 && errno != EEXIST) ||
		    write_str(PISB_CG "/cgroup.subtree_control", DOCKER_CTRL) < 0)
			logmsg("docker: " PISB_CG "/cmd: %s", strerror(errno));
		else
			cg_procs = PISB_CG "/cmd/cgroup.procs";
	}
	mkdirs("/var/lib/docker", 0710);
	if ((mkdir("/run/pisb/disk/docker", 0710) < 0 && errno != EEXIST) ||
	    mount("/run/pisb/disk/docker", "/var/lib/docker", NULL, MS_BIND, NULL) < 0)
		logmsg("docker: bind the disk's docker/ at /var/lib/docker: %s", strerror(errno));
}

/* In the late child: the bridge's modules, then DOCKER_READY for the
 * daemon's script to go on ("ok", or what failed). */
static void docker_modules(int dir)
{
	int n = load_modules(dir, "docker");
	char msg[128];
	int fd;

	if (n == 0)
		snprintf(msg, sizeof(msg), "ok\n");
	else
		snprintf(msg, sizeof(msg), "the guest kernel could not load %s of the bridge's modules (see the VM's console log)\n",
			 n < 0 ? "the list" : "some");
	fd = open(DOCKER_READY ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, msg, strlen(msg)) < 0 || close(fd) < 0 ||
	    rename(DOCKER_READY ".tmp", DOCKER_READY) < 0)
		logmsg("docker: " DOCKER_READY ": %s", strerror(errno));
}

/* In a command's child: into the limited cgroup, or fail. */
static int pids_enter(void)
{
	char v[32];
	int fd;
	ssize_t n;

	if (!pids_wanted)
		return 0;
	fd = open(PISB_CG "/pids.max", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, v, sizeof(v) - 1);
	close(fd);
	if (n <= 0 || !strncmp(v, "max", 3))
		return -1;
	return write_str(cg_procs, "0");
}

/* the /dev path of each port, found once by stage 2 (its servers, forked
 * from it, read their own); "" not found */
static char port_dev[PISB_VM_PORTS][32];

/* Every port's device into port_dev, in one pass over the ports; how
 * many of the PISB_VM_PORTS are known. */
static int find_ports(void)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *de;
	size_t pl = strlen(PISB_VM_PORT_PREFIX);
	int found = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[300], name[64];
		ssize_t r;
		int fd, n;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		r = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (r <= 0)
			continue;
		name[r] = '\0';
		name[strcspn(name, "\n")] = '\0';
		if (strncmp(name, PISB_VM_PORT_PREFIX, pl) || !name[pl] || strspn(name + pl, "0123456789") != strlen(name + pl))
			continue;
		n = atoi(name + pl);
		if (n >= 0 && n < PISB_VM_PORTS && !port_dev[n][0] &&
		    snprintf(port_dev[n], sizeof(port_dev[n]), "/dev/%s", de->d_name) >= (int)sizeof(port_dev[n]))
			port_dev[n][0] = '\0';   /* a name that long is no port's */
	}
	closedir(d);
	for (int i = 0; i < PISB_VM_PORTS; i++)
		found += port_dev[i][0] != '\0';
	return found;
}

/* /dev/vportXpY of the port named org.pisb.agent.N */
static int find_port(int n, char *dev, size_t len)
{
	if (n < 0 || n >= PISB_VM_PORTS)
		return -1;
	if (!port_dev[n][0])
		find_ports();
	if (!port_dev[n][0])
		return -1;
	snprintf(dev, len, "%s", port_dev[n]);
	return 0;
}

/* The port: a byte stream while the host is connected; read() returns 0
 * while no host is connected. */
struct port {
	int fd;
	unsigned char buf[PISB_VM_HDR + PISB_VM_MAX_FRAME];
	size_t have;
	bool host_gone;
	bool service;           /* a service port: its commands' pids are shown */
};

static int send_frame(struct port *p, int type, uint32_t sid, const void *data, size_t len)
{
	unsigned char h[PISB_VM_HDR];

	pisb_vm_hdr(h, type, sid, (uint32_t)len);
	if (write_all(p->fd, h, sizeof(h)) < 0)
		return -1;
	return len ? write_all(p->fd, data, len) : 0;
}

/* A complete frame in p->buf?  Resyncs on bad magic.  1 yes, 0 no. */
static int frame_ready(struct port *p, int *type, uint32_t *sid, uint32_t *len)
{
	for (;;) {
		if (p->have < PISB_VM_HDR)
			return 0;
		if (memcmp(p->buf, PISB_VM_MAGIC, 4) != 0 ||
		    pisb_vm_get32(p->buf + 12) > PISB_VM_MAX_FRAME) {
			memmove(p->buf, p->buf + 1, --p->have);
			continue;
		}
		*type = p->buf[4];
		*sid = pisb_vm_get32(p->buf + 8);
		*len = pisb_vm_get32(p->buf + 12);
		return p->have >= PISB_VM_HDR + *len;
	}
}

static void frame_consume(struct port *p, uint32_t len)
{
	size_t n = PISB_VM_HDR + len;
	memmove(p->buf, p->buf + n, p->have - n);
	p->have -= n;
}

/* read what is there: 1 data, 0 host not connected, -1 error */
static int port_fill(struct port *p)
{
	ssize_t r = read(p->fd, p->buf + p->have, sizeof(p->buf) - p->have);

	if (r > 0) {
		p->have += (size_t)r;
		return 1;
	}
	if (r == 0)
		return 0;
	return errno == EINTR || errno == EAGAIN ? 1 : -1;
}

/* The port signals (SIGIO) when a host connects or sends: a process
 * that keeps SIGIO blocked waits for it (port_wait) instead of polling a
 * port whose read() says no host is there.  0, or -1 (then poll). */
static int port_async(int fd)
{
	if (fcntl(fd, F_SETOWN, getpid()) < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) < 0)
		return -1;
	return 0;
}

/* Wait for the port's SIGIO, ms at most. */
static void port_wait(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	sigset_t io;

	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	sigtimedwait(&io, NULL, &ts);
}

static void __attribute__((noreturn)) poweroff(void)
{
	sync();
	kill(-1, SIGTERM);
	sleep_ms(500);
	kill(-1, SIGKILL);
	sleep_ms(100);
	sync();
	mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL);
	mount(NULL, "/run/pisb/disk", NULL, MS_REMOUNT | MS_RDONLY, NULL);
	sync();
	reboot(RB_AUTOBOOT);
	_exit(0);
}

static void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void forward_out(struct port *p, int *fd, int type, uint32_t sid)
{
	char buf[32768];
	ssize_t r = read(*fd, buf, sizeof(buf));

	if (r > 0) {
		if (!p->host_gone && send_frame(p, type, sid, buf, (size_t)r) < 0)
			p->host_gone = true;
		return;
	}
	if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
		close(*fd);
		*fd = -1;
	}
}

static void drain(struct port *p, int *fd, int type, uint32_t sid)
{
	char buf[32768];

	while (*fd >= 0) {
		ssize_t r = read(*fd, buf, sizeof(buf));
		if (r > 0) {
			if (!p->host_gone && send_frame(p, type, sid, buf, (size_t)r) < 0)
				p->host_gone = true;
		} else if (r < 0 && errno == EINTR) {
			continue;
		} else {
			close(*fd);
			*fd = -1;
		}
	}
}

/* WINSZ: the command's terminal is the pty whose path it wrote into
 * /run/pisb/pty.PID, PID the command's (pisb shell's command does, see
 * drivers/vm/vm_shell.c): resize it, and the kernel sends SIGWINCH to
 * its foreground process group.  Anything else there is ignored. */
static void set_winsize(pid_t pid, unsigned rows, unsigned cols)
{
	struct winsize ws = { (unsigned short)rows, (unsigned short)cols, 0, 0 };
	char path[64], tty[128];
	ssize_t n;
	int fd;

	if (!rows || !cols)
		return;
	snprintf(path, sizeof(path), "/run/pisb/pty.%d", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return;
	n = read(fd, tty, sizeof(tty) - 1);
	close(fd);
	if (n <= 0)
		return;
	tty[n] = '\0';
	tty[strcspn(tty, "\n")] = '\0';
	if (strncmp(tty, "/dev/pts/", 9) || strchr(tty + 9, '/'))
		return;
	fd = open(tty, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	ioctl(fd, TIOCSWINSZ, &ws);
	close(fd);
}

struct inq {
	char *d;
	size_t n, off;
};

/* Act on the complete frames of session sid in the buffer: stdin is
 * queued, kill signals the group; a new request means the old client is
 * gone (left in the buffer for the main loop). */
static void take_frames(struct port *p, uint32_t sid, pid_t pid, struct inq *q, bool *in_eof)
{
	for (;;) {
		int type;
		uint32_t fsid, flen;
		if (!frame_ready(p, &type, &fsid, &flen))
			return;
		if (type == PISB_VM_EXEC || type == PISB_VM_PING || type == PISB_VM_POWEROFF) {
			p->host_gone = true;
			kill(-pid, SIGKILL);
			return;
		}
		if (fsid == sid && type == PISB_VM_STDIN && !*in_eof) {
			if (flen == 0) {
				*in_eof = true;
			} else {
				if (q->off == q->n)
					q->off = q->n = 0;
				q->d = realloc(q->d, q->n + flen);
				memcpy(q->d + q->n, p->buf + PISB_VM_HDR, flen);
				q->n += flen;
			}
		} else if (fsid == sid && type == PISB_VM_KILL && flen >= 1) {
			int sig = p->buf[PISB_VM_HDR];
			if (sig > 0 && sig < 65)
				kill(-pid, sig);
		} else if (fsid == sid && type == PISB_VM_WINSZ && flen >= 4) {
			const unsigned char *w = p->buf + PISB_VM_HDR;
			set_winsize(pid, (unsigned)(w[0] | w[1] << 8), (unsigned)(w[2] | w[3] << 8));
		}
		frame_consume(p, flen);
	}
}

/* Run one EXEC request; returns when the command has exited. */
static void session(struct port *p, uint32_t sid, const unsigned char *pl, uint32_t len,
		    const sigset_t *oldmask)
{
	uint32_t argc, envc, i;
	const char *s, *end = (const char *)pl + len, *cwd;
	char **argv, **envv;
	int in[2], out[2], err[2], sfd, code = -1;
	pid_t pid;
	struct inq q = { NULL, 0, 0 };
	bool in_eof = false, exited = false;
	int64_t hup_since = 0;

	if (len < 8)
		return;
	argc = pisb_vm_get32(pl);
	envc = pisb_vm_get32(pl + 4);
	if (argc == 0 || argc > 65536 || envc > 65536)
		return;
	argv = calloc(argc + 1, sizeof(char *));
	envv = calloc(envc + 1, sizeof(char *));
	s = (const char *)pl + 8;
	cwd = s;
	for (i = 0; i < 1 + argc + envc; i++) {
		const char *z = memchr(s, '\0', (size_t)(end - s));
		if (!z) {
			free(argv);
			free(envv);
			send_frame(p, PISB_VM_EXIT, sid, "\x7e\0\0\0", 4);
			return;
		}
		if (i >= 1 && i <= argc)
			argv[i - 1] = (char *)s;
		else if (i > argc)
			envv[i - 1 - argc] = (char *)s;
		s = z + 1;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		free(argv);
		free(envv);
		send_frame(p, PISB_VM_EXIT, sid, "\x7e\0\0\0", 4);
		return;
	}
	pid = fork();
	if (pid == 0) {
		setsid();
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		for (int sig = 1; sig < 32; sig++)
			signal(sig, SIG_DFL);
		sigprocmask(SIG_SETMASK, oldmask, NULL);
		if (pids_enter() < 0) {
			dprintf(2, "pisb-agent: the guest's pids limit is not in force (%s): not running the command\n",
				strerror(errno));
			_exit(126);
		}
		if (cwd[0] && chdir(cwd) < 0) {
			dprintf(2, "pisb-agent: cwd '%s': %s\n", cwd, strerror(errno));
			_exit(1);
		}
		environ = envv;
		execvp(argv[0], argv);
		dprintf(2, "pisb-agent: %s: %s\n", argv[0],
			errno == ENOENT ? "command not found" : strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	free(argv);
	free(envv);
	if (pid < 0) {
		close(in[1]);
		close(out[0]);
		close(err[0]);
		send_frame(p, PISB_VM_EXIT, sid, "\x7e\0\0\0", 4);
		return;
	}
	if (p->service) {
		unsigned char b[4];
		pisb_vm_put32(b, (uint32_t)pid);
		send_frame(p, PISB_VM_STARTED, sid, b, 4);
	}
	nonblock(in[1]);
	nonblock(out[0]);
	nonblock(err[0]);
	{
		sigset_t chld;
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	}
	while (!exited || out[0] >= 0 || err[0] >= 0) {
		struct pollfd pf[5];
		int n = 0, ip = -1, io = -1, ie = -1, is = -1, ii = -1;
		if (exited) {
			/* drain what the command left in the pipes; a background
			 * child that keeps them open does not hold the exit */
			drain(p, &out[0], PISB_VM_STDOUT, sid);
			drain(p, &err[0], PISB_VM_STDERR, sid);
			continue;
		}
		if (!p->host_gone) {
			/* frames that came with the request, or since */
			take_frames(p, sid, pid, &q, &in_eof);
			if (in[1] >= 0 && in_eof && q.off >= q.n) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (!p->host_gone && hup_since) {
			/* virtio-serial reports a client's close and the next
			 * client's open as events that can trail the new client's
			 * data: a hang-up counts only once it lasts */
			struct pollfd x = { p->fd, POLLIN, 0 };
			poll(&x, 1, 0);
			if ((x.revents & POLLIN) || !(x.revents & POLLHUP)) {
				hup_since = 0;
			} else if (now_ms() - hup_since > HUP_GRACE_MS) {
				p->host_gone = true;
				in_eof = true;
				kill(-pid, SIGKILL);
			}
		}
		if (!p->host_gone && !hup_since) {
			pf[n] = (struct pollfd){ p->fd, POLLIN, 0 };
			ip = n++;
		}
		if (out[0] >= 0) {
			pf[n] = (struct pollfd){ out[0], POLLIN, 0 };
			io = n++;
		}
		if (err[0] >= 0) {
			pf[n] = (struct pollfd){ err[0], POLLIN, 0 };
			ie = n++;
		}
		if (sfd >= 0) {
			pf[n] = (struct pollfd){ sfd, POLLIN, 0 };
			is = n++;
		}
		if (in[1] >= 0 && q.n > q.off) {
			pf[n] = (struct pollfd){ in[1], POLLOUT, 0 };
			ii = n++;
		}
		if (poll(pf, (nfds_t)n, sfd >= 0 && !hup_since ? -1 : 100) < 0 && errno != EINTR)
			break;
		if (ip >= 0 && pf[ip].revents) {
			int r = (pf[ip].revents & POLLIN) ? port_fill(p) : 0;
			if (r < 0) {
				p->host_gone = true;
				kill(-pid, SIGKILL);
			} else if (r == 0) {
				hup_since = now_ms();
			}
		}
		if (!p->host_gone)
			take_frames(p, sid, pid, &q, &in_eof);
		if (p->host_gone)
			in_eof = true;
		if (ii >= 0 && pf[ii].revents) {
			ssize_t w = write(in[1], q.d + q.off, q.n - q.off);
			if (w > 0)
				q.off += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR) {
				q.off = q.n;
				in_eof = true;
			}
		}
		if (in[1] >= 0 && in_eof && q.off >= q.n) {
			close(in[1]);
			in[1] = -1;
		}
		if (io >= 0 && pf[io].revents)
			forward_out(p, &out[0], PISB_VM_STDOUT, sid);
		if (ie >= 0 && pf[ie].revents)
			forward_out(p, &err[0], PISB_VM_STDERR, sid);
		if (is >= 0 && pf[is].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0) {
			}
		}
		{
			int st;
			if (waitpid(pid, &st, WNOHANG) == pid) {
				exited = true;
				code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			}
		}
	}
	if (in[1] >= 0)
		close(in[1]);
	if (sfd >= 0)
		close(sfd);
	free(q.d);
	/* the group may have members left: they go with the command */
	kill(-pid, SIGKILL);
	{
		char path[64];
		snprintf(path, sizeof(path), "/run/pisb/pty.%d", (int)pid);
		unlink(path);
	}
	if (!p->host_gone) {
		unsigned char c[4];
		pisb_vm_put32(c, (uint32_t)code);
		send_frame(p, PISB_VM_EXIT, sid, c, 4);
	}
}


/* ---- the net port: TCP streams to 127.0.0.1 in the guest (vm_mux.h) ---- */

static void loopback(struct sockaddr_in *a, unsigned port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->sin_port = htons((uint16_t)port);
}

/* NOPEN: a non-blocking connect to 127.0.0.1:port; the guest has no other
 * address, and the host names only a port */
static int net_connect(void *arg, unsigned port, bool *pending)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	(void)arg;
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	loopback(&a, port);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (errno != EINPROGRESS) {
			close(fd);
			return -1;
		}
		*pending = true;
	}
	return fd;
}

/* With network.allowedHosts (pisb.egress=1): the proxy's port in the
 * guest, 127.0.0.1:3128 (HTTP(S)_PROXY of every command); each connection
 * becomes a stream the host hands to its egress proxy, which checks the
 * allowlist (nothing is decided here).  -1 without. */
static int egress_listen(void)
{
	const char *on = cmdline_arg("egress");
	struct sockaddr_in a;
	int fd, one = 1;

	if (!on || strcmp(on, "1"))
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	loopback(&a, PISB_VM_EGRESS_PORT);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 512) < 0) {
		logmsg("egress: listen on 127.0.0.1:%d: %s", PISB_VM_EGRESS_PORT, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void egress_accept(struct pisb_mux *m, int lfd)
{
	for (int k = 0; k < 16 && pisb_mux_opened(m) < PISB_MUX_GUEST_OPEN_MAX && !pisb_mux_full(m); k++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;

		if (fd < 0)
			return;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (!pisb_mux_open(m, fd, PISB_VM_EGRESS_PORT, NULL, 0))
			close(fd);
	}
}

static void __attribute__((noreturn)) net_serve(int fd)
{
	static struct pisb_mux m;
	static struct pollfd p[PISB_MUX_MAX_STREAMS + 2];
	bool said = false;
	int lfd = egress_listen();

	signal(SIGPIPE, SIG_IGN);
	pisb_mux_init(&m, fd, false);
	m.connect = net_connect;
	for (;;) {
		int n = pisb_mux_pollfds(&m, p, PISB_MUX_MAX_STREAMS + 1), l = -1;
		if (!said) {
			/* a new server: the host drops streams of the one before */
			pisb_mux_hello(&m);
			said = true;
		}
		/* more wait in the backlog until a stream ends */
		if (lfd >= 0 && pisb_mux_opened(&m) < PISB_MUX_GUEST_OPEN_MAX && !pisb_mux_full(&m)) {
			l = n;
			p[n++] = (struct pollfd){ lfd, POLLIN, 0 };
		}
		if (poll(p, (nfds_t)n, -1) < 0)
			continue;
		if (pisb_mux_poll(&m, p, l >= 0 ? l : n) < 0) {
			/* no host connected (read gives 0 until one is): every
			 * stream is gone; look again shortly */
			said = false;
			sleep_ms(50);
			continue;
		}
		if (l >= 0 && (p[l].revents & POLLIN))
			egress_accept(&m, lfd);
	}
}

static void __attribute__((noreturn)) serve(int n)
{
	static struct port p;
	char dev[300];
	sigset_t chld, old;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigaddset(&chld, SIGIO);
	sigprocmask(SIG_BLOCK, &chld, &old);
	if (find_port(n, dev, sizeof(dev)) < 0)
		_exit(3);
	p.fd = open(dev, O_RDWR | O_CLOEXEC);
	if (p.fd < 0) {
		logmsg("open %s: %s", dev, strerror(errno));
		_exit(4);
	}
	if (n == PISB_VM_NET_PORT)
		net_serve(p.fd);
	p.service = n >= PISB_VM_SVC_PORT;
	/* a new host is served at once, not at the next poll */
	if (port_async(p.fd) < 0)
		logmsg("port %d: no SIGIO (%s): polling it", n, strerror(errno));
	for (;;) {
		int type;
		uint32_t sid, len;
		int64_t hup_since = 0;
		while (!frame_ready(&p, &type, &sid, &len)) {
			int r = port_fill(&p);
			if (r < 0)
				_exit(5);
			if (r == 0) {
				/* no host: what was half-read is stale, once the
				 * hang-up lasts (see session) */
				if (!hup_since)
					hup_since = now_ms();
				else if (now_ms() - hup_since > HUP_GRACE_MS)
					p.have = 0;
				port_wait(50);
			} else {
				hup_since = 0;
			}
		}
		p.host_gone = false;
		if (type == PISB_VM_PING) {
			send_frame(&p, PISB_VM_PONG, sid, PISB_VM_AGENT_VERSION, strlen(PISB_VM_AGENT_VERSION));
			frame_consume(&p, len);
		} else if (type == PISB_VM_POWEROFF) {
			send_frame(&p, PISB_VM_PONG, sid, "poweroff", 8);
			frame_consume(&p, len);
			poweroff();
		} else if (type == PISB_VM_EXEC && n > 0) {
			unsigned char *req = malloc(len ? len : 1);
			memcpy(req, p.buf + PISB_VM_HDR, len);
			frame_consume(&p, len);
			session(&p, sid, req, len, &old);
			free(req);
		} else {
			frame_consume(&p, len);
		}
	}
}

/* Stage 1 of the snapshot template: say so on the console (the host
 * saves the VM when it reads that line), then wait on port 0 for the
 * BOOT frame of a restore.  Its payload, "pisb.KEY=VALUE ..." as on a
 * kernel command line, holds this instance's arguments, the host's clock
 * (pisb.time=SEC.NSEC, set here: the snapshot's clock is old) and a seed
 * mixed into the kernel's random pool (every restore starts from the
 * same pool).  Returns the payload's length, copied to args. */
static size_t await_boot(char *args, size_t cap)
{
	static struct port p;
	char dev[300];
	sigset_t io;
	bool async;
	int i;

	for (i = 0; i < 200 && find_port(0, dev, sizeof(dev)) < 0; i++)
		sleep_ms(50);
	p.fd = open(dev, O_RDWR | O_CLOEXEC);
	if (p.fd < 0)
		die("open the lifecycle port");
	/* the BOOT frame wakes us (the host sends it before the restored
	 * VM runs); SIGIO blocked only until it came, never in stage 2 */
	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	sigprocmask(SIG_BLOCK, &io, NULL);
	async = port_async(p.fd) == 0;
	logmsg("snapshot point");
	for (;;) {
		int type;
		uint32_t sid, len;
		while (!frame_ready(&p, &type, &sid, &len)) {
			int r = port_fill(&p);
			if (r < 0)
				die("read the lifecycle port");
			if (r == 0) {
				if (async)
					port_wait(20);
				else
					sleep_ms(20);
			}
		}
		if (type != PISB_VM_BOOT || len == 0 || len >= cap) {
			frame_consume(&p, len);
			continue;
		}
		memcpy(args, p.buf + PISB_VM_HDR, len);
		args[len] = '\0';
		frame_consume(&p, len);
		send_frame(&p, PISB_VM_PONG, sid, "boot", 4);
		close(p.fd);
		{
			struct timespec none = { 0, 0 };
			while (sigtimedwait(&io, NULL, &none) > 0)
				;
			sigprocmask(SIG_UNBLOCK, &io, NULL);
		}
		for (char *t = args; t && *t;) {
			char *end = strchr(t, ' ');
			size_t n = end ? (size_t)(end - t) : strlen(t);
			if (!strncmp(t, "pisb.time=", 10)) {
				struct timespec ts = { 0, 0 };
				char num[32];
				snprintf(num, sizeof(num), "%.*s", (int)(n - 10), t + 10);
				ts.tv_sec = strtoll(num, &end, 10);
				if (*end == '.')
					ts.tv_nsec = strtol(end + 1, NULL, 10);
				if (clock_settime(CLOCK_REALTIME, &ts) < 0)
					logmsg("set the clock: %s", strerror(errno));
			} else if (!strncmp(t, "pisb.seed=", 10)) {
				int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
				if (fd < 0 || write_all(fd, t + 10, n - 10) < 0)
					logmsg("seed the random pool: %s", strerror(errno));
				if (fd >= 0)
					close(fd);
			}
			t = t[n] ? t + n + 1 : NULL;
		}
		return len;
	}
}

/* ---- idle reclaim ---- */

/* the default of pisb.reclaim (seconds; 0: never) */
#define RECLAIM_S 30
/* less clean page cache than this is not worth dropping */
#define RECLAIM_MIN_KB (32 * 1024)

/* The CPU time of every CPU so far (USER_HZ ticks): busy, and all. */
static bool cpu_ticks(unsigned long long *busy, unsigned long long *all)
{
	unsigned long long v[8] = { 0 };
	char line[256];
	FILE *f = fopen("/proc/stat", "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(line, sizeof(line), f) &&
	     sscanf(line, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		    &v[6], &v[7]) == 8;
	fclose(f);
	if (!ok)
		return false;
	*all = 0;
	for (int i = 0; i < 8; i++)
		*all += v[i];
	/* less idle only: a guest waiting for its disk (a sync, a read of
	 * what was just dropped) has work, and under a loaded host it waits
	 * for whole intervals (a make check saw the cache dropped twice in
	 * one command, between its write and its read) */
	*busy = *all - v[3];
	return true;
}

/* A /proc/meminfo line's value (kB), or 0. */
static long long meminfo_kb(const char *key)
{
	char line[128];
	long long kb = 0;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			kb = atoll(line + n + 1);
			break;
		}
	fclose(f);
	return kb;
}

/* The guest keeps what it ever read in its page cache, and QEMU keeps the
 * host memory under it: once a whole interval passed with the guest idle
 * (its CPUs under 10 % busy, time waiting for the disk counted as busy: an
 * idle guest under TCG shows 3-6 %, its timer interrupts' time landing as
 * system time), its clean page cache is
 * dropped and its free memory compacted, so that free page reporting (the
 * balloon, loaded just before) hands those pages back to the host.  A
 * niced child of PID 1. */
static void __attribute__((noreturn)) reclaimer(int interval_s)
{
	unsigned long long b0 = 0, t0 = 0, b1, t1;

	if (interval_s <= 0)
		_exit(0);
	cpu_ticks(&b0, &t0);
	for (;;) {
		sleep_ms(interval_s * 1000);
		if (!cpu_ticks(&b1, &t1))
			continue;
		bool idle = t1 > t0 && (b1 - b0) * 10 < t1 - t0;
		b0 = b1;
		t0 = t1;
		if (!idle || meminfo_kb("Cached") - meminfo_kb("Shmem") < RECLAIM_MIN_KB)
			continue;
		if (write_str("/proc/sys/vm/drop_caches", "1") < 0 ||
		    write_str("/proc/sys/vm/compact_memory", "1") < 0)
			logmsg("idle reclaim: %s", strerror(errno));
		cpu_ticks(&b0, &t0);   /* its own work is not the guest's */
	}
}

static void __attribute__((noreturn)) stage2(void)
{
	const char *name = cmdline_arg("name");
	pid_t servers[PISB_VM_PORTS];
	int i;

	if (name) {
		char line[80];
		int fd;
		sethostname(name, strlen(name));
		/* /etc/hostname: a file of /run bound over the image's (as a
		 * container runtime does), not a copy-up of /etc on the disk
		 * at every create; an image without one gets one written */
		snprintf(line, sizeof(line), "%s\n", name);
		fd = open("/run/pisb/hostname", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			write_all(fd, line, strlen(line));
			close(fd);
		}
		if (mount("/run/pisb/hostname", "/etc/hostname", NULL, MS_BIND, NULL) < 0) {
			fd = open("/etc/hostname", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (fd >= 0) {
				write_all(fd, line, strlen(line));
				close(fd);
			}
		}
	}
	/* /dev/shm: half the sandbox's memory (pisb.mem, MiB), whatever a
	 * restored guest has plugged in so far (vm.c); (cmdline_arg's
	 * answer lasts until its next call: name is used by now) */
	{
		const char *mem = cmdline_arg("mem");
		char opt[64] = "mode=1777";
		if (mem && atoi(mem) > 0)
			snprintf(opt, sizeof(opt), "mode=1777,size=%dm", atoi(mem) / 2);
		mkdirs("/dev/shm", 01777);
		mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opt);
	}
	{
		const char *ws = cmdline_arg("ws");
		if (ws && ws[0] == '/')
			mkdirs(ws, 0755);
	}
	pids_setup(cmdline_arg("pids"));
	{
		const char *dk = cmdline_arg("docker");
		docker_wanted = dk && !strcmp(dk, "1");
	}
	if (docker_wanted)
		docker_setup();
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	for (i = 0; i < 1000; i++) {
		if (find_ports() == PISB_VM_PORTS && access(port_dev[PISB_VM_PORTS - 1], F_OK) == 0)
			break;
		sleep_ms(10);
	}
	for (i = 0; i < PISB_VM_PORTS; i++)
		servers[i] = 0;
	logmsg("ready");
	for (;;) {
		int st;
		pid_t w;
		for (i = 0; i < PISB_VM_PORTS; i++) {
			if (servers[i] > 0)
				continue;
			servers[i] = fork();
			if (servers[i] == 0)
				serve(i);
			if (servers[i] < 0)
				servers[i] = 0;
			/* the host pings port 0, then runs its first command
			 * on port 1: theirs first (one vCPU runs a child only
			 * once the parent yields) */
			if (i <= 1)
				sched_yield();
		}
		/* once, beside the servers: the balloon (free page reporting)
		 * is after the boot snapshot's point (vm.c), and a niced
		 * child keeps its load out of the first commands' way; it
		 * stays, as the idle reclaimer */
		if (late_modules >= 0) {
			if (fork() == 0) {
				const char *rc = cmdline_arg("reclaim");
				setpriority(PRIO_PROCESS, 0, 19);
				if (docker_wanted)
					docker_modules(late_modules);
				load_modules(late_modules, "late");
				reclaimer(rc ? atoi(rc) : RECLAIM_S);
			}
			close(late_modules);
			late_modules = -1;
		}
		w = wait(&st);
		if (w < 0) {
			sleep_ms(100);
			continue;
		}
		for (i = 0; i < PISB_VM_PORTS; i++) {
			if (servers[i] == w) {
				servers[i] = 0;
				sleep_ms(200);
			}
		}
	}
}

int main(int argc, char **argv)
{
	/* the file verbs' guest side (agent_fs.c), run as a command */
	if (getpid() != 1 && argc >= 2 && strcmp(argv[1], "fs") == 0)
		return agent_fs_main(argc - 2, argv + 2);
	if (getpid() != 1) {
		fprintf(stderr, "pisb-agent: the guest side of pisb's vm driver; it runs as PID 1 inside the VM, never on the host\n");
		return 2;
	}
	if (access("/pisb-initramfs", F_OK) == 0)
		stage1();
	stage2();
}
