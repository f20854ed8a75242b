#include "proc.h"
#include "err.h"
#include "util.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PISB_LIBEXECDIR
#define PISB_LIBEXECDIR "/usr/local/libexec/pisb"
#endif

static bool try_dir(const char *dir, size_t n, const char *bin, char *out, size_t on)
{
	if (n == 0 || n + strlen(bin) + 2 > on)
		return false;
	memcpy(out, dir, n);
	out[n] = '/';
	strcpy(out + n + 1, bin);
	return access(out, X_OK) == 0;
}

static bool try_list(const char *list, const char *bin, char *out, size_t on)
{
	while (list && *list) {
		const char *c = strchr(list, ':');
		size_t n = c ? (size_t)(c - list) : strlen(list);
		if (try_dir(list, n, bin, out, on))
			return true;
		list = c ? c + 1 : NULL;
	}
	return false;
}

int pisb_find_binary(const char *bin, char *out, size_t n, struct pisb_err *e)
{
	char self[PATH_MAX];
	ssize_t k;

	if (try_list(getenv("PISB_EXEC_PATH"), bin, out, n))
		return 0;
	k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (k > 0) {
		self[k] = '\0';
		char *s = strrchr(self, '/');
		if (s && try_dir(self, (size_t)(s - self), bin, out, n))
			return 0;
	}
	if (try_dir(PISB_LIBEXECDIR, strlen(PISB_LIBEXECDIR), bin, out, n))
		return 0;
	if (try_list(getenv("PATH"), bin, out, n))
		return 0;
	return pisb_err_set(e, PISB_EXIT_PISB, "cannot find '%s' (set PISB_EXEC_PATH)", bin);
}

void pisb_close_from(int from, int keep)
{
	/* close_range is fast; fall back to a loop on old kernels */
	if (keep < from) {
		if (syscall(SYS_close_range, from, ~0U, 0) == 0)
			return;
	} else {
		if ((keep == from || syscall(SYS_close_range, from, keep - 1, 0) == 0) &&
		    syscall(SYS_close_range, keep + 1, ~0U, 0) == 0)
			return;
	}
	for (int fd = from; fd < 4096; fd++)
		if (fd != keep)
			close(fd);
}

void pisb_close_except(const int *keep, size_t n)
{
	int from = 3;

	for (;;) {
		int next = -1;   /* the lowest kept fd at or above from */
		for (size_t i = 0; i < n; i++)
			if (keep[i] >= from && (next < 0 || keep[i] < next))
				next = keep[i];
		if (next < 0)
			break;
		for (int fd = from; fd < next; fd++)
			close(fd);
		from = next + 1;
	}
	pisb_close_from(from, -1);
}

char *pisb_find_tool(const char *name)
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

pid_t pisb_fork_piped(int p[2], struct pisb_err *e)
{
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "pipe");
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return pisb_err_sys(e, PISB_EXIT_FAIL, "fork");
	}
	return pid;
}

