/* remote.c -- requests for Pyroscope and for the OTLP endpoint.
 * See remote.h. */
#include "uploader/remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uploader/ingest.h"
#include "uploader/push.h"
#include "common/log.h"
#include "common/text.h"

#define BODY_CAP (32u << 20)

static void
tags_setup(struct ps_remote *r, const struct ps_config *c, const struct ps_span *sp, int *bad)
{
	struct ps_report rep = { 0 };
	char hex[40];
	unsigned i;

	if (ps_tags_parse(&r->tags, c->tags, &rep) < 0 || rep.dropped) {
		char why[256] = "";
		size_t n = 0;

		for (i = 0; i < rep.listed && n < sizeof(why); i++)
			n += (size_t)snprintf(why + n, sizeof(why) - n, "%s%s (%s)", i ? ", " : "",
					      rep.item[i].name, ps_tags_drop_str(rep.item[i].why));
		ps_log_config("PYROSCOPE_TAGS: dropped %u tag(s): %s; using the others",
			      rep.dropped, why);
		(*bad)++;
	}
	if (!sp)
		return;
	/* The seed's correlation tags: appended once, never overwriting. */
	if (ps_span_trace_id_hex(sp, hex, sizeof(hex)) == 0 &&
	    ps_tags_add(&r->tags, "trace_id", hex) < 0)
		ps_debug("trace_id tag not added");
	if (ps_span_span_id_hex(sp, hex, sizeof(hex)) == 0 &&
	    ps_tags_add(&r->tags, "root_span_id", hex) < 0)
		ps_debug("root_span_id tag not added");
}

static void
headers_setup(struct ps_remote *r, const struct ps_config *c, int *bad)
{
	struct ps_report rep;
	unsigned n = 0, i;
	int rc;

	rc = ps_headers_parse_json(c->http_headers, &r->hdrs, &rep);
	if (rc < 0) {
		ps_log_config("PYROSCOPE_HTTP_HEADERS: not a JSON object of strings; using none");
		(*bad)++;
	} else if (rep.dropped) {
		ps_log_config("PYROSCOPE_HTTP_HEADERS: dropped %u header(s), the first %s (%s); "
			      "using the others", rep.dropped, rep.item[0].name,
			      ps_headers_drop_str(rep.item[0].why));
		(*bad)++;
	}
	if (c->tenant[0]) {
		snprintf(r->tenant_line, sizeof(r->tenant_line), "X-Scope-OrgID: %s", c->tenant);
		r->lines[n++] = r->tenant_line;
	}
	if (r->push)
		r->lines[n++] = "Connect-Protocol-Version: 1";
	for (i = 0; i < r->hdrs.n && n < PS_HTTP_MAX_HEADERS; i++)
		r->lines[n++] = ps_headers_line(&r->hdrs, i);  /* user headers last */
	r->up.pyro.headers = r->lines;
	r->up.pyro.nheaders = n;
}

int
ps_remote_otlp_on(const struct ps_config *c)
{
	return c->otlp_endpoint[0] && !c->otlp_disabled;
}

static void
otlp_setup(struct ps_remote *r, const struct ps_config *c, int *bad)
{
	struct ps_otlp_header h[32];
	size_t n = 0, i, off = 0;
	int skipped;

	if (!ps_remote_otlp_on(c))
		return;
	snprintf(r->otlp_url, sizeof(r->otlp_url), "%s", c->otlp_endpoint);
	skipped = ps_otlp_parse_headers(c->otlp_headers, h, PS_ARRAY_LEN(h), &n, r->otlp_store,
					sizeof(r->otlp_store));
	if (skipped > 0) {
		ps_log_config("OTEL_EXPORTER_OTLP_HEADERS: %d member(s) not name=value; using the others",
			      skipped);
		(*bad)++;
	}
	for (i = 0; i < n && skipped >= 0; i++) {
		int w = snprintf(r->otlp_text + off, sizeof(r->otlp_text) - off, "%s: %s",
				 h[i].name, h[i].value);
		if (w < 0 || (size_t)w >= sizeof(r->otlp_text) - off)
			break;
		r->otlp_lines[i] = r->otlp_text + off;
		off += (size_t)w + 1;
	}
	r->up.otlp.headers = r->otlp_lines;
	r->up.otlp.nheaders = i;
}

