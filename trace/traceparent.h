/* traceparent.h -- W3C Trace Context (Level 2): traceparent and tracestate.
 *
 * pyroshim joins the trace its parent process handed down in the TRACEPARENT
 * and TRACESTATE environment variables (OpenTelemetry env carriers), or starts
 * a new one.  This module only parses, validates and formats; what to do with
 * the result is trace/span.c's business.
 *
 * Everything here is pure and allocation-free: results go into structs and
 * buffers the caller provides.  No malloc, no stdio, no getenv; the only
 * system call is getrandom(2) in ps_trace_random().
 */
#ifndef PS_TRACEPARENT_H
#define PS_TRACEPARENT_H

#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"

#define PS_TRACE_FLAG_SAMPLED 0x01  /* the caller may have recorded data */
#define PS_TRACE_FLAG_RANDOM  0x02  /* trace-id is random (Level 2) */

#define PS_TRACEPARENT_LEN 55       /* version 00 string, without the NUL */
#define PS_TRACESTATE_MAX 512       /* longest tracestate we accept */
#define PS_TRACESTATE_MAX_MEMBERS 32

struct ps_traceparent {
	uint8_t trace_id[16];   /* never all zero once parsed */
	uint8_t span_id[8];     /* the "parent-id" field; never all zero */
	uint8_t flags;          /* trace-flags as received, all 8 bits */
};

/* Parse a traceparent value.  Rules of W3C Trace Context Level 2:
 * `vv-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>`, lowercase hex
 * only; version ff is invalid; version 00 must be exactly 55 characters; a
 * higher version is parsed by its version-00 prefix and must have either the
 * end of the string or '-' right after the flags; an all-zero trace-id or
 * parent-id is invalid.  Whitespace is not trimmed.
 * On failure *out is left unchanged.
 * Returns 0, or -EINVAL (malformed, or s/out NULL).
 * Context: any thread; async-signal-safe; does not allocate. */
int ps_traceparent_parse(const char *s, struct ps_traceparent *out) PS_WUR;

/* Format tp as a version-00 traceparent: 55 characters and a NUL into buf.
 * Every version is re-emitted as 00.
 * Returns 0, -ENOSPC (len < 56; buf untouched) or -EINVAL (NULL args).
 * Context: any thread; async-signal-safe; does not allocate. */
int ps_traceparent_format(const struct ps_traceparent *tp, char *buf,
			  size_t len) PS_WUR;

/* Whether s is a valid tracestate list: at most 512 characters, at most 32
 * non-empty `key=value` members separated by ',' with optional spaces/tabs
 * around members; empty members are allowed and ignored; keys follow the
 * simple-key / tenant@system grammar (lowercase); values are 1..256
 * printable ASCII characters other than ',' and '=', not ending in a space;
 * a key may appear only once.  The empty string is valid (no members).
 * A valid tracestate is forwarded unchanged; an invalid one is dropped.
 * Returns 1 if valid, 0 if not (or s NULL).
 * Context: any thread; async-signal-safe; does not allocate. */
int ps_tracestate_valid(const char *s);

/* Write the n bytes at in as 2n lowercase hex digits plus a NUL to out,
 * which must hold 2n + 1 bytes.
 * Context: any thread; async-signal-safe; does not allocate. */
void ps_hex_encode(const uint8_t *in, size_t n, char *out);

/* Fill buf[0..n) with bytes from getrandom(2), retrying on EINTR and short
 * reads.  The result is never all zero (it is drawn again), so it can serve
 * directly as a trace-id or span-id.
 * Returns 0, -EINVAL (n == 0 or buf NULL) or the negative errno of
 * getrandom (e.g. -ENOSYS on a kernel without it).
 * Context: any thread; async-signal-safe; does not allocate; may block
 * only before the kernel's entropy pool is initialised (early boot). */
int ps_trace_random(uint8_t *buf, size_t n) PS_WUR;

#endif
