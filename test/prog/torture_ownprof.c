/* torture_ownprof: programs that use SIGPROF or ITIMER_PROF themselves, in
 * the ways test/prog/own_sigprof.c (sigaction, then setitimer, then a
 * thread) does not:
 *   signal   two threads already burn CPU when the program installs its
 *            handler with signal(), not sigaction, and then arms
 *            ITIMER_PROF at 10 Hz; it counts what it receives while the
 *            threads burn MS ms of CPU each.  The shim must have stopped
 *            the timers of threads that existed before the handler, so the
 *            count is the program's own ~MS*2/100 signals.
 *   itimer   the program arms a one-shot ITIMER_PROF of 50 ms without any
 *            handler -- a CPU-time watchdog: SIGPROF's default action ends
 *            the process ("Profiling timer expired") -- and then burns up
 *            to MS ms.  It must die of SIGPROF as it does without the shim.
 * usage: torture_ownprof MODE MS
 * signal: prints "signals in range" (or "signals: N, expected A..B") and
 * exits 0 (1 when out of range); itimer: prints "armed", and if it is
 * still alive after the burn, "not killed" and exits 3. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static atomic_int count;
static atomic_int go, started;
static double ms = 600;

static void
on_prof(int sig)
{
	(void)sig;
	atomic_fetch_add(&count, 1);
}

static double
thread_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static void
burn(double for_ms)
{
	volatile double x = 1;
	double end = thread_ms() + for_ms;

	while (thread_ms() < end)
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
}

/* Burns a little before the handler exists (so the shim's timer of this
 * thread is running), waits for the go, then burns MS ms. */
static void *
worker(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);  /* the shim armed our timer before this */
	burn(20);
	while (!atomic_load(&go))
		burn(1);
	burn(ms);
	return NULL;
}

static int
own_handler(void)
{
	struct itimerval it = { { 0, 100000 }, { 0, 100000 } };
	pthread_t t[2];
	int n, lo, hi;

	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, worker, NULL))
			return 1;
	while (atomic_load(&started) < 2)
		burn(1);
	burn(20);
	if (signal(SIGPROF, on_prof) == SIG_ERR || setitimer(ITIMER_PROF, &it, NULL))
		return 1;
	atomic_store(&go, 1);
	for (int i = 0; i < 2; i++)
		if (pthread_join(t[i], NULL))
			return 1;
	it.it_value.tv_sec = it.it_value.tv_usec = 0;
	setitimer(ITIMER_PROF, &it, NULL);
	/* ITIMER_PROF fires once per 100 ms of the process's CPU time: the
	 * two threads burn 2*MS ms after it is armed (plus the main thread's
	 * few ms of waiting in join: none).  Allow half to one and a half
	 * times that, and at least +-2, for the phase of the timer and the
	 * kernel's one-signal-per-tick limit; the shim's 1000 Hz would add
	 * hundreds. */
	n = atomic_load(&count);
	lo = (int)(2 * ms / 100 * 0.5) - 2;
	hi = (int)(2 * ms / 100 * 1.5) + 2;
	if (n < lo || n > hi) {
		printf("signals: %d, expected %d..%d\n", n, lo, hi);
		return 1;
	}
	printf("signals in range\n");
	return 0;
}

static int
watchdog(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 50000 } };

	if (setitimer(ITIMER_PROF, &it, NULL))
		return 1;
	printf("armed\n");
	fflush(stdout);
	burn(ms);
	printf("not killed\n");
	return 3;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "signal";

	if (argc > 2)
		ms = atof(argv[2]);
	if (!strcmp(mode, "signal"))
		return own_handler();
	if (!strcmp(mode, "itimer"))
		return watchdog();
	return 2;
}
