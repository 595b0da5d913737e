/* bench.h -- time spent in the signal handler, measured from inside.
 *
 * Compiled in only when the library is built with -DPS_BENCH (the
 * `bench/` build, shim/libpyroshim-bench.so); otherwise every function is
 * an empty inline and costs nothing.  A 1 % overhead cannot be seen from
 * outside on a noisy machine (REFERENCES.md section 7), so the benchmark
 * counts it inside and reports both.  Durations are read from the time
 * stamp counter (rdtsc, ~20 cycles, no system call: a clock_gettime of the
 * thread's CPU clock is a system call of ~0.5-1 us here, which would be
 * most of what is measured) and converted to ns with the rate measured
 * between start-up and exit.  A handler preempted midway counts whole;
 * with handlers of a few us against a scheduler slice of milliseconds
 * that is far rarer than the 1 % the p99 looks at.
 */
#ifndef PS_BENCH_H
#define PS_BENCH_H

#include <stdint.h>
#include "common/ps.h"

#ifdef PS_BENCH
/* Record one handler run of `ticks` (two ps_bench_now() apart).
 * Async-signal-safe. */
void ps_bench_record(uint64_t ticks);
/* Write "count N\nsum_ns N\np50_ns N\np99_ns N\nmax_ns N\n" to
 * dir/app.pid.handler.txt, once per process: the records are shared with
 * the uploader's helper, which writes them when the program ended without
 * its destructor (Go's raw exit_group).  Context: exit, guard held; or the
 * helper's last pass. */
void ps_bench_write(const char *dir, const char *app, int pid);
/* The time stamp counter.  Async-signal-safe. */
uint64_t ps_bench_now(void);
#else
static inline void ps_bench_record(uint64_t ticks) { (void)ticks; }
static inline void ps_bench_write(const char *dir, const char *app, int pid)
{
	(void)dir; (void)app; (void)pid;
}
static inline uint64_t ps_bench_now(void) { return 0; }
#endif

#endif
