/* buf.h -- a growable byte buffer with a hard size cap.
 *
 * Used outside signal context only (uploader thread, tests): it allocates
 * with malloc.  Every buffer has a cap; an append that would pass it fails
 * with -E2BIG and leaves the buffer unchanged, so an oversized profile is
 * counted and dropped instead of growing without bound.
 *
 * Ownership: the struct is owned by whoever declared it; `data` is owned by
 * the buffer and released by ps_buf_free().  A zeroed struct with a cap set
 * is a valid empty buffer: struct ps_buf b = PS_BUF_INIT(1 << 20);
 */
#ifndef PS_BUF_H
#define PS_BUF_H

#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"

struct ps_buf {
	uint8_t *data;  /* owned; NULL until the first append */
	size_t len;     /* bytes used */
	size_t alloc;   /* bytes allocated */
	size_t cap;     /* the most `len` may ever be */
};

#define PS_BUF_INIT(c) { NULL, 0, 0, (c) }

/* Append n bytes.  Returns 0, -E2BIG (cap reached) or -ENOMEM. */
int ps_buf_append(struct ps_buf *b, const void *p, size_t n) PS_WUR;
/* Append a NUL-terminated string (without the NUL).  As ps_buf_append. */
int ps_buf_puts(struct ps_buf *b, const char *s) PS_WUR;
/* Append printf-formatted text.  As ps_buf_append, or -EINVAL on a format
 * error. */
int ps_buf_printf(struct ps_buf *b, const char *fmt, ...) PS_WUR
	__attribute__((format(printf, 2, 3)));
/* Forget the contents, keep the allocation. */
void ps_buf_reset(struct ps_buf *b);
/* Release the allocation; the buffer is empty and reusable afterwards. */
void ps_buf_free(struct ps_buf *b);

/* Make the array *pp of *cap items of `size` bytes hold at least `need`,
 * doubling from 64 items and never past `max`.  Returns 0, -E2BIG (need >
 * max) or -ENOMEM; on failure *pp and *cap are unchanged. */
int ps_grow(void *pp, uint32_t *cap, uint32_t need, uint32_t max, size_t size) PS_WUR;

#endif
