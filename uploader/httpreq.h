/* httpreq.h -- the listener's HTTP/1.x request parser: what a scraper
 * (Grafana Alloy, go tool pprof, curl, a browser) sends, and nothing more.
 *
 * The listener only serves GET (and HEAD) of a few fixed paths, so the
 * parser is small enough to read in one sitting and is fuzzed
 * (test/fuzz/fuzz_httpreq.c).  Rules, stricter than Go's net/http where
 * Go is lax, and each failure mapped to the status to answer:
 *   - the request head (request line and headers, up to the empty line)
 *     must fit PS_HTTPREQ_MAX bytes: else 431;
 *   - request line `METHOD SP /path[?query] SP HTTP/1.x`, lines ending in
 *     CRLF or LF: else 400 (a version other than 1.0/1.1: 505; a path
 *     or query longer than rq's arrays: 414);
 *   - a method token other than GET or HEAD: 405 (the caller adds
 *     `Allow: GET, HEAD`);
 *   - the target in origin form (starts with '/'), printable ASCII, no
 *     fragment: else 400;
 *   - header lines `name: value` with a token name, no obs-fold
 *     continuation lines: else 400;
 *   - HTTP/1.1 needs exactly one Host header (RFC 9112 3.2): else 400;
 *   - no body: a Content-Length other than 0, or any Transfer-Encoding,
 *     is 400 (a GET carries none; reading one would be one more thing to
 *     bound).
 * Nothing is percent-decoded in the path: the served paths have nothing
 * to decode, and an encoded one is simply not found.
 *
 * Context: any thread; does not allocate; pure (no I/O).
 */
#ifndef PS_HTTPREQ_H
#define PS_HTTPREQ_H

#include <stddef.h>
#include "common/ps.h"

#define PS_HTTPREQ_MAX 8192

struct ps_httpreq {
	int head;                 /* 1: HEAD, 0: GET */
	char path[1024];          /* the target before '?' */
	char query[2048];         /* after '?', "" if none */
	const char *why;          /* on failure: a one-line reason, static */
};

/* Parse the request head in buf[0..len).  Returns
 *    0        a complete, acceptable request (rq filled);
 *   -EAGAIN   the head is not complete yet (no empty line so far) and len
 *             is below PS_HTTPREQ_MAX: read more;
 *   > 0       the HTTP status to answer (400, 405, 414, 431, 505), rq->why says
 *             why.
 * Context: any thread; does not allocate. */
int ps_httpreq_parse(const char *buf, size_t len, struct ps_httpreq *rq) PS_WUR;

/* The value of the first `key` in a query string, percent-decoded ('+' is
 * a space), into out (NUL-terminated).  Returns 1 found, 0 absent, -1
 * malformed (a bad %-escape, a NUL, a value longer than outlen - 1) or
 * given more than once. */
int ps_httpreq_query(const char *query, const char *key, char *out, size_t outlen) PS_WUR;

/* A `seconds` value: 1..max, decimal digits only (no sign, no space, no
 * leading zero).  Returns 0 and sets *out, -EINVAL (malformed, empty or
 * 0) or -ERANGE (a whole number beyond max). */
int ps_httpreq_seconds(const char *s, unsigned max, unsigned *out) PS_WUR;

#endif
