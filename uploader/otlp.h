/* otlp.h -- OTLP/HTTP protobuf encoding of the run's root span, and the
 * OTEL_EXPORTER_OTLP_HEADERS parser.
 *
 * The uploader thread sends the bytes from ps_otlp_encode_span() with
 * `POST <endpoint>/v1/traces`, `Content-Type: application/x-protobuf`, plus
 * the headers parsed by ps_otlp_parse_headers().  Message layout and field
 * numbers are those of opentelemetry-proto (see trace/otlp.proto); the span
 * follows the OpenTelemetry conventions for a process run.
 */
#ifndef PS_OTLP_H
#define PS_OTLP_H

#include <stddef.h>
#include "common/ps.h"
#include "common/buf.h"
#include "trace/span.h"

#define PS_OTLP_SCOPE_NAME "pyroshim"   /* InstrumentationScope.name */

/* Span.flags bits above the W3C trace-flags byte (opentelemetry-proto
 * SpanFlags): whether the parent's remoteness is known, and whether the
 * parent is remote.  pyroshim always knows: a parent only ever comes from
 * TRACEPARENT, i.e. from another process. */
#define PS_OTLP_FLAG_HAS_IS_REMOTE 0x100u
#define PS_OTLP_FLAG_IS_REMOTE     0x200u

/* What the resource and span attributes describe.  All pointers are
 * borrowed for the duration of the call only. */
struct ps_otlp_resource {
	const char *service_name;       /* resource service.name; required */
	int pid;                        /* process.pid */
	const char *executable_name;    /* process.executable.name; NULL: omit */
	const char *const *argv;        /* process.command_args; argc strings */
	int argc;                       /* 0: empty array; argv may be NULL */
};

/* Append one ExportTraceServiceRequest to *out: a ResourceSpans with
 * resource attribute service.name, a ScopeSpans with scope "pyroshim" /
 * PS_VERSION, and one Span:
 *   trace_id, span_id; parent_span_id only if sp->has_parent; trace_state
 *   only if non-empty; name; kind INTERNAL; start/end times;
 *   flags = W3C flags | HAS_IS_REMOTE | (IS_REMOTE if it has a parent);
 *   attributes process.pid (int), process.executable.name (string),
 *   process.command_args (string array), process.exit.code (int),
 *   pyroscope.profile.id (the span id, 16 lowercase hex);
 *   status ERROR with message "exit code N" if sp->exit_code != 0,
 *   otherwise no status (which OTLP defines as UNSET).
 * Nothing is truncated: strings go out whole or the call fails.
 * Returns 0; -E2BIG (out's cap reached) or -ENOMEM, with *out restored to
 * its length before the call; -EINVAL (NULL argument, empty service name,
 * argc < 0, a NULL argv[i], or a nanopb encoding error).
 * Context: any thread, normally the uploader thread; allocates (through
 * *out). */
int ps_otlp_encode_span(const struct ps_span *sp,
			const struct ps_otlp_resource *res,
			struct ps_buf *out) PS_WUR;

struct ps_otlp_header {
	const char *name;       /* NUL-terminated, inside the caller's storage */
	const char *value;      /* likewise; percent-decoded */
};

/* Parse OTEL_EXPORTER_OTLP_HEADERS, `name=value,name2=value2`.
 * Spaces and tabs around members, names and values are trimmed; values are
 * percent-decoded (%XX, either case; '+' stays '+'); names are kept as
 * written.  Empty members (",,", a trailing ',') are ignored.
 * A member is skipped, and counted, when: it has no '='; its name is empty
 * or has a character that is not an HTTP token character (RFC 9110 tchar);
 * its value is empty after trimming, has a malformed %-escape, or decodes
 * to a control character (CR, LF, NUL, ...; a tab is allowed); or it does
 * not fit (already `max` headers, or storage exhausted).
 * On return out[0..*n) are the accepted headers, in input order, pointing
 * into storage.  storage_len >= strlen(s) + 1 always suffices.
 * s NULL is the empty list.
 * Returns the number of skipped members (>= 0, so the caller can warn once),
 * or -EINVAL (n NULL, out NULL with max > 0, storage NULL with
 * storage_len > 0).
 * Context: any thread; does not allocate. */
int ps_otlp_parse_headers(const char *s, struct ps_otlp_header *out,
			  size_t max, size_t *n, char *storage,
			  size_t storage_len) PS_WUR;

#endif
