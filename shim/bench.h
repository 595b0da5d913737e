/* bench.h -- time spent in the SIGPROF handler, measured from inside.
 *
 * Compiled in only when the library is built with -DPS_BENCH (the
 * `bench/` build, shim/libpyroshim-bench.so); otherwise every function is
 * an empty inline and costs nothing.  A 1 % overhead cannot be seen from
 * outside on a noisy machine (REFERENCES.md section 7), so the benchmark
 * counts it inside and reports both.  Durations are the handler thread's
 * CPU time (CLOCK_THREAD_CPUTIME_ID), so preemption on a busy machine does
 * not count; the clock reads themselves (~100 ns each) are included.
 */
#ifndef PS_BENCH_H
#define PS_BENCH_H

#include <stdint.h>
#include "ps.h"

#ifdef PS_BENCH
/* Record one handler run of `ns` nanoseconds.  Async-signal-safe. */
void ps_bench_record(uint64_t ns);
/* Write "count N\nsum_ns N\np50_ns N\np99_ns N\nmax_ns N\n" to dirfd/name.
 * Context: exit, guard held. */
void ps_bench_write(const char *dir, const char *app, int pid);
uint64_t ps_bench_now(void);
#else
static inline void ps_bench_record(uint64_t ns) { (void)ns; }
static inline void ps_bench_write(const char *dir, const char *app, int pid)
{
	(void)dir; (void)app; (void)pid;
}
static inline uint64_t ps_bench_now(void) { return 0; }
#endif

#endif
