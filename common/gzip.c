/* gzip.c -- deflate with a gzip wrapper into a capped ps_buf.  See gzip.h.
 *
 * deflate() produces output in 16 KiB pieces on the stack; each piece is
 * appended to the ps_buf, whose cap is thus the cap on the compressed size.
 * Input is staged in the struct so that deflate() sees blocks of
 * PS_GZIP_STAGE bytes rather than the tag-and-varint crumbs an encoder
 * writes.
 */
#include "common/gzip.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "common/dl.h"
#include "common/log.h"

#define GZIP_WINDOW (15 + 16)   /* 32 KiB window, gzip header and trailer */
#define GZIP_MEMLEVEL 8         /* zlib's default */
#define GZIP_CHUNK 16384

/* Written once, under load_ctl. */
static struct ps_zlib zl;
static const struct ps_zlib *zl_ok;
static pthread_once_t load_ctl = PTHREAD_ONCE_INIT;

static void
load_once(void)
{
	static const struct ps_dl_sym syms[] = {
#define SYM(n) { #n, offsetof(struct ps_zlib, n) }
		SYM(deflateInit2_), SYM(deflate), SYM(deflateEnd), SYM(crc32),
#undef SYM
	};
	const char *why;

	if (!ps_dl_load("libz.so.1", syms, PS_ARRAY_LEN(syms), &zl, sizeof(zl), &why)) {
		ps_info("libz.so.1 not used (%s): no pprof file or upload, no symbol cache", why);
		return;
	}
	zl_ok = &zl;
}

const struct ps_zlib *
ps_zlib(void)
{
	if (pthread_once(&load_ctl, load_once))
		return NULL;
	return zl_ok;
}

static int
zerr(int zrc)
{
	return zrc == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
}

/* Run deflate over whatever zs.next_in holds, with `flush`, and append all
 * the output it makes.  With Z_FINISH this runs until the trailer is out. */
static int
pump(struct ps_gzip *g, int flush)
{
	unsigned char chunk[GZIP_CHUNK];
	size_t have;
	int zrc, rc;

	do {
		g->zs.next_out = chunk;
		g->zs.avail_out = sizeof(chunk);
		zrc = g->z->deflate(&g->zs, flush);
		/* Z_BUF_ERROR only means "no progress possible": not fatal. */
		if (zrc != Z_OK && zrc != Z_STREAM_END && zrc != Z_BUF_ERROR)
			return zerr(zrc);
		have = sizeof(chunk) - g->zs.avail_out;
		rc = ps_buf_append(g->out, chunk, have);
		if (rc)
			return rc;
		if (flush == Z_FINISH && zrc != Z_STREAM_END && have == 0)
			return -EINVAL;  /* cannot happen with a sane zlib */
	} while (g->zs.avail_out == 0 || (flush == Z_FINISH && zrc != Z_STREAM_END));
	return 0;
}

/* Feed n bytes straight to deflate, in pieces that fit zlib's uInt. */
static int
feed(struct ps_gzip *g, const unsigned char *p, size_t n)
{
	size_t part;
	int rc;

	while (n > 0) {
		part = n > UINT_MAX ? UINT_MAX : n;
		g->zs.next_in = (unsigned char *)p;
		g->zs.avail_in = (uInt)part;
		rc = pump(g, Z_NO_FLUSH);
		if (rc)
			return rc;
		p += part;
		n -= part;
	}
	return 0;
}

int
ps_gzip_begin(struct ps_gzip *g, struct ps_buf *out, int level)
{
	int zrc;

	if (!g || !out || level < Z_DEFAULT_COMPRESSION || level > 9)
		return -EINVAL;
	memset(&g->zs, 0, sizeof(g->zs));
	g->out = out;
	g->start = out->len;
	g->err = 0;
	g->live = 0;
	g->staged = 0;
	g->in_total = 0;
	g->z = ps_zlib();
	if (!g->z) {
		g->out = NULL;
		return -ENOSYS;
	}
	zrc = g->z->deflateInit2_(&g->zs, level, Z_DEFLATED, GZIP_WINDOW, GZIP_MEMLEVEL,
				  Z_DEFAULT_STRATEGY, ZLIB_VERSION, (int)sizeof(g->zs));
	if (zrc != Z_OK) {
		g->out = NULL;
		return zerr(zrc);
	}
	g->live = 1;
	return 0;
}

static int
flush_stage(struct ps_gzip *g)
{
	int rc;

	if (g->staged == 0)
		return 0;
	rc = feed(g, g->stage, g->staged);
	g->staged = 0;
	return rc;
}

int
ps_gzip_write(struct ps_gzip *g, const void *p, size_t n)
{
	int rc;

	if (!g->live)
		return g->err ? g->err : -EINVAL;
	if (g->err)
		return g->err;
	if (n == 0)
		return 0;
	if (n <= sizeof(g->stage) - g->staged) {
		memcpy(g->stage + g->staged, p, n);
		g->staged += n;
		g->in_total += n;
		return 0;
	}
	rc = flush_stage(g);
	if (!rc && n < sizeof(g->stage)) {
		memcpy(g->stage, p, n);
		g->staged = n;
	} else if (!rc) {
		rc = feed(g, p, n);
	}
	if (rc)
		g->err = rc;
	else
		g->in_total += n;
	return rc;
}

int
ps_gzip_end(struct ps_gzip *g)
{
	int rc;

	if (!g->live)
		return g->err ? g->err : -EINVAL;
	rc = g->err;
	if (!rc)
		rc = flush_stage(g);
	if (!rc) {
		g->zs.next_in = NULL;
		g->zs.avail_in = 0;
		rc = pump(g, Z_FINISH);
	}
	if (rc) {
		g->err = rc;
		ps_gzip_abort(g);
		return rc;
	}
	(void)g->z->deflateEnd(&g->zs);
	g->live = 0;
	g->out = NULL;      /* a later abort must not roll back */
	return 0;
}

void
ps_gzip_abort(struct ps_gzip *g)
{
	if (g->live)
		(void)g->z->deflateEnd(&g->zs);
	g->live = 0;
	if (g->out)
		g->out->len = g->start;
	g->out = NULL;
}

int
ps_gzip(const void *in, size_t n, struct ps_buf *out, int level)
{
	struct ps_gzip g;
	int rc;

	rc = ps_gzip_begin(&g, out, level);
	if (rc)
		return rc;
	rc = ps_gzip_write(&g, in, n);
	if (rc) {
		ps_gzip_abort(&g);
		return rc;
	}
	return ps_gzip_end(&g);
}
