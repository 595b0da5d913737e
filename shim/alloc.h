/* alloc.h -- allocation sampling: when to sample, and what a sample records.
 *
 * Each thread counts down the bytes it allocates; when the count crosses
 * zero, the allocation that crossed it is sampled and a new distance is
 * drawn from an exponential distribution with mean `mean_bytes` (as Go,
 * tcmalloc and jemalloc do).  A sampled allocation of size s then stands
 * for 1/(1-exp(-s/mean)) allocations and s times that many bytes, which
 * keeps totals unbiased for any mix of sizes.  The weight is applied to
 * each sample as it is taken, never averaged per stack.
 *
 * The hooks (hook_malloc.c) own the fast path: a TLS decrement and a branch
 * on allocation, one filter byte on free and realloc.  Everything here runs
 * on the slow path only.
 */
#ifndef PS_ALLOC_H
#define PS_ALLOC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "shim/livetab.h"
#include "common/ps.h"
#include "shim/stacktab.h"

enum { PS_ALLOC_WAITING = 0, PS_ALLOC_ON = 1, PS_ALLOC_OFF = 2 };

/* A distance so large that a thread never reaches the slow path again. */
#define PS_ALLOC_NEVER (INT64_MAX / 4)

/* Begin sampling into ps_stacktab_current() and lt.  mean_bytes <= 1
 * records every allocation.  Context: constructor, after the stack table
 * is published. */
void ps_alloc_start(struct ps_livetab *lt, uint64_t mean_bytes);
/* Stop sampling for good, and stop looking up freed blocks in the live
 * table: for a process that has no sampled block of its own in it (the
 * helper, which shares the program's table; a start that failed or was
 * disabled). */
void ps_alloc_off(void);
/* The current mode (PS_ALLOC_*).  Context: any thread. */
int ps_alloc_mode(void);
/* The live table, for the free and realloc hooks (NULL until started). */
struct ps_livetab *ps_alloc_livetab(void);

/* The live table's filter (livetab.h), NULL while allocation sampling was
 * never started: then no block can be sampled.  Set by ps_alloc_start,
 * before the first sample, cleared by ps_alloc_off; a fork child's table
 * is reset in place, at the same address.  A variable, not a call, because the free hook reads it
 * on every call. */
extern PS_HIDDEN _Atomic(const _Atomic uint8_t *) ps_alloc_filter;

/* 0 if p is certainly not a sampled block, so free and realloc can forward
 * it untouched; 1 if it may be one (then look it up in the live table).
 * Context: any thread; lock-free. */
static inline int
ps_alloc_maybe_sampled(const void *p)
{
	const _Atomic uint8_t *f = atomic_load_explicit(&ps_alloc_filter, memory_order_relaxed);

	/* Likely: with allocation profiling on, the filter is always there. */
	return PS_LIKELY(f != NULL) && ps_livetab_filter_hit(f, p);
}

/* Slow path of every allocation hook: the thread's countdown reached zero.
 * `p` is the block just allocated (NULL if the allocation failed), `size`
 * the bytes requested.  Returns the new countdown for the thread.
 * Context: allocation hooks, not signal context; the caller holds the
 * guard; errno is preserved. */
int64_t ps_alloc_slow(void *p, size_t size);

/* The unbiasing weight of a sample of `size` bytes, x PS_FIXED_ONE. */
uint64_t ps_alloc_weight(size_t size, uint64_t mean_bytes);

#endif
