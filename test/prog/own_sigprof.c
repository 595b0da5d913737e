/* own_sigprof: a program with its own CPU profiler.  It installs a SIGPROF
 * handler and arms ITIMER_PROF at 10 Hz on a busy second thread, and
 * counts what it receives.  SIGPROF is the program's alone: it gets its
 * ~10 signals per CPU-second, not the shim's 100 or 1000, and the shim
 * profiles it with its own signal.
 * usage: own_sigprof MILLISECONDS   (prints the count) */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static atomic_int count;
static double ms;

static void
on_prof(int sig)
{
	(void)sig;
	atomic_fetch_add(&count, 1);
}

static double
cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *
busy(void *arg)
{
	volatile double x = 1;
	double end = cpu_ms() + ms;

	(void)arg;
	while (cpu_ms() < end)
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
	return NULL;
}

int
main(int argc, char **argv)
{
	struct itimerval it = { { 0, 100000 }, { 0, 100000 } };
	struct sigaction sa;
	pthread_t t;

	ms = argc > 1 ? atof(argv[1]) : 1000;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGPROF, &sa, NULL) || setitimer(ITIMER_PROF, &it, NULL))
		return 1;
	if (pthread_create(&t, NULL, busy, NULL) || pthread_join(t, NULL))
		return 1;
	it.it_value.tv_sec = it.it_value.tv_usec = 0;
	setitimer(ITIMER_PROF, &it, NULL);
	printf("%d\n", atomic_load(&count));
	return 0;
}
