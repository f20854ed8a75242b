#include "util.h"
#include "err.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static void oom(void)
{
	static const char m[] = "fatal: out of memory\n";
	if (write(2, m, sizeof(m) - 1) < 0) { /* nothing left to do */ }
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *pisb_grow(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
	if (n < *cap)
		return v;
	*cap = *cap ? 2 * *cap : first;
	return xrealloc(v, *cap * size);
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom();
	return p;
}

char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		oom();
	return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0)
		oom();
	return s;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		oom();
	va_end(ap);
	return s;
}

void pisb_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

void pisb_buf_grow(struct pisb_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;

	if (need <= b->cap)
		return;
	if (b->cap * 2 > need)
		need = b->cap * 2;
	if (need < 64)
		need = 64;
	b->s = xrealloc(b->s, need);
	b->cap = need;
	b->s[b->len] = '\0';
}

void pisb_buf_add(struct pisb_buf *b, const void *p, size_t n)
{
	pisb_buf_grow(b, n);
	if (n)
		memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void pisb_buf_adds(struct pisb_buf *b, const char *s)
{
	pisb_buf_add(b, s, strlen(s));
}

void pisb_buf_addc(struct pisb_buf *b, char c)
{
	pisb_buf_grow(b, 1);
	b->s[b->len++] = c;
	b->s[b->len] = '\0';
}

void pisb_buf_addf(struct pisb_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	pisb_buf_grow(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void pisb_buf_reset(struct pisb_buf *b)
{
	b->len = 0;
	if (b->s)
		b->s[0] = '\0';
}

void pisb_buf_release(struct pisb_buf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

char *pisb_buf_detach(struct pisb_buf *b)
{
	char *s = b->s ? b->s : xstrdup("");
	b->s = NULL;
	b->len = b->cap = 0;
	return s;
}

void pisb_strv_push(struct pisb_strv *sv, const char *s)
{
	if (sv->n + 2 > sv->cap) {
		sv->cap = sv->cap ? sv->cap * 2 : 8;
		sv->v = xrealloc(sv->v, sv->cap * sizeof(char *));
	}
	sv->v[sv->n++] = xstrdup(s);
	sv->v[sv->n] = NULL;
}

void pisb_strv_pushf(struct pisb_strv *sv, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		oom();
	va_end(ap);
	pisb_strv_push(sv, s);
	free(s);
}

bool pisb_strv_has(const struct pisb_strv *sv, const char *s)
{
	for (size_t i = 0; sv && i < sv->n; i++)
		if (!strcmp(sv->v[i], s))
			return true;
	return false;
}

void pisb_strv_release(struct pisb_strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->cap = 0;
}

ssize_t pisb_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	size_t done = 0;

	while (done < n) {
		ssize_t w = write(fd, c + done, n - done);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			/* a non-blocking fd we were handed (a terminal Node set
			 * O_NONBLOCK on, say): wait until it takes more */
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				struct pollfd p = { fd, POLLOUT, 0 };
				if (poll(&p, 1, -1) < 0 && errno != EINTR)
					return -1;
				continue;
			}
			return -1;
		}
		done += (size_t)w;
	}
	return (ssize_t)done;
}

int pisb_send_byte_fd(int sock, char byte, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec io = { &byte, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
		if (n == 1)
			return 0;
		if (n >= 0 || errno != EINTR)
			return -1;
	}
}

int pisb_recv_byte_fd(int sock, char *byte, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec io = { byte, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n;

	*fd = -1;
	while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0)
		if (errno != EINTR)
			return -1;
	cm = CMSG_FIRSTHDR(&m);
	if (n > 0 && cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(cm), sizeof(*fd));
	return n > 0;
}

ssize_t pisb_read_all(int fd, void *p, size_t n)
{
	char *c = p;
	size_t done = 0;

	while (done < n) {
		ssize_t r = read(fd, c + done, n - done);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

int pisb_read_until(int fd, struct pisb_buf *b, int64_t deadline, size_t cap)
{
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - pisb_mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		pisb_buf_grow(b, 4096);
		n = read(fd, b->s + b->len, b->cap - b->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		b->len += (size_t)n;
		b->s[b->len] = '\0';
		if (b->len > cap)
			return 0;
	}
}

int pisb_open_beneath(int dirfd, const char *path, int flags)
{
	struct open_how how;
	int fd;

	memset(&how, 0, sizeof(how));
	how.flags = (unsigned long long)(flags | O_CLOEXEC);
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	do
		fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	while (fd < 0 && (errno == EINTR || errno == EAGAIN));
	return fd;
}

int pisb_pipe_nb_reader(int p[2])
{
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	/* O_NONBLOCK is per open file: the write end's is cleared alone */
	if (fcntl(p[1], F_SETFL, 0) < 0) {
		int saved = errno;
		close(p[0]);
		close(p[1]);
		errno = saved;
		return -1;
	}
	return 0;
}

DIR *pisb_opendirat(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return d;
}

int pisb_read_fd(int fd, struct pisb_buf *b, size_t max)
{
	struct stat st;
	/* a regular file's size and a byte more, to see its end in the
	 * second read: a record of a few hundred bytes takes one small
	 * buffer, not 64 KiB grown to 128 (a copy of the first, which a
	 * mmap'ing allocator makes page by page); a pipe, /proc, or a file
	 * that grows meanwhile, 64 KiB at a time */
	size_t chunk = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
			       (unsigned long long)st.st_size <= max
			       ? (size_t)st.st_size + 1
			       : 65536;

	for (;;) {
		ssize_t r;

		if (b->len + 1 >= b->cap)
			pisb_buf_grow(b, chunk);
		chunk = 65536;
		r = read(fd, b->s + b->len, b->cap - b->len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		b->len += (size_t)r;
		b->s[b->len] = '\0';
		if (b->len > max) {
			errno = E2BIG;
			return -1;
		}
	}
	return 0;
}

int pisb_read_file_at(int dirfd, const char *path, struct pisb_buf *b, size_t max)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	return pisb_read_fd(fd, b, max);
}

char *pisb_read_small(const char *path)
{
	struct pisb_buf b = PISB_BUF_INIT;

	if (pisb_read_file_at(AT_FDCWD, path, &b, 64 << 10) < 0) {
		pisb_buf_release(&b);
		return NULL;
	}
	if (!b.s)
		return xstrdup("");
	while (b.len && (b.s[b.len - 1] == '\n' || b.s[b.len - 1] == ' '))
		b.s[--b.len] = '\0';
	return pisb_buf_detach(&b);
}

bool pisb_str_starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool pisb_str_ends(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

int pisb_parse_ll(const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

PISB_IDLE_PATH int64_t pisb_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

PISB_IDLE_PATH int64_t pisb_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void pisb_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

int pisb_env_ms(const char *name, int dflt)
{
	const char *v = getenv(name);
	long long n;

	return v && pisb_parse_ll(v, 1, 3600000, &n) == 0 ? (int)n : dflt;
}

/* UTC by arithmetic: glibc's gmtime_r loads the time zone file first
 * (tzset), 0.1-0.2 ms of each controller's first log line (issue #21).
 * Days since 1970-01-01 to a civil date, in 400-year eras of 146097
 * days that begin on a March 1st (so a leap day ends its year). */
void pisb_time_rfc3339(int64_t t, char out[32])
{
	int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400, secs = t - days * 86400;
	int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;                                   /* [0, 146096] */
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);           /* [0, 365] */
	int64_t mp = (5 * doy + 2) / 153;                                /* [0, 11], March = 0 */
	int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
	int64_t y = yoe + era * 400 + (m <= 2);

	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02dZ", (int)y, (int)m, (int)d,
		 (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60));
}

bool pisb_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n < 1 || n > 40 || name[0] < 'a' || name[0] > 'z')
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

void pisb_log_vappend(int idir, const char *file, const char *fmt, va_list ap)
{
	_cleanup_close_ int fd = openat(idir, file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
					0600);
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	char ts[32], tmp[2048];

	if (fd < 0)
		return;
	pisb_time_rfc3339(pisb_now_ms() / 1000, ts);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	pisb_buf_addf(&b, "%s %s\n", ts, tmp);
	pisb_write_all(fd, b.s, b.len);
}

bool pisb_service_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 32 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

void pisb_freep(void *p)
{
	free(*(void **)p);
}

char *pisb_path_in(const char *workspace, const char *path)
{
	struct pisb_buf b = PISB_BUF_INIT;

	if (!path || !*path)
		path = ".";
	if (path[0] != '/')
		pisb_buf_adds(&b, workspace);
	for (const char *p = path; *p;) {
		const char *s = strchr(p, '/');
		size_t n = s ? (size_t)(s - p) : strlen(p);
		if (n && !(n == 1 && p[0] == '.')) {
			pisb_buf_addc(&b, '/');
			pisb_buf_add(&b, p, n);
		}
		p += n;
		while (*p == '/')
			p++;
	}
	if (!b.len)
		pisb_buf_addc(&b, '/');
	/* a workspace with a trailing slash, or path "." */
	while (b.len > 1 && b.s[b.len - 1] == '/')
		b.s[--b.len] = '\0';
	return pisb_buf_detach(&b);
}

static struct termios tty_saved;
static int tty_fd = -1;

void pisb_tty_restore(void)
{
	if (tty_fd >= 0)
		tcsetattr(tty_fd, TCSAFLUSH, &tty_saved);
	tty_fd = -1;
}

int pisb_tty_raw(int fd)
{
	static bool at_exit;
	struct termios raw;

	if (tcgetattr(fd, &tty_saved) < 0)
		return -1;
	tty_fd = fd;
	if (!at_exit)
		at_exit = atexit(pisb_tty_restore) == 0;
	raw = tty_saved;
	cfmakeraw(&raw);
	return tcsetattr(fd, TCSAFLUSH, &raw);
}

static int verbose_level;

void pisb_set_verbose(int level)
{
	verbose_level = level;
}

int pisb_verbose(void)
{
	return verbose_level;
}

void pisb_trace(const char *what)
{
	const char *t = getenv("PISB_TRACE");
	struct timespec ts;
	char line[256];
	int fd, n;

	if (!t || !*t || !strcmp(t, "0"))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(line, sizeof(line), "pisb-trace %lld %d %s\n",
		     (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, (int)getpid(), what);
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	/* opened and closed each time: no descriptor of it is held by the
	 * controller, and so none reaches the sandbox's init; never a
	 * symlink, and a FIFO with no reader does not block */
	fd = t[0] == '/' ? open(t, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600) : 2;
	if (fd < 0)
		return;
	pisb_write_all(fd, line, (size_t)n);
	if (fd != 2)
		close(fd);
	/* PISB_TRACE_STOP=WHAT: stop here (SIGSTOP) after that mark, so a
	 * fault test can kill the process at a known step */
	t = getenv("PISB_TRACE_STOP");
	if (t && !strcmp(t, what))
		raise(SIGSTOP);
}

int pisb_dir_watch(int dirfd, const char *path, unsigned long events)
{
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), saved;

	if (fd < 0 || fcntl(fd, F_NOTIFY, events | DN_MULTISHOT) == 0)
		return fd;
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int pisb_unix_listen_at(int dirfd, const char *name, int backlog, int sockflags)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;
	int fd, saved;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, name) >=
	    sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	unlinkat(dirfd, name, 0);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | sockflags, 0);
	if (fd < 0)
		return -1;
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, backlog) == 0) {
		umask(old);
		return fd;
	}
	saved = errno;
	umask(old);
	close(fd);
	errno = saved;
	return -1;
}

int pisb_unix_connect_at(int dirfd, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, saved;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, name) >=
	    sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

void pisb_mounts_under(const char *dir, struct pisb_strv *out)
{
	_cleanup_buf_ struct pisb_buf b = PISB_BUF_INIT;
	size_t dl = strlen(dir);
	char *line, *next;

	if (pisb_read_file_at(AT_FDCWD, "/proc/self/mountinfo", &b, 64 << 20) < 0 || !b.s)
		return;
	for (line = b.s; line && *line; line = next) {
		char *p = line, *mp, *o;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... */
		for (int i = 0; i < 4 && p; i++)
			p = strchr(p + 1, ' ');
		if (!p)
			continue;
		mp = o = ++p;
		for (; *p && *p != ' '; p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
			    p[3] >= '0' && p[3] <= '7') {
				*o++ = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
				p += 3;
			} else {
				*o++ = *p;
			}
		}
		*o = '\0';
		if (!strncmp(mp, dir, dl) && (mp[dl] == '\0' || mp[dl] == '/'))
			pisb_strv_push(out, mp);
	}
}
