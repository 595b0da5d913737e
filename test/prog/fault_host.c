/* fault_host: a host whose every observable output is deterministic, for
 * the fault tests.  It allocates STACKS 64-byte blocks, each from its own
 * call path (a binary choice of two functions per level, so STACKS
 * distinct stacks; long names, so that a folded profile of them is large),
 * keeps them live to the end, burns MILLISECONDS of CPU in burn_cpu()
 * (with a small malloc/free every millisecond), writes one fixed line on
 * stdout and one on stderr, and returns CODE from main.  With STAMPFILE,
 * it also writes there the CLOCK_MONOTONIC time at which main returns, in
 * nanoseconds, so a test can tell how long the exit (the shim's last pass)
 * took.
 * usage: fault_host MILLISECONDS CODE STACKS [STAMPFILE] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uintptr_t sink;

static double
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* With a malloc/free per millisecond: with local files only, the shim
 * starts its uploader thread at the first allocation made an upload
 * interval or more into the run, so here it always starts, and on time. */
__attribute__((noinline)) double
burn_cpu(double ms)
{
	volatile double x = 1;
	double end = cpu_ns() + ms * 1e6;

	while (cpu_ns() < end) {
		for (int i = 0; i < 2000; i++)
			x = x * 1.0000001 + 0.5;
		free(malloc(32));
	}
	return x;
}

__attribute__((noinline)) void *
descend_by_the_left_branch_of_the_call_tree(unsigned bits, int depth);
__attribute__((noinline)) void *
descend_by_the_right_branch_of_the_call_tree(unsigned bits, int depth);

/* One level of the call path; the add after the call keeps it out of tail
 * position, so every level stays a frame of its own. */
__attribute__((noinline)) static void *
take_one_more_step_down_the_call_tree(unsigned bits, int depth)
{
	void *p;

	if (depth == 0) {
		p = malloc(64);
		if (p)
			memset(p, 0x5a, 64);
		return p;
	}
	if (bits & 1)
		p = descend_by_the_right_branch_of_the_call_tree(bits >> 1, depth - 1);
	else
		p = descend_by_the_left_branch_of_the_call_tree(bits >> 1, depth - 1);
	sink += (uintptr_t)p & 1;
	return p;
}

__attribute__((noinline)) void *
descend_by_the_left_branch_of_the_call_tree(unsigned bits, int depth)
{
	void *p = take_one_more_step_down_the_call_tree(bits, depth);

	sink += (uintptr_t)p & 2;
	return p;
}

__attribute__((noinline)) void *
descend_by_the_right_branch_of_the_call_tree(unsigned bits, int depth)
{
	void *p = take_one_more_step_down_the_call_tree(bits, depth);

	sink += (uintptr_t)p & 2;
	return p;
}

int
main(int argc, char **argv)
{
	unsigned stacks, i;
	int depth = 0, code;
	void **live;
	struct timespec ts;
	FILE *f;

	if (argc < 4)
		return 2;
	code = atoi(argv[2]);
	stacks = (unsigned)strtoul(argv[3], NULL, 10);
	while ((1u << depth) < stacks)
		depth++;
	live = calloc(stacks ? stacks : 1, sizeof(*live));
	if (!live)
		return 2;
	for (i = 0; i < stacks; i++)
		live[i] = descend_by_the_left_branch_of_the_call_tree(i, depth);
	printf("fault_host: %u live blocks from %d-level paths\n", stacks, depth);
	fprintf(stderr, "fault_host: the host's own line on stderr\n");
	burn_cpu(atof(argv[1]));
	printf("fault_host: done, exiting with %d\n", code);
	if (fflush(stdout))
		return 2;
	if (argc > 4) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		f = fopen(argv[4], "w");
		if (!f || fprintf(f, "%lld\n", (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec) < 0 ||
		    fclose(f))
			return 2;
	}
	return code;
}
