/* check_upload.c -- the delivery queue (uploader/upload.c): retries,
 * backoff, bounds and the final flush, through its transport and clock
 * seams (no network, no real time). */
#include "uploader/upload.h"
#include "common/clock.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEC 1000000000ull

/* The fake server: answers from a script, records what it was sent. */
static struct {
	long status[16];          /* per call; the last repeats */
	long retry_after[16];
	int rc[16];               /* transport error per call, 0 = none */
	int n;                    /* answers scripted */
	int calls;
	char urls[16][64];
} srv;
static uint64_t fake_now;

static int
fake_post(const struct ps_http_request *rq, struct ps_http_response *rs)
{
	int i = srv.calls < srv.n ? srv.calls : srv.n - 1;

	if (srv.calls < 16)
		snprintf(srv.urls[srv.calls], sizeof(srv.urls[0]), "%s", rq->url);
	srv.calls++;
	rs->status = srv.rc[i] ? 0 : srv.status[i];
	rs->retry_after_s = srv.retry_after[i];
	snprintf(rs->message, sizeof(rs->message), "HTTP %ld", rs->status);
	return srv.rc[i];
}

static uint64_t
fake_clock(void)
{
	return fake_now;
}

static struct ps_upload u;

static void
setup(void)
{
	memset(&srv, 0, sizeof(srv));
	srv.status[0] = 200;            /* unless a test scripts otherwise */
	srv.n = 1;
	memset(&u, 0, sizeof(u));
	u.post = fake_post;
	u.now = fake_clock;
	u.rng = 42;
	fake_now = 1000 * SEC;
}

/* Script the server: n answers of (status, retry-after). */
static void
answers(int n, const long *status, const long *retry_after)
{
	for (int i = 0; i < n; i++) {
		srv.status[i] = status[i];
		srv.retry_after[i] = retry_after ? retry_after[i] : -1;
	}
	srv.n = n;
}

static void
queue(const char *url, size_t len, int otlp)
{
	struct ps_buf b = PS_BUF_INIT(1u << 30);
	char *body = calloc(1, len + 1);

	ck_assert_ptr_nonnull(body);
	memset(body, 'x', len);
	ck_assert_int_eq(ps_buf_append(&b, body, len), 0);
	free(body);
	ck_assert_int_eq(ps_upload_enqueue(&u, strdup(url), "text/plain", &b, "cpu", otlp), 0);
	ck_assert_ptr_null(b.data);     /* ownership moved */
}

static void
send_due(void)
{
	ps_upload_send(&u, fake_now, 1000, 0, 0, NULL);
}

static void
drain(void)
{
	while (u.n) {
		uint64_t due = ps_upload_next_due(&u);

		fake_now = due > fake_now ? due : fake_now;
		send_due();
	}
}

/* Whatever a case left queued is freed, not sent. */
static void
teardown(void)
{
	while (u.n) {
		struct ps_upload_item *it = u.q[--u.n];

		free(it->url);
		ps_buf_free(&it->body);
		free(it);
	}
}

START_TEST(upload_sends_2xx_once_and_empties_the_queue)
{
	long ok[] = { 204 };

	answers(1, ok, NULL);
	queue("http://s/ingest?a", 10, 0);
	send_due();
	ck_assert_int_eq(srv.calls, 1);
	ck_assert_uint_eq(u.n, 0);
	ck_assert_uint_eq(u.bytes, 0);
	ck_assert_uint_eq(u.sent, 1);
	ck_assert_uint_eq(u.failed + u.dropped + u.retries, 0);
	ck_assert_uint_eq(ps_upload_next_due(&u), UINT64_MAX);
}
END_TEST

START_TEST(upload_retries_5xx_with_doubling_jittered_backoff)
{
	long st[] = { 503, 503, 503, 200 };
	uint64_t base = SEC;

	answers(4, st, NULL);
	queue("http://s/ingest?a", 10, 0);
	for (int k = 0; k < 3; k++) {
		uint64_t before = fake_now, wait;

		send_due();
		ck_assert_uint_eq(u.n, 1);
		wait = ps_upload_next_due(&u) - before;
		/* 1 s, 2 s, 4 s, each +-25 % */
		ck_assert_uint_ge(wait, base - base / 4);
		ck_assert_uint_le(wait, base + base / 4);
		/* Not due yet: nothing is sent before its time. */
		fake_now = before + wait - 1;
		send_due();
		ck_assert_int_eq(srv.calls, k + 1);
		fake_now = before + wait;
		base *= 2;
	}
	send_due();
	ck_assert_int_eq(srv.calls, 4);
	ck_assert_uint_eq(u.sent, 1);
	ck_assert_uint_eq(u.retries, 3);
	ck_assert_uint_eq(u.n, 0);
}
END_TEST

