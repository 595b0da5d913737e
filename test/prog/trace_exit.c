/* trace_exit: burns MILLISECONDS of CPU in traced_work(), prints the
 * TRACEPARENT and TRACESTATE it was started with (as a child of it would
 * inherit them), then ends with CODE, by a return from main or by exit().
 * usage: trace_exit CODE return|exit MILLISECONDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((noinline)) double
traced_work(double ms)
{
	volatile double x = 1;
	double end = cpu_ns() + ms * 1e6;

	while (cpu_ns() < end)
		for (int i = 0; i < 2000; i++)
			x = x * 1.0000001 + 0.5;
	return x;
}

int
main(int argc, char **argv)
{
	const char *tp = getenv("TRACEPARENT"), *ts = getenv("TRACESTATE");
	int code;

	if (argc != 4)
		return 2;
	code = atoi(argv[1]);
	traced_work(atof(argv[3]));
	printf("TRACEPARENT=%s\nTRACESTATE=%s\n", tp ? tp : "(unset)", ts ? ts : "(unset)");
	if (fflush(stdout))
		return 2;
	if (!strcmp(argv[2], "exit"))
		exit(code);
	return code;
}
