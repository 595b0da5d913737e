/* fold.h -- the uploader's model of the profile: the hand-off between the
 * shim's raw tables and every output format.
 *
 * The shim stores raw instruction pointers; the uploader maps each stack
 * table slot once to an entry: a stack of locations, leaf first, the
 * shim's own frames dropped.  A location is one distinct address (the
 * interrupted instruction, or a call instruction: the unwinder already
 * subtracted one from return addresses), with the segment of the object
 * that holds it (a mapping), its function-level name from the symbol table,
 * and its source lines from DWARF: one line per inlined function,
 * innermost first, as pprof's Location.line wants them.  Each export pass
 * then recomputes the counters of every entry from the (cumulative)
 * tables, and the outputs -- folded text, pprof -- are written from here.
 *
 * Source lines cost up to ~1 ms per address on large LTO binaries, so they
 * are looked up once per location, with a time budget per pass; a location
 * still waiting, or past the DWARF memory cap, has one line that names its
 * function (line 0), and the profile's comments count them.
 *
 * Folded text is function-level: the stacks of function names (inlined
 * functions included) that Pyroscope's flame graph shows for the pprof,
 * lines that differ only in addresses merged; with `folded_lines`, frames
 * are "func (file:line)".
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
	PS_F_BLOCK_COUNT,    /* x PS_FIXED_ONE */
	PS_F_BLOCK_NS,
	PS_F_MUTEX_COUNT,    /* x PS_FIXED_ONE */
	PS_F_MUTEX_NS,
	PS_F_NVALUES,
};

struct ps_fold_entry {
	uint32_t frames;     /* index into frames[] (location ids), leaf first */
	uint32_t depth;
	uint32_t tag;        /* ps_fold_absorb's; 0 in a fold of tables */
	int64_t v[PS_F_NVALUES];
};

#define PS_FOLD_NPSEUDO 4   /* pseudo-frames: see fold.c */

/* A distinct address.  Pseudo-frames ("[truncated]", "[pyroshim: ...]")
 * are locations with address 0 and no mapping. */
struct ps_fold_loc {
	uintptr_t addr;
	uint32_t map;        /* mapping index + 1; 0: none */
	uint32_t sym;        /* function-level name id (names[]) */
	uint32_t line0;      /* lines[line0 .. line0 + nlines), innermost first */
	uint16_t nlines;     /* >= 1 */
	uint8_t resolved;    /* DWARF asked (or not to be asked) */
};

struct ps_fold_line {
	uint32_t func;       /* index into funcs[] */
	int32_t line;        /* 0: unknown */
	uint32_t label;      /* name id of its frame in folded text */
};

struct ps_fold_func {
	uint32_t name, system_name, file;   /* name ids; file 0 = "" */
	int32_t start_line;
};

struct ps_fold_map {
	uintptr_t start, limit;
	uint64_t offset;
	uint32_t file, build_id;            /* name ids */
	uint8_t has_functions;              /* symbols, not placeholders */
	uint8_t has_lines;                  /* DWARF found for this object */
};

struct ps_symbols;

