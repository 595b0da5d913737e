/* fold.h -- stacks folded by function name: the hand-off between the
 * shim's raw tables and every output format.
 *
 * The shim stores raw instruction pointers; the uploader maps each stack
 * table slot once to a folded stack (function names, the shim's own frames
 * dropped), merging slots whose stacks differ only in addresses inside the
 * same functions.  Each export pass then recomputes the counters of every
 * folded stack from the (cumulative) tables, and the outputs -- folded
 * text, pprof -- are written from the fold.
 *
 * Context: uploader thread only (or the exiting thread holding the export
 * lock); allocates with malloc (guard held, so unsampled).  Every array has
 * a cap; what does not fit is attributed to one "[pyroshim: fold full]"
 * stack and counted.
 */
#ifndef PS_FOLD_H
#define PS_FOLD_H

#include <stdint.h>
#include "common/buf.h"
#include "shim/livetab.h"
#include "common/ps.h"
#include "shim/stacktab.h"

enum {
	PS_F_CPU_SAMPLES = 0,
	PS_F_CPU_NS,
	PS_F_ALLOC_OBJS,     /* x PS_FIXED_ONE */
	PS_F_ALLOC_BYTES,
	PS_F_INUSE_OBJS,     /* x PS_FIXED_ONE */
	PS_F_INUSE_BYTES,
	PS_F_NVALUES,
};

struct ps_fold_entry {
	uint32_t frames;     /* index into frames[], leaf first */
	uint32_t depth;
	int64_t v[PS_F_NVALUES];
};

struct ps_symbols;

struct ps_fold {
	struct ps_symbols *syms;       /* owned */
	char **names;                  /* interned function names, owned */
	uint32_t nnames, names_cap;
	uint32_t *name_index;          /* open addressing: name id + 1 */
	uint32_t name_index_cap;
	struct ps_fold_entry *e;       /* folded stacks */
	uint32_t n, cap;
	uint32_t *entry_index;         /* open addressing: entry + 1 */
	uint32_t entry_index_cap;
	uint32_t *frames;              /* name ids of all entries */
	uint32_t nframes, frames_cap;
	uint32_t *slot_map;            /* stacktab slot -> entry + 1; 0 = not yet */
	uint32_t nslots;
	uint64_t dropped;              /* slots that did not fit the fold */
};

/* Returns 0, -ENOMEM.  skip_lo/skip_hi: the shim's own address range. */
int ps_fold_init(struct ps_fold *f, uint32_t nslots, uintptr_t skip_lo, uintptr_t skip_hi) PS_WUR;

/* Map new slots and recompute every counter from the tables (lt may be
 * NULL).  Returns 0 or -ENOMEM (the pass is then partial, and says so). */
int ps_fold_update(struct ps_fold *f, const struct ps_stacktab *st, struct ps_livetab *lt) PS_WUR;

/* Sum of value v over all entries, taken from vals (one row per entry)
 * or, when vals is NULL, from the fold's own counters. */
int64_t ps_fold_total(const struct ps_fold *f, const int64_t (*vals)[PS_F_NVALUES], int v);

/* Append "root;...;leaf N\n" lines for value v (divided by `div`, rounded;
 * lines that round to 0 are left out), from vals or the fold's counters
 * as above.  Returns 0, -E2BIG, -ENOMEM. */
int ps_fold_folded(const struct ps_fold *f, const int64_t (*vals)[PS_F_NVALUES], int v,
		   int64_t div, struct ps_buf *out) PS_WUR;

#endif
