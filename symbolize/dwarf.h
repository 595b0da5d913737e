/* dwarf.h -- source lines and inlined frames of an instruction, from DWARF.
 *
 * A thin layer over elfutils' libdwfl/libdw (Debian's libdw1): no DWARF is
 * parsed here.  libdw is a mature reader of every DWARF version gcc and
 * clang emit (DWARF 5, split and compressed sections), and its dwfl_* API
 * finds separate debug files the way gdb does: in the object itself, by
 * .gnu_debuglink, and by build ID under /usr/lib/debug/.build-id/.
 *
 * Why dlopen: libdw pulls in libelf, zlib, liblzma, libbz2 and libzstd.
 * Linked into the preloaded library it would be loaded into every process
 * at start-up; loaded here it costs only the uploader, and only once a
 * sample lands in code whose lines are wanted.  Without libdw.so.1 every
 * look-up answers 0 frames and profiles stay function-level (logged once
 * at info).
 *
 * Costs and bounds.  An object's DWARF is loaded only when the first
 * address in it is looked up.  The memory that libdw holds is bounded by
 * `mem_cap` bytes of growth of this process's resident set since the first
 * look-up: past it no more look-ups are made (ps_dwarf_over_cap says so,
 * and callers fall back to function-level names and say that in the
 * profile's comments).  Callers cache results per address.
 *
 * Go binaries have DWARF but no .debug_aranges, through which libdw finds
 * an address's compilation unit; for them the CUs' own ranges are indexed
 * once per object (dwarf.c, index_cus).
 *
 * Known limit, measured on Debian 12 (REFERENCES.md section 9): on LTO
 * builds (CPython 3.11 from python3.11-dbg) libdw 0.188 finds the line of
 * an address but often not the inlined chain that GNU addr2line -i finds.
 *
 * Context: the uploader only (never the signal handler or an interposer);
 * opens files, allocates; one owner, not thread-safe.
 */
#ifndef PS_DWARF_H
#define PS_DWARF_H

#include <stdint.h>
#include "common/ps.h"

struct ps_dwarf;   /* opaque, owned by its creator */

/* One frame of the inlined chain at an address.  The strings point into
 * libdw's memory, valid until ps_dwarf_free. */
struct ps_dwarf_frame {
	const char *name;       /* DW_AT_name, "" if none */
	const char *linkage;    /* DW_AT_linkage_name (mangled), or NULL */
	const char *file;       /* source file of `line`, "" if unknown */
	int line;               /* 0 if unknown */
	int decl_line;          /* the function's declaration line, 0 if unknown */
};

/* Create an empty reader; nothing is loaded until the first look-up.
 * mem_cap: bytes of resident growth allowed (0: never look anything up).
 * debuginfod: libdw may fetch what is not on disk (ps_config.debuginfod),
 * so every object is asked of it; else an object with nothing to find on
 * disk is not (elf.h, ps_elf_dwarf_possible).
 * Returns 0 and sets *out, or -ENOMEM.  Context: uploader; allocates. */
int ps_dwarf_new(struct ps_dwarf **out, uint64_t mem_cap, int debuginfod) PS_WUR;

/* Release everything (libdw stays loaded).  NULL is allowed. */
void ps_dwarf_free(struct ps_dwarf *d);

/* The inlined chain of the instruction at runtime address `addr`, in the
 * object file `path` loaded with load bias `bias` (runtime minus link-time
 * address).  `id`: the file's identity (elf.h ps_elf_file_id), which lets
 * every program that maps the file share what was read of its DWARF; 0:
 * none, the object is (path, bias).  out[0] is the innermost inlined function, each next one its
 * caller, the last the function that holds the code.  At most `max`
 * frames (the outermost ones are dropped past it).
 * valid[0..1] gets the runtime range [lo, hi) around addr whose every
 * address has the same answer (for symbolize/symcache.h), or [0, 0) when the
 * answer is not to be kept: no line because the object's DWARF was not
 * found (a debug package may come later), libdw is missing, or the cap
 * was reached.
 * Returns the number of frames; 0 when there is no line information for
 * addr (no debug information, libdw missing, the memory cap reached);
 * -EINVAL on bad arguments. */
int ps_dwarf_lookup(struct ps_dwarf *d, const char *path, uint64_t id, uintptr_t bias,
		    uintptr_t addr, struct ps_dwarf_frame *out, int max, uintptr_t valid[2]);

/* Every answer of ps_dwarf_lookup in the function (DWARF subprogram) that
 * holds runtime address addr, in one walk: emit(arg, lo, hi, f, n) for
 * each runtime range [lo, hi), in order, that gets the n frames f[] (the
 * strings valid during the call; at most max frames, as ps_dwarf_lookup).
 * emit returns nonzero to stop.  Only the function's range that holds
 * addr (not a split-off cold part).  Where DWARF has no subprogram at addr
 * (assembly, code in no compilation unit), [sym_lo, sym_hi) -- the
 * extent of addr's ELF symbol, or 0, 0 for none -- is walked instead, one
 * look-up per answer, a run without lines as one range.  Returns the
 * ranges emitted; 0 when there is no DWARF in the object (as
 * ps_dwarf_lookup), or the function has more than a few thousand inlined
 * subroutines or ranges; -EINVAL. */
int ps_dwarf_function(struct ps_dwarf *d, const char *path, uint64_t id, uintptr_t bias,
		      uintptr_t addr, uintptr_t sym_lo, uintptr_t sym_hi, int max,
		      int (*emit)(void *arg, uintptr_t lo, uintptr_t hi,
				  const struct ps_dwarf_frame *f, int n),
		      void *arg);

/* Let go of the objects whose identity alive() says no program of this
 * process maps any more (nor will: a file's identity is never reused), so
 * that a long-lived tree's helper holds the DWARF of what its programs
 * still map, not of every file they ever did.  Context: the owner. */
void ps_dwarf_drop(struct ps_dwarf *d, int (*alive)(uint64_t id));

/* 1 once the memory cap stopped look-ups. */
int ps_dwarf_over_cap(const struct ps_dwarf *d);

/* What the reader did, for the log and the tests. */
struct ps_dwarf_stats {
	int loaded;             /* libdw was loaded and a Dwfl begun */
	uint32_t objects;       /* objects asked about */
	uint32_t no_debug;      /* of them, known to have no DWARF without libdw */
	uint32_t opened;        /* objects given to libdw by every reader of
				 * this process */
};
void ps_dwarf_get_stats(const struct ps_dwarf *d, struct ps_dwarf_stats *st);

#endif
