/* malloc_loop: the allocation fast path and a malloc-heavy loop.
 *
 *   malloc_loop pairs N   N x { p = malloc(32); touch; free(p) }; prints
 *                         "ns_per_pair X" from the thread's CPU clock around
 *                         the loop only, so start-up and exit are excluded.
 *   malloc_loop mixed N   N operations on a ring of 4096 live blocks of
 *                         random sizes 16..4096 (free the old, malloc a new
 *                         one): what a real allocation-heavy program does.
 *
 * Built with -fno-builtin-malloc/-free and a volatile touch, so the
 * compiler cannot drop a malloc/free pair whose result is unused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Named so that callgrind can count this function alone
 * (--toggle-collect=pair_loop). */
__attribute__((noinline)) void
pair_loop(long n)
{
	for (long i = 0; i < n; i++) {
		char *p = malloc(32);

		if (!p)
			abort();
		*(volatile char *)p = (char)i;
		free(p);
	}
}

__attribute__((noinline)) static uint64_t
mixed_loop(long n)
{
	static char *ring[4096];
	uint64_t rng = 0x2545f4914f6cdd1dull, sum = 0;

	for (long i = 0; i < n; i++) {
		size_t k = (size_t)i & 4095, size;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		size = 16 + (size_t)(rng % 4081);
		free(ring[k]);
		ring[k] = malloc(size);
		if (!ring[k])
			abort();
		ring[k][0] = (char)i;
		sum += (uint64_t)(unsigned char)ring[k][0];
	}
	for (size_t k = 0; k < 4096; k++)
		free(ring[k]);
	return sum;
}

int
main(int argc, char **argv)
{
	long n;
	double t0;

	if (argc != 3)
		return 2;
	n = atol(argv[2]);
	if (n < 1)
		return 2;
	if (!strcmp(argv[1], "pairs")) {
		pair_loop(n / 10 + 1);  /* warm up: the first calls resolve symbols */
		t0 = thread_ns();
		pair_loop(n);
		printf("ns_per_pair %.3f\n", (thread_ns() - t0) / (double)n);
		return 0;
	}
	if (!strcmp(argv[1], "mixed")) {
		printf("sum %llu\n", (unsigned long long)mixed_loop(n));
		return 0;
	}
	return 2;
}
