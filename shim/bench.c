/* bench.c -- handler timing for the benchmarks.  See bench.h. */
#include "shim/bench.h"
#include "common/clock.h"

#ifdef PS_BENCH
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_RECORDS (1u << 20)

/* Written by handlers (slot reserved with an atomic add), read at exit. */
static uint32_t durations[MAX_RECORDS];
static _Atomic uint32_t n_records;
static _Atomic uint64_t sum_ns;

/* The counter and CLOCK_MONOTONIC at start-up, for the tick rate. */
static uint64_t tsc0, mono0;

__attribute__((constructor)) static void
bench_start(void)
{
	mono0 = ps_clock_ns(CLOCK_MONOTONIC);
	tsc0 = __builtin_ia32_rdtsc();
}

PS_SIGSAFE uint64_t
ps_bench_now(void)
{
	return __builtin_ia32_rdtsc();
}

/* Each thread's first WARMUP samples are kept apart: they fault in the
 * stack table's pages and fill the thread's unwind-row cache, which a
 * profiler does once per thread and stack, not per sample. */
#define WARMUP 20
static PS_TLS unsigned t_samples;
static _Atomic uint32_t n_warm;
static _Atomic uint64_t warm_max;

PS_SIGSAFE void
ps_bench_record(uint64_t ns)
{
	/* In ticks until ps_bench_write converts them. */
	uint32_t i;

	atomic_fetch_add(&sum_ns, ns);
	if (t_samples++ < WARMUP) {
		uint64_t m = atomic_load(&warm_max);

		atomic_fetch_add(&n_warm, 1);
		while (ns > m && !atomic_compare_exchange_weak(&warm_max, &m, ns))
			;
		return;
	}
	i = atomic_fetch_add(&n_records, 1);
	if (i < MAX_RECORDS)
		durations[i] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

static int
cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void
ps_bench_write(const char *dir, const char *app, int pid)
{
	uint32_t n = atomic_load(&n_records);
	uint32_t warm = atomic_load(&n_warm);
	uint64_t dt = __builtin_ia32_rdtsc() - tsc0, dm = ps_clock_ns(CLOCK_MONOTONIC) - mono0;
	double ns_per_tick = dt ? (double)dm / (double)dt : 1.0;
	uint32_t p50 = 0, p99 = 0, max = 0;
	char path[4096], line[256];
	int fd, len;

	if (n > MAX_RECORDS)
		n = MAX_RECORDS;
	if (!dir[0] || n + warm == 0)
		return;
	if (n) {
		qsort(durations, n, sizeof(durations[0]), cmp);
		p50 = (uint32_t)(durations[n / 2] * ns_per_tick);
		p99 = (uint32_t)(durations[(size_t)n * 99 / 100] * ns_per_tick);
		max = (uint32_t)(durations[n - 1] * ns_per_tick);
	}
	snprintf(path, sizeof(path), "%s/%s.%d.handler.txt", dir, app, pid);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	/* count and sum_ns cover every sample; the percentiles the samples
	 * after each thread's warm-up, whose own count and maximum follow. */
	len = snprintf(line, sizeof(line), "count %u\nsum_ns %llu\np50_ns %u\np99_ns %u\nmax_ns %u\n"
		       "warm_count %u\nwarm_max_ns %u\n", n + warm,
		       (unsigned long long)((double)atomic_load(&sum_ns) * ns_per_tick), p50, p99, max,
		       warm, (unsigned)((double)atomic_load(&warm_max) * ns_per_tick));
	if (write(fd, line, (size_t)len) < 0)
		(void)0;
	close(fd);
}
#endif
