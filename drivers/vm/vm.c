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
#include "events.h"
#include "lifecycle.h"
#include "instance.h"
#include "json.h"
#include "lock.h"
#include "opensandbox.h"
#include "proc.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VM_BOOT_TIMEOUT_MS 180000
#define VM_KVM_GRACE_MS 2500
#define VM_KVM_BOOT_MS 60000

static const char *const vm_modules[] = { "virtio_pci", "virtio_mmio", "virtio_blk",
	"virtio_console", "virtio_rng", NULL };

static int env_ms(const char *var, int dflt)
{
	const char *v = getenv(var);
	long long n;

	return v && pisb_parse_ll(v, 1, 3600000, &n) == 0 ? (int)n : dflt;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

/* ---- assets ---- */

struct vm_assets {
	char *kernel, *modules, *qemu, *agent, *busybox, *mke2fs;
};

static void assets_release(struct vm_assets *a)
{
	free(a->kernel);
	free(a->modules);
	free(a->qemu);
	free(a->agent);
	free(a->busybox);
	free(a->mke2fs);
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

static char *path_find(const char *name)
{
	const char *path = getenv("PATH");
	static const char *const extra[] = { "/usr/sbin", "/sbin", NULL };

	while (path && *path) {
		const char *c = strchr(path, ':');
		size_t len = c ? (size_t)(c - path) : strlen(path);
		if (len) {
			char *p = xasprintf("%.*s/%s", (int)len, path, name);
			if (access(p, X_OK) == 0)
				return p;
			free(p);
		}
		path += len + (c ? 1 : 0);
	}
	for (size_t i = 0; extra[i]; i++) {
		char *p = xasprintf("%s/%s", extra[i], name);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
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

static int find_assets(struct vm_assets *a, bool need_mke2fs, struct pisb_err *e)
{
	const char *q = getenv("PISB_VM_QEMU"), *bb = getenv("PISB_VM_BUSYBOX");
	char agent[4096];

	memset(a, 0, sizeof(*a));
	a->qemu = q && *q ? xstrdup(q) : path_find("qemu-system-x86_64");
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
	if (bb && *bb)
		a->busybox = xstrdup(bb);
	else
		a->busybox = xstrdup(is_file("/bin/busybox") ? "/bin/busybox" : "/usr/bin/busybox");
	if (!is_file(a->busybox) || !elf_static(a->busybox))
		return pisb_err_set(e, PISB_EXIT_BACKEND,
				    "the vm driver needs a static busybox for the guest: '%s' is missing or dynamic (install busybox-static, or set PISB_VM_BUSYBOX)",
				    a->busybox);
	if (need_mke2fs && !(a->mke2fs = path_find("mke2fs")))
		return pisb_err_set(e, PISB_EXIT_BACKEND, "the vm driver needs mke2fs for the guest's disk (install e2fsprogs)");
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

static int build_initrd(int idir, const struct vm_assets *a, struct pisb_err *e)
{
	_cleanup_strv_ struct pisb_strv names = PISB_STRV_INIT, paths = PISB_STRV_INIT,
					order = PISB_STRV_INIT;
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT, list = PISB_BUF_INIT;
	static const char *const dirs[] = { "bin", "dev", "proc", "sys", "modules", "newroot", NULL };
	unsigned ino = 0;

	scan_modules(a->modules, "kernel", &names, &paths);
	for (size_t i = 0; vm_modules[i]; i++)
		if (add_module(a->modules, vm_modules[i], &names, &paths, &order, 0, e) < 0)
			return -1;
	cpio_add(&b, &ino, ".", S_IFDIR | 0755, NULL, 0, 0, 0);
	for (size_t i = 0; dirs[i]; i++)
		cpio_add(&b, &ino, dirs[i], S_IFDIR | 0755, NULL, 0, 0, 0);
	cpio_add(&b, &ino, "dev/console", S_IFCHR | 0600, NULL, 0, 5, 1);
	cpio_add(&b, &ino, "pisb-initramfs", S_IFREG | 0644, NULL, 0, 0, 0);
	if (cpio_file(&b, &ino, "init", a->agent, e) < 0 ||
	    cpio_file(&b, &ino, "bin/busybox", a->busybox, e) < 0)
		return -1;
	for (size_t i = 0; i < order.n; i++) {
		_cleanup_free_ char *src = xasprintf("%s/%s", a->modules, order.v[i]);
		_cleanup_free_ char *dst = NULL;
		const char *base = strrchr(order.v[i], '/');
		base = base ? base + 1 : order.v[i];
		dst = xasprintf("modules/%s", base);
		if (cpio_file(&b, &ino, dst, src, e) < 0)
			return -1;
		pisb_buf_addf(&list, "%s\n", base);
	}
	cpio_add(&b, &ino, "modules/order", S_IFREG | 0644, list.s, list.len, 0, 0);
	cpio_add(&b, &ino, "TRAILER!!!", 0, NULL, 0, 0, 0);
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
		note = pisb_json_str(&j, pisb_json_get(&j, 0, "accelNote"));
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
	int socks[1 + PISB_VM_EXEC_PORTS];
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
	return xstrndup(start, (size_t)(end - start));
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

static void qemu_argv(const struct boot *bt, bool kvm, struct pisb_strv *av)
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
	pisb_strv_push(av, micro ? "microvm,isa-serial=on,auto-kernel-cmdline=on" : "q35");
	pisb_strv_push(av, "-accel");
	pisb_strv_push(av, kvm ? "kvm" : "tcg");
	pisb_strv_push(av, "-cpu");
	pisb_strv_push(av, kvm ? "host" : "max");
	pisb_strv_push(av, "-m");
	pisb_strv_pushf(av, "%dM", bt->cfg->memory_gib * 1024);
	pisb_strv_push(av, "-smp");
	pisb_strv_pushf(av, "%d", bt->cfg->cpus);
	pisb_strv_push(av, "-kernel");
	pisb_strv_push(av, bt->a.kernel);
	pisb_strv_push(av, "-initrd");
	pisb_strv_push(av, "initrd.cpio");
	pisb_strv_push(av, "-append");
	pisb_strv_pushf(av, "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init pisb.name=%s pisb.ws=%s",
			bt->name, bt->cfg->workspace);
	pisb_strv_push(av, "-chardev");
	pisb_strv_push(av, "file,id=con0,path=console.log");
	pisb_strv_push(av, "-serial");
	pisb_strv_push(av, "chardev:con0");
	pisb_strv_push(av, "-drive");
	pisb_strv_push(av, "file=disk.img,format=raw,if=none,id=disk0,cache=writeback,discard=unmap");
	pisb_strv_push(av, "-device");
	pisb_strv_pushf(av, "virtio-blk-%s,drive=disk0", bus);
	pisb_strv_push(av, "-object");
	pisb_strv_push(av, "rng-random,id=rng0,filename=/dev/urandom");
	pisb_strv_push(av, "-device");
	pisb_strv_pushf(av, "virtio-rng-%s,rng=rng0", bus);
	pisb_strv_push(av, "-device");
	pisb_strv_pushf(av, "virtio-serial-%s,id=vser0,max_ports=8", bus);
	for (int i = 0; i <= PISB_VM_EXEC_PORTS; i++) {
		pisb_strv_push(av, "-chardev");
		pisb_strv_pushf(av, "socket,id=agent%d,fd=%d,server=on,wait=off", i, bt->socks[i]);
		pisb_strv_push(av, "-device");
		pisb_strv_pushf(av, "virtserialport,bus=vser0.0,chardev=agent%d,name=" PISB_VM_PORT_PREFIX "%d", i, i);
	}
	/* seccomp: no spawning, no privilege changes, no obsolete calls */
	pisb_strv_push(av, "-sandbox");
	pisb_strv_push(av, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
}

static pid_t launch(const struct boot *bt, bool kvm)
{
	_cleanup_strv_ struct pisb_strv av = PISB_STRV_INIT;
	pid_t parent = getpid(), pid;
	int log = openat(bt->idir, "qemu.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	qemu_argv(bt, kvm, &av);
	if (log >= 0) {
		_cleanup_buf_ struct pisb_buf line = PISB_BUF_INIT;
		pisb_buf_addf(&line, "pisb: starting QEMU with %s (%s)\n", kvm ? "KVM" : "TCG",
			      use_microvm(kvm) ? "microvm" : "q35");
		pisb_write_all(log, line.s, line.len);
	}
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		/* QEMU goes with its supervisor */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		dup2(null, 0);
		if (log >= 0) {
			dup2(log, 1);
			dup2(log, 2);
		}
		for (int i = 0; i <= PISB_VM_EXEC_PORTS; i++)
			fcntl(bt->socks[i], F_SETFD, 0);
		execv(av.v[0], av.v);
		_exit(127);
	}
	if (log >= 0)
		close(log);
	return pid;
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
	pisb_jw_kstr(&w, "kernel", bt->a.kernel);
	pisb_jw_kstr(&w, "qemu", bt->a.qemu);
	pisb_jw_kint(&w, "memoryMiB", bt->cfg->memory_gib * 1024);
	pisb_jw_kint(&w, "cpus", bt->cfg->cpus);
	pisb_jw_kstr(&w, "disk", "raw ext4 image disk.img (sparse)");
	pisb_jw_kbool(&w, "network", false);
	pisb_jw_obj_end(&w);
	free(rt->extra_json);
	rt->extra_json = pisb_buf_detach(&b);
}

static void report(const struct boot *bt, bool ok, const char *msg)
{
	_cleanup_free_ char *s = xasprintf("%s\n%s", ok ? "ok" : "fail", msg ? msg : "");
	pisb_write_all(bt->report, s, strlen(s));
	close(bt->report);
}

static void __attribute__((noreturn)) supervise(struct boot *bt)
{
	const char *forced = getenv("PISB_VM_ACCEL");
	_cleanup_free_ char *note = NULL;
	struct pisb_runtime rt;
	struct pisb_err ig = PISB_ERR_INIT;
	bool kvm;
	int64_t deadline, kvm_deadline;
	pid_t q;
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
		if (!kvm)
			note = xstrdup("/dev/kvm is missing or not usable by this user: running under TCG (software emulation, much slower)");
	}
	q = launch(bt, kvm);
	if (q > 0 && kvm && !(forced && !strcmp(forced, "kvm")) &&
	    pisb_wait_timeout(q, &status, VM_KVM_GRACE_MS) == q) {
		_cleanup_free_ char *why = qemu_reason(bt->idir);
		note = xasprintf("KVM is not usable here (QEMU: %s): fell back to TCG (software emulation, much slower)", why);
		kvm = false;
		q = launch(bt, false);
	}
	if (q < 0) {
		report(bt, false, "cannot start QEMU (fork failed)");
		_exit(1);
	}
	if (pisb_runtime_load(bt->idir, &rt, &ig) < 0)
		memset(&rt, 0, sizeof(rt));
	snprintf(rt.state, sizeof(rt.state), "starting");
	rt.controller.pid = getpid();
	rt.controller.start = pisb_proc_start(rt.controller.pid);
	rt.init.pid = q;
	rt.init.start = pisb_proc_start(q);
	pisb_random_hex(rt.generation, 16);
	extra_json(bt, kvm, note, &rt);
	pisb_runtime_save(bt->idir, &rt, &ig);

	deadline = pisb_mono_ms() + env_ms("PISB_VM_BOOT_TIMEOUT_MS", VM_BOOT_TIMEOUT_MS);
	kvm_deadline = pisb_mono_ms() + env_ms("PISB_VM_KVM_BOOT_MS", VM_KVM_BOOT_MS);
	for (;;) {
		bool died = waitpid(q, &status, WNOHANG) == q;
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
						env_ms("PISB_VM_KVM_BOOT_MS", VM_KVM_BOOT_MS) / 1000);
			kvm = false;
			q = launch(bt, false);
			if (q < 0) {
				report(bt, false, "cannot start QEMU (fork failed)");
				_exit(1);
			}
			rt.init.pid = q;
			rt.init.start = pisb_proc_start(q);
			extra_json(bt, kvm, note, &rt);
			pisb_runtime_save(bt->idir, &rt, &ig);
			deadline = pisb_mono_ms() + env_ms("PISB_VM_BOOT_TIMEOUT_MS", VM_BOOT_TIMEOUT_MS);
			continue;
		}
		if (died) {
			_cleanup_free_ char *why = qemu_reason(bt->idir);
			_cleanup_free_ char *con = last_line_of(bt->idir, "console.log");
			_cleanup_free_ char *msg = xasprintf("QEMU exited while the guest booted (qemu.log: %s; console.log: %s)", why, con);
			report(bt, false, msg);
			_exit(1);
		}
		if (vm_ping(bt->idir, 1000) == 0)
			break;
		if (pisb_mono_ms() > deadline) {
			_cleanup_free_ char *con = last_line_of(bt->idir, "console.log");
			_cleanup_free_ char *msg = xasprintf("the guest agent did not answer within %d s (console.log: %s)",
							     env_ms("PISB_VM_BOOT_TIMEOUT_MS", VM_BOOT_TIMEOUT_MS) / 1000, con);
			kill(q, SIGKILL);
			waitpid(q, &status, 0);
			report(bt, false, msg);
			_exit(1);
		}
		sleep_ms(200);
	}
	snprintf(rt.state, sizeof(rt.state), "running");
	rt.started_at = pisb_now_ms() / 1000;
	pisb_runtime_save(bt->idir, &rt, &ig);
	pisb_runtime_release(&rt);
	report(bt, true, note);
	/* the sandbox runs as long as QEMU does; status.json is left as it is
	 * (a VM that died unasked shows "interrupted", see pisb_vm_status) */
	while (waitpid(q, &status, 0) < 0 && errno == EINTR) {
	}
	_exit(0);
}

static int make_socket(int idir, int port, struct pisb_err *e)
{
	struct sockaddr_un sa;
	char name[32];
	mode_t old;
	int fd;

	snprintf(name, sizeof(name), "agent%d.sock", port);
	unlinkat(idir, name, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", idir, name);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "socket");
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0) {
		umask(old);
		close(fd);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "listen on '%s'", name);
	}
	umask(old);
	return fd;
}

/* Boot the instance (op.lock held by the caller): a no-op when its VM
 * runs.  The accelerator note lands in status.json (pisb_vm_accel_note). */
static int boot(struct pisb_state *st, const char *name, int idir, const struct pisb_config *cfg,
		struct pisb_err *e)
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
	for (int i = 0; i <= PISB_VM_EXEC_PORTS; i++)
		bt.socks[i] = -1;
	if (pisb_lock_is_held(idir, "controller.lock"))
		return 0;
	if (find_assets(&bt.a, false, e) < 0 || build_initrd(idir, &bt.a, e) < 0)
		goto out;
	bt.dir = xasprintf("%s/instances/%s", st->path, name);
	snprintf(what, sizeof(what), "sandbox '%s' (its VM)", name);
	bt.ctl = pisb_lock_acquire(idir, "controller.lock", true, 0, what, e);
	if (bt.ctl < 0)
		goto out;
	for (int i = 0; i <= PISB_VM_EXEC_PORTS; i++)
		if ((bt.socks[i] = make_socket(idir, i, e)) < 0)
			goto out;
	{
		int fd = openat(idir, "console.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		int fq = openat(idir, "qemu.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0)
			close(fd);
		if (fq >= 0)
			close(fq);
	}
	mark(idir, "starting");
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
		int null, keep[3 + 1 + PISB_VM_EXEC_PORTS], n = 0, fd = 3;
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
		for (int i = 0; i <= PISB_VM_EXEC_PORTS; i++)
			keep[n++] = fcntl(bt.socks[i], F_DUPFD_CLOEXEC, 200);
		for (int i = 0; i < n; i++) {
			dup3(keep[i], fd + i, O_CLOEXEC);
		}
		pisb_close_from(fd + n, -1);
		bt.idir = fd;
		bt.ctl = fd + 1;
		bt.report = fd + 2;
		for (int i = 0; i <= PISB_VM_EXEC_PORTS; i++)
			bt.socks[i] = fd + 3 + i;
		supervise(&bt);
	}
	close(p[1]);
	p[1] = -1;
	waitpid(child, NULL, 0);
	for (int i = 0; i <= PISB_VM_EXEC_PORTS; i++) {
		close(bt.socks[i]);
		bt.socks[i] = -1;
	}
	close(bt.ctl);
	bt.ctl = -1;
	pisb_read_fd(p[0], &msg, 64 << 10);
	if (msg.s && pisb_str_starts(msg.s, "ok\n")) {
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
	for (int i = 0; i <= PISB_VM_EXEC_PORTS; i++)
		if (bt.socks[i] >= 0)
			close(bt.socks[i]);
	if (bt.ctl >= 0)
		close(bt.ctl);
	assets_release(&bt.a);
	free(bt.dir);
	return ret;
}

/* ---- lifecycle ---- */

static int emit(const struct pisb_lc_opts *o, const char *event, const char *name,
		const char *ws, const char *mode, struct pisb_err *e)
{
	struct pisb_event ev = { event, name, "vm", NULL, ws, !strcmp(event, "ready"), false, mode };

	return pisb_lifecycle_event(o, &ev, e);
}

static int refuse_unsupported(const struct pisb_config *cfg, struct pisb_err *e)
{
	if (cfg->nservices)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "services: the vm driver does not run services yet (a vm sandbox has no network and no previews); use driver local");
	if (cfg->nallowed_hosts)
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "network.allowedHosts: a vm sandbox has no network device at all; use driver local for an egress allowlist");
	if (cfg->nresume)
		return pisb_err_set(e, PISB_EXIT_USAGE, "resume: the vm driver does not run resume hooks yet");
	if (cfg->image && strcmp(cfg->image, "host"))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "image: the vm driver boots a busybox userland on its own disk; rootfs images are not supported yet (omit image, or use driver local)");
	if (strpbrk(cfg->workspace, " \t\n"))
		return pisb_err_set(e, PISB_EXIT_USAGE, "workspace: the vm driver needs a path without spaces");
	return 0;
}

