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
