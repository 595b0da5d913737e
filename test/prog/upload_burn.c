/* upload_burn: burns MILLISECONDS of CPU in burn_cpu() and allocates
 * steadily in burn_alloc() (16 KiB blocks, the last 64 kept live), so every
 * upload interval of a run has CPU, allocated and in-use data to send.
 * Prints the CLOCK_MONOTONIC time at which main returns, in nanoseconds,
 * so a test can tell how long the exit (the shim's last upload) took.
 * usage: upload_burn MILLISECONDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIVE 64

static void *live[LIVE];

static double
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* About one millisecond of CPU per call. */
__attribute__((noinline)) double
burn_cpu(void)
{
	volatile double x = 1;
	double end = cpu_ns() + 1e6;

	while (cpu_ns() < end)
		for (int i = 0; i < 2000; i++)
			x = x * 1.0000001 + 0.5;
	return x;
}

/* Replaces one live block: alloc_* grow every interval, inuse_* stay. */
__attribute__((noinline)) void
burn_alloc(unsigned i)
{
	free(live[i % LIVE]);
	live[i % LIVE] = malloc(16384);
	if (live[i % LIVE])
		memset(live[i % LIVE], (int)i, 64);
}

int
main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 1000;
	double end = cpu_ns() + ms * 1e6;
	unsigned i = 0;
	struct timespec ts;

	while (cpu_ns() < end) {
		burn_cpu();
		burn_alloc(i++);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("%lld\n", (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec);
	return fflush(stdout) ? 1 : 0;
}
