/* pisb-init - pid 1 of a local sandbox: reap, and obey the controller.
 *
 * The boot (drivers/local/ns.c) builds the sandbox in a fork of the
 * controller, then execs this small static program as its init, with the
 * controller's socket at fd 3.  A fork of the controller would keep a copy
 * of everything the controller had mapped and written (its heap, its
 * libraries' data) for as long as the sandbox lives; this holds a few
 * pages.  It links nothing of libpisb and reads nothing from the sandbox.
 * On x86-64 it is built without a C library (its own _start and system
 * calls: a few KiB, every sandbox's init sharing them); on other machines
 * with the C library, static.
 *
 * The protocol on fd 3 (one byte each way): 'K' from the controller: SIGKILL
 * every other process of the pid namespace, reap them all, answer 'k'.  End
 * of file: the controller is gone, and the sandbox goes with it.
 *
 * SIGCHLD is ignored (SIG_IGN): the kernel reaps the processes that end
 * as our children (the orphans of the sandbox) itself, and the loop sleeps
 * until the controller speaks: an idle sandbox's init never wakes.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#define CTL 3

#if defined(PISB_INIT_NOLIBC) && defined(__x86_64__)
static long sys6(long n, long a, long b, long c, long d, long e)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;

	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return r;
}
__asm__(".text\n.global _start\n_start:\n\txor %rbp,%rbp\n\tand $-16,%rsp\n\tcall init_main\n\thlt\n");
#elif defined(PISB_INIT_NOLIBC)
#error "PISB_INIT_NOLIBC: no system calls for this machine"
#else
#include <unistd.h>
static long sys6(long n, long a, long b, long c, long d, long e)
{
	long r = syscall(n, a, b, c, d, e);
	return r < 0 ? -errno : r;
}
#endif

/* each returns the kernel's answer: >= 0, or -errno */
static long sys_read(int fd, void *p, size_t n) { return sys6(SYS_read, fd, (long)p, (long)n, 0, 0); }
static long sys_write(int fd, const void *p, size_t n) { return sys6(SYS_write, fd, (long)p, (long)n, 0, 0); }
static long sys_wait(int options) { return sys6(SYS_wait4, -1, 0, options, 0, 0); }
static long sys_kill(pid_t pid, int sig) { return sys6(SYS_kill, pid, sig, 0, 0, 0); }
static void __attribute__((noreturn)) sys_exit(int code)
{
	for (;;)
		sys6(SYS_exit_group, code, 0, 0, 0, 0);
}

/* poll(fd 3) with no timeout: ppoll, which every machine has */
static long wait_ctl(void)
{
	struct pollfd p;

	p.fd = CTL;
	p.events = POLLIN;
	p.revents = 0;
	return sys6(SYS_ppoll, (long)&p, 1, 0, 0, 8);
}

/* SIGCHLD to SIG_IGN: no zombies (the kernel's struct: handler, flags,
 * restorer, mask; no restorer for SIG_IGN) */
static long ignore_sigchld(void)
{
	struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } sa = {
		SIG_IGN, 0, 0, 0,
	};

	return sys6(SYS_rt_sigaction, SIGCHLD, (long)&sa, 0, 8, 0);
}

void __attribute__((noreturn, used)) init_main(void)
{
	/* exec'ed from an fd, the kernel names us after its number */
	sys6(SYS_prctl, PR_SET_NAME, (long)"pisb-init", 0, 0, 0);
	/* named: what runs inside from now on reads it (ns.h) */
	while (sys_write(CTL, "r", 1) == -EINTR)
		;
	if (ignore_sigchld() < 0)
		sys_exit(1);
	for (;;) {
		char c;
		long r = wait_ctl(), n;

		while (sys_wait(WNOHANG) > 0)
			;
		if (r < 0 && r != -EINTR)
			sys_exit(1);
		if (r <= 0)
			continue;
		n = sys_read(CTL, &c, 1);
		if (n == 0 || (n < 0 && n != -EINTR && n != -EAGAIN))
			sys_exit(0); /* controller gone: the sandbox goes with it */
		if (n == 1 && c == 'K') {
			/* from pid 1, -1 means every other process in this pid ns */
			sys_kill(-1, SIGKILL);
			for (int i = 0; i < 100000; i++)
				if (sys_wait(0) == -ECHILD)
					break;
			while (sys_write(CTL, "k", 1) == -EINTR)
				;
		}
	}
}

#ifndef PISB_INIT_NOLIBC
int main(void)
{
	init_main();
}
#endif