START_TEST(upload_obeys_retry_after_capped_at_five_minutes)
{
	long st[] = { 429, 429, 200 }, ra[] = { 7, 100000, -1 };

	answers(3, st, ra);
	queue("http://s/ingest?a", 10, 0);
	send_due();
	ck_assert_uint_eq(ps_upload_next_due(&u) - fake_now, 7 * SEC);
	fake_now += 7 * SEC;
	send_due();
	ck_assert_uint_eq(ps_upload_next_due(&u) - fake_now, 300 * SEC);
}
END_TEST

START_TEST(upload_drops_4xx_at_once_as_failed)
{
	long st[] = { 400 };

	answers(1, st, NULL);
	queue("http://s/ingest?a", 10, 0);
	send_due();
	ck_assert_int_eq(srv.calls, 1);
	ck_assert_uint_eq(u.n, 0);
	ck_assert_uint_eq(u.failed, 1);
	ck_assert_uint_eq(u.retries, 0);
}
END_TEST

START_TEST(upload_gives_up_after_the_attempt_limit)
{
	long st[] = { 500 };

	answers(1, st, NULL);
	queue("http://s/ingest?a", 10, 0);
	drain();
	ck_assert_int_eq(srv.calls, PS_UPLOAD_ATTEMPTS);
	ck_assert_uint_eq(u.retries, PS_UPLOAD_ATTEMPTS - 1);
	ck_assert_uint_eq(u.failed, 1);
	ck_assert_uint_eq(u.sent, 0);
}
END_TEST

START_TEST(upload_retries_connection_errors_but_not_a_missing_libcurl)
{
	long st[] = { 0, 200 };

	answers(2, st, NULL);
	srv.rc[0] = -ECONNREFUSED;
	queue("http://s/ingest?a", 10, 0);
	drain();
	ck_assert_uint_eq(u.sent, 1);
	ck_assert_uint_eq(u.retries, 1);

	setup();
	answers(1, st, NULL);
	srv.rc[0] = -ENOSYS;
	queue("http://s/ingest?a", 10, 0);
	send_due();
	ck_assert_uint_eq(u.failed, 1);
	ck_assert_uint_eq(u.n, 0);
}
END_TEST

START_TEST(upload_otlp_retries_only_429_and_502_to_504)
{
	long st500[] = { 500 }, st502[] = { 502, 200 };

	answers(1, st500, NULL);
	queue("http://o/v1/traces", 10, 1);
	send_due();
	ck_assert_uint_eq(u.failed, 1);
	ck_assert_uint_eq(u.retries, 0);

	setup();
	answers(2, st502, NULL);
	queue("http://o/v1/traces", 10, 1);
	drain();
	ck_assert_uint_eq(u.sent, 1);
	ck_assert_uint_eq(u.retries, 1);
}
END_TEST

START_TEST(upload_full_queue_drops_the_oldest_and_counts_it)
{
	long ok[] = { 200 };
	char url[32];

	answers(1, ok, NULL);
	for (int i = 0; i < PS_UPLOAD_QUEUE_MAX + 3; i++) {
		snprintf(url, sizeof(url), "http://s/%d", i);
		queue(url, 10, 0);
	}
	ck_assert_uint_eq(u.n, PS_UPLOAD_QUEUE_MAX);
	ck_assert_uint_eq(u.dropped, 3);
	send_due();
	ck_assert_str_eq(srv.urls[0], "http://s/3");   /* 0..2 were dropped */
	ck_assert_uint_eq(u.sent, PS_UPLOAD_QUEUE_MAX);
}
END_TEST

