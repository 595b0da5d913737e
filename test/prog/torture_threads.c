/* torture_threads: a storm of short-lived threads.  Each round starts
 * BATCH threads: a third return normally and are joined, a third leave by
 * pthread_exit and are joined, a third are detached.  Every thread burns a
 * little CPU and allocates, so the shim's per-thread timer is armed, fires
 * and must be torn down for thousands of threads.
 *
 * After the storm, one more thread is started and waits; the program then
 * installs a SIGPROF handler of its own (without arming any timer), and
 * the waiting thread burns LATE_MS ms.  The shim must step aside and stop
 * every timer of its own, the late thread's included, so the handler gets
 * no signal at all.  The shim keeps its live timers in a table of 4096
 * slots: if the storm's threads leaked their slots, the late thread's
 * timer would not be in it and would keep firing into the program's
 * handler.
 * usage: torture_threads ROUNDS BATCH [WORK_US]  (CPU microseconds per thread,
 * default 200)
 * prints "ok THREADS SUM" where SUM is checked against the expected value,
 * then "own handler: N signals"; exits 1 on any mismatch or failed pthread
 * call. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_long detached_done;
static long work_us = 200;   /* CPU time each thread burns */
static atomic_ulong detached_sum;
static atomic_int own_signals, late_started, late_go;

#define LATE_MS 100.0

/* The value each thread must produce for argument i: independent of
 * timing, so lost or doubled work is detected. */
static unsigned long
expect(unsigned long i)
{
	return i * 2654435761ul % 1000003ul;
}

__attribute__((noinline)) static unsigned long
work(unsigned long i)
{
	volatile double x = 1;
	struct timespec ts;
	double end;
	char *p;

	/* Burn this thread's own CPU clock, so the work does not depend on
	 * how busy the machine is. */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	end = (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3 + (double)work_us;
	do {
		for (int k = 0; k < 1000; k++)
			x = x * 1.0000001 + 0.5;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	} while ((double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3 < end);
	p = malloc(512 + i % 4096);
	if (!p)
		abort();
	memset(p, (int)(i & 0xff), 64);
	free(p);
	return expect(i);
}

static void *
returns(void *arg)
{
	return (void *)(uintptr_t)work((uintptr_t)arg);
}

static void *
exits(void *arg)
{
	pthread_exit((void *)(uintptr_t)work((uintptr_t)arg));
}

static void *
detached(void *arg)
{
	atomic_fetch_add(&detached_sum, work((uintptr_t)arg));
	atomic_fetch_add(&detached_done, 1);
	return NULL;
}

static int
round_of(long batch, unsigned long base, unsigned long *sum)
{
	pthread_t t[batch];
	pthread_attr_t da;
	int kind[batch];

	if (pthread_attr_init(&da) || pthread_attr_setdetachstate(&da, PTHREAD_CREATE_DETACHED))
		return -1;
	for (long j = 0; j < batch; j++) {
		void *arg = (void *)(uintptr_t)(base + (unsigned long)j);
		pthread_t d;

		kind[j] = (int)(j % 3);
		if (kind[j] == 2 ? pthread_create(&d, &da, detached, arg)
				 : pthread_create(&t[j], NULL, kind[j] ? exits : returns, arg))
			return -1;
	}
	for (long j = 0; j < batch; j++) {
		void *rv;

		if (kind[j] == 2)
			continue;
		if (pthread_join(t[j], &rv))
			return -1;
		*sum += (uintptr_t)rv;
	}
	pthread_attr_destroy(&da);
	return 0;
}

static void
on_prof(int sig)
{
	(void)sig;
	atomic_fetch_add(&own_signals, 1);
}

static double
thread_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Started before the program's handler exists, so the shim arms its timer;
 * burns only once the handler is in place. */
__attribute__((noinline)) static void *
late(void *arg)
{
	volatile double x = 1;
	double end;

	(void)arg;
	atomic_store(&late_started, 1);  /* the shim armed our timer before this */
	while (!atomic_load(&late_go))
		sched_yield();
	end = thread_ms() + LATE_MS;
	while (thread_ms() < end)
		for (int k = 0; k < 1000; k++)
			x = x * 1.0000001 + 0.5;
	return NULL;
}

static int
late_thread_with_own_handler(void)
{
	struct sigaction sa;
	pthread_t t;

	if (pthread_create(&t, NULL, late, NULL))
		return -1;
	while (!atomic_load(&late_started))
		sched_yield();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGPROF, &sa, NULL))
		return -1;
	atomic_store(&late_go, 1);
	if (pthread_join(t, NULL))
		return -1;
	return atomic_load(&own_signals);
}

int
main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 200, batch = argc > 2 ? atol(argv[2]) : 24;
	unsigned long sum = 0, want = 0, n = 0;
	long ndetached = 0;

	if (argc > 3)
		work_us = atol(argv[3]);
	if (rounds < 1 || batch < 1 || batch > 256)
		return 2;
	for (long r = 0; r < rounds; r++) {
		if (round_of(batch, (unsigned long)(r * batch), &sum)) {
			fprintf(stderr, "pthread call failed in round %ld\n", r);
			return 1;
		}
	}
	for (long i = 0; i < rounds * batch; i++, n++) {
		want += expect((unsigned long)i);
		ndetached += i % batch % 3 == 2;
	}
	/* Detached threads finish on their own; the test's timeout bounds
	 * this wait if one never does. */
	while (atomic_load(&detached_done) < ndetached)
		sched_yield();
	sum += atomic_load(&detached_sum);
	if (sum != want) {
		fprintf(stderr, "sum %lu, expected %lu\n", sum, want);
		return 1;
	}
	printf("ok %lu %lu\n", n, sum);
	printf("own handler: %d signals\n", late_thread_with_own_handler());
	return 0;
}
