/* bench/interleave.c - two commands timed run by run, alternately.
 *
 *   interleave [-g GAP_MS] ROUNDS RUNS 'CMD A' 'CMD B'
 *
 * hyperfine runs all of one command's runs, then all of the other's: on a
 * shared machine whose load changes within seconds, the two halves of a
 * round see different loads and the ratio of a round swings with it.
 * Here each round is RUNS pairs, A then B, then B then A (the order flips
 * every pair, so neither always runs on the other's warm caches), after
 * three untimed pairs.  Commands are split on spaces (no quoting), run
 * without a shell (execvp), output to /dev/null; wall time from the spawn
 * to the reaped exit.  -g: sleep GAP_MS before each timed run (an agent's
 * commands come apart, not back to back).
 *
 * Prints one line: "A_MEDIAN B_MEDIAN RATIO_MIN RATIO_MEDIAN RATIO_MAX"
 * (ms; medians over all runs; the ratios A/B of each round's medians),
 * the same as bench/lib.sh's paired_ms.  Exit 1 when a run fails.
 */
#include "spawn.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char **split(char *s)
{
	char **v = calloc(strlen(s) / 2 + 2, sizeof(*v));
	int n = 0;

	for (char *t = strtok(s, " "); t; t = strtok(NULL, " "))
		v[n++] = t;
	return v;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double run(char **argv, int null, int gap_ms)
{
	struct timespec gap = { gap_ms / 1000, (gap_ms % 1000) * 1000000L };
	double t0;

	if (gap_ms)
		nanosleep(&gap, NULL);
	t0 = now_ms();
	if (spawn_wait(argv, null) != 0)
		return -1;
	return now_ms() - t0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	int gap = 0, rounds, runs, null;
	char **cmd[2];
	double *all[2], *one[2], *ratio;

	if (argc > 2 && !strcmp(argv[1], "-g")) {
		gap = atoi(argv[2]);
		argv += 2;
		argc -= 2;
	}
	if (argc != 5 || (rounds = atoi(argv[1])) < 1 || (runs = atoi(argv[2])) < 1) {
		fprintf(stderr, "usage: interleave [-g GAP_MS] ROUNDS RUNS 'CMD A' 'CMD B'\n");
		return 2;
	}
	cmd[0] = split(argv[3]);
	cmd[1] = split(argv[4]);
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	for (int i = 0; i < 2; i++) {
		all[i] = calloc((size_t)rounds * runs, sizeof(double));
		one[i] = calloc((size_t)runs, sizeof(double));
	}
	ratio = calloc((size_t)rounds, sizeof(double));
	for (int w = 0; w < 3; w++)
		for (int i = 0; i < 2; i++)
			if (run(cmd[i], null, 0) < 0) {
				fprintf(stderr, "interleave: '%s' failed\n", argv[3 + i]);
				return 1;
			}
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < runs; k++)
			for (int j = 0; j < 2; j++) {
				int i = (k % 2) ^ j;
				double t = run(cmd[i], null, gap);
				if (t < 0) {
					fprintf(stderr, "interleave: '%s' failed\n", argv[3 + i]);
					return 1;
				}
				one[i][k] = all[i][r * runs + k] = t;
			}
		ratio[r] = median(one[0], runs) / median(one[1], runs);
	}
	qsort(ratio, (size_t)rounds, sizeof(double), cmp);
	printf("%.4f %.4f %.4f %.4f %.4f\n", median(all[0], rounds * runs),
	       median(all[1], rounds * runs), ratio[0], median(ratio, rounds), ratio[rounds - 1]);
	return 0;
}
