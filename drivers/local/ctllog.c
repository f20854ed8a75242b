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
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	/* only the hooks' side blocks */
	fcntl(p[1], F_SETFL, 0);
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

/* a line of the controller's own, after hook output that ended mid-line */
static void note_dropped(struct pisb_hooklog *h, int64_t now)
{
	char buf[256];
	int n;

	if (!h->dropped)
		return;
	n = snprintf(buf, sizeof(buf), "%scontroller[%d]: dropped %lld bytes of hook output (%d KiB a second after a burst of %d KiB)\n",
		     h->midline ? "\n" : "", (int)getpid(), h->dropped,
		     PISB_HOOKLOG_RATE / 1024, PISB_HOOKLOG_BURST / 1024);
	pisb_ctllog_write(buf, (size_t)n);
	h->midline = false;
	h->dropped = 0;
	h->noted = now;
}

int pisb_hooklog_pollfd(struct pisb_hooklog *h, struct pollfd *p, int *timeout_ms)
{
	int64_t now = pisb_mono_ms();

	if (h->r < 0)
		return 0;
	if (h->dropped)
		lower(timeout_ms, h->noted + 1000, now);
	if (now < h->resume) {
		lower(timeout_ms, h->resume, now);
		return 0;
	}
	*p = (struct pollfd){ h->r, POLLIN, 0 };
	return 1;
}

void pisb_hooklog_drain(struct pisb_hooklog *h)
{
	char buf[65536];
	int64_t now = pisb_mono_ms();

	if (h->r < 0)
		return;
	if (!h->filled) {
		h->filled = now;
		h->tokens = PISB_HOOKLOG_BURST;
	} else if (now > h->filled) {
		h->tokens += (now - h->filled) * PISB_HOOKLOG_RATE / 1000;
		if (h->tokens > PISB_HOOKLOG_BURST)
			h->tokens = PISB_HOOKLOG_BURST;
		h->filled = now;
	}
	if (now >= h->resume) {
		for (int i = 0; i < 16; i++) {
			ssize_t n = read(h->r, buf, sizeof(buf));
			long long keep;

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			keep = h->tokens < n ? h->tokens : n;
			if (keep > 0) {
				pisb_ctllog_write(buf, (size_t)keep);
				h->midline = buf[keep - 1] != '\n';
			}
			h->tokens -= keep;
			if (keep < n) {
				h->dropped += n - keep;
				h->resume = now + PISB_HOOKLOG_PAUSE_MS;
				break;
			}
		}
	}
	if (h->dropped && now - h->noted >= 1000)
		note_dropped(h, now);
}
