/* upload.c -- bounded queue, retries, backoff.  See upload.h. */
#include "uploader/upload.h"
#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

uint64_t
ps_upload_now(const struct ps_upload *u)
{
	return u->now ? u->now() : ps_clock_ns(CLOCK_MONOTONIC);
}

static void
item_free(struct ps_upload_item *it)
{
	free(it->url);
	ps_buf_free(&it->body);
	free(it);
}

static void
remove_at(struct ps_upload *u, unsigned i)
{
	u->bytes -= u->q[i]->body.len;
	item_free(u->q[i]);
	memmove(&u->q[i], &u->q[i + 1], (u->n - i - 1) * sizeof(u->q[0]));
	u->n--;
}

int
ps_upload_enqueue(struct ps_upload *u, char *url, const char *content_type,
		  struct ps_buf *body, const char *what, int otlp)
{
	struct ps_upload_item *it = calloc(1, sizeof(*it));

	if (!it) {
		free(url);
		ps_buf_free(body);
		u->dropped++;
		return -ENOMEM;
	}
	while (u->n > 0 && (u->n == PS_UPLOAD_QUEUE_MAX ||
			    u->bytes + body->len > PS_UPLOAD_QUEUE_BYTES)) {
		ps_debug("upload queue full: dropping the oldest %s profile", u->q[0]->what);
		remove_at(u, 0);
		u->dropped++;
	}
	/* The bound counts bytes held, not bytes used: give back the slack
	 * the growing buffer left (up to half of it). */
	if (body->len && body->alloc > body->len) {
		uint8_t *p = realloc(body->data, body->len);

		if (p) {
			body->data = p;
			body->alloc = body->len;
		}
	}
	it->url = url;
	snprintf(it->content_type, sizeof(it->content_type), "%s", content_type);
	it->body = *body;
	memset(body, 0, sizeof(*body));
	it->what = what;
	it->otlp = otlp;
	it->due_ns = ps_upload_now(u);
	u->q[u->n++] = it;
	u->bytes += it->body.len;
	return 0;
}

uint64_t
ps_upload_next_due(const struct ps_upload *u)
{
	uint64_t t = UINT64_MAX;
	unsigned i;

	/* A final flush has the queue: nothing is due for another sender,
	 * which would find it closed and ask again at once, with the lock
	 * the flush waits for held (a request put back with Retry-After: 0). */
	if (u->closing)
		return t;
	for (i = 0; i < u->n; i++)
		if (u->q[i]->due_ns < t)
			t = u->q[i]->due_ns;
	return t;
}

static int
retryable(const struct ps_upload_item *it, int rc, long status)
{
	if (rc)
		return rc != -ENOSYS && rc != -EINVAL;
	if (it->otlp)
		return status == 429 || status == 502 || status == 503 || status == 504;
	return status == 429 || status >= 500;
}

/* Exponential backoff with +-25 % jitter, or the server's Retry-After. */
static uint64_t
backoff_ns(struct ps_upload *u, unsigned attempts, long retry_after_s)
{
	uint64_t base = 1000000000ull << (attempts < 6 ? attempts : 6);

	if (base > 60000000000ull)
		base = 60000000000ull;
	if (retry_after_s >= 0)
		return (uint64_t)(retry_after_s > 300 ? 300 : retry_after_s) * 1000000000ull;
	u->rng = u->rng * 6364136223846793005ull + 1442695040888963407ull;
	return base - base / 4 + (u->rng >> 33) % (base / 2 + 1);
}

/* libcurl, loaded on first use (with the caller's lock held). */
static int
curl_ready(struct ps_upload *u)
{
	if (u->curl == 0) {
		u->curl = ps_http_load() == 0 ? 1 : -1;
		if (u->curl < 0)
			ps_warn("libcurl.so.4 could not be loaded: profiles are not uploaded");
	}
	return u->curl > 0;
}

/* Reads only what the export state set up once, so it may run without the
 * worker lock once curl_ready() has been called. */
