/* livetab.h -- the sampled allocations that are still live (in-use heap).
 *
 * A sampled allocation is inserted by the allocation hook that sampled it;
 * free and realloc remove it.  Open addressing keyed by the pointer, no
 * lock at all: a slot's key goes EMPTY/TOMB -> BUSY (claimed) -> pointer
 * (published with release) -> TOMB.  A live pointer is unique, so it is
 * never present twice.  Lookups stop at an EMPTY slot, and EMPTY never comes
 * back, so a lookup can never miss a published pointer.
 *
 * Most frees are of unsampled pointers; before probing the table they test
 * a counting filter (one byte per 16-byte granule of address, folded every
 * 1 MiB: 64 KiB), which is almost always zero.  Neighbouring blocks share a
 * cache line of it, so frees in address order stay in L1; frees in random
 * order over a heap much larger than 1 MiB miss L1 on it (BENCHMARKS.md,
 * section 4c).
 *
 * Capacity is fixed (PS_LIVE_SLOTS); a sampled allocation that finds no
 * slot within MAX_PROBE is counted in `dropped` and missing from in-use
 * only (its alloc_* counts are kept).
 */
#ifndef PS_LIVETAB_H
#define PS_LIVETAB_H

#include <stdatomic.h>
#include <stdint.h>
#include "common/ps.h"

#define PS_LIVE_SLOTS (1u << 16)
#define PS_LIVE_FILTER (1u << 16)

/* The fields after key are a seqlock's data: written only by the thread
 * that holds the slot BUSY, between two increments of seq (odd while it
 * writes); the reader retries or skips when seq moved.  A key check alone
 * is not enough: a freed block's address comes back from malloc and is
 * often re-inserted into the same slot (ABA). */
struct ps_live_slot {
	_Atomic uintptr_t key;   /* 0 empty, 1 tombstone, 2 busy, else the pointer */
	_Atomic uint32_t stack;  /* stacktab slot of the allocating stack */
	_Atomic uint32_t seq;    /* even: stable; odd: being written */
	_Atomic uint64_t size;   /* requested bytes */
	_Atomic uint64_t weight; /* unbiasing weight x PS_FIXED_ONE */
};

/* Slots per group of the `used` map: a page of slots. */
#define PS_LIVE_GROUP (4096 / sizeof(struct ps_live_slot))

_Static_assert(PS_LIVE_SLOTS % PS_LIVE_GROUP == 0, "whole groups");

/* At the head of the mapping: everything a writer changes is in the
 * table's one mapping, so that another process reads it through a view
 * (ps_livetab_view).  The struct never changes after ps_livetab_init. */
struct ps_livetab_counters {
	_Atomic uint64_t live;          /* published entries */
	_Atomic uint64_t dropped;       /* inserts that found no slot */
};

struct ps_livetab {
	struct ps_livetab_counters *c;  /* the start of the mapping */
	struct ps_live_slot *slots;     /* PS_LIVE_SLOTS entries */
	_Atomic uint8_t *filter;        /* PS_LIVE_FILTER counters */
	/* One byte per PS_LIVE_GROUP slots, set (never cleared) by an insert
	 * into the group: ps_livetab_each skips the groups still 0, whose
	 * pages a read would make the kernel allocate and zero (shared
	 * memory): 2 MiB in every helper whose program had a live sample.
	 * After the filter. */
	_Atomic uint8_t *used;
	size_t map_len;                 /* bytes mapped from c */
};

/* Map the table.  Returns 0 or -ENOMEM.  Context: constructor. */
int ps_livetab_init(struct ps_livetab *t) PS_WUR;
/* A view of table t whose mapping is at `map` in this process
 * (ps_stacktab_view).  Returns 0 or -EINVAL.  Context: the uploader. */
int ps_livetab_view(struct ps_livetab *view, const struct ps_livetab *t, void *map) PS_WUR;
/* Forget every entry (fork child).  Returns 0 or -ENOMEM. */
int ps_livetab_reset(struct ps_livetab *t) PS_WUR;

/* Record a sampled live block.  Returns 0 or -ENOSPC (counted).
 * Context: allocation hooks, any thread; lock-free. */
int ps_livetab_insert(struct ps_livetab *t, const void *p, uint64_t size, uint64_t weight,
		      uint32_t stack);

/* Remove p if it is a sampled block.  Returns 1 if it was, else 0.
 * Context: free/realloc hooks, any thread; lock-free; the common "not
 * sampled" answer costs one relaxed load and, rarely, one filter byte. */
static inline int ps_livetab_remove(struct ps_livetab *t, const void *p);

/* Reader: call fn for each live entry.  Context: uploader thread. */
void ps_livetab_each(struct ps_livetab *t,
		     void (*fn)(void *arg, uint32_t stack, uint64_t size, uint64_t weight),
		     void *arg);

/* What a live entry records. */
struct ps_live_entry {
	uint32_t stack;
	uint64_t size, weight;
};

/* Remove p, as ps_livetab_remove, and return its entry in *out (may be
 * NULL): realloc puts it back if the C library's realloc fails.
 * Returns 1 if p was a sampled block, else 0. */
int ps_livetab_take(struct ps_livetab *t, const void *p, struct ps_live_entry *out);

/* Internals of the inline fast path. */
int ps_livetab_remove_slow(struct ps_livetab *t, const void *p);

/* 0 if p was certainly never inserted (nor is being inserted) in the table
 * whose filter is `filter`; 1 if it may have been.  One multiply and one
 * byte load: the test the free and realloc hooks make on every call. */
static inline int ps_livetab_filter_hit(const _Atomic uint8_t *filter, const void *p);

static inline uint32_t
ps_livetab_bucket(const void *p, uint32_t n)
{
	uint64_t h = ((uint64_t)(uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 40) & (n - 1);
}

/* The filter byte of p.  Not the table's multiplicative hash: 16-byte
 * granules next to each other share a cache line of the filter (1 KiB of
 * heap per line), so a program that frees blocks near each other keeps the
 * filter in its L1 cache instead of missing once per free.  Folding in the
 * bits above 1 MiB spreads page-aligned (mmap'ed) blocks over all bytes. */
static inline uint32_t
ps_livetab_filter_index(const void *p)
{
	uintptr_t g = (uintptr_t)p >> 4;

	return (uint32_t)(g ^ (g >> 16)) & (PS_LIVE_FILTER - 1);
}

static inline int
ps_livetab_filter_hit(const _Atomic uint8_t *filter, const void *p)
{
	return atomic_load_explicit(&filter[ps_livetab_filter_index(p)], memory_order_relaxed) != 0;
}

static inline int
ps_livetab_remove(struct ps_livetab *t, const void *p)
{
	if (PS_LIKELY(atomic_load_explicit(&t->c->live, memory_order_relaxed) == 0))
		return 0;
	if (PS_LIKELY(!ps_livetab_filter_hit(t->filter, p)))
		return 0;
	return ps_livetab_remove_slow(t, p);
}

#endif
