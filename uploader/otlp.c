/* otlp.c -- encode the run's root span as an OTLP ExportTraceServiceRequest.
 *
 * The nanopb structs generated from trace/otlp.proto hold every string,
 * bytes and repeated field as a callback, so the encoder borrows the
 * caller's data instead of copying it into fixed arrays: nothing has a size
 * limit but the output buffer's cap, and nothing is cut short.  The
 * callbacks below build each submessage on the stack when nanopb asks for
 * it.  nanopb calls each one twice (once to size the submessage, once to
 * write it), so they only read their arguments.
 *
 * Bytes go straight into the caller's ps_buf through a pb_ostream_t; a cap
 * or allocation failure is remembered in the stream state and reported as
 * that errno rather than nanopb's bare `false`.
 *
 * The OTEL_EXPORTER_OTLP_HEADERS parser lives here too, since the two are
 * only ever used together by the trace exporter.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <pb_encode.h>

#include "uploader/otlp.h"
#include "common/text.h"
#include "otlp.pb.h"

/* ---- output stream into a ps_buf -------------------------------------- */

struct out_state {
	struct ps_buf *buf;
	int err;                /* first ps_buf error, or 0 */
};

static bool
write_buf(pb_ostream_t *stream, const pb_byte_t *p, size_t n)
{
	struct out_state *st = stream->state;
	int rc = ps_buf_append(st->buf, p, n);

	if (rc) {
		st->err = rc;
		return false;
	}
	return true;
}

/* ---- leaf callbacks ---------------------------------------------------- */

/* One submessage of a repeated or message field: its tag, then msg. */
static bool
put_sub(pb_ostream_t *stream, const pb_field_t *field, const pb_msgdesc_t *fields,
	const void *msg)
{
	return pb_encode_tag_for_field(stream, field) &&
	       pb_encode_submessage(stream, fields, msg);
}

struct bytes_arg {
	const void *p;
	size_t n;
};

static bool
enc_bytes(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)
{
	const struct bytes_arg *b = *arg;

	return pb_encode_tag_for_field(stream, field) &&
	       pb_encode_string(stream, b->p, b->n);
}

/* arg: a NUL-terminated string. */
static bool
enc_str(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)
{
	const char *s = *arg;

	return pb_encode_tag_for_field(stream, field) &&
	       pb_encode_string(stream, (const pb_byte_t *)s, strlen(s));
}

static void
set_str(pb_callback_t *cb, const char *s)
{
	cb->funcs.encode = enc_str;
	cb->arg = (void *)s;
}

static void
set_bytes(pb_callback_t *cb, struct bytes_arg *b)
{
	cb->funcs.encode = enc_bytes;
	cb->arg = b;
}

/* ---- attributes ---------------------------------------------------------- */

enum attr_kind { ATTR_STR, ATTR_INT, ATTR_STRV };

struct attr {
	const char *key;
	enum attr_kind kind;
	const char *s;                  /* ATTR_STR */
	int64_t i;                      /* ATTR_INT */
	const char *const *v;           /* ATTR_STRV: vn strings */
	int vn;
};

struct attr_list {
	const struct attr *a;
	size_t n;
};

/* ArrayValue.values for an ATTR_STRV attribute; arg: the struct attr. */
static bool
enc_strv(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)
{
	const struct attr *at = *arg;

	for (int i = 0; i < at->vn; i++) {
		ps_otlp_pb_AnyValue v = ps_otlp_pb_AnyValue_init_zero;

		v.which_value = ps_otlp_pb_AnyValue_string_value_tag;
		set_str(&v.value.string_value, at->v[i]);
		if (!put_sub(stream, field, ps_otlp_pb_AnyValue_fields, &v))
			return false;
	}
	return true;
}

static void
fill_value(ps_otlp_pb_AnyValue *v, const struct attr *at)
{
	switch (at->kind) {
	case ATTR_STR:
		v->which_value = ps_otlp_pb_AnyValue_string_value_tag;
		set_str(&v->value.string_value, at->s);
		break;
	case ATTR_INT:
		v->which_value = ps_otlp_pb_AnyValue_int_value_tag;
		v->value.int_value = at->i;
		break;
	case ATTR_STRV:
		v->which_value = ps_otlp_pb_AnyValue_array_value_tag;
		v->value.array_value.values.funcs.encode = enc_strv;
		v->value.array_value.values.arg = (void *)at;
		break;
	}
}

