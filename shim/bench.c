/* bench.c -- handler timing for the benchmarks.  See bench.h. */
#include "shim/bench.h"
#include "common/clock.h"

#ifdef PS_BENCH
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_RECORDS (1u << 20)

/* The records live in shared memory, mapped before the uploader's helper
 * process is made: a program that ends without running its destructor
 * (Go's raw exit_group, a kill) has them written by the helper, which
 * sees the program's samples up to its last one. */
struct records {
	/* Written by handlers (slot reserved with an atomic add), read at
	 * exit, by the program or its helper. */
	uint32_t durations[MAX_RECORDS];
	_Atomic uint32_t n_records;
	_Atomic uint64_t sum_ns;
	_Atomic uint32_t n_warm;
	_Atomic uint64_t warm_max;
	_Atomic int written;            /* the file is written once */
	/* The counter and CLOCK_MONOTONIC at start-up, for the tick rate. */
	uint64_t tsc0, mono0;
};
static struct records *rec;

static void
new_records(void)
{
	void *p = mmap(NULL, sizeof(*rec), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	rec = p == MAP_FAILED ? NULL : p;
	if (!rec)
		return;
	rec->mono0 = ps_clock_ns(CLOCK_MONOTONIC);
	rec->tsc0 = __builtin_ia32_rdtsc();
}

/* Before the library's other constructors (default priority), so before
 * the helper is made.  A fork child gets records of its own (its helper
 * is made later). */
__attribute__((constructor(101))) static void
bench_start(void)
{
	new_records();
	(void)pthread_atfork(NULL, NULL, new_records);
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

PS_SIGSAFE void
ps_bench_record(uint64_t ns)
{
	/* In ticks until ps_bench_write converts them. */
	uint32_t i;

	if (!rec)
		return;
	atomic_fetch_add(&rec->sum_ns, ns);
	if (t_samples++ < WARMUP) {
		uint64_t m = atomic_load(&rec->warm_max);

		atomic_fetch_add(&rec->n_warm, 1);
		while (ns > m && !atomic_compare_exchange_weak(&rec->warm_max, &m, ns))
			;
		return;
	}
	i = atomic_fetch_add(&rec->n_records, 1);
	if (i < MAX_RECORDS)
		rec->durations[i] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
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
	uint32_t n, warm, p50 = 0, p99 = 0, max = 0;
	uint64_t dt, dm;
	double ns_per_tick;
	char path[4096], line[256];
	int fd, len;

	if (!rec || !dir[0])
		return;
	n = atomic_load(&rec->n_records);
	warm = atomic_load(&rec->n_warm);
	if (n > MAX_RECORDS)
		n = MAX_RECORDS;
	if (n + warm == 0 || atomic_exchange(&rec->written, 1))
		return;
	dt = __builtin_ia32_rdtsc() - rec->tsc0;
	dm = ps_clock_ns(CLOCK_MONOTONIC) - rec->mono0;
	ns_per_tick = dt ? (double)dm / (double)dt : 1.0;
	if (n) {
		qsort(rec->durations, n, sizeof(rec->durations[0]), cmp);
		p50 = (uint32_t)(rec->durations[n / 2] * ns_per_tick);
		p99 = (uint32_t)(rec->durations[(size_t)n * 99 / 100] * ns_per_tick);
		max = (uint32_t)(rec->durations[n - 1] * ns_per_tick);
	}
	snprintf(path, sizeof(path), "%s/%s.%d.handler.txt", dir, app, pid);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	/* count and sum_ns cover every sample; the percentiles the samples
	 * after each thread's warm-up, whose own count and maximum follow. */
	len = snprintf(line, sizeof(line), "count %u\nsum_ns %llu\np50_ns %u\np99_ns %u\nmax_ns %u\n"
		       "warm_count %u\nwarm_max_ns %u\n", n + warm,
		       (unsigned long long)((double)atomic_load(&rec->sum_ns) * ns_per_tick), p50, p99,
		       max, warm, (unsigned)((double)atomic_load(&rec->warm_max) * ns_per_tick));
	if (write(fd, line, (size_t)len) < 0)
		(void)0;
	close(fd);
}
#endif
