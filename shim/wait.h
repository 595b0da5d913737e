/* wait.h -- off-CPU time: what the block and mutex profiles record.
 *
 * Each interposer of a waiting call (hook_wait.c) reads the CPU's cycle
 * counter before and after the C library's call and hands the difference
 * to ps_wait_done().  No signal is involved, so no call is ever interrupted
 * (no EINTR), and the call itself is the C library's, unchanged.  Mutex and
 * rwlock interposers try the lock first: an uncontended lock reads no clock.
 *
 * Which waits are kept, as Go's SetBlockProfileRate does: every wait of at
 * least `rate` ns; a shorter one of d ns with probability 1-exp(-d/rate)
 * (a per-thread countdown of waited ticks with exponentially distributed
 * distances, as the allocation sampler counts bytes), then weighted by
 * 1/(1-exp(-d/rate)).  So the expected totals of contentions and delay
 * equal the real ones, and the fast path is a subtraction and two
 * predictable branches.
 *
 * A kept wait is recorded under the waiter's stack, with the waiting call's
 * own entry point (the C library's `read`, `pthread_mutex_lock`...) as the
 * leaf frame, into the stack table's PS_V_BLOCK_* values, and for mutex
 * and rwlock waits also PS_V_MUTEX_* (the delay is the waiter's: pyroshim(7)).
 *
 * The cycle counter: x86-64's TSC or arm64's virtual counter, turned into
 * nanoseconds against CLOCK_MONOTONIC (the ratio since start-up, computed
 * on the slow path); elsewhere CLOCK_MONOTONIC itself.
 */
#ifndef PS_WAIT_H
#define PS_WAIT_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include "common/clock.h"
#include "common/ps.h"

enum ps_wait_kind {
	PS_WAIT_BLOCK = 1,   /* the block profile only */
	PS_WAIT_MUTEX = 2,   /* a lock: the mutex profile, and the block profile */
};

/* Bit mask of the profiles that are on (PS_WAIT_BLOCK, PS_WAIT_MUTEX); 0
 * until ps_wait_start and after ps_wait_off.  Read on every hooked call. */
extern PS_HIDDEN _Atomic int ps_wait_on;
/* The rate in counter ticks: a wait this long or longer is always kept.
 * 0 until the counter is calibrated, so every wait takes the slow path
 * until then.  Written by slow paths (the same value from any thread). */
extern PS_HIDDEN _Atomic int64_t ps_wait_rate_ticks;
/* Ticks this thread may still wait before its next kept short wait; <= 0
 * sends the next wait to the slow path.  Owned by its thread. */
extern PS_TLS int64_t ps_wait_left;

/* Begin recording waits longer than about rate_ns into the stack table
 * (ps_stacktab_current()), for the profiles in `mask`.
 * Context: constructor, after the stack table is published. */
void ps_wait_start(int mask, uint64_t rate_ns);
/* Stop for good (the helper process, which shares the program's tables). */
void ps_wait_off(void);

/* The counter.  Context: any; async-signal-safe. */
PS_SIGSAFE static inline uint64_t
ps_wait_ticks(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return ps_clock_ns(CLOCK_MONOTONIC);
#endif
}

/* Non-zero if waits of `kind` are recorded (a lock's wait goes to the block
 * profile too).  Context: any. */
PS_SIGSAFE static inline int
ps_wait_enabled(int kind)
{
	return atomic_load_explicit(&ps_wait_on, memory_order_relaxed) & (kind | PS_WAIT_BLOCK);
}

/* The slow path: the wait that began at tick t0 and lasted d ticks is kept,
 * or the thread's countdown is due.  `leaf` is the waiting call's entry
 * point.  Context: the waiting thread, right after the call, possibly in a
 * signal handler of the program's; async-signal-safe; errno preserved. */
void ps_wait_slow(int64_t d, int kind, const void *leaf) PS_SIGSAFE;

/* After a waiting call that began at ps_wait_ticks() == t0.
 * Context: as ps_wait_slow. */
PS_SIGSAFE static inline void
ps_wait_done(uint64_t t0, int kind, const void *leaf)
{
	int64_t d = (int64_t)(ps_wait_ticks() - t0);

	if (PS_UNLIKELY(d >= atomic_load_explicit(&ps_wait_rate_ticks, memory_order_relaxed)) ||
	    PS_UNLIKELY((ps_wait_left -= d) <= 0))
		ps_wait_slow(d, kind, leaf);
}

/* The body of an interposer of the waiting call `fn`, which returns `type`:
 * `call` (the C library's call, through real_<fn>), timed when waits of
 * `kind` are recorded, its result returned. */
#define PS_WAIT_TIMED(kind, fn, type, call)                             \
	do {                                                            \
		uint64_t t0_;                                           \
		type r_;                                                \
		if (!ps_wait_enabled(kind))                             \
			return call;                                    \
		t0_ = ps_wait_ticks();                                  \
		r_ = call;                                              \
		ps_wait_done(t0_, kind, (const void *)real_##fn);       \
		return r_;                                              \
	} while (0)

/* The unbiasing weight of a kept wait of d ticks, x PS_FIXED_ONE: 1 for a
 * wait of at least `rate` ticks, 1/(1-exp(-d/rate)) for a shorter one.
 * Context: any; pure. */
uint64_t ps_wait_weight(int64_t d, int64_t rate) PS_SIGSAFE;

#endif