/* A repeated KeyValue field; arg: a struct attr_list. */
static bool
enc_attrs(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)
{
	const struct attr_list *l = *arg;

	for (size_t i = 0; i < l->n; i++) {
		ps_otlp_pb_KeyValue kv = ps_otlp_pb_KeyValue_init_zero;

		set_str(&kv.key, l->a[i].key);
		kv.has_value = true;
		fill_value(&kv.value, &l->a[i]);
		if (!put_sub(stream, field, ps_otlp_pb_KeyValue_fields, &kv))
			return false;
	}
	return true;
}

/* ---- the request --------------------------------------------------------- */

#define SPAN_ATTRS_MAX 5

/* Everything the callbacks borrow, alive for one ps_otlp_encode_span(). */
struct enc_ctx {
	const struct ps_span *sp;
	struct bytes_arg trace_id, span_id, parent_id;
	char profile_id[17];            /* span id, 16 hex + NUL */
	char status_msg[32];            /* "exit code N" */
	struct attr res_attr;
	struct attr_list res_attrs;
	struct attr span_attr[SPAN_ATTRS_MAX];
	struct attr_list span_attrs;
};

static void
fill_span(ps_otlp_pb_Span *s, struct enc_ctx *c)
{
	const struct ps_span *sp = c->sp;

	set_bytes(&s->trace_id, &c->trace_id);
	set_bytes(&s->span_id, &c->span_id);
	if (sp->has_parent)
		set_bytes(&s->parent_span_id, &c->parent_id);
	if (sp->tracestate[0])
		set_str(&s->trace_state, sp->tracestate);
	set_str(&s->name, sp->name);
	s->kind = ps_otlp_pb_Span_SpanKind_SPAN_KIND_INTERNAL;
	s->start_time_unix_nano = sp->start_ns;
	s->end_time_unix_nano = sp->end_ns;
	s->flags = sp->flags | PS_OTLP_FLAG_HAS_IS_REMOTE |
		   (sp->has_parent ? PS_OTLP_FLAG_IS_REMOTE : 0);
	s->attributes.funcs.encode = enc_attrs;
	s->attributes.arg = &c->span_attrs;
	if (sp->exit_code != 0) {
		s->has_status = true;
		s->status.code = ps_otlp_pb_Status_StatusCode_STATUS_CODE_ERROR;
		set_str(&s->status.message, c->status_msg);
	}
}

/* ScopeSpans.spans: the one span; arg: struct enc_ctx. */
static bool
enc_spans(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)
{
	ps_otlp_pb_Span s = ps_otlp_pb_Span_init_zero;

	fill_span(&s, *arg);
	return put_sub(stream, field, ps_otlp_pb_Span_fields, &s);
}

/* ResourceSpans.scope_spans: one scope; arg: struct enc_ctx. */
static bool
enc_scope_spans(pb_ostream_t *stream, const pb_field_t *field,
		void *const *arg)
{
	ps_otlp_pb_ScopeSpans ss = ps_otlp_pb_ScopeSpans_init_zero;

	ss.has_scope = true;
	set_str(&ss.scope.name, PS_OTLP_SCOPE_NAME);
	set_str(&ss.scope.version, PS_VERSION);
	ss.spans.funcs.encode = enc_spans;
	ss.spans.arg = *arg;
	return put_sub(stream, field, ps_otlp_pb_ScopeSpans_fields, &ss);
}

/* ExportTraceServiceRequest.resource_spans: one; arg: struct enc_ctx. */
static bool
enc_resource_spans(pb_ostream_t *stream, const pb_field_t *field,
		   void *const *arg)
{
	ps_otlp_pb_ResourceSpans rs = ps_otlp_pb_ResourceSpans_init_zero;
	struct enc_ctx *c = *arg;

	rs.has_resource = true;
	rs.resource.attributes.funcs.encode = enc_attrs;
	rs.resource.attributes.arg = &c->res_attrs;
	rs.scope_spans.funcs.encode = enc_scope_spans;
	rs.scope_spans.arg = c;
	return put_sub(stream, field, ps_otlp_pb_ResourceSpans_fields, &rs);
}

static struct attr
attr_int(const char *key, int64_t i)
{
	return (struct attr){ .key = key, .kind = ATTR_INT, .i = i };
}

static struct attr
attr_str(const char *key, const char *s)
{
	return (struct attr){ .key = key, .kind = ATTR_STR, .s = s };
}

static void
build_attrs(struct enc_ctx *c, const struct ps_otlp_resource *res)
{
	struct attr *a = c->span_attr;
	size_t n = 0;

	c->res_attr = attr_str("service.name", res->service_name);
	c->res_attrs = (struct attr_list){ &c->res_attr, 1 };
	a[n++] = attr_int("process.pid", res->pid);
	if (res->executable_name)
		a[n++] = attr_str("process.executable.name",
				  res->executable_name);
	a[n++] = (struct attr){ .key = "process.command_args",
				.kind = ATTR_STRV, .v = res->argv,
				.vn = res->argc };
	a[n++] = attr_int("process.exit.code", c->sp->exit_code);
	a[n++] = attr_str("pyroscope.profile.id", c->profile_id);
	c->span_attrs = (struct attr_list){ a, n };
}

