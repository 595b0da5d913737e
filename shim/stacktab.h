/* stacktab.h -- the table of distinct stacks and their counters.
 *
 * Written from the signal handler and the allocation hooks of every host
 * thread; read by the uploader thread.  Lock-free: a writer claims an empty
 * slot with a compare-and-swap, fills it, then publishes it; counters are
 * atomic adds.  Memory is mapped once at start-up with a fixed budget
 * (PYROSCOPE_STACK_MEMORY) and never grows: a stack that does not fit is
 * added to the PS_SLOT_FULL slot, so totals stay right and the loss is
 * visible in the profile and counted in `dropped`.
 *
 * The memory is shared (MAP_SHARED): the uploader reads it from a helper
 * process, which still holds it once the program is gone.  Everything a
 * writer changes -- slots, frames, counters -- is in the table's one
 * mapping; the struct only says where, and never changes after
 * ps_stacktab_init.  So a process that has the mapping at another address
 * reads the table through a view (ps_stacktab_view).
 *
 * Counters are cumulative for the whole run; the uploader computes deltas.
 * Stacks are raw instruction pointers, leaf first (see unwind.h).
 */
#ifndef PS_STACKTAB_H
#define PS_STACKTAB_H

#include <stdatomic.h>
#include <stdint.h>
#include "common/ps.h"

/* Counter indexes. */
enum {
	PS_V_CPU_SAMPLES = 0,  /* signals taken */
	PS_V_CPU_NS = 1,       /* CPU nanoseconds those signals stand for */
	PS_V_ALLOC_OBJS = 2,   /* sampled allocations, unbiased, x PS_FIXED_ONE */
	PS_V_ALLOC_BYTES = 3,  /* sampled bytes, unbiased */
	PS_V_BLOCK_COUNT = 4,  /* kept waits, unbiased, x PS_FIXED_ONE (wait.h) */
	PS_V_BLOCK_NS = 5,     /* their delay, unbiased */
	PS_V_MUTEX_COUNT = 6,  /* kept lock waits, unbiased, x PS_FIXED_ONE */
	PS_V_MUTEX_NS = 7,     /* their delay, unbiased */
	PS_NVALUES = 8,
};
#define PS_FIXED_ONE 65536  /* fixed-point unit of the unbiased counts */

/* Slots that hold no stack, at fixed indexes before the hashed ones. */
enum {
	PS_SLOT_FULL = 0,      /* "[pyroshim: stack table full]" */
	PS_SLOT_BUSY = 1,      /* "[pyroshim: inside the profiler]": signal hit shim code */
	PS_NSPECIAL = 2,
};

enum { PS_ST_EMPTY = 0, PS_ST_CLAIMED = 1, PS_ST_READY = 2 };

struct ps_stack_slot {
	_Atomic uint32_t state;      /* PS_ST_*; READY is published with release */
	uint16_t depth;              /* written once before READY */
	uint16_t truncated;          /* 1 if the stack was cut at PS_MAX_DEPTH */
	uint32_t frames;             /* index of the first frame in the pool */
	uint32_t pad;
	uint64_t hash;               /* written once before READY; never 0 */
	_Atomic uint64_t v[PS_NVALUES];
};

/* Slots per group of the `used` map (about a page of slots). */
#define PS_ST_GROUP 32

/* At the head of the mapping. */
struct ps_stacktab_counters {
	_Atomic uint32_t pool_used;
	_Atomic uint64_t dropped;    /* stacks sent to PS_SLOT_FULL */
};

struct ps_stacktab {
	struct ps_stacktab_counters *c; /* the start of the mapping */
	struct ps_stack_slot *slots; /* PS_NSPECIAL + nslots entries */
	/* One byte per PS_ST_GROUP slots, set (never cleared) by the writer
	 * that claims a slot of the group: the reader skips the groups still
	 * 0 without reading their slots, whose pages a read would only make
	 * the kernel allocate (zero-filled shared memory). */
	_Atomic uint8_t *used;
	uintptr_t *pool;             /* frame pool */
	uint32_t nslots;             /* power of two */
	uint32_t npool;
	size_t map_len;              /* bytes mapped from c */
};

