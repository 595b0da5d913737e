/* check_sampler.c -- the sampler's weight arithmetic (shim/sampler.h):
 * what CPU time each sample stands for. */
#include "shim/sampler.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MS 1000000ull

START_TEST(timer_weight_is_one_period_per_expiry)
{
	ck_assert_uint_eq(ps_sampler_timer_weight(10 * MS, 0), 10 * MS);
	/* The kernel merged 3 more expiries into this signal (250 Hz tick
	 * under a 1000 Hz timer): the sample stands for 4 periods. */
	ck_assert_uint_eq(ps_sampler_timer_weight(1 * MS, 3), 4 * MS);
}
END_TEST

START_TEST(timer_weight_ignores_a_negative_overrun)
{
	ck_assert_uint_eq(ps_sampler_timer_weight(10 * MS, -1), 10 * MS);
}
END_TEST

START_TEST(take_since_returns_the_time_since_the_last_sample)
{
	_Atomic uint64_t seen = 100;

	ck_assert_uint_eq(ps_sampler_take_since(&seen, 130), 30);
	ck_assert_uint_eq(atomic_load(&seen), 130);
	ck_assert_uint_eq(ps_sampler_take_since(&seen, 200), 70);
}
END_TEST

START_TEST(take_since_never_goes_back_nor_counts_twice)
{
	_Atomic uint64_t seen = 100;

	/* A reading older than the baseline (another thread's sample got
	 * there first) stands for nothing, and moves nothing. */
	ck_assert_uint_eq(ps_sampler_take_since(&seen, 90), 0);
	ck_assert_uint_eq(ps_sampler_take_since(&seen, 100), 0);
	ck_assert_uint_eq(atomic_load(&seen), 100);
}
END_TEST

static _Atomic uint64_t shared_seen;
static _Atomic uint64_t clock_ns;

static void *
racer(void *arg)
{
	uint64_t sum = 0;

	(void)arg;
	for (int i = 0; i < 200000; i++)
		sum += ps_sampler_take_since(&shared_seen, atomic_fetch_add(&clock_ns, 7) + 7);
	return (void *)(uintptr_t)sum;
}

START_TEST(take_since_splits_time_between_racing_threads)
{
	pthread_t t[4];
	uint64_t total = 0;
	void *r;

	atomic_store(&shared_seen, 0);
	atomic_store(&clock_ns, 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, racer, NULL), 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(t[i], &r), 0);
		total += (uint64_t)(uintptr_t)r;
	}
	/* Every nanosecond of the clock counted once, whatever the order. */
	ck_assert_uint_eq(total, atomic_load(&shared_seen));
	ck_assert_uint_eq(total, atomic_load(&clock_ns));
}
END_TEST

START_TEST(first_expiry_is_within_one_period_of_its_base)
{
	uint64_t r;

	for (r = 0; r < 1000; r++) {
		/* A fresh thread: from its CPU clock's 0. */
		uint64_t f = ps_sampler_first(3 * MS, 10 * MS, r * 0x9e3779b97f4a7c15ull);

		ck_assert_uint_ge(f, 1);
		ck_assert_uint_le(f, 10 * MS);
		/* One that ran for longer before: from now. */
		f = ps_sampler_first(PS_SAMPLER_FRESH_NS, 10 * MS, r * 0x9e3779b97f4a7c15ull);
		ck_assert_uint_gt(f, PS_SAMPLER_FRESH_NS);
		ck_assert_uint_le(f, PS_SAMPLER_FRESH_NS + 10 * MS);
	}
	ck_assert_uint_eq(ps_sampler_first(0, 10 * MS, 0), 1);
	ck_assert_uint_eq(ps_sampler_first(0, 10 * MS, 10 * MS - 1), 10 * MS);
}
END_TEST

START_TEST(crossed_counts_each_expiry_once)
{
	uint64_t next = 5 * MS;

	ck_assert_uint_eq(ps_sampler_crossed(&next, 10 * MS, 4 * MS), 0);
	ck_assert_uint_eq(next, 5 * MS);
	ck_assert_uint_eq(ps_sampler_crossed(&next, 10 * MS, 5 * MS), 1);
	ck_assert_uint_eq(next, 15 * MS);
	ck_assert_uint_eq(ps_sampler_crossed(&next, 10 * MS, 15 * MS - 1), 0);
	ck_assert_uint_eq(ps_sampler_crossed(&next, 10 * MS, 47 * MS), 4);
	ck_assert_uint_eq(next, 55 * MS);
	ck_assert_uint_eq(ps_sampler_crossed(&next, 10 * MS, 47 * MS), 0);
}
END_TEST

/* The point of the random first expiry: for any length of CPU, short or
 * long, the expected count of expiries times the period is that length.
 * 200000 threads of each length, phases from a fixed LCG (deterministic):
 * the count of one is Bernoulli-like with variance at most 1/4, so the
 * mean's standard error is at most 0.5 / sqrt(200000) = 0.0011 periods;
 * 0.01 periods is 9 of them. */
START_TEST(expiries_count_any_length_without_bias)
{
	static const uint64_t len[] = { 1 * MS / 10, 3 * MS, 4250 * 1000, 9 * MS, 26500 * 1000,
					123 * MS };
	uint64_t x = 42;

	for (size_t k = 0; k < sizeof(len) / sizeof(*len); k++) {
		double n = 0, want = (double)len[k] / (10 * MS);

		for (int i = 0; i < 200000; i++) {
			uint64_t next;

			x = x * 6364136223846793005ull + 1442695040888963407ull;
			next = ps_sampler_first(0, 10 * MS, x >> 11);
			n += (double)ps_sampler_crossed(&next, 10 * MS, len[k]);
		}
		n /= 200000;
		ck_assert_msg(n > want - 0.01 && n < want + 0.01, "%llu ns: %.4f expiries, want %.4f",
			      (unsigned long long)len[k], n, want);
	}
}
END_TEST

static Suite *
sampler_suite(void)
{
	Suite *s = suite_create("sampler");
	TCase *tc = tcase_create("sampler");

	tcase_add_test(tc, timer_weight_is_one_period_per_expiry);
	tcase_add_test(tc, timer_weight_ignores_a_negative_overrun);
	tcase_add_test(tc, take_since_returns_the_time_since_the_last_sample);
	tcase_add_test(tc, take_since_never_goes_back_nor_counts_twice);
	tcase_add_test(tc, take_since_splits_time_between_racing_threads);
	tcase_add_test(tc, first_expiry_is_within_one_period_of_its_base);
	tcase_add_test(tc, crossed_counts_each_expiry_once);
	tcase_add_test(tc, expiries_count_any_length_without_bias);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(sampler_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
