/* vm.c - the vm driver: assets, the initramfs, the disk, QEMU under a
 * host-side supervisor, create/start/stop/destroy (see vm.h).
 *
 * Ordering that matters:
 * - the caller of a boot holds op.lock and takes controller.lock, then
 *   forks the supervisor (detached, its own session) which keeps that
 *   lock for as long as QEMU lives; "running" is "controller.lock held".
 * - the agent's listening sockets are made before QEMU starts and passed
 *   to it by fd, so their paths are short and fixed whatever the state
 *   dir's length, and they stay 0600.
 * - KVM is tried first when /dev/kvm is usable; QEMU failing at once with
 *   it (nested virtualisation that does not work, say) means a second
 *   launch under TCG, and the reason is kept (inspect: vm.accelNote).
 */
#include "vm.h"
#include "vm_internal.h"
#include "vm_proto.h"
#include "config.h"
#include "err.h"
#include "lifecycle.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "opensandbox.h"
#include "proc.h"
#include "project.h"
#include "state.h"
#include "util.h"
#include "hostmask.h"
#include "fs.h"
#include "vm_fs.h"
#include "vm_net.h"

#include <dirent.h>
#include <sched.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define VM_BOOT_TIMEOUT_MS 180000
#define VM_KVM_GRACE_MS 2500
#define VM_KVM_BOOT_MS 60000
#define VM_VFS_SOCK "virtiofs.sock"
#define VM_VFS_TAG PISB_HOST_TAG
/* the kernel command line of cold boots (then the instance's arguments)
 * and of the boot snapshot's template */
/* init_on_alloc=0: the guest kernel does not zero each page it allocates
 * (Debian's default is on), which under TCG costs a vm preview ~10-15%
 * of its CPU (socket buffers, the port's buffers).  It hardens the guest
 * kernel against itself, not the host against the guest; the guest's
 * processes are all the one sandbox's */
#define VM_CMDLINE "console=ttyS0 panic=-1 quiet loglevel=4 tsc=reliable no_timer_check rdinit=/init init_on_alloc=0"
#define VM_SNAP_CMDLINE VM_CMDLINE " memhp_default_state=online pisb.snap=1"
/* a boot snapshot's guest has this much memory at its snapshot point; a
 * restore plugs the rest of the sandbox's memory in (virtio-mem), so that
 * QEMU reads and populates only this much when it restores */
#define VM_SNAP_BASE_MIB 256
/* the template's disk: what the disk's device holds until a restore puts
 * the instance's own there (a sparse file of 1 MiB, never mounted) */
#define VM_SNAP_DISK "placeholder.img"

static const char *const vm_modules[] = { "virtio_pci", "virtio_mmio", "virtio_blk",
	"virtio_console", "virtio_rng", "virtiofs", "overlay", NULL };
/* loaded before the snapshot's point when the kernel has it (else the
 * snapshot holds all of the sandbox's memory, VM_SNAP_BASE_MIB) */
#define VM_VMEM_MODULE "virtio_mem"
/* loaded after the boot snapshot's point (modules/late): the balloon's
 * free page reporting skips pages it reported before, so a guest that
 * reported before the snapshot would never hand back a restored copy's */
static const char *const vm_late_modules[] = { "virtio_balloon", NULL };
/* in the initramfs, loaded only by a guest with docker: true (before the
 * late ones): the daemon's bridge networks (docker_arg) */
static const char *const vm_docker_modules[] = { "bridge", "veth", NULL };

/* ---- what the host can honour ---- */

/* The key a size came from: resources.* when the file gave them, else
 * the profile (which may be the default). */
static const char *size_key(const struct pisb_config *cfg, const char *res)
{
	return cfg->resources_explicit ? res : "profile";
}

/* A VM cannot have more vCPUs than the host runs (TCG or KVM: the vCPU
 * threads would just share the host's cores, and an over-committed guest
 * under TCG does not finish booting), nor more memory than the host has.
 * Refused before anything is made or started. */
static int check_host_fit(const struct pisb_config *cfg, struct pisb_err *e)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct sysinfo si;

	if (ncpu > 0 && cfg->cpus > ncpu)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "%s: %d vCPUs asked for, but this host has %ld CPUs (a vm sandbox gets at most the host's CPU count)",
				    size_key(cfg, "resources.cpus"), cfg->cpus, ncpu);
	if (sysinfo(&si) == 0) {
		unsigned long long host_mib = (unsigned long long)si.totalram * si.mem_unit >> 20;
		if ((unsigned long long)cfg->memory_gib * 1024 > host_mib)
			return pisb_err_set(e, PISB_EXIT_USAGE,
					    "%s: %d GiB asked for, but this host has %llu MiB of memory in all",
					    size_key(cfg, "resources.memoryGiB"), cfg->memory_gib, host_mib);
	}
	return 0;
}

/* True when the CPU flags in /proc/cpuinfo include vmx or svm. */
static bool cpu_has_virt(void)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *line, *save = NULL;

	if (pisb_read_file_at(AT_FDCWD, "/proc/cpuinfo", &b, 4 << 20) < 0 || !b.s)
		return false;
	for (line = strtok_r(b.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "flags", 5))
			continue;
		return strstr(line, " vmx") || strstr(line, " svm");
	}
	return false;
}

bool pisb_vm_kvm_is_pvm(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0 && !cpu_has_virt();
}

/* A kernel built to run as a PVM guest says so in the config file beside
 * it (boot/config-VER for boot/vmlinuz-VER). */
static bool kernel_is_pvm_guest(const char *kernel)
{
	const char *base = strrchr(kernel, '/');
	_cleanup_free_ char *cfgp = NULL;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;

	base = base ? base + 1 : kernel;
	if (!pisb_str_starts(base, "vmlinuz-"))
		return false;
	cfgp = xasprintf("%.*sconfig-%s", (int)(base - kernel), kernel, base + 8);
	if (pisb_read_file_at(AT_FDCWD, cfgp, &b, 16 << 20) < 0 || !b.s)
		return false;
	return strstr(b.s, "\nCONFIG_PVM_GUEST=y\n") != NULL;
}

/* ---- assets ---- */

struct vm_assets {
	char *kernel, *modules, *qemu, *agent, *virtiofsd, *mke2fs, *qemu_img;
};

static void assets_release(struct vm_assets *a)
{
	free(a->kernel);
	free(a->modules);
	free(a->qemu);
	free(a->agent);
	free(a->virtiofsd);
	free(a->mke2fs);
	free(a->qemu_img);
	memset(a, 0, sizeof(*a));
}

static bool is_dir(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && access(p, R_OK) == 0;
}

/* The modules dir for kernel .../boot/vmlinuz-VER. */
static char *modules_for(const char *kernel)
{
	const char *base = strrchr(kernel, '/'), *env = getenv("PISB_VM_MODULES");
	char *dir, *cand;

	if (env && *env)
		return xstrdup(env);
	base = base ? base + 1 : kernel;
	if (!pisb_str_starts(base, "vmlinuz-"))
		return NULL;
	dir = xstrndup(kernel, (size_t)(base - kernel));   /* ".../boot/" */
	cand = xasprintf("%s../lib/modules/%s", dir, base + 8);
	free(dir);
	if (is_dir(cand))
		return cand;
	free(cand);
	cand = xasprintf("/lib/modules/%s", base + 8);
	if (is_dir(cand))
		return cand;
	free(cand);
	return NULL;
}

/* The newest boot/vmlinuz-VER under dir that has its lib/modules/VER. */
static char *cached_kernel(const char *dir)
{
	_cleanup_free_ char *boot = xasprintf("%s/boot", dir);
	DIR *d = opendir(boot);
	struct dirent *de;
	char *best = NULL;

	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		_cleanup_free_ char *mods = NULL, *k = NULL;
		if (!pisb_str_starts(de->d_name, "vmlinuz-"))
			continue;
		mods = xasprintf("%s/lib/modules/%s", dir, de->d_name + 8);
		k = xasprintf("%s/%s", boot, de->d_name);
		if (!is_dir(mods) || !is_file(k))
			continue;
		if (!best || strverscmp(strrchr(best, '/') + 1, de->d_name) < 0) {
			free(best);
			best = PISB_STEAL(k);
		}
	}
	closedir(d);
	return best;
}

static int find_kernel(struct vm_assets *a, struct pisb_err *e)
{
	const char *env = getenv("PISB_VM_KERNEL");
	struct utsname u;

	if (env && *env) {
		if (!is_file(env))
			return pisb_err_set(e, PISB_EXIT_BACKEND, "PISB_VM_KERNEL '%s': not a readable file", env);
		a->kernel = xstrdup(env);
		a->modules = modules_for(env);
		if (!a->modules)
			return pisb_err_set(e, PISB_EXIT_BACKEND,
					    "PISB_VM_KERNEL '%s': no module tree found for it (set PISB_VM_MODULES=/lib/modules/VERSION)",
					    env);
		return 0;
	}
	if (uname(&u) == 0) {
		_cleanup_free_ char *k = xasprintf("/boot/vmlinuz-%s", u.release);
		_cleanup_free_ char *m = xasprintf("/lib/modules/%s", u.release);
		if (is_file(k) && is_dir(m)) {
			a->kernel = PISB_STEAL(k);
			a->modules = PISB_STEAL(m);
			return 0;
		}
	}
	{
		const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
		const char *pc = getenv("PISB_VM_CACHE");
		char *dirs[4] = { pc && *pc ? xstrdup(pc) : NULL,
				  xdg && *xdg ? xasprintf("%s/pisb/vm", xdg) : NULL,
				  home && *home ? xasprintf("%s/.cache/pisb/vm", home) : NULL,
				  xstrdup("/var/cache/pisb/vm") };
		for (size_t i = 0; i < 4 && !a->kernel; i++)
			if (dirs[i] && (a->kernel = cached_kernel(dirs[i])))
				a->modules = modules_for(a->kernel);
		for (size_t i = 0; i < 4; i++)
			free(dirs[i]);
		if (a->kernel && a->modules)
			return 0;
	}
	return pisb_err_set(e, PISB_EXIT_BACKEND,
			    "no guest kernel for the vm driver: set PISB_VM_KERNEL=/path/to/vmlinuz, or run 'make vm-kernel' (extracts Debian's linux-image-cloud-amd64 into /var/cache/pisb/vm, or ~/.cache/pisb/vm when not root)");
}

/* A static ELF has no PT_INTERP. */
static bool elf_static(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;

	if (fd < 0 || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64)
		return false;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (size_t)i * eh.e_phentsize)) != sizeof(ph))
			return false;
		if (ph.p_type == PT_INTERP)
			return false;
	}
	return true;
}

/* need_mke2fs: a new disk; need_qemu_img: a template's copy */
static int find_assets(struct vm_assets *a, bool need_mke2fs, bool need_qemu_img, struct pisb_err *e)
{
	const char *q = getenv("PISB_VM_QEMU"), *vfs = getenv("PISB_VM_VIRTIOFSD");
	char agent[4096];

	memset(a, 0, sizeof(*a));
	a->qemu = q && *q ? xstrdup(q) : pisb_find_tool("qemu-system-x86_64");
	if (!a->qemu || access(a->qemu, X_OK) < 0)
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "the vm driver needs QEMU: qemu-system-x86_64 is not on PATH (install qemu-system-x86); nothing runs on the host instead");
	if (find_kernel(a, e) < 0)
		return -1;
	if (pisb_find_binary("pisb-agent", agent, sizeof(agent), e) < 0)
		return pisb_err_prefix(e, "the guest agent (build it with make)");
	a->agent = xstrdup(agent);
	if (!elf_static(a->agent))
		return pisb_err_set(e, PISB_EXIT_BACKEND, "guest agent '%s' is not a static binary", a->agent);
	a->virtiofsd = xstrdup(vfs && *vfs ? vfs : "/usr/lib/qemu/virtiofsd");
	if (access(a->virtiofsd, X_OK) < 0)
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "the vm driver shares the host's userland with virtiofsd: '%s' is missing (install qemu-system-common, or set PISB_VM_VIRTIOFSD)",
				    a->virtiofsd);
	if (geteuid() != 0)
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "the vm driver needs root: virtiofsd (the host's read-only userland for the guest) runs as root in a mount namespace of its own");
	if (need_mke2fs && !(a->mke2fs = pisb_find_tool("mke2fs")))
		return pisb_err_set(e, PISB_EXIT_BACKEND, "the vm driver needs mke2fs for the guest's disk (install e2fsprogs)");
	if (need_qemu_img && !(a->qemu_img = pisb_find_tool("qemu-img")))
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "the vm driver needs qemu-img for a template's copy-on-write disk (install qemu-utils)");
	return 0;
}

/* ---- kernel modules ---- */

static void norm(char *s)
{
	for (; *s; s++)
		if (*s == '-')
			*s = '_';
}

/* name -> path (relative to the modules dir) of every *.ko under kernel/ */
static void scan_modules(const char *root, const char *rel, struct pisb_strv *names,
			 struct pisb_strv *paths)
{
	_cleanup_free_ char *full = xasprintf("%s/%s", root, rel);
	DIR *d = opendir(full);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		_cleanup_free_ char *r = NULL;
		if (de->d_name[0] == '.')
			continue;
		r = xasprintf("%s/%s", rel, de->d_name);
		if (de->d_type == DT_DIR) {
			scan_modules(root, r, names, paths);
		} else if (pisb_str_ends(de->d_name, ".ko")) {
			char *n = xstrndup(de->d_name, strlen(de->d_name) - 3);
			norm(n);
			pisb_strv_push(names, n);
			pisb_strv_push(paths, r);
			free(n);
		}
	}
	closedir(d);
}