static int
check_args(const struct ps_span *sp, const struct ps_otlp_resource *res,
	   const struct ps_buf *out)
{
	if (!sp || !res || !out || !res->service_name ||
	    !res->service_name[0] || res->argc < 0 ||
	    (res->argc > 0 && !res->argv))
		return -EINVAL;
	for (int i = 0; i < res->argc; i++)
		if (!res->argv[i])
			return -EINVAL;
	return 0;
}

int
ps_otlp_encode_span(const struct ps_span *sp,
		    const struct ps_otlp_resource *res, struct ps_buf *out)
{
	ps_otlp_pb_ExportTraceServiceRequest req =
		ps_otlp_pb_ExportTraceServiceRequest_init_zero;
	struct out_state st = { out, 0 };
	pb_ostream_t os = { .callback = write_buf, .state = &st,
			    .max_size = SIZE_MAX };
	struct enc_ctx c = { .sp = sp };
	size_t start;
	int rc = check_args(sp, res, out);

	if (rc)
		return rc;
	start = out->len;
	c.trace_id = (struct bytes_arg){ sp->trace_id, sizeof(sp->trace_id) };
	c.span_id = (struct bytes_arg){ sp->span_id, sizeof(sp->span_id) };
	c.parent_id = (struct bytes_arg){ sp->parent_span_id,
					  sizeof(sp->parent_span_id) };
	ps_hex_encode(sp->span_id, sizeof(sp->span_id), c.profile_id);
	snprintf(c.status_msg, sizeof(c.status_msg), "exit code %d",
		 sp->exit_code);
	build_attrs(&c, res);
	req.resource_spans.funcs.encode = enc_resource_spans;
	req.resource_spans.arg = &c;
	if (pb_encode(&os, ps_otlp_pb_ExportTraceServiceRequest_fields, &req))
		return 0;
	out->len = start;
	return st.err ? st.err : -EINVAL;
}

/* ---- OTEL_EXPORTER_OTLP_HEADERS ------------------------------------------ */

struct span_ref {
	const char *p;
	size_t n;
};

static struct span_ref
trim(const char *b, const char *e)
{
	size_t n = (size_t)(e - b);

	ps_trim(&b, &n, ps_is_ows);
	return (struct span_ref){ b, n };
}

static int
token_ok(struct span_ref k)
{
	if (k.n == 0)
		return 0;
	for (size_t i = 0; i < k.n; i++)
		if (!ps_is_tchar(k.p[i]))
			return 0;
	return 1;
}

struct hdr_sink {
	struct ps_otlp_header *out;
	size_t max, *n;
	char *store;
	size_t used, len;
};

/* Accept or reject one non-empty member m.  Returns 1 if skipped. */
static int
take_member(struct hdr_sink *k, struct span_ref m)
{
	const char *eq = memchr(m.p, '=', m.n);
	struct span_ref key, val;
	char *kd, *vd;

	if (!eq)
		return 1;
	key = trim(m.p, eq);
	val = trim(eq + 1, m.p + m.n);
	if (!token_ok(key) || val.n == 0)
		return 1;
	if (*k->n >= k->max || k->len - k->used < key.n + val.n + 2)
		return 1;
	kd = k->store + k->used;
	vd = kd + key.n + 1;
	memcpy(kd, key.p, key.n);
	kd[key.n] = '\0';
	if (ps_pct_decode(val.p, val.n, vd, val.n + 1, 1) < 0)
		return 1;
	k->used += key.n + 1 + strlen(vd) + 1;
	k->out[*k->n] = (struct ps_otlp_header){ kd, vd };
	(*k->n)++;
	return 0;
}

int
ps_otlp_parse_headers(const char *s, struct ps_otlp_header *out, size_t max,
		      size_t *n, char *storage, size_t storage_len)
{
	struct hdr_sink k = { out, max, n, storage, 0, storage_len };
	int skipped = 0;

	if (!n || (max > 0 && !out) || (storage_len > 0 && !storage))
		return -EINVAL;
	*n = 0;
	if (!s)
		return 0;
	for (const char *p = s;;) {
		const char *end = strchrnul(p, ',');
		struct span_ref m = trim(p, end);

		if (m.n > 0 && take_member(&k, m))
			skipped++;
		if (*end == '\0')
			return skipped;
		p = end + 1;
	}
}
