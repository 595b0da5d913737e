/* torture_sigblock: a program that blocks every signal.  The main thread
 * blocks them all before starting THREADS threads (they inherit the mask);
 * then all of them, main included, burn MS ms of their own CPU each and
 * allocate.  No profiling signal can be taken, so the shim's SIGPROF stays
 * pending (per thread with per-thread timers, on the process with
 * ITIMER_PROF) while the program runs, and the program must finish with
 * the right result.  MODE then says what the program does next:
 *   plain    nothing: print the result and return (exit discards what is
 *            pending);
 *   probe    ask what a program can see of pending signals: sigpending()
 *            and a zero-timeout sigtimedwait() on every signal.  Without
 *            the shim nothing is pending;
 *   default  put SIGPROF back to SIG_DFL (as programs that reset every
 *            signal do, e.g. before an exec), then unblock everything.
 *            Without the shim nothing happens; a SIGPROF left pending
 *            would kill the process ("Profiling timer expired").
 * usage: torture_sigblock MODE THREADS MS
 * prints "ok THREADS" then, for probe, "sigpending: SIGS" and "sigtimedwait:
 * SIG" (numbers, "none" when nothing), for default, "unblocked"; exits 1 if
 * a thread's result is wrong, 2 on bad arguments. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double ms = 300;
static void *volatile sink;

static double
thread_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Returns the number of blocks that read back right: at least one, and
 * every one of them, or the thread failed. */
__attribute__((noinline)) static void *
burn_blocked(void *arg)
{
	volatile double x = 1;
	double end = thread_ms() + ms;
	long blocks = 0, good = 0;

	do {
		char *p = malloc(2048);

		if (!p)
			return NULL;
		memset(p, 7, 2048);
		good += p[2047] == 7;
		blocks++;
		sink = p;
		free(p);
		for (int k = 0; k < 2000; k++)
			x = x * 1.0000001 + 0.5;
	} while (thread_ms() < end);
	*(long *)arg = blocks > 0 && good == blocks ? blocks : -1;
	return arg;
}

static void
probe(void)
{
	struct timespec zero = { 0, 0 };
	sigset_t all, pending;
	int sig, any = 0;

	sigfillset(&all);
	sigpending(&pending);
	printf("sigpending:");
	for (sig = 1; sig < NSIG; sig++) {
		if (sigismember(&pending, sig) == 1) {
			printf(" %d", sig);
			any = 1;
		}
	}
	printf("%s\n", any ? "" : " none");
	sig = sigtimedwait(&all, NULL, &zero);
	if (sig > 0)
		printf("sigtimedwait: %d\n", sig);
	else
		printf("sigtimedwait: none (%s)\n", errno == EAGAIN ? "EAGAIN" : strerror(errno));
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "plain";
	int n = argc > 2 ? atoi(argv[2]) : 2;
	long blocks[17] = { 0 };
	pthread_t t[16];
	sigset_t all;

	if (argc > 3)
		ms = atof(argv[3]);
	if (n < 0 || n > 16 ||
	    (strcmp(mode, "plain") && strcmp(mode, "probe") && strcmp(mode, "default")))
		return 2;
	sigfillset(&all);
	if (pthread_sigmask(SIG_BLOCK, &all, NULL))
		return 1;
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, burn_blocked, &blocks[i + 1]))
			return 1;
	burn_blocked(&blocks[0]);
	for (int i = 0; i < n; i++) {
		void *rv;

		if (pthread_join(t[i], &rv) || rv != &blocks[i + 1]) {
			fprintf(stderr, "thread %d failed\n", i);
			return 1;
		}
	}
	for (int i = 0; i <= n; i++) {
		if (blocks[i] <= 0) {
			fprintf(stderr, "thread %d: wrong result\n", i);
			return 1;
		}
	}
	printf("ok %d\n", n);
	fflush(stdout);
	if (!strcmp(mode, "probe")) {
		probe();
	} else if (!strcmp(mode, "default")) {
		signal(SIGPROF, SIG_DFL);
		pthread_sigmask(SIG_UNBLOCK, &all, NULL);
		printf("unblocked\n");
	}
	return 0;
}
