/* deep_stack: recurse DEPTH frames of 4 KiB each (far more than a MiB of
 * stack under main), then burn MILLISECONDS of CPU at the bottom.  Prints
 * "ok".  usage: deep_stack [DEPTH [MILLISECONDS]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double ms = 200;

static __attribute__((noinline)) void
bottom(void)
{
	struct timespec ts;
	volatile double x = 1;
	double end;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	end = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 + ms;
	do {
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 < end);
}

static __attribute__((noinline)) int
deep(int n)
{
	volatile char pad[4096];

	memset((char *)pad, n, sizeof(pad));
	if (n == 0)
		bottom();
	else
		deep(n - 1);
	return pad[n % 4096];   /* not a tail call */
}

int
main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 600;

	if (argc > 2)
		ms = atof(argv[2]);
	deep(depth);
	printf("ok\n");
	return 0;
}