static int
attempt(struct ps_upload *u, struct ps_upload_item *it, long timeout_ms, struct ps_http_response *rs)
{
	const struct ps_upload_auth *a = it->otlp ? &u->otlp : &u->pyro;
	struct ps_http_request rq = {
		.url = it->url,
		.content_type = it->content_type,
		.body = it->body.data,
		.body_len = it->body.len,
		.headers = a->headers,
		.nheaders = a->nheaders,
		.user = a->user,
		.password = a->password,
		.bearer_token = a->bearer,
		.ca_file = u->ca_file,
		.insecure = u->insecure,
		.connect_timeout_ms = timeout_ms < 3000 ? timeout_ms : 3000,
		.total_timeout_ms = timeout_ms,
	};

	if (u->post)
		return u->post(&rq, rs);
	if (!curl_ready(u))
		return -ENOSYS;
	return ps_http_post(&rq, rs);
}

/* Count the outcome of one attempt; returns 1 if the request is finished
 * (sent or given up), 0 if it is due again later. */
static int
settle(struct ps_upload *u, struct ps_upload_item *it, int rc, const struct ps_http_response *rsp,
       int final)
{
	struct ps_http_response rs = *rsp;

	it->attempts++;
	if (rc == 0 && rs.status >= 200 && rs.status < 300) {
		u->sent++;
		ps_debug("sent %s profile (%zu bytes): %ld", it->what, it->body.len, rs.status);
		return 1;
	}
	if (!retryable(it, rc, rs.status)) {
		u->failed++;
		if (rc)
			ps_warn("%s upload failed: %s", it->what, strerror(-rc));
		else
			ps_warn("%s upload rejected: HTTP %ld: %s", it->what, rs.status, rs.message);
		return 1;
	}
	if (final || it->attempts >= PS_UPLOAD_ATTEMPTS) {
		u->failed++;
		ps_warn("%s upload failed after %u attempts: %s", it->what, it->attempts,
			rc ? strerror(-rc) : rs.message);
		return 1;
	}
	u->retries++;
	it->due_ns = ps_upload_now(u) + backoff_ns(u, it->attempts - 1, rc ? -1 : rs.retry_after_s);
	ps_debug("%s upload will be retried (%s)", it->what, rc ? strerror(-rc) : rs.message);
	return 0;
}

/* Try one request; returns 1 if it is finished (sent or given up). */
static int
send_one(struct ps_upload *u, struct ps_upload_item *it, long timeout_ms, int final)
{
	struct ps_http_response rs = { 0 };
	int rc = attempt(u, it, timeout_ms, &rs);

	return settle(u, it, rc, &rs, final);
}

/* Unlink q[i] from the queue without freeing it. */
static struct ps_upload_item *
take_at(struct ps_upload *u, unsigned i)
{
	struct ps_upload_item *it = u->q[i];

	u->bytes -= it->body.len;
	memmove(&u->q[i], &u->q[i + 1], (u->n - i - 1) * sizeof(u->q[0]));
	u->n--;
	return it;
}

/* A request to retry goes back in front, as the oldest; if the queue
 * filled up while it was in flight, it is the one dropped. */
static void
put_back(struct ps_upload *u, struct ps_upload_item *it)
{
	if (u->n == PS_UPLOAD_QUEUE_MAX || u->bytes + it->body.len > PS_UPLOAD_QUEUE_BYTES) {
		ps_debug("upload queue full: dropping the oldest %s profile", it->what);
		item_free(it);
		u->dropped++;
		return;
	}
	memmove(&u->q[1], &u->q[0], u->n * sizeof(u->q[0]));
	u->q[0] = it;
	u->n++;
	u->bytes += it->body.len;
}

/* q[i], sent with `lock` released: a request may take its whole timeout,
 * and meanwhile the exiting thread must be able to run the last pass. */
