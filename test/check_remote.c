/* check_remote.c -- what each interval queues for the server
 * (uploader/remote.h), over hand-built tables: CPU and allocations as
 * deltas, the live heap as a snapshot, empty families left out, names,
 * intervals and bodies.  The queue is read directly; nothing is sent. */
#include "uploader/remote.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handmade.h"

#define T0 1700000000000000000ull  /* the run's start, Unix ns */
#define SEC 1000000000ull

static struct ps_config cfg;
static struct ps_stacktab st;
static struct ps_livetab lt;
/* One fold per start, all kept (a fold is never freed). */
static struct ps_fold folds[32];
static int nfolds;
#define f (folds[nfolds - 1])
/* One remote state per start, all kept (its interval state is never
 * freed either). */
static struct ps_remote rs[32];
#define r (rs[nfolds - 1])
static const char *format = "folded";
/* CPU and allocations, as the tests' tables hold. */
static const int on[PS_NFAMILIES] = { [PS_FAMILY_CPU] = 1, [PS_FAMILY_ALLOC] = 1 };

static const char *
env(const char *name)
{
	if (!strcmp(name, "PYROSCOPE_SERVER_ADDRESS"))
		return "http://127.0.0.1:4040";
	if (!strcmp(name, "PYROSCOPE_INGEST_FORMAT"))
		return format;
	if (!strcmp(name, "PYROSCOPE_TAGS"))
		return "env=dev";
	return NULL;
}

static void
start(void)
{
	ck_assert_int_lt(nfolds, 32);
	nfolds++;
	hm_table(&st);
	ck_assert_int_eq(ps_livetab_init(&lt), 0);
	/* Neither load nor setup clears (config.h, remote.h). */
	memset(&cfg, 0, sizeof(cfg));
	memset(&r, 0, sizeof(r));
	ck_assert_int_ge(ps_config_load(&cfg, env, "check_remote"), 0);
	ck_assert_int_eq(ps_remote_setup(&r, &cfg, NULL, T0), 0);
	ck_assert(r.on);
	ck_assert_int_eq(ps_fold_init(&f, ps_stacktab_size(&st), 0, 0), 0);
}

static void
setup(void)
{
	format = "folded";
	start();
}

/* One interval ending at `until`: fold and queue. */
static void
interval(uint64_t until)
{
	struct ps_profile_meta m = { 0 };

	ck_assert_int_eq(ps_fold_update(&f, &st, &lt), 0);
	ps_remote_queue(&r, &f, on, &m, until);
}

/* The queued request whose name is app.<type>, or NULL. */
static struct ps_upload_item *
request(const char *type)
{
	char key[64];

	snprintf(key, sizeof(key), "name=check_remote.%s%%7B", type);
	for (unsigned i = 0; i < r.up.n; i++)
		if (strstr(r.up.q[i]->url, key))
			return r.up.q[i];
	return NULL;
}

static const char *
body(const char *type)
{
	static char text[4096];
	struct ps_upload_item *it = request(type);

	ck_assert_msg(it != NULL, "no %s request", type);
	ck_assert_uint_lt(it->body.len, sizeof(text));
	memcpy(text, it->body.data, it->body.len);
	text[it->body.len] = '\0';
	return text;
}

/* Send nothing: forget what is queued. */
static void
forget(void)
{
	while (r.up.n) {
		struct ps_upload_item *it = r.up.q[--r.up.n];

		free(it->url);
		ps_buf_free(&it->body);
		free(it);
	}
	r.up.bytes = 0;
}

START_TEST(remote_queues_nothing_without_a_server)
{
	struct ps_remote off = { 0 };
	struct ps_config c = { 0 };
	struct ps_profile_meta m = { 0 };

	ck_assert_int_ge(ps_config_load(&c, env, "check_remote"), 0);
	c.server[0] = '\0';
	ck_assert_int_eq(ps_remote_setup(&off, &c, NULL, T0), 0);
	ck_assert(!off.on);
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_eq(ps_fold_update(&f, &st, NULL), 0);
	ps_remote_queue(&off, &f, on, &m, T0 + SEC);
	ck_assert_uint_eq(off.up.n, 0);
}
END_TEST

START_TEST(remote_sends_cpu_as_deltas_per_interval)
{
	hm_cpu(&st, hm_leaf_a, 2, 10);
	interval(T0 + 10 * SEC);
	ck_assert_str_eq(body("cpu"), "hm_main;hm_work;hm_leaf_a 20000000\n");
	forget();
	hm_cpu(&st, hm_leaf_a, 3, 10);
	interval(T0 + 20 * SEC);
	ck_assert_str_eq(body("cpu"), "hm_main;hm_work;hm_leaf_a 30000000\n");
}
END_TEST

