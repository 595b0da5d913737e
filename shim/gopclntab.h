/* gopclntab.h -- the Go function table (.gopclntab), read in place.
 *
 * Every Go binary carries a table of its functions for the Go runtime's own
 * tracebacks: entry addresses, names, and per-PC tables, among them the
 * stack-pointer delta (pcsp).  It is present even when the symbol table is
 * stripped (`go build -ldflags=-s`), so it names Go functions where .symtab
 * cannot, and its SP deltas find a leaf's return address before the leaf
 * has set up its frame.
 *
 * Layout (Go 1.18 and later, golang/go src/runtime/symtab.go pcHeader and
 * _func, src/debug/gosym/pclntab.go): a header
 *     u32 magic (0xfffffff0: Go 1.18-1.19; 0xfffffff1: Go 1.20 and later)
 *     u8 0, u8 0, u8 minLC (PC quantum), u8 ptrSize
 *     uintptr nfunc, nfiles, textStart, funcnameOffset, cuOffset,
 *             filetabOffset, pctabOffset, pclnOffset
 * offsets counted from the header.  At pclnOffset, the function table:
 * nfunc+1 pairs {u32 entry offset from the text start, u32 offset of the
 * function's _func from pclnOffset}; the last entry offset is the end of
 * the text.  _func begins {u32 entryoff, i32 nameoff (into funcnametab),
 * i32 args, u32 deferreturn, u32 pcsp (into pctab), ...} in both versions
 * (Go 1.20 inserted a field further on).  A pc-value table is a sequence
 * of (zig-zag varint value delta, varint pc delta * quantum) pairs from
 * the value -1 at the entry; a zero value delta after the first pair ends
 * it.  The caller gives the text start: the textStart word
 * (ps_gopcln_header_text) once checked to lie in .text -- in a file it may
 * be unrelocated -- else the address of .text, which is the same in an
 * internally linked binary (an external link puts C start-up code first).
 *
 * The table may come from a file that is truncated, corrupt or hostile:
 * ps_gopcln_open validates the header and the function table once (every
 * offset inside the table, entries in ascending order), and every later
 * read is checked against the table's size, every varint is at most 5
 * bytes, and every walk of a pc-value table has a step limit.
 *
 * Only 64-bit little-endian tables (ptrSize 8) are read: the only kind
 * pyroshim runs beside.
 *
 * Context: any, including the signal handler; nothing here allocates,
 * locks or calls the system.
 */
#ifndef PS_GOPCLNTAB_H
#define PS_GOPCLNTAB_H

#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"

#define PS_GOPCLN_MAGIC_118 0xfffffff0u
#define PS_GOPCLN_MAGIC_120 0xfffffff1u

/* A validated table.  Filled by ps_gopcln_open; read-only afterwards. */
struct ps_gopcln {
	const uint8_t *p;       /* the table; not owned */
	size_t size;            /* bytes readable at p */
	uint64_t text;          /* address of function entry offset 0 */
	uint32_t nfunc;         /* functions; the table has nfunc + 1 entries */
	uint32_t quantum;       /* PC quantum (1 on x86-64) */
	size_t names;           /* offset of funcnametab */
	size_t pctab;           /* offset of pctab */
	size_t functab;         /* offset of the function table (pclnOffset) */
};

/* Validate the table of size bytes at p and fill *t.  text: the address
 * pcs will be given in for entry offset 0 (the .text section's address, in
 * the file's or the process's address space).  Returns 0, or -ENOEXEC (not
 * a Go 1.18+ 64-bit table, or an offset, count or entry out of order or
 * out of bounds).  Reads only p[0..size).  O(nfunc). */
int ps_gopcln_open(struct ps_gopcln *t, const void *p, size_t size, uint64_t text) PS_WUR;

/* The header's textStart word of the table of size bytes at p, or 0.
 * Not validated: the caller checks it against .text. */
uint64_t ps_gopcln_header_text(const void *p, size_t size);

/* The index of the function containing pc, or -1.  Binary search.
 * Async-signal-safe. */
int ps_gopcln_find(const struct ps_gopcln *t, uint64_t pc);

/* Function i's entry address and size in bytes (0 <= i < t->nfunc). */
void ps_gopcln_range(const struct ps_gopcln *t, uint32_t i, uint64_t *lo, uint64_t *len);

/* Function i's name, NUL-terminated inside the table, or NULL when its
 * name offset or terminator falls outside it. */
const char *ps_gopcln_name(const struct ps_gopcln *t, uint32_t i);

/* The stack-pointer delta at pc in function i: how far SP is below its
 * value at the function's entry, so that the return address is at
 * SP + *delta.  Returns 0, or -ENOENT (pc outside function i, no pcsp
 * table, a table that is malformed, leaves the section, exceeds its step
 * limit, or gives a negative delta).  Async-signal-safe and bounded. */
int ps_gopcln_spdelta(const struct ps_gopcln *t, uint32_t i, uint64_t pc, int32_t *delta) PS_WUR;

#endif
