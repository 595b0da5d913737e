/* spin: burn MILLISECONDS of CPU, then exit 0.  A profiling timer left
 * armed by a previous image would kill it with SIGPROF.  With EXECS, half
 * way through it tries that many execs of a file that does not exist (as
 * execvp does along PATH): each stops and re-arms the shim's timer, and
 * nothing may be counted twice.  With "abort", it ends by abort(3)
 * instead: dies by SIGABRT.
 * usage: spin [MILLISECONDS [EXECS | abort]] */
#include <stdlib.h>
#include <string.h>
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
	double ms = argc > 1 ? atof(argv[1]) : 20;
	int execs = argc > 2 ? atoi(argv[2]) : 0;
	char *args[] = { "missing", NULL };

	if (argc > 2 && !strcmp(argv[2], "abort")) {
		burn(ms);
		abort();
	}
	if (!execs) {
		burn(ms);
		return 0;
	}
	burn(ms / 2);
	for (int i = 0; i < execs; i++)
		if (execv("/nonexistent/pyroshim-spin", args) == 0)
			return 1;
	burn(ms / 2);
	return 0;
}
