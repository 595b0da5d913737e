/* signal_malloc: a host SIGALRM handler that calls malloc and free, fired
 * every millisecond (ITIMER_REAL) while the main thread allocates in a
 * loop.  Not async-signal-safe in theory; common in practice, and the
 * shim must not turn it into a deadlock (its sampling slow path, live
 * table and unwinder all run with the handler able to land on top).
 *
 * glibc's own malloc is only reentrant enough for this through its
 * per-thread cache: the handler uses one small size (48 B) that the main
 * loop never uses, warmed before the timer starts, so the handler's
 * malloc/free stay in that tcache bin and never take an arena lock the
 * interrupted code might hold.  The main loop uses 256 B .. 8 KiB.
 * usage: signal_malloc ITERATIONS   prints "ok TICKS", exit 0 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define HANDLER_SIZE 48

static volatile sig_atomic_t ticks, bad;

__attribute__((noinline)) static void
handler_alloc(void)
{
	char *p = malloc(HANDLER_SIZE);

	if (!p) {
		bad = 1;
		return;
	}
	memset(p, 0x5a, HANDLER_SIZE);
	if (p[HANDLER_SIZE - 1] != 0x5a)
		bad = 1;
	free(p);
}

static void
on_alarm(int sig)
{
	(void)sig;
	handler_alloc();
	ticks++;
}

__attribute__((noinline)) static unsigned long
main_alloc(unsigned long i)
{
	size_t n = 256 + (i * 2654435761u) % 8000;
	unsigned char *p = malloc(n);
	unsigned long v;

	if (!p)
		abort();
	p[0] = (unsigned char)i;
	p[n - 1] = (unsigned char)(i >> 3);
	v = p[0] + p[n - 1];
	free(p);
	return v;
}

int
main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 2000000;
	struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
	struct sigaction sa;
	unsigned long sum = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		return 2;
	free(malloc(HANDLER_SIZE));  /* warm the handler's tcache bin */
	if (setitimer(ITIMER_REAL, &it, NULL))
		return 3;
	for (long i = 0; i < iterations; i++)
		sum += main_alloc((unsigned long)i);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	if (bad)
		return 4;
	/* The tick count varies run to run; only its being nonzero is
	 * printed, so outputs compare equal. */
	printf("ok %s %lu\n", ticks > 0 ? "ticked" : "no-ticks", sum);
	return 0;
}
