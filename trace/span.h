/* span.h -- the one root span pyroshim records per run of a program.
 *
 * At start-up the lead's init code calls ps_span_start() with the
 * TRACEPARENT / TRACESTATE values read by the config module: a valid
 * traceparent makes the run a child of the caller's span (same trace), a
 * missing or invalid one starts a new trace.  The span id doubles as the
 * profile id: samples carry it as the pprof label `span_id`, and the span
 * carries it back as the attribute `pyroscope.profile.id`, which is what
 * lets Grafana jump from the span to the profile.  At exit ps_span_end()
 * records the end time and exit code, and trace/otlp.c encodes the span.
 *
 * Pure and allocation-free, like traceparent.h: the struct is the caller's.
 */
#ifndef PS_SPAN_H
#define PS_SPAN_H

#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"
#include "trace/traceparent.h"

#define PS_SPAN_NAME_MAX 128    /* bytes of name[], including the NUL */

struct ps_span {
	uint8_t trace_id[16];
	uint8_t span_id[8];             /* this run's span; random */
	uint8_t parent_span_id[8];      /* valid only if has_parent */
	int has_parent;                 /* 1: joined a trace from TRACEPARENT */
	uint8_t flags;                  /* W3C trace-flags, bits 0x03 only */
	char name[PS_SPAN_NAME_MAX];    /* NUL-terminated, valid UTF-8 cut */
	char tracestate[PS_TRACESTATE_MAX + 1]; /* "" when none */
	uint64_t start_ns, end_ns;      /* Unix epoch nanoseconds */
	int exit_code;                  /* set by ps_span_end() */
};

/* Initialise *sp for a run starting at now_ns (Unix epoch ns).
 *
 * traceparent_env: the TRACEPARENT value or NULL.  Valid: join that trace
 *   (same trace id, parent = its parent-id, flags = its sampled and random
 *   bits, other bits cleared) and keep tracestate_env if it is valid.
 *   NULL: new trace with a random trace id, flags sampled|random, no
 *   tracestate.  Present but invalid: as NULL, and *warned_invalid is set
 *   to 1 so that the caller logs one warning (it is left alone otherwise;
 *   warned_invalid may be NULL).
 * The span id is always new and random.
 * Name: span_name_override if non-NULL and non-empty, else
 *   "<last dot-separated part of app_name>.run" ("a.b.gen" -> "gen.run";
 *   "process.run" if app_name is NULL or ends in a dot); cut to fit
 *   name[] on a UTF-8 character boundary.
 * end_ns and exit_code start at 0.
 * Returns 0, -EINVAL (sp NULL) or an error of ps_trace_random() (then *sp
 * is unspecified and must not be used).
 * Context: any thread; does not allocate; calls getrandom(2). */
int ps_span_start(struct ps_span *sp, const char *traceparent_env,
		  const char *tracestate_env, const char *app_name,
		  const char *span_name_override, uint64_t now_ns,
		  int *warned_invalid) PS_WUR;

/* Record the end of the run.
 * Context: any thread; async-signal-safe; does not allocate. */
void ps_span_end(struct ps_span *sp, uint64_t now_ns, int exit_code);

/* Format the TRACEPARENT a child process should inherit:
 * "00-<trace id>-<this span's id>-<flags>" plus a NUL (56 bytes).
 * Returns 0, -ENOSPC (len < 56) or -EINVAL (NULL args).
 * Context: any thread; async-signal-safe; does not allocate. */
int ps_span_child_traceparent(const struct ps_span *sp, char *buf,
			      size_t len) PS_WUR;

/* Format the trace id as 32 lowercase hex digits plus a NUL (33 bytes), or
 * the span id as 16 plus a NUL (17 bytes).
 * Returns 0, -ENOSPC (len too small) or -EINVAL (NULL args).
 * Context: any thread; async-signal-safe; does not allocate. */
int ps_span_trace_id_hex(const struct ps_span *sp, char *buf,
			 size_t len) PS_WUR;
int ps_span_span_id_hex(const struct ps_span *sp, char *buf,
			size_t len) PS_WUR;

#endif