START_TEST(remote_intervals_follow_each_other_without_a_gap)
{
	hm_cpu(&st, hm_leaf_a, 1, 10);
	interval(T0 + 10 * SEC);
	ck_assert_ptr_nonnull(strstr(request("cpu")->url, "&from=1700000000000000000"));
	ck_assert_ptr_nonnull(strstr(request("cpu")->url, "&until=1700000010000000000"));
	forget();
	hm_cpu(&st, hm_leaf_a, 1, 10);
	interval(T0 + 20 * SEC);
	ck_assert_ptr_nonnull(strstr(request("cpu")->url, "&from=1700000010000000000"));
	ck_assert_ptr_nonnull(strstr(request("cpu")->url, "&until=1700000020000000000"));
}
END_TEST

START_TEST(remote_leaves_out_a_family_with_nothing_new)
{
	hm_cpu(&st, hm_leaf_a, 1, 10);
	interval(T0 + 10 * SEC);
	ck_assert_ptr_nonnull(request("cpu"));
	ck_assert_ptr_null(request("alloc_objects"));   /* nothing allocated */
	forget();
	interval(T0 + 20 * SEC);
	ck_assert_uint_eq(r.up.n, 0);
}
END_TEST

START_TEST(remote_sends_the_live_heap_as_a_snapshot)
{
	hm_alloc_samples(&st, &lt, 3, 100, 2);
	interval(T0 + 10 * SEC);
	ck_assert_str_eq(body("alloc_objects"), "hm_main;hm_alloc 3\n");
	ck_assert_str_eq(body("inuse_objects"), "hm_main;hm_alloc 2\n");
	ck_assert_str_eq(body("inuse_space"), "hm_main;hm_alloc 200\n");
	ck_assert_ptr_nonnull(strstr(request("inuse_space")->url, "&aggregationType=average"));
	ck_assert_ptr_nonnull(strstr(request("alloc_space")->url, "&aggregationType=sum"));
	forget();
	/* Nothing new allocated, the same blocks live: no alloc delta, the
	 * same snapshot. */
	interval(T0 + 20 * SEC);
	ck_assert_ptr_null(request("alloc_objects"));
	ck_assert_str_eq(body("inuse_objects"), "hm_main;hm_alloc 2\n");
}
END_TEST

START_TEST(remote_names_each_series_with_its_tags)
{
	hm_cpu(&st, hm_leaf_a, 1, 10);
	interval(T0 + 10 * SEC);
	ck_assert_ptr_nonnull(strstr(request("cpu")->url,
				     "/ingest?name=check_remote.cpu%7Benv%3Ddev%7D&"));
	ck_assert_ptr_nonnull(strstr(request("cpu")->url, "&format=folded"));
	ck_assert_ptr_nonnull(strstr(request("cpu")->url, "&sampleRate=1000000000"));
	ck_assert_str_eq(request("cpu")->content_type, "text/plain");
}
END_TEST

START_TEST(remote_pprof_sends_one_multipart_request_per_family)
{
	static const char inuse[] =
		"\"inuse_space\":{\"units\":\"bytes\",\"aggregation\":\"average\"}";

	format = "pprof";
	start();
	hm_cpu(&st, hm_leaf_a, 1, 10);
	hm_alloc_samples(&st, &lt, 1, 100, 1);
	interval(T0 + 10 * SEC);
	ck_assert_uint_eq(r.up.n, 2);
	for (unsigned i = 0; i < r.up.n; i++) {
		struct ps_upload_item *it = r.up.q[i];

		ck_assert_ptr_nonnull(strstr(it->content_type, "multipart/form-data; boundary="));
		ck_assert_ptr_null(strstr(it->url, "&format="));
		ck_assert_ptr_nonnull(strstr(it->url, "name=check_remote%7Benv%3Ddev%7D&"));
		if (!strcmp(it->what, "alloc"))
			ck_assert_ptr_nonnull(memmem(it->body.data, it->body.len, inuse, strlen(inuse)));
		else
			ck_assert_ptr_nonnull(strstr(it->url, "&sampleRate=100&"));
	}
}
END_TEST

static Suite *
remote_suite(void)
{
	Suite *s = suite_create("remote");
	TCase *tc = tcase_create("remote");

	tcase_add_checked_fixture(tc, setup, forget);
	tcase_add_test(tc, remote_queues_nothing_without_a_server);
	tcase_add_test(tc, remote_sends_cpu_as_deltas_per_interval);
	tcase_add_test(tc, remote_intervals_follow_each_other_without_a_gap);
	tcase_add_test(tc, remote_leaves_out_a_family_with_nothing_new);
	tcase_add_test(tc, remote_sends_the_live_heap_as_a_snapshot);
	tcase_add_test(tc, remote_names_each_series_with_its_tags);
	tcase_add_test(tc, remote_pprof_sends_one_multipart_request_per_family);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(remote_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
