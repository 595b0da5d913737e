/* burn: a fixed amount of CPU work (not a fixed time), so that the CPU time
 * of runs with and without a profiler can be compared as a ratio.  Each
 * thread recurses DEPTH levels through a noinline function before it
 * spins, so every sample has a stack about DEPTH frames deep: the handler's
 * unwinding cost grows with depth and 30 is what the targets assume.
 *
 * usage: burn MILLIONS_OF_ITERATIONS_PER_THREAD THREADS DEPTH
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long iters, depth;

/* The leaf: a dependent floating-point chain the compiler cannot fold. */
__attribute__((noinline)) static double
leaf_spin(long n)
{
	volatile double x = 1.0;

	for (long i = 0; i < n; i++)
		x = x * 1.0000001 + 0.5;
	return x;
}

/* Work after the call keeps it from becoming a tail call, so each level
 * stays a real frame on the stack. */
__attribute__((noinline)) static double
descend(long level, long n)
{
	double r;

	if (level <= 1)
		return leaf_spin(n);
	r = descend(level - 1, n);
	return r + (double)level;
}

static void *
worker(void *arg)
{
	double *out = arg;

	/* Many short descents rather than one: the unwinder sees the whole
	 * depth throughout, and the recursion itself costs nothing measurable. */
	for (long done = 0; done < iters; done += 100000)
		*out += descend(depth, 100000);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t[64];
	double res[64] = { 0 };
	long n;

	if (argc != 4)
		return 2;
	iters = atol(argv[1]) * 1000000L;
	n = atol(argv[2]);
	depth = atol(argv[3]);
	if (n < 1 || n > 64 || depth < 1 || iters < 1)
		return 2;
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, &res[i]))
			return 1;
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	/* Printing the result keeps the work observable. */
	printf("%g\n", res[0] > 0 ? 1.0 : 0.0);
	return 0;
}
