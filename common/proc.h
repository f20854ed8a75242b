/* proc.h - process helpers: finding sibling binaries, detaching,
 * waiting with deadlines, exit-status mapping. */
#ifndef PISB_PROC_H
#define PISB_PROC_H

#include <stdbool.h>
#include <sys/types.h>

struct pisb_err;

/* Path of a pisb binary: $PISB_EXEC_PATH, next to the running binary,
 * the libexec dir, then PATH.  Returns 0 and fills out. */
int pisb_find_binary(const char *bin, char *out, size_t n, struct pisb_err *e);

/* The path (caller frees) of a host tool: the first executable NAME in
 * PATH, then in /usr/sbin and /sbin (a PATH without them, cron's
 * /usr/bin:/bin, still finds mkfs.ext4), or NULL. */
char *pisb_find_tool(const char *name);

/* A pipe (p, both ends O_CLOEXEC) and a fork: the child's pid in the
 * parent, 0 in the child, both ends open in each (each closes the one it
 * does not use); -1 with e and nothing left open when either fails. */
pid_t pisb_fork_piped(int p[2], struct pisb_err *e);

/* fn(arg) in a process that shares our memory until it execs or exits
 * (CLONE_VM | CLONE_VFORK, as posix_spawn: no copy of our page tables),
 * on the stack that ends at stack_top (16-byte aligned); we are suspended
 * meanwhile.  Every signal is blocked across it, so that no handler of
 * ours can run in it: fn calls pisb_signals_reset before it execs.
 * Returns the child's pid (exit signal SIGCHLD), or -1 with errno. */
pid_t pisb_clone_vfork(int (*fn)(void *), void *arg, void *stack_top);
/* Every signal's handling the default, none blocked (a child about to
 * exec, or detached for good). */
void pisb_signals_reset(void);

/* Start argv fully detached (new session, stdio to /dev/null and log_fd,
 * no fds inherited but pass_fd, if >= 0, as its fd 3, default signal
 * handling, no signal blocked).  Returns the detached process's pid (a
 * grandchild; it is not our child) once it has exec'd, or -1 with e
 * naming argv[0] and why (its exec's errno too). */
pid_t pisb_spawn_detached(char *const argv[], int log_fd, int pass_fd, struct pisb_err *e);
/* The same for fn(arg) in a copy of our memory, without an exec: the
 * detached process exits with what fn returns; what names it in errors
 * (fn gives it its command line: pisb_proc_cmdline_set).  Our stack's
 * pages are dropped in it: arg, and what it points to, must not be on
 * our stack (the heap, static storage, our arguments are).  Returns its
 * pid once it is forked. */
pid_t pisb_spawn_detached_fn(const char *what, int (*fn)(void *), void *arg, int log_fd, int pass_fd,
			     struct pisb_err *e);

/* In a child of fork(): detach it for good (a new session, then a second
 * fork: the first child exits for its parent to reap), with stdio on
 * /dev/null, default signal handling and no signal blocked.  Returns in
 * the grandchild only; its fds are still those it inherited. */
void pisb_detach_here(void);

/* Map a wait status to pisb's exit code: N, or 128+signal. */
int pisb_wait_code(int status);

/* waitpid with a deadline (ms, <0 = forever); returns pid, 0 on timeout.
 * Sleeps on a pidfd of pid until it ends, without polling. */
pid_t pisb_wait_timeout(pid_t pid, int *status, int timeout_ms);

/* A pidfd of pid (close-on-exec), or -1 with errno (ENOSYS before Linux
 * 5.3, ESRCH when no such process).  It names that process for good: a
 * pid reused later is not it. */
int pisb_pidfd_open(pid_t pid);
/* Wait up to timeout_ms (<0 = forever) for the process of pidfd to end
 * (any process, not only a child; a child still has to be reaped):
 * 1 when it has, 0 on timeout, -1 with errno. */
int pisb_pidfd_wait(int pidfd, int timeout_ms);

struct pisb_buf;

/* Run argv (PATH lookup unless it has a '/') with envp (NULL: ours), stdin
 * from /dev/null, stdout (and stderr too with merge) collected into out up
 * to max bytes; wait at most timeout_ms, then kill its process group.
 * Returns the exit code (128+N for a signal), -1 if it could not be run
 * (*exec_errno says why), -2 on timeout. */
int pisb_run_capture(char *const argv[], char *const envp[], bool merge,
		     size_t max, int timeout_ms, struct pisb_buf *out,
		     int *exec_errno);

/* Fields first .. first+n-1 of /proc/PID/stat (pid 0: our own), as
 * numbers, into v; fields numbered as proc(5), after the command name
 * (from 4).  0, or -1 when the process is gone or its line too short. */
int pisb_proc_stat(pid_t pid, int first, int n, unsigned long long *v);

/* Our command line (/proc/self/cmdline, what ps and pgrep -f read)
 * becomes args (NULL-terminated), written in place over the one we were
 * started with, the rest of it zeroed.  Longer than that: as one line
 * over it and over the environment's strings after it (setproctitle's
 * way; the environment is copied away first).  0, or -1 with nothing
 * changed when args do not fit there either. */
int pisb_proc_cmdline_set(const char *const *args);

/* Random hex id of n chars (n < 64). */
void pisb_random_hex(char *out, size_t n);

/* Close every fd >= from except keep (or -1). */
void pisb_close_from(int from, int keep);
/* Close every fd >= 3 except the n of keep (fds >= 3, any order). */
void pisb_close_except(const int *keep, size_t n);

/* For a long-lived process that is about to sit idle (a controller):
 * give back what it holds and does not use while idle.  The free heap
 * (malloc_trim), and the mappings of the code and read-only data of the
 * program and its libraries (MADV_DONTNEED of their read-only segments:
 * the pages stay in the page cache, shared with every other process that
 * runs them; what the process runs again faults back in, a minor fault).
 * Writable segments are left alone, and so is an object with text
 * relocations (its code pages are its own copies).  Breakpoints a debugger
 * wrote into the code go with them. */
void pisb_proc_idle_trim(void);

#endif
