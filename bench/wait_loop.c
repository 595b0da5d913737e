/* wait_loop: the waiting calls' fast paths, and a syscall-heavy loop.
 *
 *   wait_loop mutex N     N x { pthread_mutex_lock(&m); pthread_mutex_unlock(&m) }
 *                         on a free mutex (never contended)
 *   wait_loop read N      N x { raw write(2) of "x"; read(r, &c, 1) } on one
 *                         pipe: a one-byte read that never blocks (the byte
 *                         is already there), the only call an interposer sees
 *                         (the write is an inline system call instruction on
 *                         x86-64: the shim interposes syscall() too)
 *   wait_loop pipe N      N x { write(w, "x", 1); read(r, &c, 1) }: the same
 *                         with both calls through the C library
 *   wait_loop pingpong N  two threads bounce one byte N times over two pipes:
 *                         every read blocks briefly (a few us), so a profiler
 *                         of waits sees N short waits per thread and keeps
 *                         some of them (the syscall-heavy loop)
 *
 * Prints "ns_per_iter X": the main thread's CPU clock around the loop only
 * (mutex, pipe; system time included), or the wall clock (pingpong).
 *
 * The process is multi-threaded from the start: main() first creates one
 * idle thread.  glibc's read and write take their cancellable path (and
 * pthread_mutex_lock its locked one) once a second thread exists, and any
 * profiler with a helper thread has one; without it, "no profiler" would be
 * measured on a path the profiled program never takes.
 *
 * For callgrind: `--toggle-collect=main` counts everything main does, and
 * the slope between two loop lengths N1 < N2, (I(N2) - I(N1)) / (N2 - N1),
 * is the cost of one iteration with every one-time cost cancelled.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double
clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *
idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) static void
mutex_loop(long n)
{
	for (long i = 0; i < n; i++) {
		if (pthread_mutex_lock(&mu))
			abort();
		pthread_mutex_unlock(&mu);
	}
}

/* write(2) by a system call instruction of our own, which no interposer
 * sees (elsewhere than x86-64: syscall(), which the shim does see). */
static long
raw_write(int fd, const void *b, size_t n)
{
#if defined(__x86_64__)
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_write), "D"((long)fd), "S"(b), "d"(n)
			 : "rcx", "r11", "memory");
	return r;
#else
	return syscall(SYS_write, fd, b, n);
#endif
}

/* raw: write by raw_write, which no interposer sees. */
__attribute__((noinline)) static void
pipe_loop(int *fd, long n, int raw)
{
	char c = 'x';

	for (long i = 0; i < n; i++) {
		if ((raw ? raw_write(fd[1], &c, 1) : write(fd[1], &c, 1)) != 1 ||
		    read(fd[0], &c, 1) != 1)
			abort();
	}
}

static int ping[2], pong[2];

static void *
ponger(void *arg)
{
	long n = (long)arg;
	char c;

	for (long i = 0; i < n; i++) {
		if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
			abort();
	}
	return NULL;
}

__attribute__((noinline)) static void
pingpong_loop(long n)
{
	pthread_t t;
	char c = 'x';

	if (pipe(ping) || pipe(pong) || pthread_create(&t, NULL, ponger, (void *)n))
		abort();
	for (long i = 0; i < n; i++) {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
			abort();
	}
	pthread_join(t, NULL);
}

int
main(int argc, char **argv)
{
	pthread_t t;
	int fd[2];
	long n;
	double t0;

	if (argc != 3 || pthread_create(&t, NULL, idle, NULL))
		return 2;
	n = atol(argv[2]);
	if (n < 0)
		return 2;
	if (!strcmp(argv[1], "mutex")) {
		mutex_loop(n / 10 + 1);  /* warm up: the first calls resolve symbols */
		t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		mutex_loop(n);
		t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	} else if (!strcmp(argv[1], "pipe") || !strcmp(argv[1], "read")) {
		int raw = !strcmp(argv[1], "read");

		if (pipe(fd))
			return 1;
		pipe_loop(fd, n / 10 + 1, raw);
		t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		pipe_loop(fd, n, raw);
		t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	} else if (!strcmp(argv[1], "pingpong")) {
		t0 = clock_ns(CLOCK_MONOTONIC);
		pingpong_loop(n);
		t0 = clock_ns(CLOCK_MONOTONIC) - t0;
	} else {
		return 2;
	}
	printf("ns_per_iter %.3f\n", n ? t0 / (double)n : 0.0);
	return 0;
}
