/* lock.h - advisory locks on files in the state directory (flock(2)).
 *
 * A lock is held as long as its fd is open; it is released by closing the
 * fd (or by the holder's death), never by unlinking the file, so a lock
 * file left behind is harmless.  Liveness of a controller is "is its lock
 * held", which stays true however pids are reused.
 *
 *   wait_ms  < 0: block until acquired
 *   wait_ms == 0: fail at once with code 4 (busy) if held
 *   wait_ms  > 0: retry until the deadline, then code 4
 */
#ifndef PISB_LOCK_H
#define PISB_LOCK_H

#include <stdbool.h>

struct pisb_err;

/* Returns the locked fd (caller closes to release) or -1. */
int pisb_lock_acquire(int dirfd, const char *path, bool exclusive, int wait_ms,
		      const char *what, struct pisb_err *e);
/* Is the lock held by someone else right now?  (false if file missing) */
bool pisb_lock_is_held(int dirfd, const char *path);

#endif
