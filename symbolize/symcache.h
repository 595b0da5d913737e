/* symcache.h -- source lines remembered per build ID, on disk, across runs.
 *
 * Opening an object's DWARF is most of what a short process's helper
 * costs: libdw inflates every compressed debug section when it opens a
 * file (libc6-dbg's are all compressed), tens of milliseconds and of
 * megabytes for a process that ran for one.  Every process of a shell
 * loop or a build asks the same objects about the same addresses, so the
 * answers are kept, as perf's ~/.debug and debuginfod's cache keep files
 * and Parca keeps answers (REFERENCES.md section 11).
 *
 * What is kept.  For one object, identified by its GNU build ID: address
 * ranges (link-time addresses) with the inlined chain that every address
 * in the range gets from DWARF (symbolize/dwarf.h computes the range: the
 * line-table row cut to the scopes around the address), or no chain when
 * DWARF has no line there.  A range answers every later address in it, so
 * a second run of a program finds its hot code answered even where its
 * samples land on other instructions.  An object whose every function was looked
 * up is marked so (PS_SYMCACHE_WALKED, PS_SYMCACHE_COMPLETE).
 *
 * Where.  One file per build ID, named by it in lowercase hex, in the
 * per-user directory given (by default $XDG_CACHE_HOME/pyroshim, mode
 * 0700).  Writes go to a temporary file that is renamed over the old one,
 * after merging what another process wrote meanwhile, so readers see a
 * whole file or the previous one.  The directory is bounded: past its
 * size, the files used least recently (mtime, touched on every use) are
 * removed.
 *
 * Trust.  Nothing in the directory is trusted: a directory that is a
 * symbolic link, belongs to another user or is open to others, and a file
 * that is not a regular file of this user, is truncated, corrupt (XXH64
 * over its body), of another byte order or of another build ID, is
 * ignored (and the next save replaces a bad file).  The build ID is the
 * key: an object without one is never cached.
 *
 * Context: the uploader only (files, malloc); one owner per struct.
 */
#ifndef PS_SYMCACHE_H
#define PS_SYMCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"
#include "symbolize/dwarf.h"

struct ps_symcache;   /* one object's answers; opaque, owned by its creator */

/* Check (and make, mode 0700) the cache directory `dir`.  Returns 0, or
 * -errno / -EPERM with *why set to a reason for the log when the directory
 * is not to be used. */
int ps_symcache_dir_check(const char *dir, const char **why) PS_WUR;

/* The answers kept for the object with build ID id[0..idlen) in `dir`
 * (already checked), loaded from its file if there is a valid one.
 * `cap` is the directory's size bound in bytes.  Returns 0 and sets *out,
 * -EINVAL (no build ID, name too long) or -ENOMEM. */
int ps_symcache_open(const char *dir, const uint8_t *id, size_t idlen, uint64_t cap,
		     struct ps_symcache **out) PS_WUR;

/* Save (ps_symcache_save) and release.  NULL is allowed. */
void ps_symcache_free(struct ps_symcache *c);

/* ps_symcache_open's cache of (dir, id), shared by every symbol reader of
 * the process: a process tree's helper serves one program after another,
 * and each would read and inflate libc's file again.  The first caller's
 * cap holds.  Returns 0 and a reference in *out, with *opened 1 when the
 * file was read now (0: the cache was open already), or as
 * ps_symcache_open.  The PS_SYMCACHE_IDLE caches released last stay
 * open for the next program.  Context: under the worker's lock, as every
 * use of symbols. */
#define PS_SYMCACHE_IDLE 64
int ps_symcache_get(const char *dir, const uint8_t *id, size_t idlen, uint64_t cap,
		    struct ps_symcache **out, int *opened) PS_WUR;

/* One more reference to c, from ps_symcache_get. */
void ps_symcache_hold(struct ps_symcache *c);

/* Release a reference from ps_symcache_get or ps_symcache_hold.  NULL is
 * allowed. */
void ps_symcache_put(struct ps_symcache *c);

/* The chain at link-time address addr into out[0..max), and in *end the
 * end of the range that holds addr.  Returns the number of frames (0:
 * DWARF has no line there), or -ENOENT when addr is in no kept range.
 * The strings stay valid until the next call on c. */
int ps_symcache_find(struct ps_symcache *c, uint64_t addr, struct ps_dwarf_frame *out,
		     int max, uint64_t *end);

/* The first address in [a, hi) that no kept range holds, or hi. */
uint64_t ps_symcache_gap(const struct ps_symcache *c, uint64_t a, uint64_t hi);

/* Keep the answer of n frames (0: none) for [lo, hi), which holds addr;
 * the range is cut where it would overlap a kept one.  Returns 0,
 * -EINVAL, -ENOSPC (the object's share of the directory is full) or
 * -ENOMEM. */
int ps_symcache_add(struct ps_symcache *c, uint64_t lo, uint64_t hi, uint64_t addr,
		    const struct ps_dwarf_frame *f, int n);

/* What is said of an object's answers as a whole, kept in its file:
 * WALKED, every function of it was looked up once (what DWARF could
 * answer is here: it is not walked again); COMPLETE, and every one was
 * answered, so that an address in no kept range has no line and DWARF
 * need not be asked. */
#define PS_SYMCACHE_WALKED   1u
#define PS_SYMCACHE_COMPLETE 2u
uint32_t ps_symcache_flags(const struct ps_symcache *c);

/* Add flags to c (written at the next save).  Not for a cache that
 * reached its bound, which is not written. */
void ps_symcache_set_flags(struct ps_symcache *c, uint32_t flags);

/* Write what was added since the last save to the object's file, merged
 * with the file's current contents, then keep the directory within its
 * bound.  Nothing is done when nothing was added.  Returns 0 or -errno
 * (the cache stays in memory; the next save tries again). */
int ps_symcache_save(struct ps_symcache *c);

/* Counters for the log and the tests. */
struct ps_symcache_stats {
	uint32_t ranges;        /* kept now */
	int loaded;             /* 1: a valid file was read at open */
	int rejected;           /* 1: a file was there but not used */
	int fits;               /* 1: its file would be within the directory's
				 * bound (0: kept for this process only) */
};
void ps_symcache_get_stats(const struct ps_symcache *c, struct ps_symcache_stats *st);

#endif
