/* symbolizer.h -- the frames at an offset of an object file.
 *
 * What names an instruction is the file its code comes from, not the
 * process that ran it: every program of a tree maps the same libc.  So
 * this is the symbolizer's one interface: an object -- its file, the key
 * of its symbol table and of its DWARF, and its GNU build ID, the key of
 * the answers kept on disk -- and a file offset, as a profile's Mapping
 * gives one, in; the function there and, when asked, its source line and
 * inlined callers out.  Processes do not appear: finding which object an
 * instruction pointer of which process is in is symbols.h's part, and
 * that is the only caller.
 *
 * Underneath, what is read is shared by every reader of the process, so
 * a process tree's helper reads each object once for all its programs:
 * symbol tables by file identity (elf.h), DWARF by file identity
 * (dwarf.h), answers by build ID (symcache.h).  A struct ps_symbolizer is
 * one reader's settings (DWARF cap, cache directory), counters and result
 * buffers.
 *
 * Context: the uploader only, under the worker's lock (as every use of
 * symbols: the shared tables have that owner); opens files, allocates.
 */
#ifndef PS_SYMBOLIZER_H
#define PS_SYMBOLIZER_H

#include <link.h>
#include <stdint.h>
#include "common/ps.h"

/* One frame of source: a function and a line in it. */
struct ps_src_frame {
	const char *name;          /* demangled, as the symbol table names it */
	const char *system_name;   /* the mangled (linkage) name, or name */
	const char *file;          /* source file, "" if unknown */
	int line;                  /* 0 if unknown */
	int start_line;            /* the function's first line, 0 if unknown */
};

/* Most frames one instruction can stand for (inlined functions + 1). */
#define PS_MAX_INLINE 16

/* ---- objects ------------------------------------------------------------ */

struct ps_object;   /* one object file; opaque, owned by whoever got it */

/* The object whose file is at path.  phdr/phnum: the loaded image's program
 * headers, which the file's must match (NULL: do not check).  The file's
 * symbols are read now unless another reader read the same file (same
 * device, inode, size, modification time) already.  Returns 1 (read now)
 * or 0 (shared) with *out set, -ENOEXEC (not ELF, or not the loaded
 * image), -ENOMEM, or -errno from open/mmap. */
int ps_object_get(const char *path, const ElfW(Phdr) *phdr, uint32_t phnum,
		  struct ps_object **out) PS_WUR;

/* Release an object from ps_object_get.  NULL is allowed. */
void ps_object_put(struct ps_object *o);

/* The object's GNU build ID: its length (0: none) and bytes in *id. */
uint32_t ps_object_build_id(const struct ps_object *o, const uint8_t **id);

/* 1 if the object's names come from a symbol table (it has functions). */
int ps_object_has_functions(const struct ps_object *o);

/* ---- frames ------------------------------------------------------------- */

struct ps_symbolizer;   /* opaque, owned by its creator; one owner */

/* Counters for logging and tests.  Cumulative since ps_symbolizer_new. */
struct ps_symbolizer_stats {
	uint64_t src_lookups; /* look-ups that went to DWARF */
	uint64_t src_cached;  /* answered by the symbol cache */
	uint64_t src_filled;  /* ranges put in it to complete functions */
	uint32_t cache_files; /* symbol cache files read */
	uint32_t cache_shared; /* symbol caches another reader had open */
	uint32_t cache_rejected; /* symbol cache files there but not used */
	int cache_full;       /* an object's cache reached its size bound */
	int dwarf_over_cap;   /* the DWARF memory cap stopped look-ups */
	int dwarf_loaded;     /* libdw was loaded for source look-ups */
	uint32_t dwarf_no_debug; /* objects known to have no DWARF without it */
	uint32_t dwarf_opened; /* objects given to libdw in this process */
};

/* Create a reader that names functions only.  Returns 0 and sets *out, or
 * -ENOMEM. */
int ps_symbolizer_new(struct ps_symbolizer **out) PS_WUR;

/* Release it.  NULL is allowed. */
void ps_symbolizer_free(struct ps_symbolizer *z);

/* Look source lines up in DWARF (dwarf.h) from now on, letting libdw's
 * memory grow by at most mem_cap bytes (0: never); debuginfod as
 * ps_dwarf_new's.  Off until called, so that a reader made only for names
 * loads no debug information.  Returns 0 or -ENOMEM. */
