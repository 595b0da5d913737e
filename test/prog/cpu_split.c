/* cpu_split: burns CPU in two functions with a known split, on one or more
 * threads, and reports the CPU time each function really used, measured
 * with the thread's own CPU clock.  The integration tests compare this truth
 * with the profile.
 *
 * usage: cpu_split MILLISECONDS_TOTAL THREADS SHARE_A_PERCENT REPORT_FILE
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long total_ms, share_a;
static double a_ns[64], b_ns[64];

static double
thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((noinline)) static double
spin(double until_ns)
{
	volatile double x = 1.0;

	while (thread_ns() < until_ns)
		for (int i = 0; i < 2000; i++)
			x = x * 1.0000001 + 0.5;
	return x;
}

/* Two distinct functions, called in slices so each is sampled throughout. */
__attribute__((noinline)) void
burn_alpha(double ns)
{
	spin(thread_ns() + ns);
}

__attribute__((noinline)) void
burn_beta(double ns)
{
	spin(thread_ns() + ns);
}

static void *
worker(void *arg)
{
	long id = (long)arg;
	/* Slices of random length: a periodic pattern would alias with the
	 * periodic timer and bias any sampling profiler. */
	unsigned long long rng = 0x9e3779b97f4a7c15ull * (unsigned long long)(id + 1);
	double slice, t0, budget = total_ms * 1e6;
	double want_a = budget * share_a / 100.0, done = 0;
	int alpha;

	while (done < budget) {
		/* Keep alpha's share of the time spent so far on target. */
		alpha = a_ns[id] <= want_a * (done / budget);
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		slice = 0.3e6 + (double)(rng % 3000) * 1e3;  /* 0.3 .. 3.3 ms */
		t0 = thread_ns();
		if (alpha)
			burn_alpha(slice);
		else
			burn_beta(slice);
		t0 = thread_ns() - t0;
		if (alpha)
			a_ns[id] += t0;
		else
			b_ns[id] += t0;
		done += t0;
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t[64];
	long n;
	double a = 0, b = 0;
	FILE *f;

	if (argc != 5)
		return 2;
	total_ms = atol(argv[1]);
	n = atol(argv[2]);
	share_a = atol(argv[3]);
	if (n < 1 || n > 64)
		return 2;
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i))
			return 1;
	for (long i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		a += a_ns[i];
		b += b_ns[i];
	}
	f = fopen(argv[4], "w");
	if (!f)
		return 1;
	fprintf(f, "{\"burn_alpha\": %.0f, \"burn_beta\": %.0f}\n", a, b);
	return fclose(f) ? 1 : 0;
}