int
ps_remote_setup(struct ps_remote *r, const struct ps_config *c, const struct ps_span *sp,
		uint64_t start_ns)
{
	int bad = 0;

	r->last_until_ns = start_ns;
	r->folded = c->ingest_folded;
	r->push = c->upload_push;
	r->sample_rate = c->sample_rate;
	r->alloc_mean = c->alloc_sample_bytes;
	(void)ps_cat(r->ca_file, sizeof(r->ca_file), 0, c->ca_file);
	r->up.ca_file = r->ca_file[0] ? r->ca_file : NULL;
	r->up.insecure = c->tls_insecure;
	r->up.rng = start_ns | 1;
	otlp_setup(r, c, &bad);
	/* Also without a server: the span's service.name is the sanitised
	 * name, and a service_name tag overrides it. */
	if (ps_app_name_sanitize(c->app_name, r->app, sizeof(r->app)) == 1)
		ps_info("application name sent as %s", r->app);
	tags_setup(r, c, sp, &bad);
	if (!c->server[0])
		return bad;
	if (ps_ingest_split_url(c->server, r->base, sizeof(r->base), r->user, sizeof(r->user),
				r->pass, sizeof(r->pass))) {
		char shown[96];

		ps_config_url_shown(c->server, shown, sizeof(shown));
		ps_log_config("PYROSCOPE_SERVER_ADDRESS=%s: expected http(s)://host[:port][/prefix]; "
			      "using local files only", shown);
		return bad + 1;
	}
	if (c->auth_user[0] || c->auth_password[0]) {
		snprintf(r->user, sizeof(r->user), "%s", c->auth_user);
		snprintf(r->pass, sizeof(r->pass), "%s", c->auth_password);
	}
	if (r->user[0] || r->pass[0]) {
		r->up.pyro.user = r->user;
		r->up.pyro.password = r->pass;
	}
	snprintf(r->bearer, sizeof(r->bearer), "%s", c->auth_token);
	r->up.pyro.bearer = r->bearer[0] ? r->bearer : NULL;
	if (c->tls_insecure)
		ps_log_config("PYROSCOPE_TLS_INSECURE=true: TLS certificates are not verified");
	if (r->push && r->folded) {
		ps_log_config("PYROSCOPE_INGEST_FORMAT=folded: the push API takes pprof only; "
			      "sending pprof");
		r->folded = 0;
		bad++;
	}
	headers_setup(r, c, &bad);
	if (ps_tags_format_name(r->app, NULL, &r->tags, r->name, sizeof(r->name))) {
		ps_log_config("PYROSCOPE_TAGS: the series name is too long; using no tags");
		memset(&r->tags, 0, sizeof(r->tags));
		if (ps_tags_format_name(r->app, NULL, &r->tags, r->name, sizeof(r->name)))
			return bad + 1;
		bad++;
	}
	r->on = 1;
	return bad;
}

static int
grow_prev(struct ps_remote *r, uint32_t n)
{
	uint32_t nc = r->prev_cap ? r->prev_cap : 256;
	void *p;

	if (n <= r->prev_cap)
		return 0;
	while (nc < n)
		nc *= 2;
	p = realloc(r->prev, (size_t)nc * sizeof(*r->prev));
	if (!p)
		return -ENOMEM;
	memset((int64_t(*)[PS_F_NVALUES])p + r->prev_cap, 0,
	       (size_t)(nc - r->prev_cap) * sizeof(*r->prev));
	r->prev = p;
	r->prev_cap = nc;
	return 0;
}

static int
same_tags(const struct ps_tags *a, const struct ps_tags *b)
{
	unsigned i;

	if (a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->tag[i].key, b->tag[i].key) ||
		    (strcmp(a->tag[i].value, b->tag[i].value) &&
		     strcmp(a->tag[i].key, "root_span_id")))
			return 0;
	return 1;
}

int
ps_remote_same(const struct ps_remote *a, const struct ps_remote *b)
{
	unsigned i;

	if (a->on != b->on)
		return 0;
	if (!a->on)
		return 1;
	if (strcmp(a->base, b->base) || strcmp(a->user, b->user) || strcmp(a->pass, b->pass) ||
	    strcmp(a->bearer, b->bearer) || strcmp(a->ca_file, b->ca_file) ||
	    strcmp(a->app, b->app) || a->folded != b->folded || a->push != b->push ||
	    a->sample_rate != b->sample_rate || a->alloc_mean != b->alloc_mean ||
	    a->up.insecure != b->up.insecure || a->up.pyro.nheaders != b->up.pyro.nheaders ||
	    !same_tags(&a->tags, &b->tags))
		return 0;
	for (i = 0; i < a->up.pyro.nheaders; i++)
		if (strcmp(a->up.pyro.headers[i], b->up.pyro.headers[i]))
			return 0;
	return 1;
}

