/* bench/timeit.c - commands run one after the other, timed without a shell.
 *
 *   timeit CMD [ARG...] [&& CMD [ARG...]]...
 *
 * Runs each command (execvp, no shell) as a script's `A && B` would, and
 * stops at the first that fails.  Their stdout and stderr go to one pipe
 * that this drains, as `{ A && B; } 2>&1 | cat` does: a command that
 * behaves differently on /dev/null (a peer that checks for a terminal or
 * a null device) does not here.
 *
 * Prints one line: the wall clock (CLOCK_REALTIME, microseconds, the clock
 * of PISB_TRACE's marks) before the first command and after each one that
 * ran, "T0 T1 ... Tn".  Exit status: 0, or 1 when a command failed (the
 * times up to it are still printed), 2 on a usage error.
 *
 * Why not bash: a bench round timed by bash pays for its forks of itself
 * (the pipeline's subshell, $(...)), 2.4 ms here around a /bin/true that
 * takes 0.9 ms alone; hyperfine -N times one command, not a sequence.
 * The fork here is vfork's, and this process is small.
 */
#include "spawn.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static long long now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	long long t[64];
	int n = 0, p[2], failed = 0;
	char buf[65536];
	pid_t drain;

	if (argc < 2 || !strcmp(argv[1], "&&")) {
		fprintf(stderr, "usage: timeit CMD [ARG...] [&& CMD [ARG...]]...\n");
		return 2;
	}
	/* the drain: a child that reads the pipe to its end, as cat would */
	if (pipe(p) < 0 || (drain = fork()) < 0) {
		perror("timeit");
		return 2;
	}
	if (drain == 0) {
		close(p[1]);
		while (read(p[0], buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	close(p[0]);
	t[n++] = now_us();
	for (int i = 1; i < argc && n < 64;) {
		int j = i;

		while (j < argc && strcmp(argv[j], "&&"))
			j++;
		argv[j < argc ? j : argc] = NULL;
		failed = spawn_wait(argv + i, p[1]) != 0;
		t[n++] = now_us();
		if (failed)
			break;
		i = j + 1;
	}
	close(p[1]);
	waitpid(drain, NULL, 0);
	for (int i = 0; i < n; i++)
		printf("%lld%c", t[i], i + 1 < n ? ' ' : '\n');
	return failed;
}