static bool builtin_module(const char *moddir, const char *name)
{
	_cleanup_free_ char *p = xasprintf("%s/modules.builtin", moddir);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *line, *save = NULL;

	if (pisb_read_file_at(AT_FDCWD, p, &b, 8 << 20) < 0 || !b.s)
		return false;
	for (line = strtok_r(b.s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *base = strrchr(line, '/');
		base = base ? base + 1 : line;
		if (pisb_str_ends(base, ".ko"))
			base[strlen(base) - 3] = '\0';
		norm(base);
		if (!strcmp(base, name))
			return true;
	}
	return false;
}

static int add_module(const char *moddir, const char *name, const struct pisb_strv *names,
		      const struct pisb_strv *paths, struct pisb_strv *order, int depth,
		      struct pisb_err *e)
{
	_cleanup_free_ char *n = xstrdup(name);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	_cleanup_free_ char *full = NULL;
	size_t i;

	norm(n);
	if (depth > 16)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "kernel module dependencies too deep at '%s'", n);
	for (i = 0; i < names->n && strcmp(names->v[i], n); i++) {
	}
	if (i == names->n) {
		if (builtin_module(moddir, n))
			return 0;
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "guest kernel modules '%s': no module '%s' (the guest needs virtio console, block and PCI/MMIO)",
				    moddir, n);
	}
	for (size_t j = 0; j < order->n; j++)
		if (!strcmp(order->v[j], paths->v[i]))
			return 0;
	full = xasprintf("%s/%s", moddir, paths->v[i]);
	if (pisb_read_file_at(AT_FDCWD, full, &b, 64 << 20) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "read kernel module '%s'", full);
	{
		/* modinfo's "depends=a,b" string in the .modinfo section */
		const char key[] = "\0depends=";
		const char *p = memmem(b.s, b.len, key, sizeof(key) - 1);
		if (p) {
			_cleanup_free_ char *deps = xstrdup(p + sizeof(key) - 1);
			char *save = NULL;
			for (char *d = strtok_r(deps, ",", &save); d; d = strtok_r(NULL, ",", &save))
				if (*d && add_module(moddir, d, names, paths, order, depth + 1, e) < 0)
					return -1;
		}
	}
	pisb_strv_push(order, paths->v[i]);
	return 0;
}

/* ---- the initramfs (cpio, newc format) ---- */

static void cpio_add(struct pisb_buf *b, unsigned *ino, const char *name, unsigned mode,
		     const void *data, size_t size, unsigned rmaj, unsigned rmin)
{
	size_t nl = strlen(name) + 1;
	static const char zero[4] = { 0 };

	pisb_buf_addf(b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		      ++*ino, mode, 0u, 0u, (mode & S_IFMT) == S_IFDIR ? 2u : 1u, 0u,
		      (unsigned)size, 0u, 0u, rmaj, rmin, (unsigned)nl, 0u);
	pisb_buf_add(b, name, nl);
	pisb_buf_add(b, zero, (4 - (110 + nl) % 4) % 4);
	if (size)
		pisb_buf_add(b, data, size);
	pisb_buf_add(b, zero, (4 - size % 4) % 4);
}

static int cpio_file(struct pisb_buf *b, unsigned *ino, const char *name, const char *src,
		     struct pisb_err *e)
{
	_cleanup_buf_ struct pisb_buf f = PISB_BUF_INIT;

	if (pisb_read_file_at(AT_FDCWD, src, &f, 256 << 20) < 0)
		return pisb_err_sys(e, PISB_EXIT_BACKEND, "read '%s'", src);
	cpio_add(b, ino, name, S_IFREG | 0755, f.s, f.len, 0, 0);
	return 0;
}

/* The initramfs in dirfd/initrd.cpio; *hash (FNV-1a of its bytes) is one
 * of the boot snapshot's inputs; *vmem: it loads virtio-mem (or the
 * kernel has it built in). */
static int build_initrd(int idir, const struct vm_assets *a, uint64_t *hash, bool *vmem, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv names = PISB_STRV_INIT, paths = PISB_STRV_INIT,
					order = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT, list = PISB_BUF_INIT;
	static const char *const dirs[] = { "dev", "proc", "sys", "modules", "newroot", "disk", "lower", NULL };
	static const char *const lists[3] = { "order", "late", "docker" };
	unsigned ino = 0;
	size_t ends[3];
	char *dst_list;

	scan_modules(a->modules, "kernel", &names, &paths);
	for (size_t i = 0; vm_modules[i]; i++)
		if (add_module(a->modules, vm_modules[i], &names, &paths, &order, 0, e) < 0)
			return -1;
	{
		struct pisb_err ig = PISB_ERR_INIT;
		*vmem = add_module(a->modules, VM_VMEM_MODULE, &names, &paths, &order, 0, &ig) == 0;
	}
	ends[0] = order.n;
	for (size_t i = 0; vm_late_modules[i]; i++) {
		/* optional: a kernel without it keeps all its memory */
		struct pisb_err ig = PISB_ERR_INIT;
		add_module(a->modules, vm_late_modules[i], &names, &paths, &order, 0, &ig);
	}
	ends[1] = order.n;
	for (size_t i = 0; vm_docker_modules[i]; i++) {
		/* a kernel without them: docker: true's daemon says so */
		struct pisb_err ig = PISB_ERR_INIT;
		add_module(a->modules, vm_docker_modules[i], &names, &paths, &order, 0, &ig);
	}
	ends[2] = order.n;
	cpio_add(&b, &ino, ".", S_IFDIR | 0755, NULL, 0, 0, 0);
	for (size_t i = 0; dirs[i]; i++)
		cpio_add(&b, &ino, dirs[i], S_IFDIR | 0755, NULL, 0, 0, 0);
	cpio_add(&b, &ino, "dev/console", S_IFCHR | 0600, NULL, 0, 5, 1);
	cpio_add(&b, &ino, "pisb-initramfs", S_IFREG | 0644, NULL, 0, 0, 0);
	if (cpio_file(&b, &ino, "init", a->agent, e) < 0)
		return -1;
	/* the files, then each list (order, late, docker: the agent loads
	 * each at its own point) once its modules are in */
	for (size_t i = 0, l = 0; l < 3; l++) {
		for (; i < ends[l]; i++) {
			_cleanup_free_ char *src = xasprintf("%s/%s", a->modules, order.v[i]);
			_cleanup_free_ char *dst = NULL;
			const char *base = strrchr(order.v[i], '/');
			base = base ? base + 1 : order.v[i];
			dst = xasprintf("modules/%s", base);
			if (cpio_file(&b, &ino, dst, src, e) < 0)
				return -1;
			pisb_buf_addf(&list, "%s\n", base);
		}
		dst_list = xasprintf("modules/%s", lists[l]);
		cpio_add(&b, &ino, dst_list, S_IFREG | 0644, list.s, list.len, 0, 0);
		free(dst_list);
		pisb_buf_reset(&list);
	}
	cpio_add(&b, &ino, "TRAILER!!!", 0, NULL, 0, 0, 0);
	*hash = 1469598103934665603ull;
	for (size_t i = 0; i < b.len; i++)
		*hash = (*hash ^ (unsigned char)b.s[i]) * 1099511628211ull;
	return pisb_atomic_write(idir, "initrd.cpio", b.s, b.len, 0600, e);
}

/* ---- status ---- */

enum pisb_status pisb_vm_status(int idir, const struct pisb_runtime *rt)
{
	if (!pisb_lock_is_held(idir, "controller.lock")) {
		if (!rt->state[0] || !strcmp(rt->state, "stopped") || !strcmp(rt->state, "creating"))
			return PISB_ST_STOPPED;
		return PISB_ST_INTERRUPTED;
	}
	if (!strcmp(rt->state, "starting") || !strcmp(rt->state, "creating"))
		return PISB_ST_STARTING;
	if (!strcmp(rt->state, "stopping"))
		return PISB_ST_STOPPING;
	return PISB_ST_RUNNING;
}

static void mark(int idir, const char *state)
{
	struct pisb_runtime rt;
	struct pisb_err ig = PISB_ERR_INIT;

	if (pisb_runtime_load(idir, &rt, &ig) < 0)
		memset(&rt, 0, sizeof(rt));
	snprintf(rt.state, sizeof(rt.state), "%s", state);
	if (!strcmp(state, "stopped"))
		rt.stopped_at = pisb_now_ms() / 1000;
	pisb_runtime_save(idir, &rt, &ig);
	pisb_runtime_release(&rt);
}

char *pisb_vm_accel_note(struct pisb_state *st, const char *name)
{
	struct pisb_err ig = PISB_ERR_INIT;
	_cleanup_close_ int idir = pisb_instance_open(st, "instances", name, &ig);
	struct pisb_runtime rt;
	struct pisb_json j;
	char *note = NULL;

	if (idir < 0 || pisb_runtime_load(idir, &rt, &ig) < 0)
		return NULL;
	if (rt.extra_json && pisb_json_parse(&j, rt.extra_json, strlen(rt.extra_json), &ig) == 0) {
		char *bn = pisb_json_str(&j, pisb_json_get(&j, 0, "bootNote"));
		note = pisb_json_str(&j, pisb_json_get(&j, 0, "accelNote"));
		if (bn) {
			char *both = note ? xasprintf("%s; %s", note, bn) : xstrdup(bn);
			free(note);
			note = both;
			free(bn);
		}
		pisb_json_release(&j);
	}
	pisb_runtime_release(&rt);
	return note;
}

/* ---- booting: the supervisor ---- */

struct boot {
	const char *name;
	const struct pisb_config *cfg;
	struct vm_assets a;
	char *dir;                       /* the instance dir's path */
	int idir, ctl, report;
	int socks[PISB_VM_PORTS];
	int vfs_sock;                    /* virtiofsd's listening socket */
	int qmp_sock;                    /* QEMU's QMP (restores only) */
	const char *state_path;          /* for the boot snapshot */
	uint64_t initrd_hash;
	bool vmem;                       /* the guest has virtio-mem (build_initrd) */
	bool restored;                   /* booted from the boot snapshot */
	bool overlay;                    /* the disk is disk.qcow2, on a template's */
	bool prep;                       /* a template being prepared (staging/) */
	bool image;                      /* image: PATH: root.img is the lower, no share */
	struct vm_project proj;          /* project.mode bind/bind-ro (vm_project.c) */
	int proj_sock;                   /* its virtiofsd's listening socket */
	char *boot_note;                 /* how the snapshot was, or why not */
};

/* A boot snapshot of VM_SNAP_BASE_MIB, the rest plugged at restore */
static bool use_vmem(const struct boot *bt)
{
	return bt->vmem && bt->cfg->memory_gib * 1024 > VM_SNAP_BASE_MIB;
}

enum vm_mode {
	VM_COLD,                         /* boot the kernel */
	VM_TEMPLATE,                     /* boot the snapshot's template */
	VM_RESTORE,                      /* restore the snapshot */
};

static char *last_line_of(int idir, const char *file)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *end, *start;

	if (pisb_read_file_at(idir, file, &b, 1 << 20) < 0 || !b.len)
		return xstrdup("no message");
	end = b.s + b.len;
	while (end > b.s && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		end--;
	start = end;
	while (start > b.s && start[-1] != '\n')
		start--;
	/* the guest writes console.log: no control character of its
	 * reaches a message */
	for (char *c = start; c < end; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return xstrndup(start, (size_t)(end - start));
}

/* What the guest's console says of a failed boot: the agent's own fatal
 * line when it wrote one (it reboots right after, so the last line is the
 * kernel's "Restarting system"), else the last line. */
static char *console_reason(int idir)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *at = NULL, *end;

	if (pisb_read_file_at(idir, "console.log", &b, 1 << 20) < 0 || !b.len)
		return xstrdup("no message");
	for (char *p = strstr(b.s, "pisb-agent: fatal: "); p; p = strstr(p + 1, "pisb-agent: fatal: "))
		at = p;
	if (!at)
		return last_line_of(idir, "console.log");
	end = at + strcspn(at, "\r\n");
	for (char *c = at; c < end; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return xstrndup(at, (size_t)(end - at));
}

/* Why QEMU failed: its first "error" line since the last launch. */
static char *qemu_reason(int idir)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char *from, *line, *save = NULL;

	if (pisb_read_file_at(idir, "qemu.log", &b, 1 << 20) < 0 || !b.len)
		return xstrdup("no message");
	from = b.s;
	for (char *p = strstr(b.s, "pisb: starting"); p; p = strstr(p + 1, "pisb: starting"))
		from = p;
	for (line = strtok_r(from, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, "error"))
			return xstrdup(line);
	return last_line_of(idir, "qemu.log");
}

/* q35, with KVM too: microvm could not be validated on the machine this
 * was written on (KVM unusable there; under TCG microvm did not even boot
 * a trivial initramfs in 25 s, where q35 takes 5 s).
 * PISB_VM_MACHINE=microvm opts in (virtio-mmio devices). */
static bool use_microvm(bool kvm)
{
	const char *m = getenv("PISB_VM_MACHINE");

	(void)kvm;
	return m && !strcmp(m, "microvm");
}

/* The agent's argument for a bound project (vm_project.c), or "". */
static const char *proj_arg(const struct boot *bt)
{
	return !bt->proj.dir ? "" : bt->proj.ro ? " pisb.proj=ro" : " pisb.proj=rw";
}

/* network.allowedHosts: the agent listens on the guest's 127.0.0.1:3128
 * for the host's egress proxy (vm_net.c) */
static const char *egress_arg(const struct boot *bt)
{
	return bt->cfg->nallowed_hosts ? " pisb.egress=1" : "";
}

/* docker: true: the agent loads modules/docker (the bridge for the
 * daemon's networks), mounts cgroup2 with the controllers runc needs and
 * binds the disk's docker/ at /var/lib/docker (overlay2 wants an upper
 * directory on ext4, not on the root's overlay) */
static const char *docker_arg(const struct boot *bt)
{
	return bt->cfg->docker ? " pisb.docker=1" : "";
}

/* PISB_VM_RECLAIM_S: how long the guest must have been idle before its
 * agent drops its clean page cache (the agent's default, 30 s, else; 0
 * never) */
static const char *reclaim_arg(void)
{
	static char a[40];
	const char *v = getenv("PISB_VM_RECLAIM_S");

	if (!v || !*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 6)
		return "";
	snprintf(a, sizeof(a), " pisb.reclaim=%s", v);
	return a;
}

