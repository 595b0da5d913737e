/* symbols.h -- a program's instruction pointers to names, outside signal
 * context.
 *
 * The sampler records raw instruction pointers; the uploader turns each
 * distinct one into a name here.  This is the process side of the
 * symbolizer: which loaded object an address of which program is in
 * (modules.h: dl_iterate_phdr, or the program's /proc/PID/maps), and where
 * in its file.  The object side -- the frames at an offset of an object
 * file, shared by every program the helper serves -- is symbolizer.h, and
 * each reader owns one (ps_symbols_symbolizer).  An object whose file
 * cannot be read (the vDSO, a deleted or replaced file) is asked through
 * dladdr instead.
 *
 * Every result is cached by IP, so a repeated IP costs one hash lookup.
 * Caps: MAX_MODULES objects, a bounded IP cache that is emptied and
 * refilled when full (see symbols.c).
 *
 * Context: uploader thread only, never the SIGPROF handler (it takes the
 * loader lock, opens files and allocates with malloc).  A struct ps_symbols
 * is not thread-safe: it has one owner.
 */
#ifndef PS_SYMBOLS_H
#define PS_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/ps.h"
#include "symbolize/symbolizer.h"

struct ps_symbols;  /* opaque cache, owned by its creator */

/* What ps_symbols_lookup() wrote. */
enum {
	PS_SYM_FUNC = 0,     /* a function name, demangled when C++ */
	PS_SYM_UNKNOWN = 1,  /* "module+0xoff" or "[unknown]+0xip" */
	PS_SYM_SHIM = 2,     /* the IP is inside the profiler itself */
};

/* Counters for logging and tests.  Cumulative since ps_symbols_new(). */
struct ps_symbols_stats {
	uint64_t lookups;     /* calls of ps_symbols_lookup */
	uint64_t cache_hits;  /* answered from the IP cache */
	uint64_t scans;       /* dl_iterate_phdr walks of the object list */
	uint64_t files;       /* ELF files read */
	uint64_t shared;      /* objects whose symbols another program's
			       * reader had read already (elf.h ps_elf_get) */
	uint64_t flushes;     /* IP cache emptied because it was full */
	struct ps_symbolizer_stats obj; /* its symbolizer's (symbolizer.h) */
	uint32_t modules;     /* objects known now */
	uint32_t cached;      /* IPs cached now */
};

/* Create an empty cache.  IPs in [skip_lo, skip_hi) -- the address range of
 * libpyroshim.so, see ps_symbols_object_range() -- are reported as
 * PS_SYM_SHIM so that the caller can drop the profiler's own frames; pass
 * 0, 0 to skip nothing.  Nothing is scanned or read until the first lookup.
 * Returns 0 and sets *out, or -ENOMEM.  Context: any thread; allocates. */
int ps_symbols_new(struct ps_symbols **out, uintptr_t skip_lo, uintptr_t skip_hi) PS_WUR;

/* Release everything.  NULL is allowed.  Context: the owner. */
void ps_symbols_free(struct ps_symbols *s);

/* Name the instruction at ip into buf (len bytes, always NUL-terminated,
 * cut at len - 1 bytes when longer; buf is the caller's).
 * Returns:
 *   PS_SYM_FUNC     the function containing ip, demangled if C++ (full
 *                   signature, e.g. "Foo::bar(int) const"), else as in the
 *                   symbol table;
 *   PS_SYM_UNKNOWN  "module+0xoff" when an object contains ip but no symbol
 *                   covers it (module = basename of the object's file, off =
 *                   ip - load bias, lowercase hex), or "[unknown]+0xip" when
 *                   no object contains it;
 *   PS_SYM_SHIM     ip is in the skip range (buf holds "[pyroshim]");
 *   -ENOMEM         the object list or the object's symbols could not be
 *                   read for want of memory; nothing is cached, so a later
 *                   call answers for good;
 *   -EINVAL         s or buf is NULL or len is 0.
 * An ip in no known object makes the object list be re-read, at most once a
 * second (or at once after ps_symbols_invalidate), so a garbage IP cannot
 * cause a scan per lookup (a walk that ran out of memory is retried at the
 * next look-up).
 * Context: the owner, uploader thread; takes the loader lock, reads files,
 * allocates. */
int ps_symbols_lookup(struct ps_symbols *s, uintptr_t ip, char *buf, size_t len);

/* The object side of s: its settings (DWARF, the symbol cache), its
 * saves.  Owned by s. */
struct ps_symbolizer *ps_symbols_symbolizer(struct ps_symbols *s);

