/* gzip.h -- gzip (RFC 1952) compression into a capped ps_buf, using zlib's
 * deflate with the gzip wrapper (windowBits 15 + 16).
 *
 * Two ways in: ps_gzip() compresses one block that is already in memory;
 * the streaming calls (begin, write..., end) let a producer such as the
 * nanopb encoder in pprof.c compress its output as it goes, so an
 * uncompressed copy of the profile never exists.  Small writes are gathered
 * in the struct and handed to deflate in blocks, so a producer may write a
 * byte at a time cheaply.
 *
 * The gzip header carries no name and a zero mtime: the same input always
 * gives the same bytes.
 *
 * Errors: a cap reached on the output buffer is -E2BIG, exactly as the
 * ps_buf underneath reports it.  After any failure, and after
 * ps_gzip_abort(), the output buffer is back at the length it had when
 * ps_gzip_begin() was called: a caller never sees half a gzip member.
 *
 * Context: any thread but not signal context; zlib allocates its state
 * (about 256 KiB at level 6, less at level 1) with malloc, and the output
 * buffer grows with malloc.
 */
#ifndef PS_GZIP_H
#define PS_GZIP_H

#include <stddef.h>
#include <zlib.h>
#include "common/buf.h"
#include "common/ps.h"

/* zlib's entry points, from libz.so.1, which the uploader loads at its
 * first use: linked into the preloaded library, it was loaded into every
 * program at start-up (0.03-0.05 ms per exec'd process, BENCHMARKS 14e)
 * for the helper alone.  ps_zlib() is NULL when it cannot be loaded (the
 * log says so once).  Context: any thread outside signal context. */
struct ps_zlib {
	int (*deflateInit2_)(z_streamp, int, int, int, int, int, const char *, int);
	int (*deflate)(z_streamp, int);
	int (*deflateEnd)(z_streamp);
	uLong (*crc32)(uLong, const Bytef *, uInt);
};
const struct ps_zlib *ps_zlib(void);

#define PS_GZIP_STAGE 4096      /* small writes are gathered up to this */

struct ps_gzip {
	z_stream zs;                /* zlib's state; private */
	const struct ps_zlib *z;    /* ps_zlib(), set by begin */
	struct ps_buf *out;         /* not owned; appended to */
	size_t start;               /* out->len at begin, for the roll-back */
	int err;                    /* first error, sticky; 0 while healthy */
	int live;                   /* deflateInit2 succeeded, End not yet */
	size_t staged;              /* bytes used in stage[] */
	unsigned char stage[PS_GZIP_STAGE];
	uint64_t in_total;          /* uncompressed bytes accepted so far */
};

/* Start a gzip member appended to `out`.  `level` is a zlib level: -1
 * (Z_DEFAULT_COMPRESSION) or 0..9; Z_BEST_SPEED (1) is what a profiler
 * running inside someone else's process should normally use.
 * Returns 0, -EINVAL (bad level or NULL argument), -ENOMEM.  On failure
 * nothing needs releasing; on success the caller must finish with
 * ps_gzip_end() or ps_gzip_abort(). */
int ps_gzip_begin(struct ps_gzip *g, struct ps_buf *out, int level) PS_WUR;

/* Compress n more bytes.  Returns 0, -E2BIG (output cap reached), -ENOMEM,
 * -EINVAL.  An error is sticky: later writes and ps_gzip_end() return it;
 * the caller still has to call ps_gzip_end() or ps_gzip_abort(). */
int ps_gzip_write(struct ps_gzip *g, const void *p, size_t n) PS_WUR;

/* Flush, write the gzip trailer and release zlib's state.  Returns 0 (the
 * whole member is now in `out`) or the first error of this stream, in
 * which case `out` is rolled back.  The struct is dead afterwards either
 * way (ps_gzip_abort() on it is a harmless no-op). */
int ps_gzip_end(struct ps_gzip *g) PS_WUR;

/* Give up: roll `out` back and release zlib's state.  Safe to call twice
 * and after ps_gzip_end(). */
void ps_gzip_abort(struct ps_gzip *g);

/* One-shot: append the gzip of in[0..n) to out.  As the calls above:
 * returns 0, -E2BIG, -ENOMEM, -EINVAL; `out` is unchanged on failure. */
int ps_gzip(const void *in, size_t n, struct ps_buf *out, int level) PS_WUR;

#endif
