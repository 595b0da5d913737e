/* check_fold.c -- folding hand-built tables (uploader/fold.h), through
 * its public results only: the folded text and the totals. */
#include "uploader/fold.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handmade.h"

static struct ps_stacktab st;
static struct ps_livetab lt;
/* One fold per case, all kept: a fold lives as long as its process and
 * has no free function, so each case's stays reachable. */
static struct ps_fold folds[32];
static int nfolds;
#define f (folds[nfolds - 1])

static void
setup(void)
{
	hm_table(&st);
	ck_assert_int_eq(ps_livetab_init(&lt), 0);
	ck_assert_int_lt(nfolds, 32);
	nfolds++;
	ck_assert_int_eq(ps_fold_init(&f, ps_stacktab_size(&st), 0, 0), 0);
}

/* The folded text of value v, NUL-terminated, in a static buffer. */
static const char *
folded(int v, int64_t div)
{
	static char text[4096];
	struct ps_buf b = PS_BUF_INIT(1 << 20);

	ck_assert_int_eq(ps_fold_folded(&f, NULL, v, div, &b), 0);
	ck_assert_uint_lt(b.len, sizeof(text));
	memcpy(text, b.data ? (const char *)b.data : "", b.len);
	text[b.len] = '\0';
	ps_buf_free(&b);
	return text;
}

START_TEST(fold_names_frames_root_first_with_cpu_nanoseconds)
{
	hm_cpu(&st, hm_leaf_a, 3, 10);
	ck_assert_int_eq(ps_fold_update(&f, &st, NULL), 0);
	ck_assert_str_eq(folded(PS_F_CPU_NS, 1), "hm_main;hm_work;hm_leaf_a 30000000\n");
	ck_assert_int_eq(ps_fold_total(&f, NULL, PS_F_CPU_SAMPLES), 3);
	ck_assert_int_eq(ps_fold_total(&f, NULL, PS_F_CPU_NS), 30 * HM_MS);
}
END_TEST

START_TEST(fold_merges_stacks_that_differ_only_inside_a_function)
{
	uintptr_t other[] = { HM_IP(hm_leaf_a) + 1, HM_IP(hm_work) + 1, HM_IP(hm_main) };
	uint64_t v[PS_NVALUES] = { 2, 20 * HM_MS, 0, 0 };

	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_uint_lt(ps_stacktab_add(&st, other, 3, 0, v), ps_stacktab_size(&st));
	ck_assert_int_eq(ps_fold_update(&f, &st, NULL), 0);
	ck_assert_str_eq(folded(PS_F_CPU_NS, 1), "hm_main;hm_work;hm_leaf_a 30000000\n");
	ck_assert_int_eq(ps_fold_total(&f, NULL, PS_F_CPU_SAMPLES), 3);
}
END_TEST

START_TEST(fold_keeps_distinct_leaves_apart)
{
	const char *t;

	hm_cpu(&st, hm_leaf_a, 1, 10);
	hm_cpu(&st, hm_leaf_b, 2, 10);
	ck_assert_int_eq(ps_fold_update(&f, &st, NULL), 0);
	t = folded(PS_F_CPU_SAMPLES, 1);
	ck_assert_ptr_nonnull(strstr(t, "hm_main;hm_work;hm_leaf_a 1\n"));
	ck_assert_ptr_nonnull(strstr(t, "hm_main;hm_work;hm_leaf_b 2\n"));
}
END_TEST

START_TEST(fold_counters_are_cumulative_across_updates)
{
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_eq(ps_fold_update(&f, &st, NULL), 0);
	hm_cpu(&st, hm_leaf_a, 4, 10);
	ck_assert_int_eq(ps_fold_update(&f, &st, NULL), 0);
	ck_assert_int_eq(ps_fold_total(&f, NULL, PS_F_CPU_SAMPLES), 5);
	ck_assert_str_eq(folded(PS_F_CPU_SAMPLES, 1), "hm_main;hm_work;hm_leaf_a 5\n");
}
END_TEST

START_TEST(fold_divides_object_counts_and_leaves_out_zero_lines)
{
	hm_alloc_samples(&st, NULL, 3, 100, 0);
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_eq(ps_fold_update(&f, &st, NULL), 0);
	ck_assert_str_eq(folded(PS_F_ALLOC_OBJS, PS_FIXED_ONE), "hm_main;hm_alloc 3\n");
	ck_assert_str_eq(folded(PS_F_ALLOC_BYTES, 1), "hm_main;hm_alloc 300\n");
	/* The CPU stack has no allocation: no line. */
	ck_assert_int_eq(ps_fold_total(&f, NULL, PS_F_ALLOC_OBJS), 3 * PS_FIXED_ONE);
}
END_TEST

START_TEST(fold_takes_in_use_values_from_the_live_table)
{
	hm_alloc_samples(&st, &lt, 5, 64, 2);
	ck_assert_int_eq(ps_fold_update(&f, &st, &lt), 0);
	ck_assert_str_eq(folded(PS_F_INUSE_OBJS, PS_FIXED_ONE), "hm_main;hm_alloc 2\n");
	ck_assert_str_eq(folded(PS_F_INUSE_BYTES, 1), "hm_main;hm_alloc 128\n");
	ck_assert_str_eq(folded(PS_F_ALLOC_OBJS, PS_FIXED_ONE), "hm_main;hm_alloc 5\n");
}
END_TEST

START_TEST(fold_reports_a_full_stack_table_as_its_own_stack)
{
	uint64_t v[PS_NVALUES] = { 7, 70 * HM_MS, 0, 0 };

	ps_stacktab_add_special(&st, PS_SLOT_FULL, v);
	ck_assert_int_eq(ps_fold_update(&f, &st, NULL), 0);
	ck_assert_ptr_nonnull(strstr(folded(PS_F_CPU_SAMPLES, 1), "table full"));
	ck_assert_int_eq(ps_fold_total(&f, NULL, PS_F_CPU_SAMPLES), 7);
}
END_TEST

static Suite *
fold_suite(void)
{
	Suite *s = suite_create("fold");
	TCase *tc = tcase_create("fold");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, fold_names_frames_root_first_with_cpu_nanoseconds);
	tcase_add_test(tc, fold_merges_stacks_that_differ_only_inside_a_function);
	tcase_add_test(tc, fold_keeps_distinct_leaves_apart);
	tcase_add_test(tc, fold_counters_are_cumulative_across_updates);
	tcase_add_test(tc, fold_divides_object_counts_and_leaves_out_zero_lines);
	tcase_add_test(tc, fold_takes_in_use_values_from_the_live_table);
	tcase_add_test(tc, fold_reports_a_full_stack_table_as_its_own_stack);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(fold_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
