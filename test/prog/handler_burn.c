/* handler_burn: burn MILLISECONDS of CPU inside the program's own SIGUSR1
 * handler (on the thread's stack), raised from outer() under main.  With
 * "thread", start and join a thread first.  The shim's samples there cross
 * glibc's signal trampoline: each has outer and main under the handler.
 * Prints "ok".
 * usage: handler_burn [MILLISECONDS [thread]] */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double ms = 200;

static double
cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static __attribute__((noinline)) void
burn_in_handler(int sig)
{
	volatile double x = 1;
	double end = cpu_ms() + ms;

	(void)sig;
	do {
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
	} while (cpu_ms() < end);
}

static __attribute__((noinline)) void
outer(void)
{
	raise(SIGUSR1);
	__asm__ volatile("" ::: "memory");   /* not a tail call */
}

static void *
idle(void *arg)
{
	return arg;
}

int
main(int argc, char **argv)
{
	struct sigaction sa;
	pthread_t t;

	if (argc > 1)
		ms = atof(argv[1]);
	if (argc > 2 && strcmp(argv[2], "thread") == 0 &&
	    (pthread_create(&t, NULL, idle, NULL) || pthread_join(t, NULL)))
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = burn_in_handler;
	if (sigaction(SIGUSR1, &sa, NULL))
		return 1;
	outer();
	printf("ok\n");
	return 0;
}
