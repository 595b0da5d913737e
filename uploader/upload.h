/* upload.h -- the delivery queue: requests to Pyroscope (and the run's
 * OTLP span), sent with bounded retries.
 *
 * Each export pass queues its requests; the uploader thread sends those
 * that are due.  Delivery rules:
 *  - 2xx: done.
 *  - connection errors, 429 and 5xx: retried with exponential backoff and
 *    jitter (1 s, 2 s, 4 s ... at most 60 s; a Retry-After wins), at most
 *    PS_UPLOAD_ATTEMPTS times, then counted as failed;
 *  - any other 4xx: dropped at once and logged at warn level with the
 *    server's message (never with credentials).
 *  - OTLP requests follow the OTLP rule: only 429, 502, 503, 504 and
 *    connection errors are retried.
 * The queue is bounded by count and bytes; when full, the oldest request
 * is dropped and counted.  At exit (or before an exec) every queued
 * request gets one more attempt within the flush timeout, and no more: a
 * server that is down must not delay the host's exit.
 *
 * Context: uploader thread, or the exiting thread holding the worker lock;
 * allocates.
 */
#ifndef PS_UPLOAD_H
#define PS_UPLOAD_H

#include <pthread.h>
#include <stdint.h>
#include "common/buf.h"
#include "uploader/headers.h"
#include "uploader/http.h"
#include "common/ps.h"

#define PS_UPLOAD_QUEUE_MAX   32
#define PS_UPLOAD_QUEUE_BYTES (16u << 20)
#define PS_UPLOAD_ATTEMPTS    6

struct ps_upload_item {
	char *url;                 /* owned */
	char content_type[96];
	struct ps_buf body;        /* owned */
	const char *what;          /* "cpu", "alloc", "span": for logs */
	int otlp;                  /* OTLP retry rules */
	unsigned attempts;
	uint64_t due_ns;           /* CLOCK_MONOTONIC time of the next attempt */
	int written_off;           /* in flight, counted as failed by a final
				    * flush that could not wait for it */
};

struct ps_upload_auth {
	const char *user, *password;   /* HTTP Basic, or NULL */
	const char *bearer;            /* or NULL */
	const char *const *headers;    /* "Name: value" lines */
	size_t nheaders;
};

struct ps_upload {
	struct ps_upload_item *q[PS_UPLOAD_QUEUE_MAX];  /* oldest first */
	unsigned n;
	size_t bytes;
	/* The request being sent with the lock released (owned by the thread
	 * sending it, out of q), or NULL; at most one: one thread sends. */
	struct ps_upload_item *flight;
	int closing;               /* a final flush is under way */
	struct ps_upload_auth pyro, otlp;  /* borrowed from the export state */
	const char *ca_file;
	int insecure;
	int curl;                  /* 0 not tried, 1 loaded, -1 unavailable */
	uint64_t rng;              /* jitter */
	/* Seams (tests, the failing-allocator test): NULL means libcurl's
	 * ps_http_post and CLOCK_MONOTONIC. */
	int (*post)(const struct ps_http_request *rq, struct ps_http_response *rs);
	uint64_t (*now)(void);
	/* Counters: shown in the debug log and in the next profile.
	 * dropped: requests never sent (queue full, or not built for lack
	 * of memory); deferred: intervals whose requests could not be built
	 * and are sent with the next interval's, which then covers both. */
	uint64_t sent, failed, dropped, retries, deferred;
};

/* Queue a request.  Takes ownership of url and body (freed on failure
 * too, and counted in dropped).  Returns 0 or -ENOMEM.  A full queue
 * drops its oldest entry. */
int ps_upload_enqueue(struct ps_upload *u, char *url, const char *content_type,
		      struct ps_buf *body, const char *what, int otlp);

/* Send what is due at now_ns (CLOCK_MONOTONIC).  Each request may take up
 * to timeout_ms.  With `final`, send everything once, oldest first,
 * whatever its due time, then wait (with `lock`, held by the caller,
 * released) for a request another thread has in flight; stop at
 * deadline_ns, and count what is left as failed.  Without `final` and
 * with `lock`, each request is taken out of the queue and sent with the
 * lock released; such a sender stops when a final flush has begun. */
void ps_upload_send(struct ps_upload *u, uint64_t now_ns, long timeout_ms, int final,
		    uint64_t deadline_ns, pthread_mutex_t *lock);

/* The queue's clock: CLOCK_MONOTONIC, or the tests' (u->now). */
uint64_t ps_upload_now(const struct ps_upload *u);

/* When the next queued request is due; UINT64_MAX if none, or while a
 * final flush has the queue. */
uint64_t ps_upload_next_due(const struct ps_upload *u);

/* Free what is still queued, counted as dropped (no request is in
 * flight: the caller's final flush is over). */
void ps_upload_free(struct ps_upload *u);

/* Fork child: forget the parent's queue without freeing (never sent
 * twice). */
void ps_upload_abandon(struct ps_upload *u);

#endif
