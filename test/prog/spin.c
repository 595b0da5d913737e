/* spin: burn MILLISECONDS of CPU, then exit 0.  A profiling timer left
 * armed by a previous image would kill it with SIGPROF. */
#include <stdlib.h>
#include <time.h>

int
main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 20;
	struct timespec ts;
	volatile double x = 1;
	double end;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	end = ts.tv_sec * 1e9 + ts.tv_nsec + ms * 1e6;
	do {
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec * 1e9 + ts.tv_nsec < end);
	return 0;
}