int64_t (*ps_remote_interval(struct ps_remote *r, const struct ps_fold *f))[PS_F_NVALUES]
{
	int64_t (*d)[PS_F_NVALUES];
	uint32_t i;
	int k;

	if (grow_prev(r, f->n))
		return NULL;
	d = calloc(f->n ? f->n : 1, sizeof(*d));
	if (!d)
		return NULL;
	for (i = 0; i < f->n; i++) {
		for (k = 0; k < PS_F_NVALUES; k++)
			d[i][k] = f->e[i].v[k] - r->prev[i][k];
		d[i][PS_F_INUSE_OBJS] = f->e[i].v[PS_F_INUSE_OBJS];
		d[i][PS_F_INUSE_BYTES] = f->e[i].v[PS_F_INUSE_BYTES];
	}
	return d;
}

void
ps_remote_commit(struct ps_remote *r, const struct ps_fold *f)
{
	uint32_t i;

	/* ps_remote_interval grew prev to f->n, and f only grows. */
	for (i = 0; i < f->n && i < r->prev_cap; i++)
		memcpy(r->prev[i], f->e[i].v, sizeof(r->prev[i]));
}

/* A request that could not be built: counted, and said at debug level
 * (the profile's comments show the count). */
static int
dropped(struct ps_remote *r, const char *what, int rc)
{
	r->up.dropped++;
	ps_debug("%s profile not queued: %s", what, strerror(-rc));
	return rc;
}

static int
queue_request(struct ps_remote *r, const struct ps_ingest_query *q, struct ps_buf *body,
	      const char *ctype, const char *what)
{
	struct ps_buf url = PS_BUF_INIT(64 << 10);
	int rc = ps_ingest_url(r->base, q, &url);

	if (rc) {
		ps_buf_free(&url);
		ps_buf_free(body);
		return dropped(r, what, rc);
	}
	return ps_upload_enqueue(&r->up, (char *)url.data, ctype, body, what, 0);
}

/* The push API: one series, this profile (remote.h). */
static int
queue_push(struct ps_remote *r, const struct ps_family *fam, const struct ps_buf *pb)
{
	struct ps_push_label l[PS_PUSH_MAX_LABELS];
	struct ps_buf body = PS_BUF_INIT(BODY_CAP + 65536);
	unsigned dropped;
	size_t n = ps_push_labels(fam->metric, r->app,
				  &r->tags, l, &dropped);
	char *url;
	int rc;

	if (dropped && !r->push_warned) {
		ps_warn("push API: %u tag(s) left out (a repeated name once '.' is '_', a name "
			"starting with a digit, or more than %d labels)", dropped, PS_PUSH_MAX_LABELS);
		r->push_warned = 1;
	}
	rc = ps_push_request(l, n, pb->data, pb->len, &body);
	if (rc || asprintf(&url, "%s%s", r->base, PS_PUSH_PATH) < 0) {
		ps_buf_free(&body);
		return rc ? rc : -ENOMEM;
	}
	return ps_upload_enqueue(&r->up, url, "application/proto", &body, fam->kind, 0);
}

static int
queue_pprof(struct ps_remote *r, const struct ps_profile_part *parts, size_t nparts,
	    const struct ps_family *fam, const struct ps_profile_meta *m,
	    struct ps_ingest_query *q)
{
	struct ps_buf pb = PS_BUF_INIT(BODY_CAP), body = PS_BUF_INIT(BODY_CAP + 4096);
	char ctype[96];
	int rc;

	rc = ps_profile_encode_parts(parts, nparts, fam, m, &pb);
	if (!rc && r->push) {
		rc = queue_push(r, fam, &pb);
		ps_buf_free(&pb);
		ps_buf_free(&body);
		return rc;
	}
	if (!rc)
		rc = ps_ingest_multipart(pb.data, pb.len, fam->type_config, &body, ctype,
					 sizeof(ctype));
	ps_buf_free(&pb);
	if (rc) {
		ps_buf_free(&body);
		return dropped(r, fam->kind, rc);
	}
	q->name = r->name;
	return queue_request(r, q, &body, ctype, fam->kind);
}

