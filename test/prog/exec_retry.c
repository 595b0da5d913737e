/* exec_retry: burn MS/2 ms of CPU, try N execs of a file that does not
 * exist (as execvp does along PATH), burn MS/2 ms more, exit 0.  Each
 * failed exec stops and re-arms the shim's timer: nothing may be counted
 * twice.
 * usage: exec_retry N MS */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void
burn(double ms)
{
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
}

int
main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	double ms = argc > 2 ? atof(argv[2]) : 10;
	char *args[] = { "missing", NULL };

	burn(ms / 2);
	for (int i = 0; i < n; i++)
		if (execv("/nonexistent/pyroshim-exec-retry", args) == 0)
			return 1;
	burn(ms / 2);
	return 0;
}
