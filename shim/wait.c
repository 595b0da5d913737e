/* wait.c -- the kept wait: its weight, its stack, its record.  See wait.h. */
#include "shim/wait.h"

#include <errno.h>

#include "common/expo.h"
#include "common/guard.h"
#include "shim/sigvirt.h"
#include "shim/stacktab.h"
#include "shim/unwind.h"

_Atomic int ps_wait_on;
_Atomic int64_t ps_wait_rate_ticks;
PS_TLS int64_t ps_wait_left;

/* Written by ps_wait_start (constructor, before any wait is recorded) and
 * read by every slow path afterwards. */
static uint64_t rate_ns;
static uint64_t tick0, mono0;  /* one reading of both clocks, to calibrate */

/* Per-thread generator state; 0 means "not seeded yet".  Owned by its
 * thread. */
static PS_TLS uint64_t t_rng;

void
ps_wait_start(int mask, uint64_t rate)
{
	rate_ns = rate ? rate : 1;
	mono0 = ps_clock_ns(CLOCK_MONOTONIC);
	tick0 = ps_wait_ticks();
	atomic_store(&ps_wait_rate_ticks, 0);
	atomic_store(&ps_wait_on, mask);
}

PS_SIGSAFE void
ps_wait_off(void)
{
	atomic_store(&ps_wait_on, 0);
}

/* Nanoseconds per tick: the ratio of the two clocks since start-up.  Both
 * are read within a few tens of ns of each other, so after the first
 * 100 us of the process the ratio is within 0.1 %. */
PS_SIGSAFE static double
ns_per_tick(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	uint64_t t = ps_wait_ticks(), m = ps_clock_ns(CLOCK_MONOTONIC);

	if (t <= tick0 || m <= mono0)
		return 0;
	return (double)(m - mono0) / (double)(t - tick0);
#else
	return 1;
#endif
}

PS_SIGSAFE static uint64_t
next_random(void)
{
	/* xorshift64*: good enough to draw sampling distances. */
	t_rng ^= t_rng >> 12;
	t_rng ^= t_rng << 25;
	t_rng ^= t_rng >> 27;
	return t_rng * 0x2545f4914f6cdd1dull;
}

/* An exponentially distributed distance of mean `rate` ticks, >= 1. */
PS_SIGSAFE static int64_t
draw(int64_t rate)
{
	/* u in (0, 1]: -log(u) is then finite and >= 0. */
	double u = ((double)(next_random() >> 11) + 1.0) * (1.0 / 9007199254740992.0);

	return (int64_t)(ps_expo_neglog(u) * (double)rate) + 1;
}

PS_SIGSAFE uint64_t
ps_wait_weight(int64_t d, int64_t rate)
{
	double p;

	if (d >= rate || rate <= 0)
		return PS_FIXED_ONE;
	p = ps_expo_p((double)d / (double)rate);
	if (p <= 0)
		return PS_FIXED_ONE;
	return (uint64_t)((double)PS_FIXED_ONE / p + 0.5);
}

/* Record a kept wait under the calling thread's stack, `leaf` on top.
 * The shim's own frames (this one, the interposer) are dropped when the
 * stack is symbolized.  A thread whose unwinder is not ready (not warmed
 * up, or already inside a capture when a program's signal handler waits)
 * records the leaf alone: never a capture that could allocate or nest. */
PS_SIGSAFE static void
record(const void *leaf, const uint64_t *vals)
{
	uintptr_t ips[PS_MAX_DEPTH];
	struct ps_stacktab *tab = ps_stacktab_current();
	int depth = 1;

	if (!tab)
		return;
	ips[0] = (uintptr_t)leaf;
	if (ps_unwind_ready())
		depth += ps_unwind_here(ips + 1, PS_MAX_DEPTH - 1);
	(void)ps_stacktab_add(tab, ips, depth, depth == PS_MAX_DEPTH, vals);
}

PS_SIGSAFE void
ps_wait_slow(int64_t d, int kind, const void *leaf)
{
	uint64_t vals[PS_NVALUES] = { 0 };
	sigset_t old;
	int on = atomic_load_explicit(&ps_wait_on, memory_order_relaxed) & (kind | PS_WAIT_BLOCK);
	int saved = errno;
	int64_t rate;
	uint64_t w, ns;
	double npt;

	/* The shim's own waits (its threads hold the guard) are never
	 * profiled; nor is a wait that went backwards (a counter read on
	 * two CPUs that disagree). */
	if (d <= 0 || !on || ps_guard_held())
		goto out;
	npt = ns_per_tick();
	if (npt <= 0)
		goto out;
	rate = (int64_t)((double)rate_ns / npt);
	if (rate < 1)
		rate = 1;
	atomic_store_explicit(&ps_wait_rate_ticks, rate, memory_order_relaxed);
	if (d < rate) {
		/* The countdown is due (or the thread's first short wait). */
		if (!t_rng) {
			/* First visit: the thread's sampling points start at its
			 * first waited tick, as alloc.c's start at its first byte. */
			t_rng = ((uint64_t)(uintptr_t)&t_rng ^ ps_wait_ticks()) *
				0x9e3779b97f4a7c15ull | 1;
			ps_wait_left = draw(rate) - d;
			if (ps_wait_left > 0)
				goto out;
		}
		ps_wait_left = draw(rate);
	}
	w = ps_wait_weight(d, rate);
	ns = (uint64_t)((double)d * npt * (double)w / PS_FIXED_ONE + 0.5);
	if (on & PS_WAIT_BLOCK) {
		vals[PS_V_BLOCK_COUNT] = w;
		vals[PS_V_BLOCK_NS] = ns;
	}
	if (on & kind & PS_WAIT_MUTEX) {
		vals[PS_V_MUTEX_COUNT] = w;
		vals[PS_V_MUTEX_NS] = ns;
	}
	/* A handler of the program's that left by siglongjmp (from a read,
	 * say, which is async-signal-safe) would leave the guard and the
	 * unwinder's state set for good: the thread's hooks then answered
	 * without the C library (pipe said EMFILE) and it recorded nothing
	 * more.  Two system calls for each wait kept. */
	ps_sigvirt_hold(&old);
	ps_guard_enter();
	record(leaf, vals);
	ps_guard_leave();
	ps_sigvirt_release(&old);
out:
	errno = saved;
}
