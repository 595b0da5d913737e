/* fuzz_span.c -- libFuzzer target for ps_span_start() (trace/span.c).
 *
 * Input: a flags byte, then up to four NUL-separated strings: TRACEPARENT,
 * TRACESTATE, the application name and the span-name override.  Bit i of
 * the flags byte makes string i NULL (variable unset) even if present.
 * Invariants, straight from span.h:
 *   - rc == 0, ids never all zero, name NUL-terminated inside name[];
 *   - joined iff the traceparent parses; then the ids and flags come from
 *     it and the tracestate is kept iff valid; otherwise a new trace with
 *     flags sampled|random, no tracestate, *warned set iff one was given;
 *   - the name is a prefix of the override (when non-empty), else
 *     "<last dot part>.run", cut on a UTF-8 boundary: valid UTF-8 in gives
 *     valid UTF-8 out;
 *   - the child traceparent parses back to this trace and this span.
 */
#include <errno.h>

#include "fuzz.h"
#include "trace/span.h"

static void
check_name(const struct ps_span *sp, const char *app, const char *over)
{
	size_t n = strnlen(sp->name, sizeof(sp->name));
	const char *base;

	FUZZ_ASSERT(n < sizeof(sp->name));
	if (over && over[0]) {
		FUZZ_ASSERT(!strncmp(sp->name, over, n));
		/* Valid UTF-8: whole, or cut by less than one character. */
		if (fuzz_utf8_ok((const unsigned char *)over, strlen(over))) {
			FUZZ_ASSERT(n == strlen(over) || n + 4 > sizeof(sp->name) - 1);
			FUZZ_ASSERT(fuzz_utf8_ok((const unsigned char *)sp->name, n));
		}
		return;
	}
	FUZZ_ASSERT(n >= 4 && !strcmp(sp->name + n - 4, ".run"));
	/* The expected base, computed as span.h words it. */
	base = "process";
	if (app) {
		const char *dot = strrchr(app, '.');
		const char *last = dot ? dot + 1 : app;

		if (last[0])
			base = last;
	}
	FUZZ_ASSERT(!strncmp(sp->name, base, n - 4));
	/* Invalid UTF-8 may be cut shorter: the cut backs over every
	 * continuation byte, however many there are. */
	if (fuzz_utf8_ok((const unsigned char *)base, strlen(base))) {
		FUZZ_ASSERT(n - 4 == strlen(base) || n >= sizeof(sp->name) - 4);
		FUZZ_ASSERT(fuzz_utf8_ok((const unsigned char *)sp->name, n));
	}
}

static void
check_ids(const struct ps_span *sp)
{
	static const uint8_t zero[16];
	struct ps_traceparent back;
	char buf[PS_TRACEPARENT_LEN + 1];

	FUZZ_ASSERT(memcmp(sp->trace_id, zero, 16) != 0);
	FUZZ_ASSERT(memcmp(sp->span_id, zero, 8) != 0);
	FUZZ_ASSERT((sp->flags & ~3u) == 0);
	FUZZ_ASSERT(ps_span_child_traceparent(sp, buf, sizeof(buf)) == 0);
	FUZZ_ASSERT(ps_traceparent_parse(buf, &back) == 0);
	FUZZ_ASSERT(!memcmp(back.trace_id, sp->trace_id, 16));
	FUZZ_ASSERT(!memcmp(back.span_id, sp->span_id, 8));
	FUZZ_ASSERT(back.flags == sp->flags);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ps_traceparent tp;
	struct ps_span sp;
	char *f[4];
	const char *tpe, *tse, *app, *over;
	int warned = 0, joined;
	uint8_t nulls;

	if (size < 1)
		return 0;
	nulls = data[0];
	fuzz_split(data + 1, size - 1, f, 4);
	tpe = nulls & 1 ? NULL : f[0];
	tse = nulls & 2 ? NULL : f[1];
	app = nulls & 4 ? NULL : f[2];
	over = nulls & 8 ? NULL : f[3];

	FUZZ_ASSERT(ps_span_start(&sp, tpe, tse, app, over, 42, &warned) == 0);
	FUZZ_ASSERT(sp.start_ns == 42 && sp.end_ns == 0 && sp.exit_code == 0);
	joined = tpe && ps_traceparent_parse(tpe, &tp) == 0;
	FUZZ_ASSERT(sp.has_parent == joined);
	FUZZ_ASSERT(strnlen(sp.tracestate, sizeof(sp.tracestate)) < sizeof(sp.tracestate));
	if (joined) {
		FUZZ_ASSERT(!memcmp(sp.trace_id, tp.trace_id, 16));
		FUZZ_ASSERT(!memcmp(sp.parent_span_id, tp.span_id, 8));
		FUZZ_ASSERT(sp.flags == (tp.flags & 3));
		FUZZ_ASSERT(warned == 0);
		if (tse && ps_tracestate_valid(tse))
			FUZZ_ASSERT(!strcmp(sp.tracestate, tse));
		else
			FUZZ_ASSERT(sp.tracestate[0] == '\0');
	} else {
		FUZZ_ASSERT(sp.flags == 3 && sp.tracestate[0] == '\0');
		FUZZ_ASSERT(warned == (tpe != NULL));
	}
	check_name(&sp, app, over);
	check_ids(&sp);
	fuzz_free_all(f, 4);
	return 0;
}
