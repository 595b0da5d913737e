/* remote.h -- what is sent to the Pyroscope server, and the run's span to
 * the OTLP endpoint.
 *
 * Protocol (REFERENCES.md section 1): POST {server}/ingest, one request per
 * profile family and interval, multipart/form-data with the gzipped pprof
 * in field `profile` and no `format` parameter; `from`/`until` in
 * nanoseconds cover exactly the interval the data belongs to.  A request
 * holds every program of a tree that has the same name and settings, each
 * sample labelled with its program (uploader/group.h): a program keeps
 * its own interval values, and the group's remote queues and sends.
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

/* What ps_remote_setup writes without a server comes first, the large
 * members after: each page of it a process touches costs it a fault
 * (BENCHMARKS 14q). */
struct ps_remote {
	int on;                        /* a valid server is configured */
	int folded;
	int push;                      /* PYROSCOPE_UPLOAD_API=push */
	int push_warned;               /* tags left out: said once */
	unsigned sample_rate;
	uint64_t alloc_mean;
	/* Per-interval state, owned by the uploader. */
	uint64_t last_until_ns;
	int64_t (*prev)[PS_F_NVALUES]; /* cumulative values already sent */
	uint32_t prev_cap;
	struct ps_upload up;
	char app[256];                 /* sanitised application name */
	/* ca_file, base, user, pass, bearer: copies, not pointers into the
	 * configuration: a group's remote outlives the program whose
	 * configuration made it (group.h). */
	char ca_file[sizeof(((struct ps_config *)0)->ca_file)];
	struct ps_tags tags;           /* user tags (+ trace tags) */
	char base[PS_CFG_STR];         /* server URL without user-info or '/' */
	char user[256], pass[256];
	char bearer[sizeof(((struct ps_config *)0)->auth_token)];
	char name[8192];               /* app{tags} */
	struct ps_headers hdrs;
	char tenant_line[300];
	const char *lines[PS_HTTP_MAX_HEADERS];
	/* OTLP */
	char otlp_url[PS_CFG_STR];
	char otlp_store[4096];
	char otlp_text[4096];
	const char *otlp_lines[32];
};

/* 1 if c sends the run's span to an OTLP endpoint (with trace correlation
 * on, the span is then sent at the run's end). */
int ps_remote_otlp_on(const struct ps_config *c);

/* Validate the server address, tags, headers and OTLP settings of c, and
 * print one configuration line for each thing that is wrong.  `span` is
 * the run's root span or NULL; its ids are appended to the tags.  `r`
 * must be zeroed (static, calloc'd): it is not cleared here, so that a
 * process's start-up touches only the pages it sets of its 53 KB.  Returns
 * the number of problems reported.  Context: constructor. */
int ps_remote_setup(struct ps_remote *r, const struct ps_config *c, const struct ps_span *span,
		    uint64_t start_ns);

/* 1 if a and b send to the same series of the same server in the same
 * way: everything but their root_span_id tags, which differ for every
 * program of a tree (uploader/group.h). */
int ps_remote_same(const struct ps_remote *a, const struct ps_remote *b);

/* One program's values for this interval, per entry of its fold f
 * (allocated; NULL without memory): deltas of the cumulative counters
 * since the values last committed, the live heap as it is. */
int64_t (*ps_remote_interval(struct ps_remote *r, const struct ps_fold *f))[PS_F_NVALUES];

/* f's values belong to an interval that was queued (or could not be):
 * the next interval starts from them. */
void ps_remote_commit(struct ps_remote *r, const struct ps_fold *f);

/* Queue this interval's profiles of the programs in parts, one request per
 * family (and per series with folded text): each part's vals are its
 * program's interval values, labelled with meta's sets.  comments and
 * labels go into every pprof.  The interval ends at now_ns. */
void ps_remote_queue_parts(struct ps_remote *r, const struct ps_profile_part *parts,
			   size_t nparts, const int *on, const struct ps_profile_meta *meta,
			   uint64_t now_ns);

/* A program's interval values could not be made (no memory): counted,
 * said, and sent with the next interval's. */
void ps_remote_defer(struct ps_remote *r);

/* One program alone: its interval, queued and committed -- what a group
 * of one does, for check_remote (the groups use the three above). */
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
