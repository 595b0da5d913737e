/* span.c -- start, end and propagate the run's root span.
 *
 * The W3C rules decide what survives from the environment: a valid
 * traceparent is joined (trace id and parent kept, only the flag bits this
 * version defines kept), tracestate travels only with a valid traceparent,
 * and anything invalid is replaced by a fresh random trace.  Names are cut
 * on a UTF-8 character boundary so that an exporter never sees half a
 * character.
 */
#include <errno.h>
#include <string.h>

#include "trace/span.h"

#define SPAN_SUFFIX ".run"
#define SPAN_DEFAULT_BASE "process"

/* Length of the longest prefix of s[0..n) that is at most max bytes and
 * does not end inside a UTF-8 sequence. */
static size_t
utf8_cut(const char *s, size_t n, size_t max)
{
	if (n <= max)
		return n;
	/* s[max] is the first byte dropped; while it continues a sequence,
	 * the sequence started before the cut and must go too. */
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

/* Copy s[0..n) cut to at most max bytes into dst, NUL-terminate, return
 * the bytes written (without the NUL). */
static size_t
copy_cut(char *dst, const char *s, size_t n, size_t max)
{
	size_t k = utf8_cut(s, n, max);

	memcpy(dst, s, k);
	dst[k] = '\0';
	return k;
}

static void
set_name(struct ps_span *sp, const char *app_name, const char *override)
{
	const size_t room = sizeof(sp->name) - 1;
	const char *base = SPAN_DEFAULT_BASE;
	size_t k;

	if (override && override[0]) {
		copy_cut(sp->name, override, strlen(override), room);
		return;
	}
	if (app_name) {
		const char *dot = strrchr(app_name, '.');
		const char *last = dot ? dot + 1 : app_name;

		if (last[0])
			base = last;
	}
	k = copy_cut(sp->name, base, strlen(base),
		     room - (sizeof(SPAN_SUFFIX) - 1));
	memcpy(sp->name + k, SPAN_SUFFIX, sizeof(SPAN_SUFFIX));
}

/* Join the trace of a valid incoming traceparent. */
static void
join(struct ps_span *sp, const struct ps_traceparent *tp,
     const char *tracestate_env)
{
	memcpy(sp->trace_id, tp->trace_id, sizeof(sp->trace_id));
	memcpy(sp->parent_span_id, tp->span_id, sizeof(sp->parent_span_id));
	sp->has_parent = 1;
	/* Level 2 defines only sampled and random; other bits are cleared. */
	sp->flags = tp->flags & (PS_TRACE_FLAG_SAMPLED | PS_TRACE_FLAG_RANDOM);
	if (tracestate_env && ps_tracestate_valid(tracestate_env))
		memcpy(sp->tracestate, tracestate_env,
		       strlen(tracestate_env) + 1);
}

int
ps_span_start(struct ps_span *sp, const char *traceparent_env,
	      const char *tracestate_env, const char *app_name,
	      const char *span_name_override, uint64_t now_ns,
	      int *warned_invalid)
{
	struct ps_traceparent tp;
	int rc;

	if (!sp)
		return -EINVAL;
	memset(sp, 0, sizeof(*sp));
	sp->start_ns = now_ns;
	set_name(sp, app_name, span_name_override);
	rc = ps_trace_random(sp->span_id, sizeof(sp->span_id));
	if (rc)
		return rc;
	if (traceparent_env && ps_traceparent_parse(traceparent_env, &tp) == 0) {
		join(sp, &tp, tracestate_env);
		return 0;
	}
	if (traceparent_env && warned_invalid)
		*warned_invalid = 1;
	sp->flags = PS_TRACE_FLAG_SAMPLED | PS_TRACE_FLAG_RANDOM;
	return ps_trace_random(sp->trace_id, sizeof(sp->trace_id));
}

void
ps_span_end(struct ps_span *sp, uint64_t now_ns, int exit_code)
{
	sp->end_ns = now_ns;
	sp->exit_code = exit_code;
}

int
ps_span_child_traceparent(const struct ps_span *sp, char *buf, size_t len)
{
	struct ps_traceparent tp;

	if (!sp)
		return -EINVAL;
	memcpy(tp.trace_id, sp->trace_id, sizeof(tp.trace_id));
	memcpy(tp.span_id, sp->span_id, sizeof(tp.span_id));
	tp.flags = sp->flags;
	return ps_traceparent_format(&tp, buf, len);
}

/* id[0..n) as hex into buf[0..len). */
static int
id_hex(const uint8_t *id, size_t n, char *buf, size_t len)
{
	if (!buf)
		return -EINVAL;
	if (len < 2 * n + 1)
		return -ENOSPC;
	ps_hex_encode(id, n, buf);
	return 0;
}

int
ps_span_trace_id_hex(const struct ps_span *sp, char *buf, size_t len)
{
	return sp ? id_hex(sp->trace_id, sizeof(sp->trace_id), buf, len) : -EINVAL;
}

int
ps_span_span_id_hex(const struct ps_span *sp, char *buf, size_t len)
{
	return sp ? id_hex(sp->span_id, sizeof(sp->span_id), buf, len) : -EINVAL;
}