/* Save what s's symbolizer learned (ps_symbolizer_save: fill_ns, busy),
 * after offering it, when DWARF was asked anything, every object of the
 * program that a sample landed in to be looked up whole
 * (ps_symbolizer_fill).  Context: the owner, between passes; reads files
 * and DWARF, writes files. */
void ps_symbols_save(struct ps_symbols *s, uint64_t fill_ns, int (*busy)(void));

/* The source frames of the instruction at ip, as ps_symbolize gives them
 * with PS_FRAMES_LINES for its object and file offset (the function that
 * holds the code named as ps_symbols_lookup names it, so function-level
 * views agree).  The strings stay valid until the next call on s.
 * Returns the number of frames (<= max); 0 when there is no line
 * information (no DWARF, ps_symbolizer_use_dwarf not called, the cap
 * reached, or ip in no object); -EINVAL on bad arguments.
 * Context: the owner, uploader; reads files, allocates. */
int ps_symbols_source(struct ps_symbols *s, uintptr_t ip, struct ps_src_frame *out, int max);

/* The mapped segment that holds ip, as /proc/PID/maps shows it. */
struct ps_map_info {
	uintptr_t start, limit;    /* page-aligned runtime range */
	uint64_t offset;           /* file offset of start */
	const char *file;          /* object file, "[vdso]", or for code in no
				    * object its region's: "//anon", a file */
	char build_id[129];        /* GNU build ID in lowercase hex, "" if none */
	int has_functions;         /* names come from a symbol table (not
				    * "[unknown]+0x..." placeholders) */
};

/* Describe the segment of the object that contains ip, or for an ip in no
 * object (JIT code, anonymous memory) its region of /proc/PID/maps.  file
 * stays valid until the next call on s.  Returns 0, -ENOENT (ip in no
 * mapped region), -EINVAL.  Context: the owner, uploader. */
int ps_symbols_mapping(struct ps_symbols *s, uintptr_t ip, struct ps_map_info *out);

/* Objects were loaded or unloaded (dlopen, dlclose): forget the IP cache and
 * re-read the object list at the next lookup.  Symbol tables of objects that
 * are still loaded at the same address are kept; those of other objects are
 * dropped and files are re-read lazily when next needed.
 * Context: the owner. */
void ps_symbols_invalidate(struct ps_symbols *s);

/* Where a watched program leaves its object list when it ends without
 * waiting for its last pass (a tree's member, worker.c): the executable
 * lines of its /proc/PID/maps, `*len` bytes of `text` (0: not yet; never
 * more than `cap` are read), published by a release store of *len.
 * Memory the program wrote: parsed as any maps file, trusted no further. */
struct ps_maps_left {
	const char *text;
	const _Atomic uint32_t *len;
	uint32_t cap;
};

/* Look up the objects of process `pid` (no ptrace rights needed: its
 * /proc/PID/maps and the files themselves).  `only` 0: as well as this
 * process's own, for a helper forked from the program, which learns so of
 * the objects the program loaded later; 1: its objects alone, for a
 * program the helper is no copy of (a session of the tree's helper,
 * worker.h).  `left` (or NULL): the lines it leaves at its end, read
 * instead of /proc/PID/maps once they are there.  Once the program is
 * gone, the objects already known are kept.  Context: the owner, before
 * any look-up. */
void ps_symbols_watch(struct ps_symbols *s, pid_t pid, int only,
		      const struct ps_maps_left *left);

/* Read the watched program's object list now, while it lives, unless it
 * was read already: one that dies before its first look-up (killed, or a
 * Go program's raw exit_group) then has its frames named all the same,
 * from the list read here.  Context: the owner. */
void ps_symbols_learn(struct ps_symbols *s);

/* Copy the counters.  Context: the owner. */
void ps_symbols_get_stats(const struct ps_symbols *s, struct ps_symbols_stats *st);

/* The address range [*lo, *hi) of the PT_LOAD segments of the loaded object
 * that contains addr, e.g. a function of libpyroshim.so to get the skip
 * range.  Returns 0, or -ENOENT if no loaded object contains addr.
 * Context: any thread outside signal context (takes the loader lock). */
int ps_symbols_object_range(const void *addr, uintptr_t *lo, uintptr_t *hi) PS_WUR;

/* Test seam: parse the ELF file at path as the object loader would (no
 * check against a loaded image) and report how many function symbols it
 * yields.  Returns 0 and sets *nsyms, -errno from open/fstat/mmap, -ENOEXEC
 * (not a well-formed ELF file of this machine's class), -ENOMEM.
 * Context: any thread; allocates. */
int ps_symbols_load_file_for_test(const char *path, size_t *nsyms) PS_WUR;

#endif
