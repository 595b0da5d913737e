/* bench.c -- handler timing for the benchmarks.  See bench.h. */
#include "bench.h"

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

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((constructor)) static void
bench_start(void)
{
	mono0 = mono_ns();
	tsc0 = __builtin_ia32_rdtsc();
}

PS_SIGSAFE uint64_t
ps_bench_now(void)
{
	return __builtin_ia32_rdtsc();
}

PS_SIGSAFE void
ps_bench_record(uint64_t ns)
{
	/* In ticks until ps_bench_write converts them. */
	uint32_t i = atomic_fetch_add(&n_records, 1);

	atomic_fetch_add(&sum_ns, ns);
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
	char path[4096], line[256];
	int fd, len;

	if (n > MAX_RECORDS)
		n = MAX_RECORDS;
	uint64_t dt = __builtin_ia32_rdtsc() - tsc0, dm = mono_ns() - mono0;
	double ns_per_tick = dt ? (double)dm / (double)dt : 1.0;

	if (!dir[0] || n == 0)
		return;
	qsort(durations, n, sizeof(durations[0]), cmp);
	snprintf(path, sizeof(path), "%s/%s.%d.handler.txt", dir, app, pid);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	len = snprintf(line, sizeof(line), "count %u\nsum_ns %llu\np50_ns %u\np99_ns %u\nmax_ns %u\n",
		       n, (unsigned long long)((double)atomic_load(&sum_ns) * ns_per_tick),
		       (unsigned)(durations[n / 2] * ns_per_tick),
		       (unsigned)(durations[(size_t)n * 99 / 100] * ns_per_tick),
		       (unsigned)(durations[n - 1] * ns_per_tick));
	if (write(fd, line, (size_t)len) < 0)
		(void)0;
	close(fd);
}
#endif
