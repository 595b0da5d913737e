/* lines_main.c -- a workload with hot loops on known lines, built -O2 -g,
 * for the source-line tests (test_lines.py).  Four phases, each burning
 * about `ms` milliseconds of CPU:
 *   own_spin       a loop in the program's own code;
 *   inline_caller  a loop around an always_inline function, so the hot line
 *                  is in inl_step but the code is in inline_caller;
 *   lib_spin       a loop in the program's own shared library;
 *   sort_phase     libc's qsort calling back into cmp_ints (qsort mallocs
 *                  its 16 KiB buffer, a known allocation site).
 * The test finds each hot line by its "HOT: <what>" comment. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

uint64_t lib_spin(uint64_t n);

static volatile uint64_t sink;

static double
cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static __attribute__((noinline)) uint64_t
own_spin(uint64_t n)
{
	uint64_t acc = 1, i;

	for (i = 0; i < n; i++)
		acc = acc * 6364136223846793005ull + (acc >> 31);   /* HOT: own */
	return acc;
}

static inline __attribute__((always_inline)) uint64_t
inl_step(uint64_t x)
{
	return x * 2862933555777941757ull + (x >> 27);   /* HOT: inline */
}

static __attribute__((noinline)) uint64_t
inline_caller(uint64_t n)
{
	uint64_t acc = 3, i;

	for (i = 0; i < n; i++)
		acc = inl_step(acc);   /* CALL: inline */
	return acc;
}

static int
cmp_ints(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);   /* HOT: callback */
}

static __attribute__((noinline)) void
sort_phase(int *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		v[i] = (int)((i * 2654435761u) % 1000003u);
	qsort(v, n, sizeof(*v), cmp_ints);   /* CALL: qsort */
	sink += (uint64_t)v[0];   /* not a tail call: sort_phase keeps its frame */
}

int
main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 500, t0;
	static int v[4096];

	for (t0 = cpu_ms(); cpu_ms() - t0 < ms;)
		sink += own_spin(2000000);
	for (t0 = cpu_ms(); cpu_ms() - t0 < ms;)
		sink += inline_caller(2000000);
	for (t0 = cpu_ms(); cpu_ms() - t0 < ms;)
		sink += lib_spin(2000000);
	for (t0 = cpu_ms(); cpu_ms() - t0 < ms;)
		sort_phase(v, sizeof(v) / sizeof(v[0]));
	printf("done\n");
	return 0;
}
