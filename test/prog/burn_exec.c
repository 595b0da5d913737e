/* burn_exec: burn MILLISECONDS of CPU, then exec PROGRAM ARGS... if given
 * (an exec chain: the same process, image after image), else print the
 * process's CPU clock, which counts every image of the chain from the
 * fork that made the process: "chain_cpu_ns N".
 * usage: burn_exec MILLISECONDS [PROGRAM ARGS...] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int
main(int argc, char **argv)
{
	volatile double x = 1;
	double end;

	if (argc < 2)
		return 2;
	end = cpu_ns() + atof(argv[1]) * 1e6;
	do {
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
	} while (cpu_ns() < end);
	if (argc > 2) {
		execv(argv[2], argv + 2);
		return 127;
	}
	printf("chain_cpu_ns %.0f\n", cpu_ns());
	return 0;
}