START_TEST(upload_byte_bound_drops_the_oldest)
{
	size_t big = PS_UPLOAD_QUEUE_BYTES / 2 + 1;

	queue("http://s/0", big, 0);
	queue("http://s/1", big, 0);
	ck_assert_uint_eq(u.n, 1);
	ck_assert_uint_eq(u.dropped, 1);
	ck_assert_uint_le(u.bytes, PS_UPLOAD_QUEUE_BYTES);
	ck_assert_str_eq(u.q[0]->url, "http://s/1");
	drain();   /* frees */
}
END_TEST

START_TEST(upload_final_flush_tries_each_request_once_whatever_its_due_time)
{
	long st[] = { 503, 200 };

	answers(2, st, NULL);
	queue("http://s/0", 10, 0);
	send_due();                     /* 503: due again in ~1 s */
	queue("http://s/1", 10, 0);
	ps_upload_send(&u, fake_now, 1000, 1, fake_now + 5 * SEC, NULL);
	ck_assert_int_eq(srv.calls, 3);
	ck_assert_uint_eq(u.n, 0);
	ck_assert_uint_eq(u.sent, 2);   /* the 503 one got its last chance */
}
END_TEST

START_TEST(upload_final_flush_past_its_deadline_counts_the_rest_as_failed)
{
	long ok[] = { 200 };

	answers(1, ok, NULL);
	queue("http://s/0", 10, 0);
	queue("http://s/1", 10, 0);
	ps_upload_send(&u, fake_now, 1000, 1, fake_now, NULL);
	ck_assert_int_eq(srv.calls, 0);
	ck_assert_uint_eq(u.failed, 2);
	ck_assert_uint_eq(u.n, 0);      /* given up: never sent later too */
	ck_assert_uint_eq(u.bytes, 0);
}
END_TEST

START_TEST(upload_with_a_lock_sends_unlocked_and_puts_retries_back)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	long st[] = { 503, 200 };

	answers(2, st, NULL);
	queue("http://s/0", 10, 0);
	pthread_mutex_lock(&lock);
	ps_upload_send(&u, fake_now, 1000, 0, 0, &lock);
	ck_assert_uint_eq(u.n, 1);              /* put back for a retry */
	ck_assert_uint_eq(u.retries, 1);
	fake_now = ps_upload_next_due(&u);
	ps_upload_send(&u, fake_now, 1000, 0, 0, &lock);
	pthread_mutex_unlock(&lock);
	ck_assert_uint_eq(u.n, 0);
	ck_assert_uint_eq(u.sent, 1);
}
END_TEST

/* A sending thread's request in flight while the exiting thread runs the
 * final flush: a post that holds until `release`, on the real clock. */
static atomic_int entered, release, posted;
static pthread_mutex_t flight_lock = PTHREAD_MUTEX_INITIALIZER;

/* The polling loops' 1 ms pause. */
static void
nap(void)
{
	(void)nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

/* The first post holds until `release`; the others are counted in
 * `posted` once done, so the fake server is never used by two threads at
 * once. */
static int
held_post(const struct ps_http_request *rq, struct ps_http_response *rs)
{
	int rc;

	if (atomic_fetch_add(&entered, 1) == 0) {
		while (!atomic_load(&release))
			nap();
		return fake_post(rq, rs);
	}
	rc = fake_post(rq, rs);
	atomic_fetch_add(&posted, 1);
	return rc;
}

static void *
sender(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&flight_lock);
	ps_upload_send(&u, ps_upload_next_due(&u), 1000, 0, 0, &flight_lock);
	pthread_mutex_unlock(&flight_lock);
	return NULL;
}

/* Lets the request in flight settle once the flush has begun the two
 * queued ones (so the order below is not a matter of timing). */
static void *
releaser(void *arg)
{
	(void)arg;
	while (atomic_load(&posted) < 2)
		nap();
	atomic_store(&release, 1);
	return NULL;
}

/* Starts the sender on the oldest of three requests and returns once it
 * is in flight. */
static pthread_t
start_flight(void)
{
	pthread_t t;

	atomic_store(&entered, 0);
	atomic_store(&release, 0);
	atomic_store(&posted, 0);
	u.post = held_post;
	u.now = NULL;
	queue("http://s/0", 10, 0);
	queue("http://s/1", 10, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, sender, NULL), 0);
	while (!atomic_load(&entered))
		nap();
	pthread_mutex_lock(&flight_lock);
	ck_assert_ptr_nonnull(u.flight);
	queue("http://s/2", 10, 0);     /* the last pass's */
	return t;
}

