/* malloc_loop: the allocation fast path and a malloc-heavy loop.
 *
 *   malloc_loop pairs N   N x { p = malloc(32); touch; free(p) }; prints
 *                         "ns_per_pair X" from the thread's CPU clock around
 *                         the loop only, so start-up and exit are excluded.
 *   malloc_loop calls N   each entry point on its own, N calls of each:
 *                         malloc(32) and calloc(1, 32) in batches of 4096
 *                         live blocks, free of those blocks (free-heavy),
 *                         and p = realloc(p, 1 + i % 256) (realloc-heavy:
 *                         a string grown one byte at a time, as naive code
 *                         does); prints "ns_per_malloc X", "ns_per_calloc",
 *                         "ns_per_free", "ns_per_realloc", each from the
 *                         thread CPU clock around its calls only.  16 MiB
 *                         in 1 KiB blocks stay live throughout, as in a
 *                         real program: a profiler then always has some
 *                         sampled blocks live, which free and realloc must
 *                         tell apart from the rest.
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

/* The entry points one at a time (`calls`).  Each loop is a function of
 * its own so that callgrind can count it alone (--toggle-collect=NAME). */
#define BATCH 4096

__attribute__((noinline)) void
malloc_batch(char **b)
{
	for (int i = 0; i < BATCH; i++) {
		b[i] = malloc(32);
		if (!b[i])
			abort();
	}
}

__attribute__((noinline)) void
calloc_batch(char **b)
{
	for (int i = 0; i < BATCH; i++) {
		b[i] = calloc(1, 32);
		if (!b[i])
			abort();
	}
}

__attribute__((noinline)) void
free_batch(char **b)
{
	for (int i = 0; i < BATCH; i++)
		free(b[i]);
}

__attribute__((noinline)) char *
realloc_loop(char *p, long n)
{
	for (long i = 0; i < n; i++) {
		p = realloc(p, 1 + (size_t)(i & 255));
		if (!p)
			abort();
		p[i & 255] = (char)i;
	}
	return p;
}

/* N calls of each entry point, in batches; prints ns per call of each. */
static void
calls(long n)
{
	static char *b[BATCH], *heap[16384];
	double t_malloc = 0, t_calloc = 0, t_free = 0, t0;
	long batches = n / BATCH + 1;
	char *p;

	for (int i = 0; i < 16384; i++) {
		heap[i] = malloc(1024);
		if (!heap[i])
			abort();
		memset(heap[i], 1, 1024);
	}
	for (long k = 0; k < batches; k++) {
		t0 = thread_ns();
		malloc_batch(b);
		t_malloc += thread_ns() - t0;
		t0 = thread_ns();
		free_batch(b);
		t_free += thread_ns() - t0;
		t0 = thread_ns();
		calloc_batch(b);
		t_calloc += thread_ns() - t0;
		free_batch(b);
	}
	p = realloc_loop(NULL, n / 10 + 1);  /* warm up */
	t0 = thread_ns();
	p = realloc_loop(p, n);
	printf("ns_per_realloc %.3f\n", (thread_ns() - t0) / (double)n);
	free(p);
	printf("ns_per_malloc %.3f\n", t_malloc / (double)(batches * BATCH));
	printf("ns_per_calloc %.3f\n", t_calloc / (double)(batches * BATCH));
	printf("ns_per_free %.3f\n", t_free / (double)(batches * BATCH));
	for (int i = 0; i < 16384; i++)
		free(heap[i]);
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
	if (!strcmp(argv[1], "calls")) {
		calls(n);
		return 0;
	}
	if (!strcmp(argv[1], "mixed")) {
		printf("sum %llu\n", (unsigned long long)mixed_loop(n));
		return 0;
	}
	return 2;
}
