/* leakcheck.c - LeakSanitizer in the sanitizer build (make SANITIZE=1).
 *
 * Leak checking runs at exit in a tracer that ptraces the process; from a
 * process that has joined a sandbox's user namespace it cannot, and fails
 * the process.  So the check is skipped exactly there: in a process whose
 * user namespace is no longer the one it started in (or whose /proc no
 * longer shows it, after joining a sandbox's mount namespace), and runs in
 * every other.  The Makefile links this file into every binary of the
 * sanitizer build (-Wl,-u,__lsan_is_turned_off); elsewhere it is unused.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int __lsan_is_turned_off(void);

static char start_ns[64];

__attribute__((constructor)) static void note_user_ns(void)
{
	ssize_t n = readlink("/proc/self/ns/user", start_ns, sizeof(start_ns) - 1);
	start_ns[n > 0 ? n : 0] = '\0';
}

int __lsan_is_turned_off(void)
{
	char now[64];
	ssize_t n = readlink("/proc/self/ns/user", now, sizeof(now) - 1);

	if (n <= 0 || !start_ns[0])
		return 1;
	now[n] = '\0';
	return strcmp(now, start_ns) != 0;
}
