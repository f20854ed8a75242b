/* ctllog.h - the controller's log, controller.log, bounded on the host.
 *
 * The controller's stderr is instances/NAME/controller.log.  What the
 * sandbox can make it write is bounded in two ways:
 *   - the log itself: a write that would take it past PISB_CTLLOG_MAX
 *     renames it to controller.log.1 first (never reading it) and goes on
 *     in a new one, so the two hold at most 2 * PISB_CTLLOG_MAX;
 *   - the setup and resume hooks (and what they leave running) write into
 *     a pipe the controller reads (struct pisb_hooklog), not into the log
 *     file: no host fd enters the sandbox.  The controller keeps a burst of
 *     PISB_HOOKLOG_BURST bytes, then PISB_HOOKLOG_RATE bytes a second, and
 *     drops the rest, saying once a second how much it dropped.  While it
 *     drops it reads once per PISB_HOOKLOG_PAUSE_MS, so a flood costs it
 *     little and the writer blocks on the full pipe meanwhile.
 */
#ifndef PISB_CTLLOG_H
#define PISB_CTLLOG_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PISB_CTLLOG_MAX (1024 * 1024)
#define PISB_HOOKLOG_RATE (256 * 1024)
#define PISB_HOOKLOG_BURST (1024 * 1024)
#define PISB_HOOKLOG_PAUSE_MS 10

/* fd 2 is instances/NAME/controller.log, idir that directory (borrowed,
 * kept open by the caller); a log already past the bound is rotated now.
 * Before this call (and in processes that never make it) pisb_ctllog_write
 * writes to fd 2 unbounded: only the controller's loop calls it. */
void pisb_ctllog_init(int idir);

/* Append n bytes to the log (fd 2), rotating first if needed. */
void pisb_ctllog_write(const char *b, size_t n);

/* A token bucket over a pipe the sandbox writes into: a burst of
 * `burst` bytes, then `rate` bytes a second, the rest read and dropped;
 * while dropping, one read per PISB_HOOKLOG_PAUSE_MS (the writer blocks
 * on the full pipe meanwhile).  Zero-initialise, then set rate, burst. */
struct pisb_bucket {
	long long rate, burst;
	int64_t filled, noted, resume;  /* last refill, last note of drops, next read */
	long long tokens, dropped;      /* bytes it may keep now; dropped since noted */
};

/* Read fd (non-blocking; at most 16 reads of 64 KiB) unless in a pause:
 * keep(arg, bytes, n) for what the bucket allows, the rest dropped. */
void pisb_bucket_drain(struct pisb_bucket *b, int fd,
		       void (*keep)(void *arg, const char *bytes, size_t n), void *arg);
/* While dropping: lower *timeout_ms (-1: none) to the end of the pause
 * and the next once-a-second note; whether fd should be polled now. */
bool pisb_bucket_poll(const struct pisb_bucket *b, int *timeout_ms);
/* Whether a note of the drops is due (dropped > 0, a second since the last). */
bool pisb_bucket_note_due(const struct pisb_bucket *b);

struct pisb_hooklog {
	int r, w;                   /* the pipe; w goes to the hooks' stdout and stderr */
	struct pisb_bucket bucket;
	bool midline;               /* the last hook byte kept was not a newline */
};

/* Make the pipe (both ends O_CLOEXEC; only r is non-blocking). */
int pisb_hooklog_open(struct pisb_hooklog *h);
void pisb_hooklog_close(struct pisb_hooklog *h);

/* The pollfd to watch (returns 0 or 1 entries) and, while dropping, a
 * lower *timeout_ms for the pause and the once-a-second note. */
int pisb_hooklog_pollfd(struct pisb_hooklog *h, struct pollfd *p, int *timeout_ms);

/* r is readable (or the pause ended): move what the bucket allows into
 * the log, drop the rest. */
void pisb_hooklog_drain(struct pisb_hooklog *h);
/* r was polled and is not readable: only the note of what was dropped,
 * if it is due (no read of the empty pipe) */
void pisb_hooklog_note(struct pisb_hooklog *h);

#endif
