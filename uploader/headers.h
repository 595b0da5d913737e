/* headers.h -- user HTTP headers from PYROSCOPE_HTTP_HEADERS.
 *
 * The variable holds a JSON object of string values, as the Java agent
 * takes it: {"X-Foo":"bar","X-Baz":"q"}.  A strict, small parser accepts
 * exactly that shape (whitespace allowed; escapes \" \\ \/ \b \f \n \r \t
 * and \uXXXX, surrogate pairs included, decoded to UTF-8) and nothing else:
 * nested objects, arrays, numbers, true/false/null, trailing garbage, raw
 * control characters, invalid UTF-8 or a lone surrogate make the whole
 * variable a syntax error.  Each member becomes one `Name: value` line in
 * the form libcurl takes (CURLOPT_HTTPHEADER), which the HTTP client sends
 * after its own headers, so a user header may override e.g. Authorization.
 *
 * A well-formed member is still dropped (and reported) when:
 *   - its name is not an HTTP token (RFC 9110: ALPHA DIGIT and
 *     !#$%&'*+-.^_`|~, at least one);
 *   - its value is empty or blank (libcurl would read `Name:` with nothing
 *     after it as "remove this header"), or holds a control character
 *     other than TAB -- CR and LF above all, which would inject headers;
 *   - its name is Content-Type, Content-Length or Transfer-Encoding: those
 *     frame the body pyroshim builds and must not be replaced;
 *   - the same name (case-insensitive) came earlier: the first wins;
 *   - PS_HEADERS_MAX headers or PS_HEADERS_BYTES bytes are used already.
 *
 * Allocation-free: the lines live inside struct ps_headers, stored as
 * offsets, so the struct may be copied by value.
 */
#ifndef PS_HEADERS_H
#define PS_HEADERS_H

#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"
#include "common/text.h"

#define PS_HEADERS_MAX   32     /* headers kept */
#define PS_HEADERS_BYTES 8192   /* bytes of all "Name: value\0" lines */

/* A zeroed struct holds no headers.  Owned by whoever declared it; filled
 * only by ps_headers_parse_json(). */
struct ps_headers {
	unsigned n;                     /* lines used, <= PS_HEADERS_MAX */
	uint16_t off[PS_HEADERS_MAX];   /* start of line i in text */
	char text[PS_HEADERS_BYTES];    /* NUL-terminated lines, back to back */
};

/* Why a member was dropped. */
enum ps_headers_drop {
	PS_HEADERS_DROP_BAD_NAME = 1,   /* not an HTTP token */
	PS_HEADERS_DROP_BAD_VALUE,      /* blank, CR/LF or other control char */
	PS_HEADERS_DROP_RESERVED,       /* Content-Type/-Length, Transfer-Encoding */
	PS_HEADERS_DROP_DUPLICATE,      /* name seen before: first wins */
	PS_HEADERS_DROP_FULL,           /* PS_HEADERS_MAX or PS_HEADERS_BYTES */
};

/* What was dropped, for one warning: a struct ps_report (common/text.h),
 * whose item[].why is an enum ps_headers_drop.  Names only, never values:
 * a header value is often a credential. */

/* Parse a PYROSCOPE_HTTP_HEADERS value into h, replacing its contents;
 * rep (may be NULL) is reset and then lists the members dropped under the
 * rules above.  A NULL or blank json holds no headers and is not an error.
 * Returns the number of headers kept (0..PS_HEADERS_MAX), or
 *  -EINVAL  h is NULL, or json is not an object of string values (then h
 *           and rep hold nothing: the caller warns once and ignores the
 *           variable).
 * Context: any thread; does not allocate. */
int ps_headers_parse_json(const char *json, struct ps_headers *h,
			  struct ps_report *rep) PS_WUR;

/* Line i ("Name: value"), or NULL if i >= h->n.  Points into h.
 * Context: any thread. */
const char *ps_headers_line(const struct ps_headers *h, unsigned i);

/* Fill v with pointers to h's lines, for ps_http_request.headers, and
 * return how many (h->n).  The pointers are into h and valid while h is
 * neither modified nor freed.
 * Context: any thread. */
unsigned ps_headers_vector(const struct ps_headers *h,
			   const char *v[PS_HEADERS_MAX]);

/* A short English word for a drop reason.  Never NULL.  Context: any. */
const char *ps_headers_drop_str(enum ps_headers_drop why);

#endif