struct ps_fold {
	struct ps_symbols *syms;       /* owned */
	char **names;                  /* interned strings, owned; names[0] = "" */
	uint32_t nnames, names_cap;
	uint32_t *name_index;          /* open addressing: name id + 1 */
	uint32_t name_index_cap;
	struct ps_fold_entry *e;       /* stacks of locations */
	uint32_t n, cap;
	uint32_t *entry_index;         /* open addressing: entry + 1 */
	uint32_t entry_index_cap;
	uint32_t *frames;              /* location ids of all entries */
	uint32_t nframes, frames_cap;
	struct ps_fold_loc *locs;      /* locations */
	uint32_t nlocs, locs_cap;
	uint32_t *loc_index;           /* open addressing by address: loc + 1 */
	uint32_t loc_index_cap;
	struct ps_fold_line *lines;
	uint32_t nlines, lines_cap;
	struct ps_fold_func *funcs;
	uint32_t nfuncs, funcs_cap;
	uint32_t *func_index;          /* open addressing: func + 1 */
	uint32_t func_index_cap;
	struct ps_fold_map *maps;
	uint32_t nmaps, maps_cap;
	uint32_t pseudo[PS_FOLD_NPSEUDO];  /* pseudo-frame location ids + 1 */
	uint32_t resolve_from;         /* locations before it all resolved */
	uint32_t *slot_map;            /* stacktab slot -> entry + 1; 0 = not yet */
	uint32_t nslots;
	int folded_lines;              /* folded frames are "func (file:line)" */
	uint64_t dwarf_budget_ns;      /* DWARF time per pass; 0: no source lines */
	uint32_t unresolved;           /* locations still without DWARF lines */
	uint64_t dropped;              /* slots that did not fit the fold */
	size_t name_bytes;             /* what names[] point to (ps_fold_bytes) */
};

/* Returns 0, -ENOMEM.  skip_lo/skip_hi: the shim's own address range. */
int ps_fold_init(struct ps_fold *f, uint32_t nslots, uintptr_t skip_lo, uintptr_t skip_hi) PS_WUR;

/* The mapping of `entry`, the program's entry point, made f's first, so
 * that its executable is the first Mapping of every profile that samples
 * it (pprof's "File:").  Right after ps_fold_init, and after
 * ps_symbols_watch for another process's addresses.  Returns 0 or
 * -ENOMEM. */
int ps_fold_first_mapping(struct ps_fold *f, uintptr_t entry) PS_WUR;

/* Free everything f holds; *f is then zero. */
void ps_fold_free(struct ps_fold *f);

/* Options, from the configuration.  dwarf_memory: bytes libdw may hold
 * (PYROSCOPE_DWARF_MEMORY; 0: function-level only); debuginfod: as
 * ps_dwarf_new's; budget_ns: DWARF look-up time per pass.  Returns 0 or
 * -ENOMEM. */
int ps_fold_configure(struct ps_fold *f, int folded_lines, uint64_t dwarf_memory,
		      int debuginfod, uint64_t budget_ns) PS_WUR;

/* Map new slots and recompute every counter from the tables (lt may be
 * NULL).  Returns 0 or -ENOMEM (the pass is then partial, and says so). */
int ps_fold_update(struct ps_fold *f, const struct ps_stacktab *st, struct ps_livetab *lt) PS_WUR;

/* Copy into dst the entries of src that have a value -- in vals (one row
 * per entry of src), or their own when vals is NULL -- tagged `tag`
 * (> 0), with what they reach: locations, lines, mappings (each of src's
 * its own in dst: another process's addresses), functions and names
 * (shared with what dst holds).  dst is a store: zeroed at first, then
 * only absorbing; it has no symbols and no slots.  For the processes of a
 * program that ended, whose files and last upload still hold them
 * (uploader/group.h).  Returns 0 or -ENOMEM (dst then holds part of src,
 * every entry whole). */
int ps_fold_absorb(struct ps_fold *dst, const struct ps_fold *src,
		   const int64_t (*vals)[PS_F_NVALUES], uint32_t tag) PS_WUR;
/* The bytes f's arrays and names hold, about. */
size_t ps_fold_bytes(const struct ps_fold *f);

/* Sum of value v over all entries, taken from vals (one row per entry)
 * or, when vals is NULL, from the fold's own counters. */
int64_t ps_fold_total(const struct ps_fold *f, const int64_t (*vals)[PS_F_NVALUES], int v);

/* Append "root;...;leaf N\n" lines for value v (divided by `div`, rounded;
 * lines that round to 0 are left out), from vals or the fold's counters
 * as above.  Returns 0, -E2BIG, -ENOMEM. */
int ps_fold_folded(const struct ps_fold *f, const int64_t (*vals)[PS_F_NVALUES], int v,
		   int64_t div, struct ps_buf *out) PS_WUR;

#endif