static int
queue_folded(struct ps_remote *r, const struct ps_profile_part *parts, size_t nparts,
	     const struct ps_series *s, uint64_t until_ns)
{
	struct ps_ingest_query q = { .from_ns = r->last_until_ns, .until_ns = until_ns,
				     .spy_name = "pyroshim", .format = "folded",
				     .sample_rate = s->sample_rate, .units = s->units,
				     .aggregation = s->aggregation };
	struct ps_buf body = PS_BUF_INIT(BODY_CAP);
	char name[sizeof(r->name)];
	int rc = ps_profile_folded(parts, nparts, s, &body);

	if (rc || body.len == 0) {
		ps_buf_free(&body);
		return rc ? dropped(r, s->type, rc) : 0;
	}
	rc = ps_tags_format_name(r->app, s->type, &r->tags, name, sizeof(name));
	if (rc) {
		ps_buf_free(&body);
		return dropped(r, s->type, rc);
	}
	q.name = name;
	return queue_request(r, &q, &body, "text/plain", s->type);
}

static int
queue_family(struct ps_remote *r, const struct ps_profile_part *parts, size_t nparts,
	     const struct ps_profile_meta *m, const struct ps_family *fam, uint64_t until_ns)
{
	struct ps_ingest_query q = { .from_ns = r->last_until_ns, .until_ns = until_ns,
				     .spy_name = "pyroshim", .units = fam->ingest_units,
				     .aggregation = "sum" };
	int rc = 0;

	if (!ps_profile_present(parts, nparts, fam))
		return 0;
	if (r->folded) {
		for (size_t k = 0; k < fam->nseries; k++)
			rc |= queue_folded(r, parts, nparts, &fam->series[k], until_ns);
		return rc ? -EIO : 0;
	}
	if (fam->rate_query)
		q.sample_rate = r->sample_rate;
	return queue_pprof(r, parts, nparts, fam, m, &q);
}

void
ps_remote_defer(struct ps_remote *r)
{
	/* Nothing is lost: the next interval starts where this one did, so
	 * its deltas cover both. */
	r->up.deferred++;
	ps_warn("this interval's uploads go with the next one: out of memory");
}

void
ps_remote_queue_parts(struct ps_remote *r, const struct ps_profile_part *parts, size_t nparts,
		      const int *on, const struct ps_profile_meta *meta, uint64_t now_ns)
{
	struct ps_profile_meta m = *meta;
	uint32_t i;
	int rc = 0;

	if (!r->on)
		return;
	m.time_nanos = (int64_t)r->last_until_ns;
	m.duration_nanos = (int64_t)(now_ns - r->last_until_ns);
	for (i = 0; i < PS_NFAMILIES; i++) {
		const struct ps_family *fam = ps_families[i];

		if (!on[fam->id])
			continue;
		m.period = ps_family_period(fam, r->sample_rate, r->alloc_mean);
		rc |= queue_family(r, parts, nparts, &m, fam, now_ns);
	}
	if (rc)
		ps_warn("some profiles of this interval could not be queued");
	r->last_until_ns = now_ns;
}

void
ps_remote_queue(struct ps_remote *r, const struct ps_fold *f, const int *on,
		const struct ps_profile_meta *meta, uint64_t now_ns)
{
	struct ps_profile_part part = { f, NULL, 0 };

	if (!r->on)
		return;
	part.vals = (const int64_t(*)[PS_F_NVALUES])ps_remote_interval(r, f);
	if (!part.vals) {
		ps_remote_defer(r);
		return;
	}
	ps_remote_queue_parts(r, &part, 1, on, meta, now_ns);
	free((void *)part.vals);
	/* What was queued (or could not be) belongs to this interval. */
	ps_remote_commit(r, f);
}

void
ps_remote_queue_span(struct ps_remote *r, const struct ps_span *sp,
		     const struct ps_otlp_resource *res)
{
	struct ps_buf body = PS_BUF_INIT(1 << 20);
	char *url;
	int rc;

	if (!r->otlp_url[0] || !sp)
		return;
	rc = ps_otlp_encode_span(sp, res, &body);
	url = strdup(r->otlp_url);
	if (rc || !url) {
		ps_warn("the run's span could not be encoded: %s", strerror(rc ? -rc : ENOMEM));
		free(url);
		ps_buf_free(&body);
		r->up.dropped++;
		return;
	}
	(void)ps_upload_enqueue(&r->up, url, "application/x-protobuf", &body, "span", 1);
}

void
ps_remote_free(struct ps_remote *r)
{
	ps_upload_free(&r->up);
	free(r->prev);
	r->prev = NULL;
	r->prev_cap = 0;
}

void
ps_remote_abandon(struct ps_remote *r, uint64_t start_ns)
{
	ps_upload_abandon(&r->up);
	r->prev = NULL;
	r->prev_cap = 0;
	r->last_until_ns = start_ns;
}
