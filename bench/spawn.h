/* bench/spawn.h - one command run as a benchmark runs it (included by the
 * single-file tools bench/interleave.c and bench/timeit.c). */
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run argv (execvp, no shell) with its stdout and stderr on out, and wait
 * for it: its exit status, or -1 (it could not be started, or was killed
 * by a signal). */
static int spawn_wait(char **argv, int out)
{
	pid_t pid = vfork();
	int st;

	if (pid == 0) {
		dup2(out, 1);
		dup2(out, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
