/* ctllog.c - the controller's log, bounded on the host (ctllog.h). */
#include "ctllog.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int log_dir = -1;        /* instances/NAME, once pisb_ctllog_init ran */
static long long log_size;      /* bytes in fd 2 */

/* controller.log -> controller.log.1 (whatever is there), a new log on fd 2 */
static void rotate(void)
{
	int fd;

	if (renameat(log_dir, "controller.log", log_dir, "controller.log.1") < 0 && errno != ENOENT) {
		/* controller.log.1 is something rename cannot replace (a
		 * directory): the host's own state dir, so just truncate */
		if (ftruncate(2, 0) == 0)
			log_size = 0;
		return;
	}
	fd = openat(log_dir, "controller.log",
		    O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0)
		return;     /* go on in controller.log.1: better than losing lines */
	dup2(fd, 2);
	close(fd);
	log_size = 0;
}

void pisb_ctllog_init(int idir)
{
	struct stat sb;

	struct stat at;

	/* only when fd 2 is that directory's controller.log (not when run by
	 * hand with stderr a terminal) */
	if (fstat(2, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    fstatat(idir, "controller.log", &at, AT_SYMLINK_NOFOLLOW) < 0 ||
	    at.st_ino != sb.st_ino || at.st_dev != sb.st_dev)
		return;
	log_dir = idir;
	log_size = sb.st_size;
	if (log_size > PISB_CTLLOG_MAX)
		rotate();
}

void pisb_ctllog_write(const char *b, size_t n)
{
	if (log_dir >= 0 && log_size > 0 && log_size + (long long)n > PISB_CTLLOG_MAX)
		rotate();
	if (pisb_write_all(2, b, n) == (ssize_t)n)
		log_size += (long long)n;
}

int pisb_hooklog_open(struct pisb_hooklog *h)
{
	int p[2];

	memset(h, 0, sizeof(*h));
	h->r = h->w = -1;
	h->bucket.rate = PISB_HOOKLOG_RATE;
	h->bucket.burst = PISB_HOOKLOG_BURST;
	/* only the hooks' side blocks */
	if (pisb_pipe_nb_reader(p) < 0)
		return -1;
	h->r = p[0];
	h->w = p[1];
	return 0;
}

void pisb_hooklog_close(struct pisb_hooklog *h)
{
	if (h->r >= 0)
		close(h->r);
	if (h->w >= 0)
		close(h->w);
	h->r = h->w = -1;
}

static void lower(int *timeout, int64_t at, int64_t now)
{
	int64_t d = at > now ? at - now : 0;

	if (*timeout < 0 || d < *timeout)
		*timeout = (int)d;
}

PISB_IDLE_PATH
void pisb_bucket_drain(struct pisb_bucket *b, int fd,
		       void (*keep)(void *arg, const char *bytes, size_t n), void *arg)
{
	char buf[65536];
	int64_t now = pisb_mono_ms();

	if (!b->filled) {
		b->filled = now;
		b->tokens = b->burst;
	} else if (now > b->filled) {
		b->tokens += (now - b->filled) * b->rate / 1000;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
		b->filled = now;
	}
	if (now < b->resume)
		return;
	for (int i = 0; i < 16; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));
		long long k;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		k = b->tokens < n ? b->tokens : n;
		if (k > 0)
			keep(arg, buf, (size_t)k);
		b->tokens -= k;
		if (k < n) {
			b->dropped += n - k;
			b->resume = now + PISB_HOOKLOG_PAUSE_MS;
			break;
		}
	}
}

PISB_IDLE_PATH bool pisb_bucket_poll(const struct pisb_bucket *b, int *timeout_ms)
{
	int64_t now;

	/* never dropped, never paused (an idle controller's): no clock to
	 * read, nor the C library's page of clock_gettime to fault in, with
	 * its 64 KiB around it, after the idle trim */
	if (!b->dropped && !b->resume)
		return true;
	now = pisb_mono_ms();
	if (b->dropped)
		lower(timeout_ms, b->noted + 1000, now);
	if (now < b->resume) {
		lower(timeout_ms, b->resume, now);
		return false;
	}
	return true;
}

PISB_IDLE_PATH bool pisb_bucket_note_due(const struct pisb_bucket *b)
{
	return b->dropped && pisb_mono_ms() - b->noted >= 1000;
}

/* a line of the controller's own, after hook output that ended mid-line */
static void note_dropped(struct pisb_hooklog *h)
{
	char buf[256];
	int n;

	n = snprintf(buf, sizeof(buf), "%scontroller[%d]: dropped %lld bytes of hook output (%d KiB a second after a burst of %d KiB)\n",
		     h->midline ? "\n" : "", (int)getpid(), h->bucket.dropped,
		     PISB_HOOKLOG_RATE / 1024, PISB_HOOKLOG_BURST / 1024);
	pisb_ctllog_write(buf, (size_t)n);
	h->midline = false;
	h->bucket.dropped = 0;
	h->bucket.noted = pisb_mono_ms();
}

PISB_IDLE_PATH int pisb_hooklog_pollfd(struct pisb_hooklog *h, struct pollfd *p, int *timeout_ms)
{
	if (h->r < 0 || !pisb_bucket_poll(&h->bucket, timeout_ms))
		return 0;
	*p = (struct pollfd){ h->r, POLLIN, 0 };
	return 1;
}

static void hook_keep(void *arg, const char *bytes, size_t n)
{
	struct pisb_hooklog *h = arg;

	pisb_ctllog_write(bytes, n);
	h->midline = bytes[n - 1] != '\n';
}

PISB_IDLE_PATH void pisb_hooklog_note(struct pisb_hooklog *h)
{
	if (h->r >= 0 && pisb_bucket_note_due(&h->bucket))
		note_dropped(h);
}

PISB_IDLE_PATH void pisb_hooklog_drain(struct pisb_hooklog *h)
{
	if (h->r < 0)
		return;
	pisb_bucket_drain(&h->bucket, h->r, hook_keep, h);
	if (pisb_bucket_note_due(&h->bucket))
		note_dropped(h);
}
