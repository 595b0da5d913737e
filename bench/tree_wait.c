/* tree_wait -- run a command N times and wait for its whole process tree,
 * helpers included (BENCHMARKS.md section 14).
 *
 *   tree_wait N [VAR=VALUE ...] -- PROGRAM [ARG ...]
 *
 * tree_wait makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so
 * every process the command leaves behind (the shim's helper processes,
 * which are reparented away from the program that started them) becomes
 * its child.  Each run: fork, set the VAR=VALUE pairs in the child only
 * (tree_wait itself is never preloaded), exec PROGRAM; wait4 for it
 * (its rusage holds the program and every descendant it waited for, so
 * no helper), then wait4 for every orphan until none is left (their
 * rusage: the helpers, to their last pass).  The next run starts only
 * then, so one run's helpers never overlap the next.  Prints to stderr:
 *
 *   tree_wait: runs N prog_wall_ns W tree_wall_ns T prog_cpu_ns P orphan_cpu_ns O orphans K
 *
 * prog_wall: fork to the program's end (what a caller waits for); tree_wall:
 * fork to the last orphan's end; sums over the N runs.  The program's
 * standard output and error pass through. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long
cpu_ns(const struct rusage *ru)
{
	return (ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000000LL +
	       (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1000LL;
}

int
main(int argc, char **argv)
{
	long long prog_wall = 0, tree_wall = 0, prog_cpu = 0, orphan_cpu = 0, orphans = 0;
	struct rusage ru;
	int i, n, sep = 0, st;

	for (i = 2; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			sep = i;
			break;
		}
	if (argc < 4 || (n = atoi(argv[1])) < 1 || !sep || sep + 1 >= argc) {
		fprintf(stderr, "usage: tree_wait N [VAR=VALUE ...] -- PROGRAM [ARG ...]\n");
		return 2;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) {
		perror("tree_wait: PR_SET_CHILD_SUBREAPER");
		return 1;
	}
	for (int r = 0; r < n; r++) {
		long long t0 = now_ns();
		pid_t pid = fork(), w;

		if (pid < 0) {
			perror("tree_wait: fork");
			return 1;
		}
		if (pid == 0) {
			for (i = 2; i < sep; i++)
				if (putenv(argv[i])) {
					perror("tree_wait: putenv");
					_exit(127);
				}
			execvp(argv[sep + 1], argv + sep + 1);
			perror("tree_wait: exec");
			_exit(127);
		}
		while ((w = wait4(pid, &st, 0, &ru)) < 0 && errno == EINTR)
			;
		if (w < 0) {
			perror("tree_wait: wait4");
			return 1;
		}
		prog_wall += now_ns() - t0;
		prog_cpu += cpu_ns(&ru);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "tree_wait: %s: status 0x%x\n", argv[sep + 1], st);
			return 1;
		}
		for (;;) {
			int ost;

			w = wait4(-1, &ost, 0, &ru);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				break;  /* ECHILD: the tree is gone */
			orphans++;
			orphan_cpu += cpu_ns(&ru);
		}
		tree_wall += now_ns() - t0;
	}
	fprintf(stderr, "tree_wait: runs %d prog_wall_ns %lld tree_wall_ns %lld prog_cpu_ns %lld "
		"orphan_cpu_ns %lld orphans %lld\n", n, prog_wall, tree_wall, prog_cpu, orphan_cpu, orphans);
	return 0;
}
