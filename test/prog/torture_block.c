/* torture_block: threads waiting in system calls while another thread
 * burns CPU, to check pyroshim(7)'s word on EINTR.  Two phases; in each,
 * the main thread burns BURN_MS ms of its own CPU while one other thread
 * waits, and with MASK=1 the main thread blocks SIGPROF while it burns
 * (as programs do around critical sections), so that a process-wide
 * ITIMER_PROF signal cannot go to it and must go to the waiting thread.
 *   read phase   a thread blocks in read(2) on an empty pipe; the main
 *                thread writes a message only after its burn.  read is
 *                restarted after a handler installed with SA_RESTART, so
 *                it must return the whole message in every mode.
 *   sleep phase  a thread sleeps SLEEP_MS ms in nanosleep(2), then makes
 *                WAITS calls of poll(2) (1 ms timeout, on an empty pipe)
 *                and WAITS of nanosleep(2) of 1 ms.  These are never
 *                restarted: a handler that runs while they wait makes them
 *                fail with EINTR.
 * Without the shim no signal exists, so nothing is interrupted.  With the
 * default per-thread timers a thread that uses no CPU is never signalled:
 * the output is the same as without the shim.  With
 * PYROSCOPE_CPU_TIMER=process the kernel sends the signal to the thread
 * that is running, unless it blocks SIGPROF: with MASK=1 the waiting thread
 * takes them, and the sleep phase counts EINTRs.
 * usage: torture_block SLEEP_MS BURN_MS MASK
 * prints "read N MESSAGE ERRNO", "sleep RC ERRNO" (the long sleep) and
 * "eintr poll N nanosleep N"; exits 0 unless a system call setting things
 * up failed, or a wait failed with anything but EINTR. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MESSAGE "written-after-the-burn"
#define WAITS 100

static int data[2], never[2];
static double sleep_ms = 300;
static int failed;

static struct {
	ssize_t n;
	int err;
	char buf[64];
} rd;

static struct {
	int rc, err, poll_eintr, sleep_eintr;
} sl;

/* Blocks until the main thread writes, after its burn. */
__attribute__((noinline)) static void *
reader(void *arg)
{
	(void)arg;
	rd.n = read(data[0], rd.buf, sizeof(rd.buf) - 1);
	rd.err = rd.n < 0 ? errno : 0;
	if (rd.n > 0)
		rd.buf[rd.n] = '\0';
	return NULL;
}

__attribute__((noinline)) static void *
sleeper(void *arg)
{
	struct timespec one = { 0, 1000000 };
	struct timespec ts = { (time_t)(sleep_ms / 1000),
			       (long)(sleep_ms * 1e6) % 1000000000L };
	struct pollfd p = { never[0], POLLIN, 0 };
	int rc;

	(void)arg;
	sl.rc = nanosleep(&ts, NULL);
	sl.err = sl.rc ? errno : 0;
	if (sl.rc && sl.err != EINTR)
		failed = 1;
	for (int i = 0; i < WAITS; i++) {
		rc = poll(&p, 1, 1);
		if (rc < 0 && errno == EINTR)
			sl.poll_eintr++;
		else if (rc != 0)
			failed = 1;
		rc = nanosleep(&one, NULL);
		if (rc && errno == EINTR)
			sl.sleep_eintr++;
		else if (rc)
			failed = 1;
	}
	return NULL;
}

static double
cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static void
burn(double ms, int mask)
{
	volatile double x = 1;
	double end = cpu_ms() + ms;
	sigset_t prof;

	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	if (mask)
		pthread_sigmask(SIG_BLOCK, &prof, NULL);
	while (cpu_ms() < end)
		for (int k = 0; k < 2000; k++)
			x = x * 1.0000001 + 0.5;
	if (mask)
		pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
}

static const char *
name(int err)
{
	return err == 0 ? "0" : err == EINTR ? "EINTR" : strerror(err);
}

int
main(int argc, char **argv)
{
	double burn_ms = argc > 2 ? atof(argv[2]) : 300;
	int mask = argc > 3 ? atoi(argv[3]) : 0;
	pthread_t t;

	sleep_ms = argc > 1 ? atof(argv[1]) : 300;
	if (pipe(data) || pipe(never))
		return 1;
	/* Read phase: the reader is the only thread that could take a
	 * signal the burning thread does not. */
	if (pthread_create(&t, NULL, reader, NULL))
		return 1;
	burn(burn_ms, mask);
	if (write(data[1], MESSAGE, strlen(MESSAGE)) != (ssize_t)strlen(MESSAGE))
		return 1;
	if (pthread_join(t, NULL))
		return 1;
	/* Sleep phase: now the sleeper is. */
	if (pthread_create(&t, NULL, sleeper, NULL))
		return 1;
	burn(burn_ms, mask);
	if (pthread_join(t, NULL))
		return 1;
	printf("read %zd %s %s\n", rd.n, rd.n > 0 ? rd.buf : "-", name(rd.err));
	printf("sleep %d %s\n", sl.rc, name(sl.err));
	printf("eintr poll %d nanosleep %d\n", sl.poll_eintr, sl.sleep_eintr);
	return failed;
}
