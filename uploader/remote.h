/* remote.h -- what is sent to the Pyroscope server, and the run's span to
 * the OTLP endpoint.
 *
 * Protocol (REFERENCES.md section 1): POST {server}/ingest, one request per
 * profile family and interval, multipart/form-data with the gzipped pprof
 * in field `profile` and no `format` parameter; `from`/`until` in
 * nanoseconds cover exactly the interval the data belongs to.
 *  - CPU is sent as per-interval deltas.
 *  - Allocations: alloc_objects/alloc_space per interval (deltas), and
 *    inuse_objects/inuse_space as the live heap at the end of the interval
 *    (a snapshot, aggregated by average on the server) -- what the Go SDK
 *    sends, and what Pyroscope's /ingest expects (`__delta__="false"`:
 *    the server does not subtract anything itself).
 *  - PYROSCOPE_INGEST_FORMAT=folded sends folded text instead, one request
 *    per type: name=app.cpu{...} (CPU nanoseconds, sampleRate=1000000000 so
 *    the server's 1e9/sampleRate scaling is 1), app.alloc_objects{...},
 *    app.alloc_space{...}, app.inuse_objects{...}, app.inuse_space{...}.
 * Empty profiles are not sent.
 *
 * PYROSCOPE_UPLOAD_API=push sends the same pprof profiles, one request per
 * family and interval, through `POST {server}/push.v1.PusherService/Push`
 * instead (uploader/push.h): labels `__name__` process_cpu or memory,
 * `service_name`, `__delta__="false"`, the tags.  The push API has no
 * from/until: the interval is the profile's time_nanos and duration_nanos.
 * Folded text exists only for /ingest.
 *
 * Context: uploader thread or the exiting thread holding the worker lock.
 */
#ifndef PS_REMOTE_H
#define PS_REMOTE_H

#include <stdint.h>
#include "common/config.h"
#include "uploader/fold.h"
#include "uploader/headers.h"
#include "uploader/otlp.h"
#include "uploader/pprof.h"
#include "uploader/profiles.h"
#include "trace/span.h"
#include "uploader/tags.h"
#include "uploader/upload.h"

struct ps_remote {
	int on;                        /* a valid server is configured */
	char base[PS_CFG_STR];         /* server URL without user-info or '/' */
	char user[256], pass[256];
	char app[256];                 /* sanitised application name */
	struct ps_tags tags;           /* user tags (+ trace tags) */
	char name[8192];               /* app{tags} */
	int folded;
	int push;                      /* PYROSCOPE_UPLOAD_API=push */
	int push_warned;               /* tags left out: said once */
	unsigned sample_rate;
	uint64_t alloc_mean;
	struct ps_headers hdrs;
	char tenant_line[300];
	const char *lines[PS_HTTP_MAX_HEADERS];
	/* OTLP */
	char otlp_url[PS_CFG_STR];
	char otlp_store[4096];
	char otlp_text[4096];
	const char *otlp_lines[32];
	/* Per-interval state, owned by the uploader. */
	uint64_t last_until_ns;
	int64_t (*prev)[PS_F_NVALUES]; /* cumulative values already sent */
	uint32_t prev_cap;
	struct ps_upload up;
};

/* Validate the server address, tags, headers and OTLP settings of c, and
 * print one configuration line for each thing that is wrong.  `span` is
 * the run's root span or NULL; its ids are appended to the tags.  Returns
 * the number of problems reported.  Context: constructor. */
int ps_remote_setup(struct ps_remote *r, const struct ps_config *c, const struct ps_span *span,
		    uint64_t start_ns);

/* Queue this interval's profiles (CPU and allocation deltas since the last
 * call, the live heap now).  comments/labels go into every pprof. */
void ps_remote_queue(struct ps_remote *r, const struct ps_fold *f, const int *on,
		     const struct ps_profile_meta *meta, uint64_t now_ns);

/* Queue the run's span (at exit). */
void ps_remote_queue_span(struct ps_remote *r, const struct ps_span *sp,
			  const struct ps_otlp_resource *res);

/* Free the queue and the interval state, once the last flush is over. */
void ps_remote_free(struct ps_remote *r);

/* Fork child: forget the queue and the interval state (not freed). */
void ps_remote_abandon(struct ps_remote *r, uint64_t start_ns);

#endif
