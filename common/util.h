/* util.h - allocation, growable buffers, cleanup attributes, fd I/O.
 *
 * x-alloc helpers abort on out-of-memory: a sandbox tool that cannot get a
 * few bytes has nothing sensible left to do.
 */
#ifndef PISB_UTIL_H
#define PISB_UTIL_H

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pisb_err;

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
/* Room for one more in array v of *cap elements of size bytes, n of them
 * used: grows *cap to first, then by doubling; returns the array. */
void *pisb_grow(void *v, size_t n, size_t *cap, size_t size, size_t first);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap);

/* Growable byte buffer, always NUL-terminated after s[len]. */
struct pisb_buf {
	char *s;
	size_t len, cap;
};
#define PISB_BUF_INIT { NULL, 0, 0 }
void pisb_buf_grow(struct pisb_buf *b, size_t extra);
void pisb_buf_add(struct pisb_buf *b, const void *p, size_t n);
void pisb_buf_adds(struct pisb_buf *b, const char *s);
void pisb_buf_addc(struct pisb_buf *b, char c);
void pisb_buf_addf(struct pisb_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void pisb_buf_reset(struct pisb_buf *b);
void pisb_buf_release(struct pisb_buf *b);
/* Hand the string over to the caller; the buffer is left empty. */
char *pisb_buf_detach(struct pisb_buf *b);

/* A NULL-terminated vector of owned strings. */
struct pisb_strv {
	char **v;
	size_t n, cap;
};
#define PISB_STRV_INIT { NULL, 0, 0 }
void pisb_strv_push(struct pisb_strv *sv, const char *s);
void pisb_strv_pushf(struct pisb_strv *sv, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void pisb_strv_release(struct pisb_strv *sv);
/* Mount points at or under dir (a canonical path) in /proc/self/mountinfo
 * order (a mount after the one it sits on), the \NNN escapes decoded. */
void pisb_mounts_under(const char *dir, struct pisb_strv *out);
/* Whether sv holds s. */
bool pisb_strv_has(const struct pisb_strv *sv, const char *s);

/* cleanup attributes */
void pisb_freep(void *p);
void pisb_closep(int *fd);
static inline void pisb_buf_releasep(struct pisb_buf *b) { pisb_buf_release(b); }
static inline void pisb_strv_releasep(struct pisb_strv *s) { pisb_strv_release(s); }
#define _cleanup_free_ __attribute__((cleanup(pisb_freep)))
#define _cleanup_close_ __attribute__((cleanup(pisb_closep)))
#define _cleanup_buf_ __attribute__((cleanup(pisb_buf_releasep)))
#define _cleanup_strv_ __attribute__((cleanup(pisb_strv_releasep)))

/* Hand an fd or pointer out of a cleanup-managed local. */
static inline int pisb_steal_fd(int *fd) { int r = *fd; *fd = -1; return r; }
#define PISB_STEAL(p) ({ __typeof__(p) _t = (p); (p) = NULL; _t; })

/* Full reads and writes, retrying EINTR and short transfers. */
ssize_t pisb_write_all(int fd, const void *p, size_t n);
/* One byte on a local socket, with fd (SCM_RIGHTS) unless it is -1:
 * 0, or -1 (errno; never SIGPIPE). */
int pisb_send_byte_fd(int sock, char byte, int fd);
/* One byte from a local socket into *byte, and the descriptor that came
 * with it (close-on-exec) into *fd, or -1: 1, 0 at its end, -1 (errno). */
int pisb_recv_byte_fd(int sock, char *byte, int *fd);
ssize_t pisb_read_all(int fd, void *p, size_t n);
/* Append what fd reads to b until EOF, the deadline (pisb_mono_ms) or
 * more than cap bytes (a peer's output, read with limits): 0 at EOF (or a
 * read error) or past cap, -1 when the deadline came first. */
int pisb_read_until(int fd, struct pisb_buf *b, int64_t deadline, size_t cap);
/* A unix stream socket listening on dirfd/name (any old one replaced),
 * mode 0600, through /proc/self/fd (short whatever dirfd's path);
 * sockflags: SOCK_NONBLOCK or 0.  The fd, or -1 (errno). */
int pisb_unix_listen_at(int dirfd, const char *name, int backlog, int sockflags);
/* A connection (SOCK_CLOEXEC) to the unix stream socket dirfd/name, the
 * same way; -1 (errno). */
int pisb_unix_connect_at(int dirfd, const char *name);

/* A dnotify watch of directory dirfd/path (DN_* events, multishot): an
 * fd whose events come as SIGIO, which the caller blocks and reads (a
 * signalfd); closed, the watch ends at once.  Not an inotify instance:
 * a user has 128 of those, and closing one waits for an SRCU grace period
 * (up to 20 ms).  -1 with errno (no dnotify: EINVAL). */
int pisb_dir_watch(int dirfd, const char *path, unsigned long events);
/* openat2(dirfd, path, flags | O_CLOEXEC) beneath dirfd, never through a
 * symlink or a magic link; EINTR/EAGAIN retried.  The fd, or -1 (errno). */
int pisb_open_beneath(int dirfd, const char *path, int flags);
/* The directory path (relative to dirfd; "." for dirfd itself) to read
 * with readdir, not through a symlink; NULL (errno) when it cannot be
 * opened.  closedir() closes its fd. */
DIR *pisb_opendirat(int dirfd, const char *path);
/* A close-on-exec pipe whose read end (p[0]) does not block and whose
 * write end (p[1]) does: a writer we run waits, our reader never does. */
int pisb_pipe_nb_reader(int p[2]);
/* Read a whole fd (at most max bytes; -1 and E2BIG past it) into b. */
int pisb_read_fd(int fd, struct pisb_buf *b, size_t max);
/* Read a file relative to dirfd (AT_FDCWD for cwd) into b. */
int pisb_read_file_at(int dirfd, const char *path, struct pisb_buf *b, size_t max);
/* A whole small file (64 KiB at most), trailing newlines and spaces cut;
 * NULL if unreadable.  Caller frees. */
char *pisb_read_small(const char *path);

bool pisb_str_starts(const char *s, const char *prefix);
bool pisb_str_ends(const char *s, const char *suffix);
/* Parse a whole decimal integer within [lo, hi]; -1 on any junk. */
int pisb_parse_ll(const char *s, long long lo, long long hi, long long *out);

/* Monotonic milliseconds and realtime seconds. */
int64_t pisb_now_ms(void);
int64_t pisb_mono_ms(void);

/* The code an idle controller runs (its loop, once a second, and
 * pisb_proc_idle_trim): placed together (.text.hot), so that it keeps one
 * window of the program's code mapped (a fault maps the 64 KiB around
 * the page), not one in each file it calls. */
#define PISB_IDLE_PATH __attribute__((hot))
/* Sleep ms milliseconds, whatever signals arrive (their handlers run). */
void pisb_sleep_ms(int ms);
/* The milliseconds in environment variable name (1..3600000), else dflt. */
int pisb_env_ms(const char *name, int dflt);
/* RFC 3339 UTC time for a unix time, e.g. 2026-11-29T10:12:57Z. */
void pisb_time_rfc3339(int64_t t, char out[32]);

/* A path inside a sandbox made absolute: relative means under workspace;
 * empty and "." components and repeated slashes dropped (".." is kept:
 * confinement is the resolver's job).  Caller frees. */
char *pisb_path_in(const char *workspace, const char *path);

/* Sandbox and template names: ^[a-z][a-z0-9-]{0,39}$ */
bool pisb_name_valid(const char *name);
/* A driver's log of its steps (remote.log, sbx.log): one line
 * "RFC3339-TIME MESSAGE" appended to file in directory idir (0600, never
 * through a symlink); a log that cannot be written is skipped. */
void pisb_log_vappend(int idir, const char *file, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Service names: ^[a-z0-9][a-z0-9-]{0,31}$ (config, svc requests, logs) */
bool pisb_service_name_valid(const char *name);

/* The caller's terminal fd made raw (^C and friends go through as bytes),
 * its settings restored by pisb_tty_restore or at exit.  -1 when fd is
 * not a terminal (nothing changed). */
int pisb_tty_raw(int fd);
void pisb_tty_restore(void);

/* -v's level for the whole command, set once by main(): at 1 and above the
 * remote drivers trace their HTTP exchanges on stderr (http.h). */
void pisb_set_verbose(int level);
int pisb_verbose(void);

/* PISB_TRACE=1: one line "pisb-trace USEC PID WHAT" on stderr per phase of
 * create and boot (of the drivers that trace) (the controller's stderr is its controller.log);
 * PISB_TRACE=/FILE: appended to FILE by every process instead.  Wall
 * clock in microseconds, for the create breakdown of make bench.  Nothing
 * is written when PISB_TRACE is unset, empty or 0. */
void pisb_trace(const char *what);

#endif