static void
send_unlocked(struct ps_upload *u, unsigned i, long timeout_ms, pthread_mutex_t *lock)
{
	struct ps_http_response rs = { 0 };
	struct ps_upload_item *it;
	int rc;

	if (!u->post)
		(void)curl_ready(u);  /* u->curl is only read from here on */
	it = take_at(u, i);
	u->flight = it;
	pthread_mutex_unlock(lock);
	rc = attempt(u, it, timeout_ms, &rs);
	pthread_mutex_lock(lock);
	u->flight = NULL;
	if (it->written_off) {          /* a final flush gave up on it: recount */
		it->written_off = 0;
		u->failed--;
	}
	if (settle(u, it, rc, &rs, 0))
		item_free(it);
	else
		put_back(u, it);
}

/* A final flush, once the queue is sent, waits for the request another
 * thread has in flight with the lock released: the process ends after the
 * flush, and would take it down unsent and uncounted.  The queue goes
 * first: one request that hangs must not cost the others.  Polled, with
 * `lock` released: this happens only at exit or exec, and a condition
 * variable would need setting up, and care across fork.  Returns 1 once
 * it has settled (it may be back in the queue for its last attempt), 0 if
 * the deadline passed first: it then counts as failed, and is recounted
 * if it settles after all (the process lived on: an exec failed). */
static int
wait_for_flight(struct ps_upload *u, uint64_t deadline_ns, pthread_mutex_t *lock)
{
	struct timespec nap;

	while (u->flight && lock && ps_upload_now(u) < deadline_ns) {
		pthread_mutex_unlock(lock);
		nap = (struct timespec){ 0, 5 * 1000000L };
		while (nanosleep(&nap, &nap) && errno == EINTR)
			;
		pthread_mutex_lock(lock);
	}
	if (!u->flight)
		return 1;
	if (!u->flight->written_off) {
		u->flight->written_off = 1;
		u->failed++;
		ps_warn("flush timeout: the %s request in flight is not confirmed", u->flight->what);
	}
	return 0;
}

void
ps_upload_send(struct ps_upload *u, uint64_t now_ns, long timeout_ms, int final,
	       uint64_t deadline_ns, pthread_mutex_t *lock)
{
	unsigned i = 0;
	long left;

	if (final)
		u->closing = 1;
	/* A sender that got the lock back while a final flush waited stops:
	 * the rest is the flush's. */
	while (final || !u->closing) {
		if (i >= u->n) {
			if (!final || !u->flight || !wait_for_flight(u, deadline_ns, lock))
				break;
			i = 0;
			continue;
		}
		if (!final && u->q[i]->due_ns > now_ns) {
			i++;
			continue;
		}
		if (final) {
			now_ns = ps_upload_now(u);
			if (now_ns >= deadline_ns) {
				/* Given up, not kept: a sender that lives on
				 * (after an exec that failed) must not send
				 * what is already counted as failed. */
				ps_warn("flush timeout: %u requests not sent", u->n - i);
				u->failed += u->n - i;
				while (u->n > i)
					remove_at(u, i);
				(void)wait_for_flight(u, deadline_ns, lock);
				break;
			}
			left = (long)((deadline_ns - now_ns) / 1000000ull);
			timeout_ms = left < 1 ? 1 : left;
		} else if (lock) {
			/* The queue may change meanwhile: start over; what was
			 * just tried is no longer due, nor is anything queued
			 * since now_ns. */
			send_unlocked(u, i, timeout_ms, lock);
			i = 0;
			continue;
		}
		if (send_one(u, u->q[i], timeout_ms, final))
			remove_at(u, i);
		else
			i++;
	}
	if (final)
		u->closing = 0;
}

void
ps_upload_free(struct ps_upload *u)
{
	while (u->n) {
		item_free(u->q[--u->n]);
		u->dropped++;
	}
	u->bytes = 0;
}

void
ps_upload_abandon(struct ps_upload *u)
{
	u->n = 0;
	u->bytes = 0;
	u->flight = NULL;           /* the parent's thread's, not in this process */
	u->closing = 0;
	u->sent = u->failed = u->dropped = u->retries = u->deferred = 0;
}