static void run_setup(int idir, const struct pisb_config *cfg)
{
	_cleanup_strv_ struct pisb_strv env = PISB_STRV_INIT;
	_cleanup_close_ int log = openat(idir, "setup.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	char *failed = NULL;

	pisb_strv_push(&env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	pisb_strv_push(&env, "HOME=/root");
	for (size_t i = 0; i < cfg->env.n; i++)
		pisb_strv_pushf(&env, "%s=%s", cfg->env.v[i].key, cfg->env.v[i].val);
	for (size_t i = 0; i < cfg->nsetup && !failed; i++) {
		char *argv[] = { "/bin/sh", "-lc", cfg->setup[i], NULL };
		struct vm_run r = { argv, env.v, cfg->workspace, -1, log, log, false, false };
		struct pisb_err e = PISB_ERR_INIT;
		int code = 0;
		if (vm_run(idir, &r, &code, &e) < 0)
			failed = xasprintf("setup[%zu] '%s': %s", i, cfg->setup[i], e.msg);
		else if (code)
			failed = xasprintf("setup[%zu] '%s' exited with %d", i, cfg->setup[i], code);
	}
	if (failed) {
		struct pisb_runtime rt;
		struct pisb_err ig = PISB_ERR_INIT;
		if (pisb_runtime_load(idir, &rt, &ig) == 0) {
			free(rt.setup_error);
			rt.setup_error = failed;
			failed = NULL;
			pisb_runtime_save(idir, &rt, &ig);
			pisb_runtime_release(&rt);
		}
		free(failed);
	}
}

int pisb_vm_create(struct pisb_state *st, const struct pisb_config *cfg,
		   const char *config_json, const struct pisb_lc_opts *o,
		   struct pisb_err *e)
{
	struct vm_assets a;
	_cleanup_free_ char *stg = NULL, *dest = NULL, *img = NULL;
	_cleanup_close_ int sdir = -1, lock = -1, idir = -1;
	struct pisb_record rec;
	struct pisb_runtime rt;
	bool published = false;
	int ret = -1;

	memset(&a, 0, sizeof(a));
	if (!pisb_name_valid(o->name))
		return pisb_err_set(e, PISB_EXIT_USAGE,
				    "invalid name '%s' (lowercase letter, then up to 39 of a-z 0-9 -)", o->name);
	if (refuse_unsupported(cfg, e) < 0 || find_assets(&a, true, e) < 0) {
		assets_release(&a);
		return pisb_err_prefix(e, "create '%s'", o->name);
	}
	dest = xasprintf("instances/%s", o->name);
	if (faccessat(st->fd, dest, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		assets_release(&a);
		return pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", o->name);
	}
	sdir = pisb_instance_stage(st, o->name, &stg, &lock, e);
	if (sdir < 0)
		goto out;
	/* the disk: a sparse ext4 image, made here (the guest has no mkfs) */
	img = xasprintf("%s/%s/disk.img", st->path, stg);
	{
		char size[32];
		snprintf(size, sizeof(size), "%dG", cfg->disk_gib);
		char *argv[] = { a.mke2fs, "-q", "-F", "-t", "ext4", "-L", "pisb-root", "-m", "0",
				 "-E", "lazy_itable_init=1,lazy_journal_init=1", img, size, NULL };
		_cleanup_buf_ struct pisb_buf out = PISB_BUF_INIT;
		int xe = 0, code = pisb_run_capture(argv, NULL, true, 8192, 120000, &out, &xe);
		if (code != 0) {
			pisb_err_set(e, PISB_EXIT_BACKEND, "make the disk with mke2fs: %s",
				     out.s && out.len ? out.s : code == -1 ? strerror(xe) : "failed");
			goto out;
		}
		if (fchmodat(st->fd, strchr(img + strlen(st->path), '/') + 1, 0600, 0) < 0) {
		}
	}
	memset(&rec, 0, sizeof(rec));
	rec.name = (char *)o->name;
	rec.driver = "vm";
	rec.created_at = pisb_now_ms() / 1000;
	rec.config_json = (char *)config_json;
	rec.owner.pid = o->owner_pid;
	rec.owner.start = o->owner_pid > 0 ? pisb_proc_start(o->owner_pid) : 0;
	rec.session_id = (char *)o->session_id;
	if (pisb_record_save(sdir, &rec, e) < 0)
		goto out;
	memset(&rt, 0, sizeof(rt));
	snprintf(rt.state, sizeof(rt.state), "creating");
	if (pisb_runtime_save(sdir, &rt, e) < 0)
		goto out;
	if (renameat2(st->fd, stg, st->fd, dest, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST || errno == ENOTEMPTY)
			pisb_err_set(e, PISB_EXIT_BUSY, "sandbox '%s' already exists", o->name);
		else
			pisb_err_sys(e, PISB_EXIT_FAIL, "publish sandbox '%s'", o->name);
		goto out;
	}
	pisb_fsync_dir(st->fd);
	published = true;
	idir = pisb_instance_open(st, "instances", o->name, e);
	if (idir < 0 || boot(st, o->name, idir, cfg, e) < 0)
		goto out;
	run_setup(idir, cfg);
	close(lock);
	lock = -1;
	if (emit(o, "ready", o->name, cfg->workspace, NULL, e) < 0)
		goto out;
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
			pisb_state_trash(st, "instances", o->name, &ig);
		} else if (stg) {
			pisb_rm_rf_at(st->fd, stg, &ig);
		}
		pisb_err_prefix(e, "create '%s'", o->name);
	}
	assets_release(&a);
	return ret;
}

struct vm_inst {
	int idir, lock;
	struct pisb_record rec;
	struct pisb_runtime rt;
	struct pisb_config *cfg;
};

static int inst_open(struct pisb_state *st, const char *name, const struct pisb_lc_opts *o,
		     struct vm_inst *t, struct pisb_err *e)
{
	char what[96];

	memset(t, 0, sizeof(*t));
	t->lock = -1;
	t->idir = pisb_instance_open(st, "instances", name, e);
	if (t->idir < 0)
		return -1;
	if (pisb_record_load(t->idir, &t->rec, e) < 0)
		goto fail0;
	if (strcmp(t->rec.driver, "vm")) {
		pisb_err_set(e, PISB_EXIT_FAIL, "sandbox '%s' uses driver '%s', not vm", name, t->rec.driver);
		goto fail1;
	}
	if (pisb_record_config(&t->rec, &t->cfg, e) < 0)
		goto fail1;
	snprintf(what, sizeof(what), "sandbox '%s'", name);
	t->lock = pisb_lock_acquire(t->idir, "op.lock", true, o ? o->wait_ms : 0, what, e);
	if (t->lock < 0)
		goto fail2;
	if (pisb_runtime_load(t->idir, &t->rt, e) < 0)
		goto fail3;
	return 0;
fail3:
	close(t->lock);
fail2:
	pisb_config_free(t->cfg);
fail1:
	pisb_record_release(&t->rec);
fail0:
	close(t->idir);
	return -1;
}

static void inst_release(struct vm_inst *t)
{
	if (t->lock >= 0)
		close(t->lock);
	pisb_runtime_release(&t->rt);
	pisb_config_free(t->cfg);
	pisb_record_release(&t->rec);
	close(t->idir);
}

/* Wait until the supervisor is gone; QEMU is asked (poweroff), then
 * told (TERM, KILL). */
static int halt(struct vm_inst *t, bool graceful, struct pisb_err *e)
{
	int64_t deadline;

	if (!pisb_lock_is_held(t->idir, "controller.lock"))
		return 0;
	mark(t->idir, "stopping");
	if (graceful && vm_poweroff(t->idir, 5000) == 0) {
		deadline = pisb_mono_ms() + env_ms("PISB_VM_STOP_MS", 20000);
		while (pisb_lock_is_held(t->idir, "controller.lock") && pisb_mono_ms() < deadline)
			sleep_ms(100);
	}
	for (int sig = graceful ? SIGTERM : SIGKILL; pisb_lock_is_held(t->idir, "controller.lock");
	     sig = SIGKILL) {
		if (pisb_proc_id_alive(&t->rt.init))
			kill(t->rt.init.pid, sig);
		else if (pisb_proc_id_alive(&t->rt.controller))
			kill(t->rt.controller.pid, sig);
		deadline = pisb_mono_ms() + 3000;
		while (pisb_lock_is_held(t->idir, "controller.lock") && pisb_mono_ms() < deadline)
			sleep_ms(50);
		if (sig == SIGKILL && pisb_lock_is_held(t->idir, "controller.lock"))
			return pisb_err_set(e, PISB_EXIT_BACKEND, "the VM's supervisor does not exit");
	}
	return 0;
}

int pisb_vm_start(struct pisb_state *st, const char *name,
		  const struct pisb_lc_opts *o, struct pisb_err *e)
{
	struct vm_inst t;
	int ret;

	if (inst_open(st, name, o, &t, e) < 0)
		return pisb_err_prefix(e, "start '%s'", name);
	ret = boot(st, name, t.idir, t.cfg, e);
	if (ret < 0)
		pisb_err_prefix(e, "start '%s'", name);
	inst_release(&t);
	return ret;
}

int pisb_vm_stop(struct pisb_state *st, const char *name,
		 const struct pisb_lc_opts *o, struct pisb_err *e)
{
	struct vm_inst t;
	int ret;

	if (inst_open(st, name, o, &t, e) < 0)
		return pisb_err_prefix(e, "stop '%s'", name);
	ret = halt(&t, true, e);
	if (ret == 0)
		mark(t.idir, "stopped");
	close(t.lock);
	t.lock = -1;
	if (ret == 0)
		ret = emit(o, "released", name, t.cfg->workspace, "stop", e);
	if (ret < 0)
		pisb_err_prefix(e, "stop '%s'", name);
	inst_release(&t);
	return ret;
}

int pisb_vm_destroy(struct pisb_state *st, const char *name,
		    const struct pisb_lc_opts *o, struct pisb_err *e)
{
	struct vm_inst t;
	_cleanup_free_ char *ws = NULL;
	int ret;

	if (inst_open(st, name, o, &t, e) < 0)
		return pisb_err_prefix(e, "destroy '%s'", name);
	ws = xstrdup(t.cfg->workspace);
	ret = halt(&t, false, e);
	close(t.lock);
	t.lock = -1;
	inst_release(&t);
	if (ret == 0)
		ret = pisb_state_trash(st, "instances", name, e);
	if (ret == 0)
		ret = emit(o, "released", name, ws, "remove", e);
	if (ret < 0)
		pisb_err_prefix(e, "destroy '%s'", name);
	return ret;
}
