/* Unit tests of the wait sampler (shim/wait.c): its weight, and the
 * unbiasedness of what it keeps, driven with waits of known length through
 * ps_wait_done into a real stack table. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "common/guard.h"
#include "shim/stacktab.h"
#include "shim/wait.h"

static struct ps_stacktab tab;
static const char leaf_fn[1];  /* stands for the waiting call's entry point */

static void
setup(void)
{
	static int done;
	struct timespec ms = { 0, 2000000 };

	if (!done) {
		ck_assert_int_eq(ps_stacktab_init(&tab, 1 << 20), 0);
		ps_stacktab_publish(&tab);
		done = 1;
	}
	ps_wait_start(PS_WAIT_BLOCK | PS_WAIT_MUTEX, 1000000);
	/* Calibration is the ratio of the two clocks since ps_wait_start. */
	nanosleep(&ms, NULL);
}

/* The sum of value v over every stack of the table. */
static uint64_t
total(int v)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < ps_stacktab_size(&tab); i++)
		sum += atomic_load(&tab.slots[i].v[v]);
	return sum;
}

/* The table's totals now, to compare with after some waits. */
static void
snap(uint64_t *out)
{
	for (int v = 0; v < PS_NVALUES; v++)
		out[v] = total(v);
}

START_TEST(wait_weight_is_one_at_or_above_the_rate)
{
	ck_assert_uint_eq(ps_wait_weight(1000, 1000), PS_FIXED_ONE);
	ck_assert_uint_eq(ps_wait_weight(5000, 1000), PS_FIXED_ONE);
	ck_assert_uint_eq(ps_wait_weight(10, 0), PS_FIXED_ONE);
}
END_TEST

START_TEST(wait_weight_is_the_inverse_keep_probability)
{
	double p = -expm1(-0.1);

	ck_assert_uint_eq(ps_wait_weight(100, 1000), (uint64_t)(PS_FIXED_ONE / p + 0.5));
	ck_assert_uint_gt(ps_wait_weight(1, 1000), 999 * (uint64_t)PS_FIXED_ONE);
}
END_TEST

/* Feeds `n` waits of `d` ticks each through the fast path (ps_wait_done
 * with a start `d` ticks ago) and returns the table's change. */
static void
feed(int n, int64_t d, int kind, uint64_t *delta)
{
	uint64_t before[PS_NVALUES];

	snap(before);
	for (int i = 0; i < n; i++)
		ps_wait_done(ps_wait_ticks() - (uint64_t)d, kind, leaf_fn);
	snap(delta);
	for (int v = 0; v < PS_NVALUES; v++)
		delta[v] -= before[v];
}

START_TEST(long_waits_are_all_kept_with_their_length)
{
	uint64_t d[PS_NVALUES];
	int64_t rate;

	feed(1, 1, PS_WAIT_BLOCK, d);  /* calibrates the rate in ticks */
	rate = atomic_load(&ps_wait_rate_ticks);
	ck_assert_int_gt(rate, 0);
	feed(100, 3 * rate, PS_WAIT_MUTEX, d);
	/* 100 waits of 3 ms each, plus the ticks between feed's reading and
	 * ps_wait_done's: a few ns natively, tens of us under valgrind (so
	 * up to +10 %); never less than 3 ms each, but for the calibration:
	 * the two clocks are read a few ns apart natively (< 0.1 % over the
	 * 2 ms of setup), tens of us apart under valgrind (-1.7 % seen). */
	ck_assert_uint_eq(d[PS_V_BLOCK_COUNT], 100 * PS_FIXED_ONE);
	ck_assert_uint_eq(d[PS_V_MUTEX_COUNT], 100 * PS_FIXED_ONE);
	ck_assert_uint_eq(d[PS_V_MUTEX_NS], d[PS_V_BLOCK_NS]);
	ck_assert_msg(d[PS_V_BLOCK_NS] > 285000000 && d[PS_V_BLOCK_NS] < 330000000, "%llu ns",
		      (unsigned long long)d[PS_V_BLOCK_NS]);
	ck_assert_uint_eq(d[PS_V_CPU_NS] + d[PS_V_ALLOC_BYTES], 0);
}
END_TEST

START_TEST(short_waits_are_sampled_without_bias)
{
	uint64_t d[PS_NVALUES];
	int64_t rate;
	double kept, want;

	feed(1, 1, PS_WAIT_BLOCK, d);
	rate = atomic_load(&ps_wait_rate_ticks);
	/* 200000 waits of a 20th of the rate: each kept with probability
	 * 1-exp(-1/20) = 4.9 %, ~9750 kept.  The estimate of the total has a
	 * relative sd of about 1/sqrt(9750) = 1 %: +-6 % is 6 sd. */
	feed(200000, rate / 20, PS_WAIT_BLOCK, d);
	kept = (double)d[PS_V_BLOCK_COUNT] / PS_FIXED_ONE;
	ck_assert(fabs(kept - 200000) < 0.06 * 200000);
	want = 200000 * 1e6 / 20;  /* ns: the rate is 1 ms */
	ck_assert_msg(fabs((double)d[PS_V_BLOCK_NS] - want) < 0.06 * want, "%.0f vs %.0f",
		      (double)d[PS_V_BLOCK_NS], want);
	/* Block only: nothing in the mutex profile. */
	ck_assert_uint_eq(d[PS_V_MUTEX_COUNT], 0);
}
END_TEST

START_TEST(the_shims_own_waits_and_off_are_not_recorded)
{
	uint64_t d[PS_NVALUES];
	int64_t rate;

	feed(1, 1, PS_WAIT_BLOCK, d);
	rate = atomic_load(&ps_wait_rate_ticks);
	ps_guard_enter();
	feed(10, 2 * rate, PS_WAIT_BLOCK, d);
	ps_guard_leave();
	ck_assert_uint_eq(d[PS_V_BLOCK_COUNT], 0);
	ps_wait_off();
	ck_assert_int_eq(ps_wait_enabled(PS_WAIT_BLOCK), 0);
	feed(10, 2 * rate, PS_WAIT_BLOCK, d);
	ck_assert_uint_eq(d[PS_V_BLOCK_COUNT], 0);
}
END_TEST

START_TEST(the_leaf_is_the_waiting_call)
{
	uint64_t d[PS_NVALUES];
	const uintptr_t *ips;
	int depth, trunc, found = 0;

	feed(1, 1, PS_WAIT_BLOCK, d);
	feed(1, 2 * atomic_load(&ps_wait_rate_ticks), PS_WAIT_BLOCK, d);
	for (uint32_t i = PS_NSPECIAL; i < ps_stacktab_size(&tab); i++)
		if (ps_stacktab_get(&tab, i, &ips, &depth, &trunc) && ips[0] == (uintptr_t)leaf_fn)
			found = 1;
	ck_assert(found);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("wait");
	TCase *tc = tcase_create("wait");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, wait_weight_is_one_at_or_above_the_rate);
	tcase_add_test(tc, wait_weight_is_the_inverse_keep_probability);
	tcase_add_test(tc, long_waits_are_all_kept_with_their_length);
	tcase_add_test(tc, short_waits_are_sampled_without_bias);
	tcase_add_test(tc, the_shims_own_waits_and_off_are_not_recorded);
	tcase_add_test(tc, the_leaf_is_the_waiting_call);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