pid_t pisb_clone_vfork(int (*fn)(void *), void *arg, void *stack_top)
{
	sigset_t all, old;
	pid_t pid;
	int en;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = clone(fn, stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
	en = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = en;
	return pid;
}

void pisb_signals_reset(void)
{
	sigset_t none;

	/* the handlers first, while signals are still blocked */
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Where the stack began: argc's address, below the arguments, the
 * environment and the auxiliary vector (glibc keeps it; with another C
 * library, the kernel's startstack of /proc/self/stat), or 0. */
#ifdef __GLIBC__
extern void *__libc_stack_end;
#endif
static uintptr_t stack_start(void)
{
#ifdef __GLIBC__
	return (uintptr_t)__libc_stack_end;
#else
	unsigned long long v;
	return pisb_proc_stat(0, 28, 1, &v) < 0 ? 0 : (uintptr_t)v;
#endif
}

/* pisb_spawn_detached's two processes share our memory until the
 * detached one has exec'd (pisb_clone_vfork): the middle one makes the
 * new session and exits; the other is the detached process.  Both run on
 * stacks in this frame.  pisb_spawn_detached_fn's detached process is a
 * fork of the middle one, on its stack (in its copy of our memory). */
struct detach_arg {
	char *const *argv;
	int (*fn)(void *);   /* or this, in a copy of our memory */
	void *fn_arg;
	int log_fd, pass_fd;
	pid_t pid;   /* the detached process's, from the middle one */
	int err;     /* what failed, an errno: its clone, or its exec */
	char stack[2][32 * 1024] __attribute__((aligned(16)));
};

static int detached_main(void *p)
{
	struct detach_arg *a = p;
	int null, pass = a->pass_fd;

	/* no terminal, no inherited fds but pass_fd, which becomes fd 3
	 * (moved out of stdio's way first) */
	if (pass >= 0)
		pass = fcntl(pass, F_DUPFD_CLOEXEC, 10);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	dup2(null, 0);
	dup2(a->log_fd >= 0 ? a->log_fd : null, 1);
	dup2(a->log_fd >= 0 ? a->log_fd : null, 2);
	if (a->pass_fd >= 0 && (pass < 0 || dup2(pass, 3) != 3)) {
		a->err = errno;
		_exit(127);
	}
	pisb_close_from(pass >= 0 ? 4 : 3, -1);
	pisb_signals_reset();
	if (a->fn) {
		/* our caller's frames, from the end of the stack we run on to
		 * where the program's began: dead here (we never return; fn's
		 * argument is not on them), and no page of them stays ours */
		uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
		uintptr_t lo = ((uintptr_t)a->stack[1] + pg - 1) & ~(pg - 1);
		uintptr_t hi = stack_start() & ~(pg - 1);
		if (hi > lo)
			madvise((void *)lo, hi - lo, MADV_DONTNEED);
		_exit(a->fn(a->fn_arg));
	}
	execv(a->argv[0], a->argv);
	a->err = errno;
	_exit(127);
}

static int detach_middle(void *p)
{
	struct detach_arg *a = p;
	pid_t pid;

	setsid();
	/* fn runs in a copy of our memory: a fork (libc's, which leaves the
	 * child's state its own: its thread id, its locks), here in the
	 * middle one while we wait */
	if (a->fn) {
		pid = fork();
		if (pid == 0)
			detached_main(a);
	} else {
		pid = pisb_clone_vfork(detached_main, a, a->stack[1] + sizeof(a->stack[1]));
	}
	if (pid < 0)
		a->err = errno;
	else if (!a->err)
		a->pid = pid;
	_exit(0);
}

static pid_t spawn_detached(char *const argv[], int (*fn)(void *), void *fn_arg, int log_fd, int pass_fd,
			    struct pisb_err *e)
{
	struct detach_arg a;   /* not zeroed: 64 KiB of stacks */
	pid_t mid;

	a.argv = argv;
	a.fn = fn;
	a.fn_arg = fn_arg;
	a.log_fd = log_fd;
	a.pass_fd = pass_fd;
	a.pid = -1;
	a.err = 0;
	mid = pisb_clone_vfork(detach_middle, &a, a.stack[0] + sizeof(a.stack[0]));
	if (mid < 0)
		return pisb_err_sys(e, PISB_EXIT_FAIL, "could not start '%s': fork", argv[0]);
	while (waitpid(mid, NULL, __WALL) < 0 && errno == EINTR)
		;
	if (a.err) {
		errno = a.err;
		return pisb_err_sys(e, PISB_EXIT_FAIL, "could not start '%s'", argv[0]);
	}
	return a.pid;
}

pid_t pisb_spawn_detached(char *const argv[], int log_fd, int pass_fd, struct pisb_err *e)
{
	return spawn_detached(argv, NULL, NULL, log_fd, pass_fd, e);
}

pid_t pisb_spawn_detached_fn(const char *what, int (*fn)(void *), void *arg, int log_fd, int pass_fd,
			     struct pisb_err *e)
{
	char *const name[] = { (char *)what, NULL };

	return spawn_detached(name, fn, arg, log_fd, pass_fd, e);
}

void pisb_detach_here(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	setsid();
	if (fork() != 0)
		_exit(0);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	pisb_signals_reset();
	prctl(PR_SET_PDEATHSIG, 0);
}

int pisb_wait_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return PISB_EXIT_PISB;
}

int pisb_pidfd_open(pid_t pid)
{
	if (pid <= 0) {
		errno = EINVAL;
		return -1;
	}
	/* close-on-exec always: a pidfd is made with O_CLOEXEC */
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

int pisb_pidfd_wait(int pidfd, int timeout_ms)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	struct pollfd p = { pidfd, POLLIN, 0 };

	for (;;) {
		int64_t left = timeout_ms < 0 ? -1 : deadline - pisb_mono_ms();
		int r;

		if (timeout_ms >= 0 && left < 0)
			left = 0;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		return r > 0 ? 1 : 0;
	}
}

pid_t pisb_wait_timeout(pid_t pid, int *status, int timeout_ms)
{
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	_cleanup_close_ int pidfd = timeout_ms < 0 ? -1 : pisb_pidfd_open(pid);

	for (;;) {
		pid_t r = waitpid(pid, status, timeout_ms < 0 ? 0 : WNOHANG);
		int64_t left;

		if (r != 0 || timeout_ms < 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return r;
		}
		left = deadline - pisb_mono_ms();
		if (left <= 0)
			return 0;
		/* readable once the child has ended: no polling (kernels
		 * without pidfd_open: every 2 ms as before) */
		if (pidfd >= 0) {
			pisb_pidfd_wait(pidfd, (int)left);
		} else {
			struct timespec ts = { 0, 2 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

int pisb_run_capture(char *const argv[], char *const envp[], bool merge,
		     size_t max, int timeout_ms, struct pisb_buf *out,
		     int *exec_errno)
{
	int p[2], ep[2], status, en = 0;
	int64_t deadline = pisb_mono_ms() + timeout_ms;
	pid_t pid;

	*exec_errno = 0;
	if (pipe2(p, O_CLOEXEC) < 0) {
		*exec_errno = errno;
		return -1;
	}
	if (pipe2(ep, O_CLOEXEC) < 0) {
		*exec_errno = errno;
		close(p[0]);
		close(p[1]);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		*exec_errno = errno;
		close(p[0]); close(p[1]); close(ep[0]); close(ep[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		setpgid(0, 0);
		dup2(null, 0);
		dup2(p[1], 1);
		dup2(merge ? p[1] : null, 2);
		if (envp)
			execvpe(argv[0], argv, envp);
		else
			execvp(argv[0], argv);
		en = errno;
		pisb_write_all(ep[1], &en, sizeof(en));
		_exit(127);
	}
	close(p[1]);
	close(ep[1]);
	/* EOF at once if the exec worked (the pipe is close-on-exec) */
	if (pisb_read_all(ep[0], &en, sizeof(en)) != sizeof(en))
		en = 0;
	close(ep[0]);
	pisb_read_until(p[0], out, deadline, max);
	close(p[0]);
	{
		int64_t left = deadline - pisb_mono_ms();
		if (pisb_wait_timeout(pid, &status, left > 0 ? (int)left : 0) <= 0) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			*exec_errno = en;
			return en ? -1 : -2;
		}
	}
	*exec_errno = en;
	return en ? -1 : pisb_wait_code(status);
}

void pisb_random_hex(char *out, size_t n)
{
	unsigned char raw[32];
	static const char hex[] = "0123456789abcdef";

	if (n > 63)
		n = 63;
	if (getrandom(raw, sizeof(raw), 0) < 0) {
		uint64_t t = (uint64_t)pisb_now_ms() ^ ((uint64_t)getpid() << 32);
		memcpy(raw, &t, sizeof(t));
		memcpy(raw + 8, &t, sizeof(t));
	}
	for (size_t i = 0; i < n; i++)
		out[i] = hex[(raw[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
	out[n] = '\0';
}

/* Does the object have text relocations (code pages written at load)? */
static PISB_IDLE_PATH bool has_textrel(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_DYNAMIC)
			continue;
		for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr); d->d_tag != DT_NULL; d++)
			if (d->d_tag == DT_TEXTREL || (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)))
				return true;
	}
	return false;
}

/* the read-only segments to drop, gathered first: the program headers
 * they are found by lie in them */
struct ro_ranges {
	size_t n;
	uintptr_t r[64][2];
};

static PISB_IDLE_PATH int find_ro_segments(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct ro_ranges *rs = arg;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);

	(void)size;
	/* the vDSO is the kernel's, not a file's */
	if (info->dlpi_name && strstr(info->dlpi_name, "linux-vdso"))
		return 0;
	if (has_textrel(info))
		return 0;
	for (int i = 0; i < info->dlpi_phnum && rs->n < 64; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a, b;
		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
			continue;
		/* whole pages only: an edge page may be a neighbour's */
		a = (info->dlpi_addr + ph->p_vaddr + pg - 1) & ~(pg - 1);
		b = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(pg - 1);
		if (b > a) {
			rs->r[rs->n][0] = a;
			rs->r[rs->n++][1] = b;
		}
	}
	return 0;
}

/* The stack below our frame: pages that the deepest calls of a start
 * touched (a boot, a command's spawn; in a forked controller, its
 * starter's), dead from here on; a later call that goes as deep faults
 * zeroed pages in again.  Its lowest address is the [stack] mapping's. */
static PISB_IDLE_PATH void __attribute__((noinline)) trim_stack(void)
{
	char line[256], here;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = 0, hi = 0;
	/* room for the calls below us (fgets, madvise): two pages */
	uintptr_t top = (((uintptr_t)&here) & ~(pg - 1)) - 2 * pg;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			break;
	fclose(f);
	if (lo && (uintptr_t)&here > lo && (uintptr_t)&here < hi && top > lo)
		madvise((void *)lo, top - lo, MADV_DONTNEED);
}

PISB_IDLE_PATH void pisb_proc_idle_trim(void)
{
	struct ro_ranges rs = { 0 };

	/* first: its maps reader's buffer is freed before the heap's trim */
	trim_stack();
#ifdef __GLIBC__
	/* (the musl build's allocator, malloc.c, keeps its free chunks: an
	 * idle controller's are small, and a trim of their pages gave back
	 * 2 KiB of PSS per sandbox of 10, 156 -> 154) */
	malloc_trim(0);
#endif
	dl_iterate_phdr(find_ro_segments, &rs);
	for (size_t i = 0; i < rs.n; i++)
		madvise((void *)rs.r[i][0], rs.r[i][1] - rs.r[i][0], MADV_DONTNEED);
}

/* The environment's strings, copied out of the place the kernel put them
 * (pisb_proc_cmdline_set writes over it) */
static void environ_move(void)
{
	static bool moved;
	size_t n = 0;
	char **v;

	if (moved)
		return;
	moved = true;
	while (environ && environ[n])
		n++;
	v = xcalloc(n + 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = xstrdup(environ[i]);
	environ = v;
}

int pisb_proc_stat(pid_t pid, int first, int n, unsigned long long *v)
{
	char path[64], buf[1024], *p;
	_cleanup_close_ int fd = -1;
	ssize_t k;

	if (pid < 0 || first < 4)
		return -1;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (k = pisb_read_all(fd, buf, sizeof(buf) - 1)) <= 0)
		return -1;
	buf[k] = '\0';
	/* the command name may hold spaces and parens: after its last ')'
	 * comes field 3 */
	p = strrchr(buf, ')');
	for (int f = 3; p && f <= first; f++)
		p = strchr(p + 1, ' ');
	for (int i = 0; i < n; i++) {
		char *end;
		if (!p)
			return -1;
		v[i] = strtoull(p + 1, &end, 10);
		if (end == p + 1)
			return -1;
		p = *end == ' ' ? end : NULL;
	}
	return 0;
}

int pisb_proc_cmdline_set(const char *const *args)
{
	unsigned long long f[4];
	unsigned long start, end, env_start, env_end;
	char *p, *at;
	size_t need = 0;
	bool spill;

	/* arg_start, arg_end, env_start, env_end */
	if (pisb_proc_stat(0, 48, 4, f) < 0 || f[1] <= f[0])
		return -1;
	start = f[0], end = f[1], env_start = f[2], env_end = f[3];
	at = (char *)start;
	for (size_t i = 0; args[i]; i++)
		need += strlen(args[i]) + 1;
	/* longer than the place of the arguments: one line over it and the
	 * environment's after it (as setproctitle does; the kernel reads it
	 * to its end when the arguments' last byte is not a NUL), the
	 * environment copied away first */
	spill = need > end - start;
	if (spill && (env_start != end || need > env_end - start))
		return -1;
	if (spill)
		environ_move();
	memset(at, 0, (spill ? env_end : end) - start);
	for (size_t i = 0; args[i]; i++)
		at = stpcpy(at, args[i]) + 1;
	if (spill)
		for (p = (char *)start; p < at - 1; p++)
			if (!*p)
				*p = ' ';
	return 0;
}