START_TEST(upload_final_flush_sends_the_queue_then_waits_for_the_request_in_flight)
{
	pthread_t t = start_flight(), r;
	uint64_t t0;

	ck_assert_int_eq(pthread_create(&r, NULL, releaser, NULL), 0);
	t0 = ps_clock_ns(CLOCK_MONOTONIC);
	ps_upload_send(&u, t0, 1000, 1, t0 + 10 * SEC, &flight_lock);
	/* The flush returned only once the one in flight had settled. */
	ck_assert_ptr_null(u.flight);
	ck_assert_uint_eq(u.sent, 3);
	ck_assert_uint_eq(u.failed, 0);
	ck_assert_uint_eq(u.n, 0);
	pthread_mutex_unlock(&flight_lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(pthread_join(r, NULL), 0);
	/* The queue first (one request that hangs must not cost the
	 * others), and the sender took nothing more once the flush began. */
	ck_assert_int_eq(srv.calls, 3);
	ck_assert_str_eq(srv.urls[0], "http://s/1");
	ck_assert_str_eq(srv.urls[1], "http://s/2");
	ck_assert_str_eq(srv.urls[2], "http://s/0");
}
END_TEST

START_TEST(upload_final_flush_past_its_deadline_counts_the_request_in_flight)
{
	uint64_t t0;
	pthread_t t = start_flight();

	t0 = ps_clock_ns(CLOCK_MONOTONIC);
	ps_upload_send(&u, t0, 1000, 1, t0 + 50 * 1000000ull, &flight_lock);
	ck_assert_uint_le(ps_clock_ns(CLOCK_MONOTONIC) - t0, 2 * SEC);   /* bounded by the deadline */
	ck_assert_int_eq(srv.calls, 2);
	ck_assert_uint_eq(u.sent, 2);
	ck_assert_uint_eq(u.failed, 1);                /* the one in flight */
	/* Settling after all corrects the count (the process lived on: an
	 * exec that failed). */
	atomic_store(&release, 1);
	pthread_mutex_unlock(&flight_lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(u.sent, 3);
	ck_assert_uint_eq(u.failed, 0);
	ck_assert_uint_eq(u.n, 0);
}
END_TEST

START_TEST(upload_abandon_forgets_the_queue_and_counters)
{
	queue("http://s/0", 10, 0);
	struct ps_upload_item *it = u.q[0];

	ps_upload_abandon(&u);
	ck_assert_uint_eq(u.n, 0);
	ck_assert_uint_eq(u.bytes, 0);
	ck_assert_uint_eq(ps_upload_next_due(&u), UINT64_MAX);
	/* The parent's items are not freed by a fork child: free by hand. */
	free(it->url);
	ps_buf_free(&it->body);
	free(it);
}
END_TEST

static Suite *
upload_suite(void)
{
	Suite *s = suite_create("upload");
	TCase *tc = tcase_create("upload");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, upload_sends_2xx_once_and_empties_the_queue);
	tcase_add_test(tc, upload_retries_5xx_with_doubling_jittered_backoff);
	tcase_add_test(tc, upload_obeys_retry_after_capped_at_five_minutes);
	tcase_add_test(tc, upload_drops_4xx_at_once_as_failed);
	tcase_add_test(tc, upload_gives_up_after_the_attempt_limit);
	tcase_add_test(tc, upload_retries_connection_errors_but_not_a_missing_libcurl);
	tcase_add_test(tc, upload_otlp_retries_only_429_and_502_to_504);
	tcase_add_test(tc, upload_full_queue_drops_the_oldest_and_counts_it);
	tcase_add_test(tc, upload_byte_bound_drops_the_oldest);
	tcase_add_test(tc, upload_final_flush_tries_each_request_once_whatever_its_due_time);
	tcase_add_test(tc, upload_final_flush_past_its_deadline_counts_the_rest_as_failed);
	tcase_add_test(tc, upload_with_a_lock_sends_unlocked_and_puts_retries_back);
	tcase_add_test(tc, upload_final_flush_sends_the_queue_then_waits_for_the_request_in_flight);
	tcase_add_test(tc, upload_final_flush_past_its_deadline_counts_the_request_in_flight);
	tcase_add_test(tc, upload_abandon_forgets_the_queue_and_counters);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(upload_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
