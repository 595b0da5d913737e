/* ingest.h -- building requests for Pyroscope's `POST {server}/ingest`.
 *
 * Three pieces, all pure formatting (no I/O besides getrandom(2)):
 *   - the server address is split into a base URL and HTTP Basic
 *     credentials, so that a password never travels inside a URL string
 *     that might be logged;
 *   - the query string carries the series name and the profile metadata,
 *     every value percent-encoded;
 *   - a pprof profile goes in a multipart/form-data body, as pyroscope-go
 *     sends it.  The server matches `format=pprof` before it looks at the
 *     content type, so a multipart body must be sent with NO format
 *     parameter; folded text is sent raw with `format=folded` (any format
 *     the server does not know is read as folded "groups" text).
 */
#ifndef PS_INGEST_H
#define PS_INGEST_H

#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"
#include "common/buf.h"

/* Split a server address into base URL and credentials.
 * Accepted: `http://` or `https://` (any case; written lowercase), an
 * optional `user[:password]@` (percent-decoded into user/pass and removed
 * from base; the last '@' before the path ends it), a non-empty host (name
 * of [A-Za-z0-9._~-], or an IPv6 literal in brackets), an optional port
 * 1..65535, and an optional path prefix (e.g. `/pyroscope`).  Trailing
 * slashes are stripped, so base + "/ingest" is always right.
 * Refused: other schemes, an empty host, a query or fragment, spaces,
 * control characters or non-ASCII bytes anywhere, a bad %-escape, or
 * credentials that decode to a NUL or control character.
 * user and pass get "" when the address has none (pass is "" for
 * `user@host`).
 * Returns 0, -EINVAL (malformed or a NULL argument) or -ENOSPC (an output
 *  buffer too small); on failure all three outputs hold "" (if their
 *  length is not 0).
 * Context: any thread; does not allocate. */
int ps_ingest_split_url(const char *server, char *base, size_t blen,
			char *user, size_t ulen, char *pass, size_t plen) PS_WUR;

/* Query parameters of one upload.  Borrowed for the call. */
struct ps_ingest_query {
	const char *name;       /* series name, ps_tags_format_name(); required */
	uint64_t from_ns;       /* start, Unix ns; 0 = omitted (server: now) */
	uint64_t until_ns;      /* end, Unix ns; 0 = omitted (server: now) */
	const char *spy_name;   /* e.g. "pyroshim"; NULL = omitted */
	unsigned sample_rate;   /* Hz; 0 = omitted (server default 100) */
	const char *units;      /* "samples", "objects", "bytes"; NULL = omitted */
	const char *aggregation; /* "sum" or "average"; NULL = omitted */
	const char *format;     /* NULL for a multipart pprof body, "folded" for
	                         * folded text */
};

/* Append `base/ingest?name=..&from=..&until=..&format=..&spyName=..
 * &sampleRate=..&units=..&aggregationType=..` to out.  Every value is
 * percent-encoded (all bytes but ALPHA DIGIT - . _ ~, RFC 3986), so
 * `app{env=dev}` is sent as `app%7Benv%3Ddev%7D`.  Times are written as
 * exactly 19 digits (zero-padded): the server infers the unit from the
 * number of digits, and 19 means nanoseconds.
 * On success out->data is NUL-terminated (the NUL is not counted in
 * out->len), ready to be passed as a C string.
 * Returns 0,
 *  -EINVAL  NULL or empty base or name, or until_ns < from_ns (both set),
 *  -ERANGE  a time of 10^19 ns or more (the year 2286),
 *  -E2BIG / -ENOMEM  from the buffer;
 *  on failure out->len is restored to its value at entry.
 * Context: any thread outside signal context; may allocate (out). */
int ps_ingest_url(const char *base, const struct ps_ingest_query *q,
		  struct ps_buf *out) PS_WUR;

/* Append a multipart/form-data body to body: a part `profile` (filename
 * "profile.pprof", Content-Type application/octet-stream) holding the n
 * bytes at pprof_gz (gzipped or not: the server sniffs), and, when
 * sample_type_config_json is not NULL, a part `sample_type_config`
 * (filename "sample_type_config.json") holding that text.  The boundary is
 * 32 random hex digits; the data is checked not to contain it and a new
 * one drawn if it does.  content_type receives
 * `multipart/form-data; boundary=...` for the request header.
 * Returns 0,
 *  -EINVAL  NULL pprof_gz, body or content_type, or n == 0,
 *  -ENOSPC  ctlen too small for the content type,
 *  -EAGAIN  every boundary drawn occurred in the data (practically never),
 *  -E2BIG / -ENOMEM  from the buffer;
 *  on failure body->len is restored to its value at entry.
 * Context: any thread outside signal context; may allocate (body). */
int ps_ingest_multipart(const void *pprof_gz, size_t n,
			const char *sample_type_config_json,
			struct ps_buf *body, char *content_type,
			size_t ctlen) PS_WUR;

/* Test seam: replace the random source of the multipart boundary.  fill
 * must fill all n bytes and return 0, or return non-zero to make the
 * caller fall back to a time- and counter-based boundary.  NULL restores
 * getrandom(2).
 * Context: tests only, before any concurrent use. */
void ps_ingest_set_random(int (*fill)(void *p, size_t n));

#endif
