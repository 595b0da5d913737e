/* burn_ms MS -- burn MS milliseconds of this process's CPU time, then exit
 * (BENCHMARKS.md section 14: short processes).
 *
 * Spins on a floating-point loop until CLOCK_PROCESS_CPUTIME_ID has
 * advanced MS ms since main began, then prints the process's CPU clock at
 * the end of main, in ns (everything since the process was forked: the
 * exec, the dynamic loader, a preloaded profiler's start-up, the burn), the
 * truth its profile is compared with. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long
cpu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static double
burn_ms_loop(long long until)
{
	volatile double x = 1.0;

	while (cpu_now() < until)
		for (int i = 0; i < 2000; i++)
			x = x * 1.000001 + 1e-9;
	return x;
}

int
main(int argc, char **argv)
{
	long long ms = argc > 1 ? atoll(argv[1]) : 3;

	burn_ms_loop(cpu_now() + ms * 1000000LL);
	printf("burn_ms_cpu_ns %lld\n", cpu_now());
	return 0;
}