/* Map a table using about `budget` bytes (a quarter for slots, the rest for
 * frames).  Returns 0, -EINVAL (budget too small), -ENOMEM.
 * Context: constructor; calls mmap. */
int ps_stacktab_init(struct ps_stacktab *t, uint64_t budget) PS_WUR;

/* A view of table t (as its writer's struct describes it) whose mapping
 * (t->map_len bytes) is at `map` in this process: the same table, read
 * here.  Returns 0, or -EINVAL when t does not describe a table within its
 * mapping (another process's word is not trusted).  Context: the
 * uploader. */
int ps_stacktab_view(struct ps_stacktab *view, const struct ps_stacktab *t, void *map) PS_WUR;

/* The process's stack table, held in this one place: published by the
 * constructor once the table is mapped (a fork child keeps the same
 * address), read by the signal handler, the allocation hooks and the
 * uploader.  NULL until published (nothing is recorded then).
 * Context: publish: constructor, or the `first` function below;
 * current: any thread, async-signal-safe. */
void ps_stacktab_publish(struct ps_stacktab *t) PS_SIGSAFE;
struct ps_stacktab *ps_stacktab_current(void) PS_SIGSAFE;

/* A program whose tables are made at its first record (uploader/worker.h,
 * ps_worker_defer): while no table is published, ps_stacktab_current
 * calls `first`, which makes and publishes it -- or does nothing when
 * another thread is making it, and that record is dropped -- and reads
 * again.  NULL: none.  `first` must be async-signal-safe.  Context: the
 * constructor, and `first` itself once done. */
void ps_stacktab_defer(void (*first)(void)) PS_SIGSAFE;

/* Forget every stack (fork child): the pages are replaced by fresh zero
 * pages, which costs nothing until touched.  Context: fork child handler,
 * single thread.  Returns 0 or -ENOMEM. */
int ps_stacktab_reset(struct ps_stacktab *t) PS_WUR;

/* Add `vals` (PS_NVALUES entries, zeros allowed) to the counters of the
 * stack ips[0..depth).  Returns the slot index used (possibly PS_SLOT_FULL).
 * Context: any thread, signal handler included; async-signal-safe. */
uint32_t ps_stacktab_add(struct ps_stacktab *t, const uintptr_t *ips, int depth,
			 int truncated, const uint64_t *vals);

/* Add to a special slot.  Context: async-signal-safe. */
void ps_stacktab_add_special(struct ps_stacktab *t, uint32_t slot, const uint64_t *vals);

/* Reader side.  Returns 1 and fills the pointers if slot i is published,
 * else 0.  Context: uploader thread. */
int ps_stacktab_get(const struct ps_stacktab *t, uint32_t i, const uintptr_t **ips,
		    int *depth, int *truncated);

/* 0 if no slot of slot i's group was ever claimed, so the reader may skip
 * the group (i | (PS_ST_GROUP - 1) is its last slot); 1 otherwise.  The
 * special slots are always read.  Context: uploader thread. */
static inline int
ps_stacktab_group_used(const struct ps_stacktab *t, uint32_t i)
{
	return i < PS_NSPECIAL ||
	       atomic_load_explicit(&t->used[i / PS_ST_GROUP], memory_order_relaxed) != 0;
}

/* 1 if nothing was ever recorded (no stack stored, no special slot used),
 * or t is NULL or not mapped yet.  Context: any thread; async-signal-safe. */
int ps_stacktab_empty(const struct ps_stacktab *t);

static inline uint32_t
ps_stacktab_size(const struct ps_stacktab *t)
{
	return PS_NSPECIAL + t->nslots;
}

#endif
