/* forker: the parent and a forked child each burn CPU in their own
 * function; the child's profile must be written under the child's pid.
 * usage: forker MILLISECONDS  (prints the child's pid) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((noinline)) static double
spin(double ms)
{
	volatile double x = 1;
	double end = cpu_ns() + ms * 1e6;

	while (cpu_ns() < end)
		for (int i = 0; i < 2000; i++)
			x = x * 1.0000001 + 0.5;
	return x;
}

__attribute__((noinline)) void
child_work(double ms)
{
	spin(ms);
}

__attribute__((noinline)) void
parent_work(double ms)
{
	spin(ms);
}

int
main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 300;
	int st;
	pid_t pid;

	parent_work(ms / 2);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		child_work(ms);
		exit(0);
	}
	parent_work(ms / 2);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	printf("%d\n", (int)pid);
	return 0;
}
