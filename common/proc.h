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

/* Start argv fully detached (new session, stdio to /dev/null and log_fd,
 * no fds inherited).  Returns the detached process's pid (a grandchild;
 * it is not our child). */
pid_t pisb_spawn_detached(char *const argv[], int log_fd, struct pisb_err *e);

/* Map a wait status to pisb's exit code: N, or 128+signal. */
int pisb_wait_code(int status);

/* waitpid with a deadline (ms, <0 = forever); returns pid, 0 on timeout. */
pid_t pisb_wait_timeout(pid_t pid, int *status, int timeout_ms);

/* Random hex id of n chars (n < 64). */
void pisb_random_hex(char *out, size_t n);

/* Close every fd >= from except keep (or -1). */
void pisb_close_from(int from, int keep);

#endif