/* The argv of QEMU.  A template and its restores differ only in the
 * chardevs' backends, the disk's backend and -incoming: the devices,
 * memory and ROMs of a restore must be the template's.  The disk's
 * device is there from the template's boot on (a placeholder behind it,
 * VM_SNAP_DISK; a restore puts the instance's disk there and resizes it,
 * restore_finish), which spares the guest a PCIe hot-plug (the port's
 * link takes 120 ms to come up); the shares are not there (vhost-user-fs
 * cannot migrate: they are hot-plugged into PCIe root ports after the
 * restore, see restore_finish), and the guest's memory is
 * VM_SNAP_BASE_MIB with the rest on a virtio-mem device that the restore
 * plugs: QEMU 7.2 reads and populates every page of RAM a restore loads
 * (about 1.3 s a GiB under TCG here), and none of a virtio-mem device's
 * unplugged memory. */
static void qemu_argv(const struct boot *bt, bool kvm, enum vm_mode mode, int qmp_fd, int in_fd,
		      struct pisb_strv *av)
{
	bool micro = use_microvm(kvm);
	const char *bus = micro ? "device" : "pci";   /* microvm: virtio-mmio */

	pisb_strv_push(av, bt->a.qemu);
	pisb_strv_push(av, "-nodefaults");
	pisb_strv_push(av, "-no-user-config");
	pisb_strv_push(av, "-no-reboot");
	pisb_strv_push(av, "-display");
	pisb_strv_push(av, "none");
	pisb_strv_push(av, "-nic");
	pisb_strv_push(av, "none");
	pisb_strv_push(av, "-name");
	pisb_strv_pushf(av, "pisb-%s", bt->name);
	pisb_strv_push(av, "-machine");
	pisb_strv_push(av, micro ? "microvm,isa-serial=on,auto-kernel-cmdline=on,memory-backend=mem" : "q35,memory-backend=mem");
	pisb_strv_push(av, "-accel");
	pisb_strv_push(av, kvm ? "kvm" : "tcg");
	pisb_strv_push(av, "-cpu");
	/* TCG runs rep movsb/stosb a byte per translated block: without
	 * ERMS the guest's kernel copies and clears with rep movsq and its
	 * libc with SSE (copy_to_user 380 MB/s -> 1.3 GB/s here, a vm
	 * preview's throughput ~2.4x) */
	pisb_strv_push(av, kvm ? "host" : "max,erms=off");
	/* vhost-user (virtiofsd) maps the guest's memory: shared memfd */
	if (mode == VM_COLD || micro || !use_vmem(bt)) {
		pisb_strv_push(av, "-m");
		pisb_strv_pushf(av, "%dM", bt->cfg->memory_gib * 1024);
		pisb_strv_push(av, "-object");
		pisb_strv_pushf(av, "memory-backend-memfd,id=mem,size=%dM,share=on", bt->cfg->memory_gib * 1024);
	} else {
		/* the snapshot's: VM_SNAP_BASE_MIB, and the rest on a
		 * virtio-mem device that a restore plugs (restore_finish) */
		pisb_strv_push(av, "-m");
		pisb_strv_pushf(av, "%dM,maxmem=%dM", VM_SNAP_BASE_MIB, bt->cfg->memory_gib * 1024);
		pisb_strv_push(av, "-object");
		pisb_strv_pushf(av, "memory-backend-memfd,id=mem,size=%dM,share=on", VM_SNAP_BASE_MIB);
		pisb_strv_push(av, "-object");
		pisb_strv_pushf(av, "memory-backend-memfd,id=vmem,size=%dM,share=on",
				bt->cfg->memory_gib * 1024 - VM_SNAP_BASE_MIB);
		pisb_strv_push(av, "-device");
		pisb_strv_push(av, "virtio-mem-pci,id=vmem0,memdev=vmem,requested-size=0");
	}
	pisb_strv_push(av, "-smp");
	pisb_strv_pushf(av, "%d", bt->cfg->cpus);
	pisb_strv_push(av, "-kernel");
	pisb_strv_push(av, bt->a.kernel);
	pisb_strv_push(av, "-initrd");
	pisb_strv_push(av, "initrd.cpio");
	pisb_strv_push(av, "-append");
	/* tsc=reliable no_timer_check: no clocksource watchdog or timer
	 * check at boot (cuts a cold boot under TCG, see issue #14) */
	if (mode == VM_COLD)
		pisb_strv_pushf(av, VM_CMDLINE " pisb.name=%s pisb.ws=%s pisb.pids=%d pisb.mem=%d%s%s%s%s%s",
				bt->name, bt->cfg->workspace, bt->cfg->pids, bt->cfg->memory_gib * 1024,
				bt->image ? " pisb.root=" PISB_VM_IMAGE_SERIAL : "", proj_arg(bt), egress_arg(bt),
				docker_arg(bt), reclaim_arg());
	else
		pisb_strv_push(av, VM_SNAP_CMDLINE);
	pisb_strv_push(av, "-chardev");
	pisb_strv_push(av, "file,id=con0,path=console.log");
	pisb_strv_push(av, "-serial");
	pisb_strv_push(av, "chardev:con0");
	if (mode == VM_COLD) {
		pisb_strv_push(av, "-drive");
		pisb_strv_pushf(av, "file=%s,if=none,id=disk0,cache=writeback,discard=unmap",
				bt->overlay ? "disk.qcow2,format=qcow2" : "disk.img,format=raw");
		pisb_strv_push(av, "-device");
		pisb_strv_pushf(av, "virtio-blk-%s,drive=disk0", bus);
		/* image: PATH: the rootfs image, read-only (vm_image.c); the
		 * agent finds it by its serial */
		if (bt->image) {
			pisb_strv_push(av, "-drive");
			pisb_strv_push(av, "file=root.img,format=raw,if=none,id=root0,readonly=on");
			pisb_strv_push(av, "-device");
			pisb_strv_pushf(av, "virtio-blk-%s,drive=root0,serial=" PISB_VM_IMAGE_SERIAL, bus);
		}
	} else {
		pisb_strv_push(av, "-blockdev");
		if (mode == VM_TEMPLATE)
			pisb_strv_push(av, "driver=raw,node-name=disk0,discard=unmap,file.driver=file,file.filename=" VM_SNAP_DISK);
		else
			pisb_strv_pushf(av, "driver=%s,node-name=disk0,discard=unmap,file.driver=file,file.filename=%s",
					bt->overlay ? "qcow2" : "raw", bt->overlay ? "disk.qcow2" : "disk.img");
		pisb_strv_push(av, "-device");
		pisb_strv_push(av, "pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1");
		pisb_strv_push(av, "-device");
		pisb_strv_push(av, "virtio-blk-pci,id=vda,drive=disk0,bus=rp1");
		/* the PCIe root ports' own (native) hot-plug: the guest finds
		 * a share ~150 ms after the restore under TCG, against ~300 ms
		 * through ACPI (its AML, interpreted), QEMU's default for q35 */
		pisb_strv_push(av, "-global");
		pisb_strv_push(av, "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off");
		pisb_strv_push(av, "-device");
		pisb_strv_push(av, "pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2");
		/* a bound project's share (restore_finish) */
		pisb_strv_push(av, "-device");
		pisb_strv_push(av, "pcie-root-port,id=rp3,bus=pcie.0,chassis=3,slot=3");
	}
	pisb_strv_push(av, "-object");
	pisb_strv_push(av, "rng-random,id=rng0,filename=/dev/urandom");
	pisb_strv_push(av, "-device");
	pisb_strv_pushf(av, "virtio-rng-%s,rng=rng0", bus);
	/* free page reporting: the guest hands back the pages it has free
	 * (QEMU punches them out of the memfd); a guest restored from the
	 * boot snapshot starts with all of its memory populated */
	pisb_strv_push(av, "-device");
	pisb_strv_pushf(av, "virtio-balloon-%s,free-page-reporting=on", bus);
	pisb_strv_push(av, "-device");
	/* (port 0 of the bus is a console's: ours are 1..) */
	pisb_strv_pushf(av, "virtio-serial-%s,id=vser0,max_ports=%d", bus, PISB_VM_PORTS + 1);
	for (int i = 0; i < PISB_VM_PORTS; i++) {
		pisb_strv_push(av, "-chardev");
		if (mode == VM_TEMPLATE)
			pisb_strv_pushf(av, "null,id=agent%d", i);
		else
			pisb_strv_pushf(av, "socket,id=agent%d,fd=%d,server=on,wait=off", i, bt->socks[i]);
		pisb_strv_push(av, "-device");
		pisb_strv_pushf(av, "virtserialport,bus=vser0.0,chardev=agent%d,name=" PISB_VM_PORT_PREFIX "%d", i, i);
	}
	/* the host's userland, read-only (virtiofsd, see launch_virtiofsd) */
	if (mode == VM_COLD) {
		if (!bt->image) {
			pisb_strv_push(av, "-chardev");
			pisb_strv_push(av, "socket,id=vfs0,path=" VM_VFS_SOCK);
			pisb_strv_push(av, "-device");
			pisb_strv_pushf(av, "vhost-user-fs-%s,chardev=vfs0,tag=" VM_VFS_TAG ",queue-size=1024", bus);
		}
		if (bt->proj.dir)
			vm_project_qemu_args(av, bus);
	} else {
		pisb_strv_push(av, "-chardev");
		pisb_strv_pushf(av, "socket,id=qmp,fd=%d,server=on,wait=off", qmp_fd);
		pisb_strv_push(av, "-mon");
		pisb_strv_push(av, "chardev=qmp,mode=control");
	}
	if (mode == VM_RESTORE) {
		pisb_strv_push(av, "-incoming");
		pisb_strv_pushf(av, "fd:%d", in_fd);
	}
	/* seccomp: no spawning, no privilege changes, no obsolete calls */
	pisb_strv_push(av, "-sandbox");
	pisb_strv_push(av, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
}

/* ---- the host's userland for the guest: virtiofsd, read-only ---- */

/* Bind src at dst, recursively (made read-only at the end, all at once). */
static int vfs_bind(const char *src, const char *dst)
{
	return mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
}

/* mkdir -p of path's parents (below base, which exists), mode 0755. */
static int vfs_parents(char *path, size_t base)
{
	for (char *c = path + base + 1; (c = strchr(c, '/')); c++) {
		*c = '\0';
		int r = mkdir(path, 0755);
		*c = '/';
		if (r < 0 && errno != EEXIST)
			return -1;
	}
	return 0;
}

/* /etc at dst: an overlay of the host's /etc under an upper layer that
 * holds the masked paths of hostmask.h (an empty file, an empty opaque
 * directory), on a tmpfs mounted on <instance>/vfs-etc in this namespace
 * only.  The overlay finds those in its upper layer and never looks at
 * the host's.  (A cover bound onto the host's file would not last: when
 * the host replaces the file, as useradd and passwd do with a rename, the
 * kernel drops the mounts on it in every other namespace.) */
static int vfs_etc(const char *dir, const char *dst)
{
	char up[4000], p[4096], opts[8400];
	size_t n;
	int fd;

	snprintf(up, sizeof(up), "%s/vfs-etc", dir);
	if ((mkdir(up, 0700) < 0 && errno != EEXIST) ||
	    mount("tmpfs", up, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k") < 0)
		return -1;
	snprintf(opts, sizeof(opts), "lowerdir=/etc,upperdir=%s/u,workdir=%s/w", up, up);
	snprintf(p, sizeof(p), "%s/w", up);
	if (mkdir(p, 0700) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/u", up);
	if (mkdir(p, 0755) < 0)
		return -1;
	n = strlen(p);
	for (int k = 0; k < 2; k++)
		for (int i = 0; (k ? pisb_host_masked_dirs : pisb_host_masked_files)[i]; i++) {
			const char *m = (k ? pisb_host_masked_dirs : pisb_host_masked_files)[i];
			if (strncmp(m, "/etc/", 5))
				continue;
			snprintf(p + n, sizeof(p) - n, "%s", m + 4);
			if (vfs_parents(p, n) < 0)
				return -1;
			if (k) {
				if (mkdir(p, 0700) < 0 || setxattr(p, "trusted.overlay.opaque", "y", 1, 0) < 0)
					return -1;
			} else {
				fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
				if (fd < 0)
					return -1;
				close(fd);
			}
		}
	return mount("overlay", dst, "overlay", 0, opts);
}

/* The share, built under <instance>/share in a mount namespace that only
 * virtiofsd lives in: a tmpfs holding the host's system directories as
 * binds (merged-usr symlinks copied), /etc through vfs_etc's overlay,
 * the masked paths of hostmask.h outside /etc covered (an empty file, an
 * empty tmpfs), and then every
 * mount of it read-only.  virtiofsd has no read-only switch: the kernel
 * refuses its writes (EROFS), whatever the guest asks for — remounting
 * its virtiofs mount read-write included.  The covers are mounts of this
 * private namespace: nothing in the guest can reach, move or unmount
 * them.  Returns 0 in the child, where the caller execs virtiofsd. */
/* the host's directories in the guest's lower layer (image: host) */
static const char *const vfs_dirs[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", NULL };

/* Can a new sandbox's workspace hold anything but what pisb put there: a
 * project, an image's files, or the host's under one of vfs_dirs? */
static bool workspace_may_hold(const struct pisb_config *cfg, const char *project)
{
	const char *ws = cfg->workspace + 1;
	size_t n = strcspn(ws, "/");

	if (project || (cfg->image && strcmp(cfg->image, "host")))
		return true;
	for (size_t i = 0; vfs_dirs[i]; i++)
		if (strlen(vfs_dirs[i]) == n && !strncmp(ws, vfs_dirs[i], n))
			return true;
	return false;
}

static int vfs_build(const char *dir, const char *share)
{
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	char p[4096], link[4096];
	struct stat sb;
	int fd;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	if (mount("tmpfs", share, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
		return -1;
	for (int i = 0; vfs_dirs[i]; i++) {
		char host[64];
		ssize_t n;
		snprintf(host, sizeof(host), "/%s", vfs_dirs[i]);
		snprintf(p, sizeof(p), "%s/%s", share, vfs_dirs[i]);
		if (lstat(host, &sb) < 0)
			continue;
		if (S_ISLNK(sb.st_mode)) {
			n = readlink(host, link, sizeof(link) - 1);
			if (n < 0)
				return -1;
			link[n] = '\0';
			if (symlink(link, p) < 0)
				return -1;
		} else if (S_ISDIR(sb.st_mode)) {
			if (mkdir(p, 0755) < 0)
				return -1;
			if (!strcmp(vfs_dirs[i], "etc") ? vfs_etc(dir, p) < 0 : vfs_bind(host, p) < 0)
				return -1;
		}
	}
	/* the covers: an empty file (unlinked once bound) and empty tmpfs */
	snprintf(link, sizeof(link), "%s/.empty", share);
	fd = open(link, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	close(fd);
	for (int i = 0; pisb_host_masked_files[i]; i++) {
		if (!strncmp(pisb_host_masked_files[i], "/etc/", 5))
			continue;   /* in vfs_etc's upper layer */
		snprintf(p, sizeof(p), "%s%s", share, pisb_host_masked_files[i]);
		if (lstat(p, &sb) == 0 && mount(link, p, NULL, MS_BIND, NULL) < 0)
			return -1;
	}
	unlink(link);
	for (int i = 0; pisb_host_masked_dirs[i]; i++) {
		if (!strncmp(pisb_host_masked_dirs[i], "/etc/", 5))
			continue;
		snprintf(p, sizeof(p), "%s%s", share, pisb_host_masked_dirs[i]);
		if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode) &&
		    mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=4k") < 0)
			return -1;
	}
	if (syscall(SYS_mount_setattr, AT_FDCWD, share, AT_RECURSIVE, &ro, sizeof(ro)) < 0)
		return -1;
	return 0;
}

/* virtiofsd on the listening socket bt->vfs_sock, serving the share. */
pid_t vm_virtiofsd(const char *virtiofsd, int idir, const char *logname, int sock, const char *source,
		   bool project, int (*prep)(void *arg, struct pisb_err *e), void *arg)
{
	pid_t parent = getpid(), pid;
	int log = openat(idir, logname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);

	pid = fork();
	if (pid == 0) {
		struct pisb_err e = PISB_ERR_INIT;
		_cleanup_free_ char *src = xasprintf("source=%s", source);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		dup2(null, 0);
		if (log >= 0) {
			dup2(log, 1);
			dup2(log, 2);
		}
		if (prep(arg, &e) < 0) {
			dprintf(2, "pisb: %s\n", e.msg);
			_exit(1);
		}
		if (dup2(sock, 3) < 0)
			_exit(1);
		/* the host's userland: cache=always, so the guest keeps its
		 * page cache across opens (cache=auto drops it at every
		 * open: each exec of a dynamic program read ld.so and libc
		 * again, 170 ms of a `true` under TCG against 30 ms); a
		 * project: cache=auto, edits show both ways */
		char *argv[] = { (char *)virtiofsd, "--fd=3", "-o", src, "-o", project ? "cache=auto" : "cache=always",
				 "-o", "sandbox=namespace", "-o", "log_level=warn",
				 /* no thread pool: its threads call
				  * sched_getaffinity, which virtiofsd's own
				  * seccomp filter kills (SIGSYS) */
				 "--thread-pool-size=0",
				 /* a project: no device nodes, no file capabilities */
				 project ? "-o" : NULL, "modcaps=-mknod:-setfcap", NULL };
		execv(argv[0], argv);
		_exit(127);
	}
	if (log >= 0)
		close(log);
	return pid;
}

static int share_prep(void *arg, struct pisb_err *e)
{
	const struct boot *bt = arg;
	_cleanup_free_ char *share = xasprintf("%s/share", bt->dir);

	if (vfs_build(bt->dir, share) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "build the read-only share '%s'", share);
	return 0;
}

static pid_t launch_virtiofsd(const struct boot *bt)
{
	_cleanup_free_ char *share = xasprintf("%s/share", bt->dir);

	return vm_virtiofsd(bt->a.virtiofsd, bt->idir, "virtiofsd.log", bt->vfs_sock, share, false,
			    share_prep, (void *)bt);
}

static pid_t vfs_pid = -1;   /* the supervisor's virtiofsd */
static pid_t proj_pid = -1;  /* and its bound project's (vm_project.c) */

static void reap(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR) {
		}
	}
	*pid = -1;
}

static void stop_virtiofsd(void)
{
	reap(&vfs_pid);
	reap(&proj_pid);
}

/* QEMU in mode; its log is qemu.log in logdir, its working directory cwd
 * (NULL: the instance's).  qmp_fd and in_fd (-1: none) are passed on. */
static pid_t launch_qemu(const struct boot *bt, bool kvm, enum vm_mode mode, int logdir,
			 const char *cwd, int qmp_fd, int in_fd)
{
	static const char *const what[] = { "cold boot", "boot snapshot template", "boot snapshot restore" };
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	pid_t parent = getpid(), pid;
	int log = openat(logdir, "qemu.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	qemu_argv(bt, kvm, mode, qmp_fd, in_fd, &av);
	if (log >= 0) {
		_cleanup_buf_ struct pisb_buf line = PISB_BUF_INIT;
		pisb_buf_addf(&line, "pisb: starting QEMU with %s (%s, %s)\n", kvm ? "KVM" : "TCG",
			      use_microvm(kvm) ? "microvm" : "q35", what[mode]);
		pisb_write_all(log, line.s, line.len);
	}
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		/* QEMU goes with its supervisor */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || (cwd && chdir(cwd) < 0))
			_exit(1);
		dup2(null, 0);
		if (log >= 0) {
			dup2(log, 1);
			dup2(log, 2);
		}
		if (mode != VM_TEMPLATE)
			for (int i = 0; i < PISB_VM_PORTS; i++)
				fcntl(bt->socks[i], F_SETFD, 0);
		if (qmp_fd >= 0)
			fcntl(qmp_fd, F_SETFD, 0);
		if (in_fd >= 0)
			fcntl(in_fd, F_SETFD, 0);
		execv(av.v[0], av.v);
		_exit(127);
	}
	if (log >= 0)
		close(log);
	return pid;
}

/* QEMU, with a virtiofsd of its own (it serves one connection): a cold
 * boot, or (in_fd >= 0) a restore of the boot snapshot read from in_fd. */
static pid_t launch(const struct boot *bt, bool kvm, int in_fd)
{
	stop_virtiofsd();
	if (bt->image)   /* nothing of the host's is shared in */
		return launch_qemu(bt, kvm, VM_COLD, bt->idir, NULL, -1, -1);
	vfs_pid = launch_virtiofsd(bt);
	if (vfs_pid < 0)
		return -1;
	if (bt->proj.dir &&
	    (proj_pid = vm_project_virtiofsd(bt->a.virtiofsd, bt->dir, bt->idir, bt->proj_sock,
					     &bt->proj, &bt->cfg->project)) < 0)
		return -1;
	if (in_fd >= 0)
		return launch_qemu(bt, kvm, VM_RESTORE, bt->idir, NULL, bt->qmp_sock, in_fd);
	return launch_qemu(bt, kvm, VM_COLD, bt->idir, NULL, -1, -1);
}

/* ---- the boot snapshot ----
 *
 * Under <state>/vmsnap/<MiB>m-<cpus>c-<accel>/: state (QEMU's migration
 * stream of a template VM stopped in the agent's stage 1, before it has a
 * disk or a share, with VM_SNAP_BASE_MIB of memory plugged: nothing of
 * any instance is in it), inputs (what it was
 * made from: the format, kernel, QEMU binary, initramfs, memory, vCPUs,
 * accelerator), build.lock (held while it is checked or made; the
 * template's console.log and qemu.log are kept beside).  Made at the
 * first boot that finds no valid one; a restore that fails removes
 * inputs (the next boot makes it again) and boots cold.  Every failure
 * here means a cold boot with a note, never a failed boot.
 * PISB_VM_SNAPSHOT=0 turns it off. */

/* bump it when the template's devices change (qemu_argv) */
#define VM_SNAP_FORMAT "pisb-vmsnap 7"
#define VM_SNAP_LOCK_MS 600000
#define VM_QMP_MS 30000

/* QMP: one connection, one command at a time, a line per message. */
struct qmp {
	int fd;
	pid_t qemu;                      /* waited for: its exit ends a wait */
	char buf[65536];
	size_t have;
};

/* QEMU q has exited (not reaped: its status stays for waitpid). */
static bool exited(pid_t q)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	return q > 0 && waitid(P_PID, (id_t)q, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == q;
}

static void qmp_close(struct qmp *m)
{
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
}

/* The next message that is not an event into line (NUL-ended): 0, or
 * -1 (EOF, timeout, a line too long). */
static int qmp_reply(struct qmp *m, int timeout_ms, char **line)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;

	for (;;) {
		char *nl = memchr(m->buf, '\n', m->have);
		if (nl) {
			size_t n = (size_t)(nl - m->buf) + 1;
			bool event = memmem(m->buf, n, "\"event\"", 7) != NULL;
			if (!event)
				*line = xstrndup(m->buf, n - 1);
			memmove(m->buf, m->buf + n, m->have - n);
			m->have -= n;
			if (!event)
				return 0;
			continue;
		}
		if (m->have == sizeof(m->buf))
			return -1;
		int64_t left = deadline - pisb_mono_ms();
		struct pollfd pf = { m->fd, POLLIN, 0 };
		int pr;
		if (left <= 0 || exited(m->qemu))
			return -1;
		pr = poll(&pf, 1, left > 100 ? 100 : (int)left);
		if (pr < 0 && errno != EINTR)
			return -1;
		if (pr <= 0)
			continue;
		ssize_t r = read(m->fd, m->buf + m->have, sizeof(m->buf) - m->have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		m->have += (size_t)r;
	}
}

/* Run one command (JSON text), with pass_fd sent along (SCM_RIGHTS) when
 * >= 0.  0 and, when key, return.KEY's string in *val; -1 and *why. */
static int qmp_cmd(struct qmp *m, const char *cmd, int pass_fd, const char *key, char **val,
		   char **why)
{
	_cleanup_free_ char *line = NULL;
	_cleanup_free_ char *msg = xasprintf("%s\n", cmd);
	struct pisb_json j;
	struct pisb_err ig = PISB_ERR_INIT;
	int err, ret = -1;

	if (pass_fd >= 0) {
		char ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { msg, strlen(msg) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		ssize_t w;
		memset(ctl, 0, sizeof(ctl));
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
		do
			w = sendmsg(m->fd, &mh, MSG_NOSIGNAL);
		while (w < 0 && errno == EINTR);
		if (w != (ssize_t)strlen(msg)) {
			*why = xasprintf("QMP: send '%s': %s", cmd, w < 0 ? strerror(errno) : "short write");
			return -1;
		}
	} else if (pisb_write_all(m->fd, msg, strlen(msg)) < 0) {
		*why = xasprintf("QMP: send '%s': %s", cmd, strerror(errno));
		return -1;
	}
	if (qmp_reply(m, VM_QMP_MS, &line) < 0) {
		*why = xasprintf("QMP: no answer to '%s' (QEMU gone?)", cmd);
		return -1;
	}
	if (pisb_json_parse(&j, line, strlen(line), &ig) < 0) {
		*why = xasprintf("QMP: not JSON: %.200s", line);
		return -1;
	}
	err = pisb_json_get(&j, 0, "error");
	if (err >= 0) {
		char *desc = pisb_json_str(&j, pisb_json_get(&j, err, "desc"));
		*why = xasprintf("QMP '%s': %s", cmd, desc ? desc : "error");
		free(desc);
	} else if (pisb_json_get(&j, 0, "return") < 0) {
		*why = xasprintf("QMP: unexpected answer: %.200s", line);
	} else {
		if (key && val)
			*val = pisb_json_str(&j, pisb_json_get(&j, pisb_json_get(&j, 0, "return"), key));
		ret = 0;
	}
	pisb_json_release(&j);
	return ret;
}

/* Connect to dirfd/name (QEMU's QMP socket), read its greeting, leave
 * capability negotiation. */
static int qmp_open(struct qmp *m, int dirfd, const char *name, pid_t qemu, char **why)
{
	struct sockaddr_un sa;
	_cleanup_free_ char *greet = NULL;

	m->have = 0;
	m->qemu = qemu;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, name);
	m->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->fd < 0 || connect(m->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		*why = xasprintf("QMP: connect: %s", strerror(errno));
		qmp_close(m);
		return -1;
	}
	if (qmp_reply(m, VM_QMP_MS, &greet) < 0 ||
	    qmp_cmd(m, "{\"execute\":\"qmp_capabilities\"}", -1, NULL, NULL, why) < 0) {
		if (!*why)
			*why = xstrdup("QMP: no greeting from QEMU");
		qmp_close(m);
		return -1;
	}
	return 0;
}

/* A unix socket NAME in DIRFD (any old one replaced), mode 0600, listening
 * with BACKLOG. */
static int listen_at(int dirfd, const char *name, int backlog, struct pisb_err *e)
{
	int fd = pisb_unix_listen_at(dirfd, name, backlog, 0);

	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "listen on '%s'", name);
	return fd;
}

static void stat_line(struct pisb_buf *b, const char *what, const char *path)
{
	struct stat sb;

	if (stat(path, &sb) < 0)
		memset(&sb, 0, sizeof(sb));
	pisb_buf_addf(b, "%s %s %lld %lld.%09ld\n", what, path, (long long)sb.st_size,
		      (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
}

/* What a snapshot is made of: any change means another snapshot. */
static char *snap_inputs(const struct boot *bt, bool kvm)
{
	struct pisb_buf b = PISB_BUF_INIT;

	pisb_buf_addf(&b, "%s\ncmdline %s\n", VM_SNAP_FORMAT, VM_SNAP_CMDLINE);
	stat_line(&b, "kernel", bt->a.kernel);
	stat_line(&b, "qemu", bt->a.qemu);
	pisb_buf_addf(&b, "initrd %016llx\nmemoryMiB %d\ncpus %d\naccel %s\n",
		      (unsigned long long)bt->initrd_hash, bt->cfg->memory_gib * 1024, bt->cfg->cpus,
		      kvm ? "kvm" : "tcg");
	return pisb_buf_detach(&b);
}

static bool qemu_alive(pid_t q, const char *stage, char **why)
{
	int status;

	if (waitpid(q, &status, WNOHANG) != q)
		return true;
	*why = xasprintf("QEMU exited %s (status %d)", stage, status);
	return false;
}

/* Boot the template in sdir (build.lock held) and save it to sdir/state:
 * 0, or -1 and *why. */
static int snap_build(const struct boot *bt, bool kvm, int sdir, const char *sdir_path,
		      const char *inputs, char **why)
{
	struct pisb_err e = PISB_ERR_INIT;
	struct qmp m = { .fd = -1 };
	uint64_t hash = 0;
	int64_t deadline;
	int qsock = -1, out = -1, ret = -1, status;
	bool vmem;
	pid_t q = -1;

	unlinkat(sdir, "inputs", 0);
	if (build_initrd(sdir, &bt->a, &hash, &vmem, &e) < 0) {
		*why = xstrdup(e.msg);
		return -1;
	}
	if (hash != bt->initrd_hash) {
		*why = xstrdup("the initramfs changed while the snapshot was made");
		return -1;
	}
	if ((qsock = listen_at(sdir, "qmp.sock", 2, &e)) < 0) {
		*why = xstrdup(e.msg);
		return -1;
	}
	{
		int fd = openat(sdir, "console.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		int fq = openat(sdir, "qemu.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0)
			close(fd);
		if (fq >= 0)
			close(fq);
	}
	{
		/* the disk's device holds this until a restore (qemu_argv) */
		int fd = openat(sdir, VM_SNAP_DISK, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 || ftruncate(fd, 1 << 20) < 0) {
			*why = xasprintf("the template's placeholder disk: %s", strerror(errno));
			if (fd >= 0)
				close(fd);
			goto out;
		}
		close(fd);
	}
	q = launch_qemu(bt, kvm, VM_TEMPLATE, sdir, sdir_path, qsock, -1);
	if (q < 0) {
		*why = xstrdup("cannot start QEMU (fork failed)");
		goto out;
	}
	/* the template is ready when the agent says so on the console */
	deadline = pisb_mono_ms() + pisb_env_ms("PISB_VM_BOOT_TIMEOUT_MS", VM_BOOT_TIMEOUT_MS);
	for (;;) {
		_cleanup_buf_ struct pisb_buf con = PISB_BUF_INIT;
		if (!qemu_alive(q, "while the template booted", why)) {
			q = -1;
			goto out;
		}
		if (pisb_read_file_at(sdir, "console.log", &con, 1 << 20) == 0 && con.s &&
		    strstr(con.s, "pisb-agent: snapshot point"))
			break;
		if (pisb_mono_ms() > deadline) {
			*why = xstrdup("the template did not reach its snapshot point");
			goto out;
		}
		pisb_sleep_ms(100);
	}
	out = openat(sdir, "state.new", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (out < 0) {
		*why = xasprintf("create 'state.new': %s", strerror(errno));
		goto out;
	}
	if (qmp_open(&m, sdir, "qmp.sock", q, why) < 0 ||
	    qmp_cmd(&m, "{\"execute\":\"stop\"}", -1, NULL, NULL, why) < 0 ||
	    qmp_cmd(&m, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"snap\"}}", out, NULL, NULL, why) < 0 ||
	    qmp_cmd(&m, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:snap\"}}", -1, NULL, NULL, why) < 0)
		goto out;
	deadline = pisb_mono_ms() + 300000;
	for (;;) {
		_cleanup_free_ char *ms = NULL;
		if (qmp_cmd(&m, "{\"execute\":\"query-migrate\"}", -1, "status", &ms, why) < 0)
			goto out;
		if (ms && !strcmp(ms, "completed"))
			break;
		if ((ms && (!strcmp(ms, "failed") || !strcmp(ms, "cancelled"))) || pisb_mono_ms() > deadline) {
			*why = xasprintf("saving the template: migration %s", ms ? ms : "did not finish");
			goto out;
		}
		pisb_sleep_ms(50);
	}
	if (fsync(out) < 0 || renameat(sdir, "state.new", sdir, "state") < 0 ||
	    pisb_atomic_write(sdir, "inputs", inputs, strlen(inputs), 0600, &e) < 0) {
		*why = xasprintf("keep the snapshot: %s", e.msg[0] ? e.msg : strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (m.fd >= 0) {
		char *ig = NULL;
		qmp_cmd(&m, "{\"execute\":\"quit\"}", -1, NULL, NULL, &ig);
		free(ig);
		qmp_close(&m);
	}
	if (q > 0) {
		if (pisb_wait_timeout(q, &status, 5000) != q) {
			kill(q, SIGKILL);
			waitpid(q, &status, 0);
		}
	}
	if (out >= 0)
		close(out);
	if (ret < 0)
		unlinkat(sdir, "state.new", 0);
	close(qsock);
	return ret;
}

/* The snapshot for this boot, made first when there is no valid one: an
 * fd of its state (read-only), or -1 with *why.  *built says it was made
 * now. */
static int snap_get(const struct boot *bt, bool kvm, bool *built, char **why)
{
	struct pisb_err e = PISB_ERR_INIT;
	_cleanup_free_ char *top = xasprintf("%s/vmsnap", bt->state_path);
	_cleanup_free_ char *path = xasprintf("%s/%dm-%dc-%s", top, bt->cfg->memory_gib * 1024,
					      bt->cfg->cpus, kvm ? "kvm" : "tcg");
	_cleanup_free_ char *want = snap_inputs(bt, kvm);
	_cleanup_buf_ struct pisb_buf have = PISB_BUF_INIT;
	_cleanup_close_ int sdir = -1, lock = -1;
	int fd;

	*built = false;
	if ((mkdir(top, 0700) < 0 && errno != EEXIST) || (mkdir(path, 0700) < 0 && errno != EEXIST) ||
	    (sdir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		*why = xasprintf("'%s': %s", path, strerror(errno));
		return -1;
	}
	lock = pisb_lock_acquire(sdir, "build.lock", true, VM_SNAP_LOCK_MS, "the boot snapshot", &e);
	if (lock < 0) {
		*why = xstrdup(e.msg);
		return -1;
	}
	if (pisb_read_file_at(sdir, "inputs", &have, 1 << 16) < 0 || !have.s || strcmp(have.s, want)) {
		if (snap_build(bt, kvm, sdir, path, want, why) < 0)
			return -1;
		*built = true;
	}
	fd = openat(sdir, "state", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		*why = xasprintf("open the snapshot's state: %s", strerror(errno));
	return fd;
}

/* A restore that failed: the snapshot goes (the next boot makes it). */
static void snap_drop(const struct boot *bt, bool kvm)
{
	_cleanup_free_ char *path = xasprintf("%s/vmsnap/%dm-%dc-%s", bt->state_path,
					      bt->cfg->memory_gib * 1024, bt->cfg->cpus, kvm ? "kvm" : "tcg");
	_cleanup_close_ int sdir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	struct pisb_err ig = PISB_ERR_INIT;
	_cleanup_close_ int lock = sdir >= 0 ? pisb_lock_acquire(sdir, "build.lock", true, VM_SNAP_LOCK_MS, "the boot snapshot", &ig) : -1;

	if (lock >= 0)
		unlinkat(sdir, "inputs", 0);
}

/* A bound project's share, hot-plugged into the third root port. */
static int restore_project(struct qmp *m, char **why)
{
	if (exited(proj_pid)) {
		*why = xstrdup("the project's virtiofsd exited (see " VM_PROJECT_LOG ")");
		return -1;
	}
	if (qmp_cmd(m, "{\"execute\":\"chardev-add\",\"arguments\":{\"id\":\"vfs1\",\"backend\":{\"type\":\"socket\",\"data\":{\"server\":false,\"addr\":{\"type\":\"unix\",\"data\":{\"path\":\"" VM_PROJECT_SOCK "\"}}}}}}",
		    -1, NULL, NULL, why) < 0)
		return -1;
	return qmp_cmd(m, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"vhost-user-fs-pci\",\"id\":\"vfsp\",\"chardev\":\"vfs1\",\"tag\":\"" PISB_PROJECT_TAG "\",\"queue-size\":1024,\"bus\":\"rp3\"}}",
		       -1, NULL, NULL, why);
}

/* After QEMU q started restoring: wait until the state is in, hot-plug
 * the disk (rp1) and the share (rp2), run the VM, and hand the agent its
 * arguments.  0, or -1 and *why (the caller kills q). */
static int plug_memory(const struct boot *bt, struct qmp *m, char **why)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd),
		 "{\"execute\":\"qom-set\",\"arguments\":{\"path\":\"vmem0\",\"property\":\"requested-size\",\"value\":%lld}}",
		 ((long long)bt->cfg->memory_gib * 1024 - VM_SNAP_BASE_MIB) << 20);
	return qmp_cmd(m, cmd, -1, NULL, NULL, why);
}

/* The size of the instance's disk as its guest sees it, in bytes: the
 * raw image's, or the virtual size in a qcow2 overlay's header. */
static int disk_bytes(const struct boot *bt, long long *size, char **why)
{
	int fd = openat(bt->idir, bt->overlay ? "disk.qcow2" : "disk.img", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	unsigned char h[32];
	struct stat sb;

	*size = -1;
	if (fd >= 0 && !bt->overlay && fstat(fd, &sb) == 0)
		*size = (long long)sb.st_size;
	else if (fd >= 0 && bt->overlay && pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		 !memcmp(h, "QFI\xfb", 4)) {
		*size = 0;
		for (int i = 24; i < 32; i++)
			*size = (*size << 8) | h[i];
	}
	if (fd >= 0)
		close(fd);
	if (*size <= 0 || *size % 512) {
		*why = xasprintf("the instance's disk (%s) has no size pisb can give the guest",
				 bt->overlay ? "disk.qcow2" : "disk.img");
		return -1;
	}
	return 0;
}

static int restore_finish(const struct boot *bt, pid_t q, char **why)
{
	struct qmp m = { .fd = -1 };
	struct vm_conn c = VM_CONN_INIT;
	int64_t deadline = pisb_mono_ms() + pisb_env_ms("PISB_VM_BOOT_TIMEOUT_MS", VM_BOOT_TIMEOUT_MS);
	char seed[64], *args = NULL, cmd[160];
	long long disk;
	uint32_t sid;
	struct timespec now;
	int64_t t0 = pisb_mono_ms(), t1;
	int ret = -1;

	if (qmp_open(&m, bt->idir, "qmp.sock", q, why) < 0) {
		if (exited(q)) {
			_cleanup_free_ char *qr = qemu_reason(bt->idir);
			free(*why);
			*why = xasprintf("QEMU exited while it restored the snapshot: %s", qr);
		}
		return -1;
	}
	for (;;) {
		_cleanup_free_ char *rs = NULL;
		if (qmp_cmd(&m, "{\"execute\":\"query-status\"}", -1, "status", &rs, why) < 0) {
			free(*why);
			*why = NULL;
			if (!qemu_alive(q, "while it restored the snapshot", why)) {
				_cleanup_free_ char *qr = qemu_reason(bt->idir);
				char *w = xasprintf("%s: %s", *why, qr);
				free(*why);
				*why = w;
			} else {
				*why = xstrdup("QMP: no answer while restoring");
			}
			goto out;
		}
		if (rs && strcmp(rs, "inmigrate"))
			break;
		if (pisb_mono_ms() > deadline) {
			*why = xstrdup("the restore did not finish");
			goto out;
		}
		pisb_sleep_ms(20);
	}
	/* the disk's device has held the template's placeholder: it holds
	 * the instance's disk now (qemu_argv), and a resize to the disk's
	 * own size tells the guest its capacity (a config interrupt at cont;
	 * the agent waits for it, pisb.disk) */
	if (disk_bytes(bt, &disk, why) < 0)
		goto out;
	snprintf(cmd, sizeof(cmd),
		 "{\"execute\":\"block_resize\",\"arguments\":{\"node-name\":\"disk0\",\"size\":%lld}}", disk);
	if (qmp_cmd(&m, cmd, -1, NULL, NULL, why) < 0 ||
	    qmp_cmd(&m, "{\"execute\":\"chardev-add\",\"arguments\":{\"id\":\"vfs0\",\"backend\":{\"type\":\"socket\",\"data\":{\"server\":false,\"addr\":{\"type\":\"unix\",\"data\":{\"path\":\"" VM_VFS_SOCK "\"}}}}}}",
		    -1, NULL, NULL, why) < 0 ||
	    qmp_cmd(&m, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"vhost-user-fs-pci\",\"id\":\"vfs\",\"chardev\":\"vfs0\",\"tag\":\"" VM_VFS_TAG "\",\"queue-size\":1024,\"bus\":\"rp2\"}}",
		    -1, NULL, NULL, why) < 0 ||
	    (bt->proj.dir && restore_project(&m, why) < 0) ||
	    (use_vmem(bt) && plug_memory(bt, &m, why) < 0))
		goto out;
	/* the clock and a fresh seed: every restore starts from the same
	 * memory, the template's clock and random pool included; sent
	 * before cont, so that the guest finds them as it runs */
	pisb_random_hex(seed, 48);
	clock_gettime(CLOCK_REALTIME, &now);
	args = xasprintf("pisb.name=%s pisb.ws=%s pisb.pids=%d pisb.mem=%d pisb.disk=%lld pisb.time=%lld.%09ld pisb.seed=%s%s%s%s%s",
			 bt->name, bt->cfg->workspace, bt->cfg->pids, bt->cfg->memory_gib * 1024, disk,
			 (long long)now.tv_sec, now.tv_nsec, seed, proj_arg(bt), egress_arg(bt), docker_arg(bt),
			 reclaim_arg());
	if (vm_boot_send(bt->idir, args, &c, &sid) < 0) {
		*why = xstrdup("cannot send the restored agent its arguments (port 0)");
		goto out;
	}
	if (qmp_cmd(&m, "{\"execute\":\"cont\"}", -1, NULL, NULL, why) < 0) {
		vm_conn_close(&c);
		goto out;
	}
	t1 = pisb_mono_ms();
	pisb_trace("vm: restored, shares hot-plugged");
	if (vm_boot_wait(&c, sid, 60000) < 0) {
		*why = xstrdup("the restored agent did not take its arguments");
	} else {
		int log = openat(bt->idir, "qemu.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
		pisb_trace("vm: the agent took its arguments");
		if (log >= 0) {
			dprintf(log, "pisb: restored and hot-plugged in %lld ms, the agent took its arguments %lld ms later\n",
				(long long)(t1 - t0), (long long)(pisb_mono_ms() - t1));
			close(log);
		}
		ret = 0;
	}
	free(args);
out:
	qmp_close(&m);
	return ret;
}

static void extra_json(const struct boot *bt, bool kvm, const char *note, struct pisb_runtime *rt)
{
	struct pisb_buf b = PISB_BUF_INIT;
	struct pisb_jw w;

	pisb_jw_init(&w, &b);
	pisb_jw_obj(&w);
	pisb_jw_kstr(&w, "accel", kvm ? "kvm" : "tcg");
	pisb_jw_kstr(&w, "machine", use_microvm(kvm) ? "microvm" : "q35");
	pisb_jw_kstr(&w, "accelNote", note);
	pisb_jw_kstr(&w, "boot", bt->restored ? "snapshot" : "cold");
	pisb_jw_kstr(&w, "bootNote", bt->boot_note);
	pisb_jw_kstr(&w, "kernel", bt->a.kernel);
	pisb_jw_kstr(&w, "qemu", bt->a.qemu);
	pisb_jw_kint(&w, "memoryMiB", bt->cfg->memory_gib * 1024);
	pisb_jw_kint(&w, "cpus", bt->cfg->cpus);
	pisb_jw_kstr(&w, "disk", bt->overlay ? "qcow2 copy-on-write overlay disk.qcow2 on its template's disk.img"
					    : "raw ext4 image disk.img (sparse)");
	pisb_jw_kbool(&w, "network", false);
	pisb_jw_obj_end(&w);
	free(rt->extra_json);
	rt->extra_json = pisb_buf_detach(&b);
}

/* Restore the boot snapshot (made first when needed): QEMU's pid, or -1
 * for a cold boot, bt->boot_note saying why. */
static pid_t try_restore(struct boot *bt, bool kvm)
{
	int64_t t0 = pisb_mono_ms();
	char *why = NULL;
	bool built;
	int fd, status;
	pid_t q;

	pisb_trace("vm: restore asked");
	fd = snap_get(bt, kvm, &built, &why);
	pisb_trace(built ? "vm: boot snapshot made" : "vm: boot snapshot found");
	if (fd < 0) {
		bt->boot_note = xasprintf("no boot snapshot (%s): cold boot", why ? why : "unknown error");
		free(why);
		return -1;
	}
	if (built)
		bt->boot_note = xasprintf("made the boot snapshot in %.1f s (once per kernel, agent, QEMU, memory and vCPUs)",
					  (double)(pisb_mono_ms() - t0) / 1000);
	q = launch(bt, kvm, fd);
	close(fd);
	pisb_trace("vm: QEMU started (restore)");
	if (q > 0 && restore_finish(bt, q, &why) == 0) {
		bt->restored = true;
		return q;
	}
	if (q > 0) {
		kill(q, SIGKILL);
		waitpid(q, &status, 0);
	}
	/* a virtiofsd that is gone (a project that cannot be served, say)
	 * is no fault of the snapshot's: it stays, and the cold boot's
	 * supervision reports the daemon's reason */
	if (exited(vfs_pid) || exited(proj_pid)) {
		free(bt->boot_note);
		bt->boot_note = xasprintf("the boot snapshot could not be restored (%s; a virtiofsd exited): cold boot",
					  why ? why : "cannot start QEMU");
		free(why);
		return -1;
	}
	snap_drop(bt, kvm);
	free(bt->boot_note);
	bt->boot_note = xasprintf("the boot snapshot could not be restored (%s): removed it, cold boot",
				  why ? why : "cannot start QEMU");
	free(why);
	return -1;
}

static bool snap_wanted(bool kvm)
{
	const char *v = getenv("PISB_VM_SNAPSHOT");

	return !use_microvm(kvm) && !(v && !strcmp(v, "0"));
}

static void report(const struct boot *bt, bool ok, const char *msg)
{
	_cleanup_free_ char *s = xasprintf("%s\n%s", ok ? "ok" : "fail", msg ? msg : "");
	pisb_write_all(bt->report, s, strlen(s));
	close(bt->report);
}

/* The previews' and the egress proxy's relay (vm_net.h) of a running VM,
 * (re)started: after the boot (died < 0), or when it exited with status
 * died; a template being prepared has none unless its setup needs the
 * proxy (network.allowedHosts); after 5 restarts, none either.  Its pid,
 * or -1. */
static pid_t net_up(const struct boot *bt, int died)
{
	static int restarts;

	if ((bt->prep && !bt->cfg->nallowed_hosts) || (died >= 0 && ++restarts > 5))
		return -1;
	if (died >= 0) {
		int log = openat(bt->idir, "qemu.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
		if (log >= 0) {
			dprintf(log, "pisb: the preview relay exited (status %d, see net.log): starting it again\n", died);
			close(log);
		}
		pisb_sleep_ms(500);
	}
	/* started again after a failure (not the end of the VM, status 0):
	 * it brings the services back itself */
	return vm_net_start(bt->idir, bt->name, bt->cfg, died > 0);
}

/* A boot that went wrong, once more: QEMU cold (kvm or not), recorded
 * in status.json, the boot's deadline restarted.  QEMU's pid. */
static pid_t boot_again_cold(struct boot *bt, bool kvm, const char *note, struct pisb_runtime *rt,
			     int64_t *deadline)
{
	struct pisb_err ig = PISB_ERR_INIT;
	pid_t q;

	bt->restored = false;
	q = launch(bt, kvm, -1);
	pisb_trace("vm: QEMU started (cold boot)");
	if (q < 0) {
		report(bt, false, "cannot start QEMU (fork failed)");
		_exit(1);
	}
	rt->init.pid = q;
	rt->init.start = pisb_proc_start(q);
	extra_json(bt, kvm, note, rt);
	pisb_runtime_save(bt->idir, rt, &ig);
	*deadline = pisb_mono_ms() + pisb_env_ms("PISB_VM_BOOT_TIMEOUT_MS", VM_BOOT_TIMEOUT_MS);
	return q;
}

static void __attribute__((noreturn)) supervise(struct boot *bt)
{
	const char *forced = getenv("PISB_VM_ACCEL");
	_cleanup_free_ char *note = NULL;
	struct pisb_runtime rt;
	struct pisb_err ig = PISB_ERR_INIT;
	bool kvm;
	int64_t deadline, kvm_deadline;
	pid_t q, net = -1;
	int status;

	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (chdir(bt->dir) < 0) {
		report(bt, false, "cannot enter the instance directory");
		_exit(1);
	}
	if (forced && !strcmp(forced, "tcg")) {
		kvm = false;
		note = xstrdup("PISB_VM_ACCEL=tcg: running under TCG (software emulation, much slower than KVM)");
	} else if (forced && !strcmp(forced, "kvm")) {
		kvm = true;
	} else {
		kvm = access("/dev/kvm", R_OK | W_OK) == 0;
		if (!kvm) {
			note = xstrdup("/dev/kvm is missing or not usable by this user: running under TCG (software emulation, much slower)");
		} else if (pisb_vm_kvm_is_pvm() && !kernel_is_pvm_guest(bt->a.kernel)) {
			/* PVM boots only kernels built for it: a stock kernel
			 * hangs or fails, so do not wait for it */
			kvm = false;
			note = xasprintf("/dev/kvm is PVM (module kvm_pvm, no vmx/svm), which boots only guest kernels built with CONFIG_PVM_GUEST, and '%s' is not one: running under TCG (software emulation, much slower)",
					 bt->a.kernel);
		}
	}
	/* the boot snapshot hot-plugs the host's share: an image's guest
	 * boots cold (its root is never a snapshot's) */
	if (bt->image)
		bt->boot_note = xstrdup("image: PATH boots cold (the boot snapshot is made for image: host only)");
	pisb_trace("vm: supervisor start");
	q = snap_wanted(kvm) && !bt->image ? try_restore(bt, kvm) : -1;
	if (q < 0 && !bt->restored) {
		q = launch(bt, kvm, -1);
		pisb_trace("vm: QEMU started (cold boot)");
	}
	if (q > 0 && !bt->restored && kvm && !(forced && !strcmp(forced, "kvm")) &&
	    pisb_wait_timeout(q, &status, VM_KVM_GRACE_MS) == q) {
		_cleanup_free_ char *why = qemu_reason(bt->idir);
		note = xasprintf("KVM is not usable here (QEMU: %s): fell back to TCG (software emulation, much slower)", why);
		kvm = false;
		q = launch(bt, false, -1);
	}
	if (q < 0) {
		report(bt, false, "cannot start QEMU (fork failed)");
		_exit(1);
	}
	if (pisb_runtime_load(bt->idir, &rt, &ig) < 0)
		memset(&rt, 0, sizeof(rt));
	snprintf(rt.state, sizeof(rt.state), "starting");
	memset(&rt.resume, 0, sizeof(rt.resume));
	rt.controller.pid = getpid();
	rt.controller.start = pisb_proc_start(rt.controller.pid);
	rt.init.pid = q;
	rt.init.start = pisb_proc_start(q);
	pisb_random_hex(rt.generation, 16);
	extra_json(bt, kvm, note, &rt);
	pisb_runtime_save(bt->idir, &rt, &ig);

	deadline = pisb_mono_ms() + pisb_env_ms("PISB_VM_BOOT_TIMEOUT_MS", VM_BOOT_TIMEOUT_MS);
	kvm_deadline = pisb_mono_ms() + pisb_env_ms("PISB_VM_KVM_BOOT_MS", VM_KVM_BOOT_MS);
	for (;;) {
		bool died = waitpid(q, &status, WNOHANG) == q;
		if (!died && proj_pid > 0 && waitpid(proj_pid, &status, WNOHANG) == proj_pid) {
			_cleanup_free_ char *why = last_line_of(bt->idir, VM_PROJECT_LOG);
			_cleanup_free_ char *msg = xasprintf("virtiofsd (the project '%s' for the guest) exited while the guest booted (" VM_PROJECT_LOG ": %s)",
							     bt->proj.dir, why);
			proj_pid = -1;
			kill(q, SIGKILL);
			waitpid(q, &status, 0);
			report(bt, false, msg);
			_exit(1);
		}
		if (!died && vfs_pid > 0 && waitpid(vfs_pid, &status, WNOHANG) == vfs_pid) {
			_cleanup_free_ char *why = last_line_of(bt->idir, "virtiofsd.log");
			_cleanup_free_ char *msg = xasprintf("virtiofsd (the host's userland for the guest) exited while the guest booted (virtiofsd.log: %s)", why);
			vfs_pid = -1;
			kill(q, SIGKILL);
			waitpid(q, &status, 0);
			report(bt, false, msg);
			_exit(1);
		}
		if (kvm && !(forced && !strcmp(forced, "kvm")) && (died || pisb_mono_ms() > kvm_deadline)) {
			/* KVM that starts but does not boot: once more under TCG */
			_cleanup_free_ char *why = died ? qemu_reason(bt->idir) : NULL;
			if (!died) {
				kill(q, SIGKILL);
				waitpid(q, &status, 0);
			}
			free(note);
			note = died ? xasprintf("KVM is not usable here (QEMU exited during boot: %s): fell back to TCG (software emulation, much slower)", why)
				    : xasprintf("KVM is not usable here (the guest did not answer within %d s): fell back to TCG (software emulation, much slower)",
						pisb_env_ms("PISB_VM_KVM_BOOT_MS", VM_KVM_BOOT_MS) / 1000);
			kvm = false;
			q = boot_again_cold(bt, kvm, note, &rt, &deadline);
			continue;
		}
		if (died && bt->restored) {
			/* a restored guest that dies before its agent answers
			 * (stage 1 failed on the hot-plugged devices): once
			 * more, cold, like every other failure of the snapshot
			 * path, the reason kept in bootNote and qemu.log */
			_cleanup_free_ char *con = console_reason(bt->idir);
			int log = openat(bt->idir, "qemu.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
			if (log >= 0) {
				dprintf(log, "pisb: the restored guest died before its agent answered (console.log: %s): cold boot\n", con);
				close(log);
			}
			free(bt->boot_note);
			bt->boot_note = xasprintf("the restored guest died before its agent answered (console.log: %s): cold boot", con);
			q = boot_again_cold(bt, kvm, note, &rt, &deadline);
			continue;
		}
		if (died) {
			_cleanup_free_ char *why = qemu_reason(bt->idir);
			_cleanup_free_ char *con = console_reason(bt->idir);
			_cleanup_free_ char *pj = bt->proj.dir ? last_line_of(bt->idir, VM_PROJECT_LOG) : NULL;
			_cleanup_free_ char *msg = xasprintf("QEMU exited while the guest booted (qemu.log: %s; console.log: %s%s%s)",
							     why, con, pj ? "; " VM_PROJECT_LOG ": " : "", pj ? pj : "");
			report(bt, false, msg);
			_exit(1);
		}
		if (vm_ping(bt->idir, 300) == 0) {
			pisb_trace("vm: the agent answers");
			break;
		}
		if (pisb_mono_ms() > deadline) {
			_cleanup_free_ char *con = console_reason(bt->idir);
			_cleanup_free_ char *msg = xasprintf("the guest agent did not answer within %d s (console.log: %s)",
							     pisb_env_ms("PISB_VM_BOOT_TIMEOUT_MS", VM_BOOT_TIMEOUT_MS) / 1000, con);
			kill(q, SIGKILL);
			waitpid(q, &status, 0);
			report(bt, false, msg);
			_exit(1);
		}
		pisb_sleep_ms(10);
	}
	snprintf(rt.state, sizeof(rt.state), "running");
	rt.started_at = pisb_now_ms() / 1000;
	pisb_runtime_save(bt->idir, &rt, &ig);
	pisb_runtime_release(&rt);
	net = net_up(bt, -1);
	pisb_trace("vm: running recorded, relay started");
	report(bt, true, note);
	/* the sandbox runs as long as QEMU does; status.json is left as it is
	 * (a VM that died unasked shows "interrupted", see pisb_vm_status) */
	for (;;) {
		pid_t w = waitpid(-1, &status, bt->prep ? WNOHANG : 0);
		if (w == 0) {
			/* a template being prepared lives only as long as its
			 * prepare, which holds op.lock until the template is
			 * published or dropped: a prepare killed (^C) leaves a
			 * VM that nothing lists, so it goes */
			if (!pisb_lock_is_held(bt->idir, "op.lock")) {
				int log = openat(bt->idir, "qemu.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
				if (log >= 0) {
					dprintf(log, "pisb: the prepare that booted this VM is gone: stopping it\n");
					close(log);
				}
				kill(q, SIGKILL);
				bt->prep = false;
			} else {
				pisb_sleep_ms(500);
			}
			continue;
		}
		if (w == q || (w < 0 && errno != EINTR))
			break;
		if (w == net)
			net = net_up(bt, status);
		if (w == vfs_pid || w == proj_pid) {
			/* the guest's userland (or its project) is gone: its
			 * file system calls would hang for ever, so the VM goes
			 * too (interrupted) */
			int log = openat(bt->idir, "qemu.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
			if (log >= 0) {
				dprintf(log, "pisb: virtiofsd%s exited (status %d): stopping the VM\n",
					w == proj_pid ? " (the project's)" : "", status);
				close(log);
			}
			if (w == vfs_pid)
				vfs_pid = -1;
			else
				proj_pid = -1;
			kill(q, SIGKILL);
		}
	}
	vm_net_stop(net);
	stop_virtiofsd();
	_exit(0);
}

/* Boot the instance in the state's directory rel (instances/NAME, or a
 * template being prepared), op.lock held by the caller: a no-op when its
 * VM runs, else *booted.  The accelerator note lands in status.json
 * (pisb_vm_accel_note). */
static int boot(struct pisb_state *st, const char *name, const char *rel, int idir,
		const struct pisb_config *cfg, bool *booted, struct pisb_err *e)
{
	struct boot bt;
	char what[96];
	int p[2] = { -1, -1 }, ret = -1;
	pid_t child;
	_cleanup_buf_ struct pisb_buf msg = PISB_BUF_INIT;

	memset(&bt, 0, sizeof(bt));
	bt.name = name;
	bt.cfg = cfg;
	bt.idir = idir;
	bt.ctl = -1;
	bt.vfs_sock = -1;
	bt.qmp_sock = -1;
	bt.proj_sock = -1;
	bt.state_path = st->path;
	for (int i = 0; i < PISB_VM_PORTS; i++)
		bt.socks[i] = -1;
	*booted = false;
	if (pisb_lock_is_held(idir, "controller.lock"))
		return 0;
	pisb_trace("vm: boot asked");
	if (check_host_fit(cfg, e) < 0)
		return -1;
	if (find_assets(&bt.a, false, false, e) < 0 || build_initrd(idir, &bt.a, &bt.initrd_hash, &bt.vmem, e) < 0 ||
	    vm_project_load(idir, &bt.proj, e) < 0)
		goto out;
	bt.dir = xasprintf("%s/%s", st->path, rel);
	bt.overlay = faccessat(idir, "disk.qcow2", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	bt.image = faccessat(idir, "root.img", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	bt.prep = pisb_str_starts(rel, "staging/");
	snprintf(what, sizeof(what), "sandbox '%s' (its VM)", name);
	bt.ctl = pisb_lock_acquire(idir, "controller.lock", true, 0, what, e);
	if (bt.ctl < 0)
		goto out;
	for (int i = 0; i < PISB_VM_PORTS; i++) {
		char sock[32];
		snprintf(sock, sizeof(sock), "agent%d.sock", i);
		if ((bt.socks[i] = listen_at(idir, sock, 8, e)) < 0)
			goto out;
	}
	if ((bt.vfs_sock = listen_at(idir, VM_VFS_SOCK, 1, e)) < 0 ||
	    (bt.qmp_sock = listen_at(idir, "qmp.sock", 2, e)) < 0)
		goto out;
	if (mkdirat(idir, "share", 0700) < 0 && errno != EEXIST) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir 'share'");
		goto out;
	}
	if (bt.proj.dir && (((bt.proj_sock = listen_at(idir, VM_PROJECT_SOCK, 1, e)) < 0) ||
			    (mkdirat(idir, "pview", 0700) < 0 && errno != EEXIST))) {
		if (bt.proj_sock >= 0)
			pisb_err_sys(e, PISB_EXIT_FAIL, "mkdir 'pview'");
		goto out;
	}
	{
		int fd = openat(idir, "console.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		int fq = openat(idir, "qemu.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0)
			close(fd);
		if (fq >= 0)
			close(fq);
	}
	mark(idir, "starting");
	pisb_trace("vm: initramfs and sockets ready");
	if (pipe2(p, O_CLOEXEC) < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "pipe");
		goto out;
	}
	child = fork();
	if (child < 0) {
		pisb_err_sys(e, PISB_EXIT_PISB, "fork");
		goto out;
	}
	if (child == 0) {
		int null, keep[6 + PISB_VM_PORTS], n = 0, fd = 3;
		setsid();
		if (fork() != 0)
			_exit(0);
		/* the supervisor: no terminal, no fds but its own, renumbered
		 * from 3 so that nothing the caller inherited stays open */
		null = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		keep[n++] = fcntl(idir, F_DUPFD_CLOEXEC, 200);
		keep[n++] = fcntl(bt.ctl, F_DUPFD_CLOEXEC, 200);
		keep[n++] = fcntl(p[1], F_DUPFD_CLOEXEC, 200);
		for (int i = 0; i < PISB_VM_PORTS; i++)
			keep[n++] = fcntl(bt.socks[i], F_DUPFD_CLOEXEC, 200);
		keep[n++] = fcntl(bt.vfs_sock, F_DUPFD_CLOEXEC, 200);
		keep[n++] = fcntl(bt.qmp_sock, F_DUPFD_CLOEXEC, 200);
		keep[n++] = bt.proj_sock >= 0 ? fcntl(bt.proj_sock, F_DUPFD_CLOEXEC, 200) : -1;
		for (int i = 0; i < n; i++) {
			if (keep[i] < 0)
				continue;
			dup3(keep[i], fd + i, O_CLOEXEC);
		}
		pisb_close_from(fd + n, -1);
		bt.idir = fd;
		bt.ctl = fd + 1;
		bt.report = fd + 2;
		for (int i = 0; i < PISB_VM_PORTS; i++)
			bt.socks[i] = fd + 3 + i;
		bt.vfs_sock = fd + 3 + PISB_VM_PORTS;
		bt.qmp_sock = fd + 4 + PISB_VM_PORTS;
		bt.proj_sock = bt.proj_sock >= 0 ? fd + 5 + PISB_VM_PORTS : -1;
		supervise(&bt);
	}
	close(p[1]);
	p[1] = -1;
	waitpid(child, NULL, 0);
	for (int i = 0; i < PISB_VM_PORTS; i++) {
		close(bt.socks[i]);
		bt.socks[i] = -1;
	}
	close(bt.vfs_sock);
	bt.vfs_sock = -1;
	close(bt.qmp_sock);
	bt.qmp_sock = -1;
	if (bt.proj_sock >= 0)
		close(bt.proj_sock);
	bt.proj_sock = -1;
	close(bt.ctl);
	bt.ctl = -1;
	pisb_read_fd(p[0], &msg, 64 << 10);
	if (msg.s && pisb_str_starts(msg.s, "ok\n")) {
		pisb_trace("vm: booted");
		*booted = true;
		ret = 0;
	} else {
		const char *why = msg.s && strchr(msg.s, '\n') ? strchr(msg.s, '\n') + 1 : "the supervisor died";
		int fd;
		pisb_err_set(e, PISB_EXIT_BACKEND, "boot the VM: %s", why);
		/* the supervisor is gone or going: the VM is stopped */
		fd = pisb_lock_acquire(idir, "controller.lock", true, 10000, what, &(struct pisb_err)PISB_ERR_INIT);
		if (fd >= 0)
			close(fd);
		mark(idir, "stopped");
	}
out:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	for (int i = 0; i < PISB_VM_PORTS; i++)
		if (bt.socks[i] >= 0)
			close(bt.socks[i]);
	if (bt.vfs_sock >= 0)
		close(bt.vfs_sock);
	if (bt.qmp_sock >= 0)
		close(bt.qmp_sock);
	if (bt.proj_sock >= 0)
		close(bt.proj_sock);
	if (bt.ctl >= 0)
		close(bt.ctl);
	assets_release(&bt.a);
	vm_project_release(&bt.proj);
	free(bt.dir);
	return ret;
}

/* ---- lifecycle ---- */

static int refuse_unsupported(const struct pisb_config *cfg, struct pisb_err *e)
{
	/* docker: true's daemon is a service too (services.c) */
	if (cfg->nservices + cfg->docker > PISB_VM_SVC_PORTS)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "services: a vm sandbox runs at most %d services (each holds one of the guest agent's %d service ports); this config declares %zu%s",
				    PISB_VM_SVC_PORTS, PISB_VM_SVC_PORTS, cfg->nservices,
				    cfg->docker ? " and docker: true's daemon is one more" : "");
	if (check_host_fit(cfg, e) < 0)
		return -1;
	if (strpbrk(cfg->workspace, " \t\n"))
		return pisb_err_set(e, PISB_EXIT_USAGE, "workspace: the vm driver needs a path without spaces");
	return 0;
}

/* create --project: the copy pushed into the booted guest before its
 * setup runs (project.h's remote seed: staged and verified on the host,
 * one push), its base kept in the instance */
static int seed_project(struct pisb_state *st, const char *name, const struct pisb_config *cfg,
			const char *dir, struct pisb_err *e)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	struct pisb_project_stats s;

	if (pisb_sandbox_open(&sb, st, name, e) < 0 ||
	    pisb_project_seed_remote(&sb, dir, &cfg->project, &s, e) < 0)
		return pisb_err_prefix(e, "project '%s'", dir);
	return 0;
}

static bool project_bound(const struct pisb_config *cfg)
{
	return cfg->project.mode == PISB_PROJECT_BIND || cfg->project.mode == PISB_PROJECT_BIND_RO;
}

/* A template's copy: the configuration given to create, written into the
 * running guest's workspace (.sandbox.yaml) by the file verbs' agent, as
 * pisb write does. */
static int guest_config(struct pisb_state *st, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	_cleanup_sandbox_ struct pisb_sandbox sb = PISB_SANDBOX_INIT;
	_cleanup_free_ char *abs = NULL;
	struct pisb_fs_src src = { -1, o->config_text, o->config_len };
	long long bytes;

	if (!o->config_text)
		return 0;
	if (pisb_sandbox_open(&sb, st, o->name, e) < 0 ||
	    pisb_vm_fs_write(&sb, ".sandbox.yaml", &src, 0644, true, &abs, &bytes, e) < 0)
		return pisb_err_prefix(e, "write the guest's .sandbox.yaml");
	return 0;
}

/* A new disk in the staging dir sdir (stg under the state): a sparse ext4
 * image of diskGiB, made here (the guest has no mkfs), holding the
 * overlay's upper and work dirs over the host's userland and the guest
 * copy of the config, <workspace>/.sandbox.yaml */
static int new_disk(struct pisb_state *st, int sdir, const char *stg, const struct pisb_config *cfg,
		    const struct pisb_lc_opts *o, const struct vm_assets *a, struct pisb_err *e)
{
	_cleanup_free_ char *img = xasprintf("%s/%s/disk.img", st->path, stg);
	_cleanup_free_ char *tree = xasprintf("%s/%s/fsroot", st->path, stg);
	_cleanup_free_ char *ws = xasprintf("fsroot/upper%s", cfg->workspace);
	_cleanup_free_ char *yml = xasprintf("%s/.sandbox.yaml", ws);
	_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
	char size[32];
	int xe = 0, code;

	if (pisb_mkdirs_at(sdir, ws, 0755, e) < 0 || pisb_mkdirs_at(sdir, "fsroot/work", 0700, e) < 0 ||
	    (o->config_text && pisb_atomic_write(sdir, yml, o->config_text, o->config_len, 0644, e) < 0))
		return -1;
	snprintf(size, sizeof(size), "%dG", cfg->disk_gib);
	char *argv[] = { a->mke2fs, "-q", "-F", "-t", "ext4", "-L", "pisb-root", "-m", "0",
			 "-E", "lazy_itable_init=1,lazy_journal_init=1", "-d", tree, img, size, NULL };
	code = pisb_run_capture(argv, NULL, true, 8192, 120000, &out, &xe);
	if (code != 0)
		return pisb_err_set(e, PISB_EXIT_BACKEND, "make the disk with mke2fs: %s",
				    out.s && out.len ? out.s : code == -1 ? strerror(xe) : "failed");
	if (fchmodat(sdir, "disk.img", 0600, 0) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "make the disk private (chmod 600 '%s')", img);
	pisb_rm_rf_at(sdir, "fsroot", &(struct pisb_err)PISB_ERR_INIT);
	return 0;
}

/* A vm sandbox under its op.lock: sb's instance dir and config
 * (borrowed), status.json read under the lock. */
struct vm_inst {
	int idir, lock;
	struct pisb_runtime rt;
	const struct pisb_config *cfg;
};

static int inst_open(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct vm_inst *t,
		     struct pisb_err *e)
{
	char what[96];

	memset(t, 0, sizeof(*t));
	t->idir = sb->idir;
	t->cfg = pisb_sandbox_config(sb, e);
	if (!t->cfg)
		return pisb_err_prefix(e, "sandbox '%s'", sb->name);
	snprintf(what, sizeof(what), "sandbox '%s'", sb->name);
	t->lock = pisb_lock_acquire(t->idir, "op.lock", true, o ? o->wait_ms : 0, what, e);
	if (t->lock < 0)
		return -1;
	if (pisb_runtime_load(t->idir, &t->rt, e) < 0) {
		close(t->lock);
		return -1;
	}
	return 0;
}

static void inst_release(struct vm_inst *t)
{
	if (t->lock >= 0)
		close(t->lock);
	pisb_runtime_release(&t->rt);
}

/* Wait until the supervisor is gone; QEMU is asked (poweroff), then
 * told (TERM, KILL).  *clean (may be NULL): the guest powered off when
 * asked (its disk synced and read-only). */
static int halt(struct vm_inst *t, bool graceful, bool *clean, struct pisb_err *e)
{
	int64_t deadline;

	if (clean)
		*clean = false;
	if (!pisb_lock_is_held(t->idir, "controller.lock"))
		return 0;
	mark(t->idir, "stopping");
	if (graceful)
		vm_net_halt(t->idir);   /* the services first, TERM before KILL */
	if (graceful && vm_poweroff(t->idir, 5000) == 0) {
		deadline = pisb_mono_ms() + pisb_env_ms("PISB_VM_STOP_MS", 20000);
		while (pisb_lock_is_held(t->idir, "controller.lock") && pisb_mono_ms() < deadline)
			pisb_sleep_ms(100);
		if (clean)
			*clean = !pisb_lock_is_held(t->idir, "controller.lock");
	}
	for (int sig = graceful ? SIGTERM : SIGKILL; pisb_lock_is_held(t->idir, "controller.lock");
	     sig = SIGKILL) {
		if (pisb_proc_id_alive(&t->rt.init))
			kill(t->rt.init.pid, sig);
		else if (pisb_proc_id_alive(&t->rt.controller))
			kill(t->rt.controller.pid, sig);
		deadline = pisb_mono_ms() + 3000;
		while (pisb_lock_is_held(t->idir, "controller.lock") && pisb_mono_ms() < deadline)
			pisb_sleep_ms(50);
		if (sig == SIGKILL && pisb_lock_is_held(t->idir, "controller.lock"))
			return pisb_err_set(e, PISB_EXIT_BACKEND, "the VM's supervisor does not exit");
	}
	return 0;
}

/* After a boot of a disk that setup already ran on: the resume hooks
 * (vm_hooks.c); a runner still running after 10 s is status.json's
 * resume (inspect: resumePid).  A runner that cannot start is logged:
 * the sandbox runs, as with the local driver. */
static void resume(int idir, const struct pisb_config *cfg)
{
	struct pisb_proc_id bg;
	struct pisb_runtime rt;
	struct pisb_err e = PISB_ERR_INIT, ig = PISB_ERR_INIT;

	if (vm_run_resume(idir, cfg, &bg, &e) < 0) {
		int log = openat(idir, "setup.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (log >= 0) {
			dprintf(log, "pisb: resume hooks: %s\n", e.msg);
			close(log);
		}
		return;
	}
	if (!bg.pid || pisb_runtime_load(idir, &rt, &ig) < 0)
		return;
	rt.resume = bg;
	pisb_runtime_save_volatile(idir, &rt, &ig);
	pisb_runtime_release(&rt);
}

/* After the hooks: the services (the relay's, vm_net.h), waited for as
 * the local driver's controller waits; one that fails is logged in
 * setup.log and net.log, the sandbox runs on. */
static void services_up(int idir)
{
	struct pisb_err e = PISB_ERR_INIT;

	if (vm_net_boot(idir, &e) < 0) {
		int log = openat(idir, "setup.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (log >= 0) {
			dprintf(log, "pisb: services: %s\n", e.msg);
			close(log);
		}
	}
}

/* What a template being prepared (staging/NAME.prep, booted, set up)
 * holds besides its disk, its record and setup.log: gone before it is
 * published (a template never boots by itself). */
static const char *const prep_leftovers[] = {
	"status.json", "initrd.cpio", "virtiofs.sock", "virtiofsd.log", "qmp.sock", "console.log",
	"qemu.log", "controller.lock", "control.sock", "net.log", "net.log.1", "previews.json",
	"services.json", NULL,
};  /* and each port's agentN.sock and agentN.lock */

/* prepare: setup succeeded, the guest powered off cleanly (its disk
 * synced, unmounted read-only), the disk made read-only, then the one
 * rename that publishes templates/NAME. */
static int publish_template(struct pisb_state *st, int idir, const char *live, const char *dest,
			    const struct pisb_config *cfg, const char *name, struct pisb_err *e)
{
	struct vm_inst t = { idir, -1, { .state = "" }, cfg };
	_cleanup_close_ int disk = -1;
	bool clean;
	int ret = -1;

	if (pisb_runtime_load(idir, &t.rt, e) < 0)
		return -1;
	if (t.rt.setup_error) {
		pisb_err_set(e, PISB_EXIT_FAIL, "setup failed, no template was saved: %s", t.rt.setup_error);
		goto out;
	}
	if (halt(&t, true, &clean, e) < 0)
		goto out;
	if (!clean) {
		pisb_err_set(e, PISB_EXIT_BACKEND,
			     "the VM did not power off when asked (its disk may not be consistent): no template was saved");
		goto out;
	}
	for (size_t i = 0; prep_leftovers[i]; i++)
		unlinkat(idir, prep_leftovers[i], 0);
	for (int i = 0; i < PISB_VM_PORTS; i++) {
		char f[32];
		snprintf(f, sizeof(f), "agent%d.sock", i);
		unlinkat(idir, f, 0);
		snprintf(f, sizeof(f), "agent%d.lock", i);
		unlinkat(idir, f, 0);
	}
	unlinkat(idir, "share", AT_REMOVEDIR);
	unlinkat(idir, "vfs-etc", AT_REMOVEDIR);
	disk = openat(idir, "disk.img", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (disk < 0 || fchmod(disk, 0400) < 0 || fsync(disk) < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "keep the template's disk");
		goto out;
	}
	if (renameat2(st->fd, live, st->fd, dest, RENAME_NOREPLACE) < 0) {
		pisb_err_sys(e, errno == EEXIST ? PISB_EXIT_BUSY : PISB_EXIT_FAIL, "publish template '%s'", name);
		goto out;
	}
	pisb_fsync_parent(st->fd, dest);
	ret = 0;
out:
	pisb_runtime_release(&t.rt);
	return ret;
}

/* create and prepare (o->prepare), from a new disk or from a template's
 * (o->template_: vm_template.c).  A sandbox is published as
 * instances/NAME before it boots; a template is made and booted under
 * staging/NAME.prep and published as templates/NAME only once its setup
 * succeeded and its VM powered off.  Any failure removes what was made. */
static int make(struct pisb_state *st, const struct pisb_config *cfg, const char *config_json,
		const struct pisb_lc_opts *o, struct pisb_err *e)
{
	bool tmpl = o->prepare, published = false, booted;
	const char *what = tmpl ? "template" : "sandbox";
	struct vm_assets a;
	_cleanup_free_ char *stg = NULL, *dest = NULL, *live = NULL, *cache = NULL;
	_cleanup_close_ int sdir = -1, lock = -1, idir = -1, tlock = -1;
	struct pisb_record rec;
	struct pisb_runtime rt;
	int ret = -1;

	memset(&a, 0, sizeof(a));
	if (!pisb_name_valid(o->name))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "invalid name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)", o->name);
	if (refuse_unsupported(cfg, e) < 0 || find_assets(&a, !o->template_, o->template_ != NULL, e) < 0)
		goto out;
	dest = xasprintf("%s/%s", tmpl ? "templates" : "instances", o->name);
	if (faccessat(st->fd, dest, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		pisb_err_set(e, PISB_EXIT_BUSY, "%s '%s' already exists", what, o->name);
		goto out;
	}
	if (tmpl && pisb_mkdirs_at(st->fd, "templates", 0700, e) < 0)
		goto out;
	/* held until the copy is published: destroy --template sees it */
	if (o->template_ && (tlock = vm_template_hold(st, o->template_, cfg, o->wait_ms, e)) < 0)
		goto out;
	sdir = pisb_instance_stage(st, o->name, &stg, &lock, e);
	if (sdir < 0)
		goto out;
	if (o->template_ ? vm_template_overlay(st, sdir, stg, o->template_, a.qemu_img, e) < 0
			 : new_disk(st, sdir, stg, cfg, o, &a, e) < 0)
		goto out;
	pisb_trace(o->template_ ? "vm: copy-on-write disk made" : "vm: disk made (mke2fs)");
	/* image: PATH: its cached base, linked in as root.img (a
	 * template's copy got its template's in vm_template_overlay) */
	if (!o->template_ && cfg->image && strcmp(cfg->image, "host") &&
	    vm_image_root(st, sdir, cfg->image, a.mke2fs, &cache, e) < 0)
		goto out;
	/* bind, bind-ro: the project is mounted at every boot, nothing copied */
	if (o->project && project_bound(cfg) && vm_project_record(sdir, o->project, cfg, e) < 0)
		goto out;
	memset(&rec, 0, sizeof(rec));
	rec.name = (char *)o->name;
	rec.driver = "vm";
	rec.created_at = pisb_now_ms() / 1000;
	rec.template_ = (char *)o->template_;
	rec.config_json = (char *)config_json;
	rec.owner.pid = o->owner_pid;
	rec.owner.start = o->owner_pid > 0 ? pisb_proc_start(o->owner_pid) : 0;
	rec.session_id = (char *)o->session_id;
	rec.image_cache = cache;
	if (pisb_record_save(sdir, &rec, e) < 0)
		goto out;
	memset(&rt, 0, sizeof(rt));
	snprintf(rt.state, sizeof(rt.state), "creating");
	if (pisb_runtime_save(sdir, &rt, e) < 0)
		goto out;
	live = tmpl ? xasprintf("staging/%s.prep", o->name) : xstrdup(dest);
	if (renameat2(st->fd, stg, st->fd, live, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST || errno == ENOTEMPTY)
			pisb_err_set(e, PISB_EXIT_BUSY, tmpl ? "template '%s' is being prepared" : "sandbox '%s' already exists",
				     o->name);
		else
			pisb_err_sys(e, PISB_EXIT_FAIL, "publish %s '%s'", what, o->name);
		goto out;
	}
	pisb_fsync_parent(st->fd, live);
	published = true;
	if (tlock >= 0) {
		close(tlock);
		tlock = -1;
	}
	idir = openat(st->fd, live, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (idir < 0) {
		pisb_err_sys(e, PISB_EXIT_FAIL, "open '%s'", live);
		goto out;
	}
	if (boot(st, o->name, live, idir, cfg, &booted, e) < 0)
		goto out;
	if (o->template_) {
		/* setup ran on the template; the first boot of its copy is a
		 * start: the resume hooks */
		/* (a bound project is the workspace: its .sandbox.yaml stays
		 * the host's business, as with the local driver) */
		if ((!project_bound(cfg) && guest_config(st, o, e) < 0) ||
		    (o->project && !project_bound(cfg) && seed_project(st, o->name, cfg, o->project, e) < 0))
			goto out;
		resume(idir, cfg);
		pisb_trace("vm: resume hooks run");
	} else {
		if (o->project && !project_bound(cfg) && seed_project(st, o->name, cfg, o->project, e) < 0)
			goto out;
		pisb_trace("vm: project seeded");
		/* a new workspace holds .sandbox.yaml: .agents/setup is
		 * looked for (an exec in the guest) only where it may be */
		vm_run_setup(idir, cfg, cfg->nsetup || workspace_may_hold(cfg, o->project));
		pisb_trace("vm: setup run");
	}
	if (tmpl && publish_template(st, idir, live, dest, cfg, o->name, e) < 0)
		goto out;
	if (!tmpl)
		services_up(idir);
	close(lock);
	lock = -1;
	if (o->ready)
		o->ready->workspace = xstrdup(cfg->workspace);
	ret = 0;
out:
	if (ret < 0) {
		struct pisb_err ig = PISB_ERR_INIT;
		if (published) {
			if (idir >= 0) {
				struct pisb_runtime r2;
				if (pisb_runtime_load(idir, &r2, &ig) == 0) {
					if (pisb_lock_is_held(idir, "controller.lock") && pisb_proc_id_alive(&r2.init))
						kill(r2.init.pid, SIGKILL);
					pisb_runtime_release(&r2);
				}
			}
			if (lock >= 0) {
				close(lock);
				lock = -1;
			}
			if (tmpl)
				pisb_rm_rf_at(st->fd, live, &ig);
			else
				pisb_state_trash(st, "instances", o->name, &ig);
		} else if (stg) {
			pisb_rm_rf_at(st->fd, stg, &ig);
		}
		pisb_err_prefix(e, "%s '%s'", tmpl ? "prepare" : "create", o->name);
	}
	assets_release(&a);
	return ret;
}

int pisb_vm_create(struct pisb_state *st, const struct pisb_config *cfg,
		   const char *config_json, const struct pisb_lc_opts *o,
		   struct pisb_err *e)
{
	return make(st, cfg, config_json, o, e);
}

int pisb_vm_start(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, struct pisb_err *e)
{
	_cleanup_free_ char *rel = xasprintf("instances/%s", sb->name);
	struct vm_inst t;
	bool booted;
	int ret;

	if (inst_open(sb, o, &t, e) < 0)
		return pisb_err_prefix(e, "start '%s'", sb->name);
	ret = boot(sb->st, sb->name, rel, t.idir, t.cfg, &booted, e);
	if (ret < 0)
		pisb_err_prefix(e, "start '%s'", sb->name);
	else if (booted) {
		resume(t.idir, t.cfg);
		services_up(t.idir);
	}
	inst_release(&t);
	return ret;
}

int pisb_vm_end(struct pisb_sandbox *sb, const struct pisb_lc_opts *o, bool destroy,
		struct pisb_ready *ev, struct pisb_err *e)
{
	struct vm_inst t;
	int ret;

	if (inst_open(sb, o, &t, e) < 0)
		return -1;
	/* stop asks the guest first; destroy does not */
	ret = halt(&t, !destroy, NULL, e);
	if (ret == 0 && !destroy)
		mark(t.idir, "stopped");
	if (ret == 0)
		ev->workspace = xstrdup(t.cfg->workspace);
	close(t.lock);
	t.lock = -1;
	inst_release(&t);
	return ret;
}
