/* torture_exit: burns CPU and allocates, then ends with status CODE in the
 * way MODE says.  Every line is written with write(2): stdio buffers would
 * be lost by _exit, and the line must be the same with and without the shim.
 *   return   two threads burn MS ms each; return from main;
 *   exit     the same, then exit() from main;
 *   _exit    the same, then _exit() from main: no exit handler runs, so the
 *            shim's last write is the uploader thread's (pyroshim(7),
 *            LIMITATIONS; the second thread started it);
 *   thread   _exit() from the second thread after MS ms while the main
 *            thread is still burning and allocating (exit_group ends it
 *            wherever it is, maybe inside the shim's hooks);
 *   signal   _exit() from a SIGALRM handler that interrupts the main thread
 *            after MS ms of wall time while both threads burn and allocate
 *            (_exit is async-signal-safe; the shim's must be too);
 *   single   one thread only: burn MS ms, then _exit() -- a short
 *            single-threaded program has no uploader thread, so the shim
 *            loses what it sampled (documented).
 * usage: torture_exit MODE CODE MS
 * prints "torture_exit MODE CODE" and exits CODE; 98 if a set-up call
 * failed, 2 on a bad MODE. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double ms = 200;
static int code;
static const char *mode = "return";
static void *volatile sink;

static double
thread_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Allocation sizes vary so that the sampled path runs often at a small
 * sampling interval. */
__attribute__((noinline)) static void
burn_and_allocate(double for_ms)
{
	volatile double x = 1;
	double end = thread_ms() + for_ms;
	unsigned n = 0;

	do {
		void *p = malloc(512 + (n++ % 8) * 512);

		sink = p;  /* the block escapes: the allocation stays */
		free(p);
		for (int k = 0; k < 2000; k++)
			x = x * 1.0000001 + 0.5;
	} while (thread_ms() < end);
}

/* Async-signal-safe (it runs in a signal handler): the line is built by
 * hand, without stdio. */
static void
say(void)
{
	char line[128];
	size_t n, len = strlen(mode);
	char digits[12];
	int d = 0, c = code;

	memcpy(line, "torture_exit ", 13);
	n = 13;
	memcpy(line + n, mode, len);
	n += len;
	line[n++] = ' ';
	do {
		digits[d++] = (char)('0' + c % 10);
		c /= 10;
	} while (c && d < 11);
	while (d)
		line[n++] = digits[--d];
	line[n++] = '\n';
	if (write(1, line, n) != (ssize_t)n)
		_exit(99);
}

static void
on_alarm(int sig)
{
	(void)sig;
	say();
	_exit(code);
}

static void *
second(void *arg)
{
	(void)arg;
	if (!strcmp(mode, "thread")) {
		burn_and_allocate(ms);
		say();
		_exit(code);
	}
	if (!strcmp(mode, "signal")) {
		for (;;)
			burn_and_allocate(1000);
	}
	burn_and_allocate(ms);
	return NULL;
}

int
main(int argc, char **argv)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };
	struct sigaction sa;
	sigset_t alrm;
	pthread_t t;

	mode = argc > 1 ? argv[1] : "return";
	code = argc > 2 ? atoi(argv[2]) : 0;
	ms = argc > 3 ? atof(argv[3]) : 200;
	if (strcmp(mode, "return") && strcmp(mode, "exit") && strcmp(mode, "_exit") &&
	    strcmp(mode, "thread") && strcmp(mode, "signal") && strcmp(mode, "single"))
		return 2;
	if (!strcmp(mode, "single")) {
		burn_and_allocate(ms);
		say();
		_exit(code);
	}
	if (!strcmp(mode, "signal")) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGALRM, &sa, NULL))
			return 98;
		/* The second thread inherits SIGALRM blocked: the handler
		 * always interrupts the main thread. */
		sigemptyset(&alrm);
		sigaddset(&alrm, SIGALRM);
		if (pthread_sigmask(SIG_BLOCK, &alrm, NULL))
			return 98;
	}
	if (pthread_create(&t, NULL, second, NULL))
		return 98;
	if (!strcmp(mode, "signal")) {
		it.it_value.tv_sec = (time_t)(ms / 1000);
		it.it_value.tv_usec = (long)(ms * 1000) % 1000000;
		if (pthread_sigmask(SIG_UNBLOCK, &alrm, NULL) || setitimer(ITIMER_REAL, &it, NULL))
			return 98;
	}
	if (!strcmp(mode, "thread") || !strcmp(mode, "signal")) {
		/* Allocate until the other thread or the handler ends the
		 * process; the test's timeout bounds this. */
		for (;;)
			burn_and_allocate(1000);
	}
	burn_and_allocate(ms);
	pthread_join(t, NULL);
	say();
	if (!strcmp(mode, "exit"))
		exit(code);
	if (!strcmp(mode, "_exit"))
		_exit(code);
	return code;
}