int ps_symbolizer_use_dwarf(struct ps_symbolizer *z, uint64_t mem_cap, int debuginfod) PS_WUR;

/* Keep the answers of source look-ups per build ID in directory `dir`,
 * bounded to `cap` bytes (symcache.h), and ask them before DWARF from now
 * on.  dir "" or cap 0: none.  The directory is checked (and made) at the
 * first look-up.  Returns 0 or -ENAMETOOLONG. */
int ps_symbolizer_use_cache(struct ps_symbolizer *z, const char *dir, uint64_t cap) PS_WUR;

/* What ps_symbolize is asked for. */
#define PS_FRAMES_LINES 1u   /* source lines and inlined callers too */

/* The frames at file offset `off` of object o into out[0..max): without
 * PS_FRAMES_LINES, or where DWARF has no line there (or is not used, or
 * capped), one frame: the function, file "" and line 0.  With it, the
 * inlined chain: out[0] the innermost inlined function, each next one its
 * caller, the last the function that holds the code, named as the symbol
 * table names it so that function-level views agree.  Only code a symbol
 * names is given lines (elsewhere, PLT stubs included, libdw may answer
 * with the nearest line of some other function).  C++ names are
 * demangled with the process's __cxa_demangle when it has one.  The
 * strings stay valid until the next call on z.
 * Returns the number of frames, 0 when no symbol covers off or off is in
 * no loaded segment of the file, -ENOMEM (the chain could not be copied
 * out: nothing was lost, ask again), -EINVAL.  Naming the function alone
 * allocates nothing but a C++ name's demangling. */
int ps_symbolize(struct ps_symbolizer *z, struct ps_object *o, uint64_t off, unsigned flags,
		 struct ps_src_frame *out, int max);

/* A raw symbol name (from dladdr, for code whose file is not read) named
 * as ps_symbolize names functions: demangled, without its version.  The
 * string stays valid until the next call on z. */
const char *ps_symbolize_name(struct ps_symbolizer *z, const char *raw);

/* Offer o, an object the program's samples landed in, to be looked up
 * whole by a later save with `busy`, this reader's or another's of the
 * process (the offers are the process's): taken only once this reader
 * asked DWARF anything, when o has a
 * symbol cache whose object was never walked (symcache.h) and DWARF to
 * read (elf.h, ps_elf_dwarf_possible).  Once every function of it was
 * looked up, its cache is marked walked, and complete if every one is
 * answered: no later run then asks its DWARF about any of its code.  The
 * first run pays for it, once per build ID: libc6-dbg's libc is 0.6 s of
 * CPU and a 9 MB file. */
void ps_symbolizer_fill(struct ps_symbolizer *z, struct ps_object *o);

/* Write what the symbol caches learned since the last call (each file
 * merged with what other processes wrote), after spending at most fill_ns
 * on looking up the rest of each function DWARF was asked about (so that
 * a later run finds all of it), then, with `busy` (NULL: not in this
 * save), on the objects offered to be looked up whole until busy() says
 * the caller has other work.  Between passes: reads DWARF, writes
 * files. */
void ps_symbolizer_save(struct ps_symbolizer *z, uint64_t fill_ns, int (*busy)(void));

/* Spend at most ns, or until busy() says the caller has other work, on
 * looking up the objects offered (ps_symbolizer_fill) whole, as a save
 * with `busy` does, for a process that serves no reader any more: a
 * tree's helper whose last program is gone.  Between passes: reads
 * DWARF, writes files. */
void ps_symbolizer_walk(uint64_t ns, int (*busy)(void));

/* In a fork child: the objects offered so far are the parent's to look
 * up.  Forgotten, not released: the child's copies of them stay allocated
 * (at most MAX_WHOLE), and the allocator is not run in a fork handler. */
void ps_symbolizer_forget_offers(void);

/* Copy the counters. */
void ps_symbolizer_get_stats(const struct ps_symbolizer *z, struct ps_symbolizer_stats *st);

/* Let go of the DWARF reader every ps_symbolizer of the process shares,
 * when none uses it: for a process that ends by exit(3), so that what
 * libdw holds is not left allocated (the unit tests under valgrind).  The
 * helper ends by _exit and never needs it.  Context: the owner of every
 * reader. */
void ps_symbolizer_release_shared(void);

#endif
