/* buf.c -- growable byte buffer with a cap.  See buf.h. */
#include "common/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
reserve(struct ps_buf *b, size_t n)
{
	size_t want, na;
	uint8_t *p;

	if (n > b->cap || b->len > b->cap - n)
		return -E2BIG;
	want = b->len + n;
	if (want <= b->alloc)
		return 0;
	na = b->alloc ? b->alloc : 256;
	while (na < want)
		na = na > SIZE_MAX / 2 ? want : na * 2;
	if (na > b->cap)
		na = b->cap;
	p = realloc(b->data, na);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->alloc = na;
	return 0;
}

int
ps_buf_append(struct ps_buf *b, const void *p, size_t n)
{
	int rc;

	if (n == 0)
		return 0;
	rc = reserve(b, n);
	if (rc)
		return rc;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int
ps_buf_puts(struct ps_buf *b, const char *s)
{
	return ps_buf_append(b, s, strlen(s));
}

int
ps_buf_printf(struct ps_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n < sizeof(small))
		return ps_buf_append(b, small, (size_t)n);
	rc = reserve(b, (size_t)n + 1);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void
ps_buf_reset(struct ps_buf *b)
{
	b->len = 0;
}

void
ps_buf_free(struct ps_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
}

int
ps_grow(void *pp, uint32_t *cap, uint32_t need, uint32_t max, size_t size)
{
	void **p = pp;
	uint32_t nc = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	if (need > max)
		return -E2BIG;
	while (nc < need)
		nc = nc > max / 2 ? max : nc * 2;
	q = realloc(*p, (size_t)nc * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = nc;
	return 0;
}
