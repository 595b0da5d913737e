/* check_span.c -- the run's root span: new trace, joined trace, invalid
 * input, names and the traceparent handed to children. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/span.h"

#define TID "0af7651916cd43dd8448eb211c80319c"
#define PID "b7ad6b7169203331"
#define TS "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"

static int
is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

START_TEST(span_new_trace_sets_sampled_and_random_flags)
{
	struct ps_span sp;
	int warned = 0;

	ck_assert_int_eq(ps_span_start(&sp, NULL, TS, "app", NULL, 42,
				       &warned), 0);
	ck_assert_uint_eq(sp.flags, 0x03);
	ck_assert(!is_zero(sp.trace_id, sizeof(sp.trace_id)));
	ck_assert(!is_zero(sp.span_id, sizeof(sp.span_id)));
	ck_assert_int_eq(sp.has_parent, 0);
	ck_assert(is_zero(sp.parent_span_id, sizeof(sp.parent_span_id)));
	/* tracestate only travels with the traceparent it belongs to */
	ck_assert_str_eq(sp.tracestate, "");
	ck_assert_int_eq(warned, 0);
	ck_assert_uint_eq(sp.start_ns, 42);
	ck_assert_uint_eq(sp.end_ns, 0);
}
END_TEST

START_TEST(span_new_traces_get_distinct_ids)
{
	struct ps_span a, b;

	ck_assert_int_eq(ps_span_start(&a, NULL, NULL, "app", NULL, 1, NULL),
			 0);
	ck_assert_int_eq(ps_span_start(&b, NULL, NULL, "app", NULL, 1, NULL),
			 0);
	ck_assert_mem_ne(a.trace_id, b.trace_id, sizeof(a.trace_id));
	ck_assert_mem_ne(a.span_id, b.span_id, sizeof(a.span_id));
}
END_TEST

START_TEST(span_join_keeps_trace_and_sets_parent)
{
	struct ps_span sp;
	char hex[33];
	int warned = 0;

	ck_assert_int_eq(ps_span_start(&sp, "00-" TID "-" PID "-01", TS,
				       "app", NULL, 7, &warned), 0);
	ck_assert_int_eq(ps_span_trace_id_hex(&sp, hex, sizeof(hex)), 0);
	ck_assert_str_eq(hex, TID);
	ck_assert_int_eq(sp.has_parent, 1);
	ps_hex_encode(sp.parent_span_id, 8, hex);
	ck_assert_str_eq(hex, PID);
	/* a new span id, not the parent's */
	ck_assert_int_eq(ps_span_span_id_hex(&sp, hex, sizeof(hex)), 0);
	ck_assert_str_ne(hex, PID);
	ck_assert(!is_zero(sp.span_id, sizeof(sp.span_id)));
	ck_assert_uint_eq(sp.flags, 0x01);
	ck_assert_str_eq(sp.tracestate, TS);
	ck_assert_int_eq(warned, 0);
}
END_TEST

START_TEST(span_join_keeps_only_sampled_and_random_bits)
{
	struct ps_span sp;

	ck_assert_int_eq(ps_span_start(&sp, "00-" TID "-" PID "-00", NULL,
				       "app", NULL, 0, NULL), 0);
	ck_assert_uint_eq(sp.flags, 0x00);
	ck_assert_int_eq(ps_span_start(&sp, "00-" TID "-" PID "-ff", NULL,
				       "app", NULL, 0, NULL), 0);
	ck_assert_uint_eq(sp.flags, 0x03);
	ck_assert_int_eq(ps_span_start(&sp, "00-" TID "-" PID "-fe", NULL,
				       "app", NULL, 0, NULL), 0);
	ck_assert_uint_eq(sp.flags, 0x02);
}
END_TEST

START_TEST(span_join_drops_invalid_tracestate)
{
	struct ps_span sp;

	ck_assert_int_eq(ps_span_start(&sp, "00-" TID "-" PID "-01",
				       "Bad=1", "app", NULL, 0, NULL), 0);
	ck_assert_int_eq(sp.has_parent, 1);
	ck_assert_str_eq(sp.tracestate, "");
}
END_TEST

START_TEST(span_invalid_traceparent_warns_and_starts_new_trace)
{
	struct ps_span sp;
	char hex[33];
	int warned = 0;

	ck_assert_int_eq(ps_span_start(&sp, "00-" TID "-" PID "-01-x", TS,
				       "app", NULL, 0, &warned), 0);
	ck_assert_int_eq(warned, 1);
	ck_assert_int_eq(sp.has_parent, 0);
	ck_assert_uint_eq(sp.flags, 0x03);
	ck_assert_int_eq(ps_span_trace_id_hex(&sp, hex, sizeof(hex)), 0);
	ck_assert_str_ne(hex, TID);
	ck_assert(!is_zero(sp.trace_id, sizeof(sp.trace_id)));
	ck_assert_str_eq(sp.tracestate, "");
	/* a NULL warned_invalid is allowed */
	ck_assert_int_eq(ps_span_start(&sp, "garbage", NULL, "app", NULL, 0,
				       NULL), 0);
}
END_TEST

START_TEST(span_name_uses_last_part_of_app_name)
{
	struct ps_span sp;

	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL,
			"interviewing-golang.generator", NULL, 0, NULL), 0);
	ck_assert_str_eq(sp.name, "generator.run");
	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, "gen", NULL, 0,
				       NULL), 0);
	ck_assert_str_eq(sp.name, "gen.run");
	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, "a.b.c", "", 0,
				       NULL), 0);
	ck_assert_str_eq(sp.name, "c.run");
	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, "trailing.", NULL, 0,
				       NULL), 0);
	ck_assert_str_eq(sp.name, "process.run");
	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, NULL, NULL, 0, NULL),
			 0);
	ck_assert_str_eq(sp.name, "process.run");
}
END_TEST

START_TEST(span_name_override_wins)
{
	struct ps_span sp;

	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, "a.gen", "nightly job",
				       0, NULL), 0);
	ck_assert_str_eq(sp.name, "nightly job");
}
END_TEST

START_TEST(span_name_is_cut_to_fit_on_a_character_boundary)
{
	struct ps_span sp;
	char big[300];
	size_t n;

	/* 298 bytes of two-byte characters (U+00E9): characters start at
	 * even offsets, so a plain cut at 127 bytes would split one. */
	for (int i = 0; i + 1 < (int)sizeof(big) - 1; i += 2) {
		big[i] = (char)0xc3;
		big[i + 1] = (char)0xa9;
	}
	big[sizeof(big) - 2] = '\0';
	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, "app", big, 0, NULL),
			 0);
	n = strlen(sp.name);
	ck_assert_uint_eq(n, sizeof(sp.name) - 2);
	ck_assert_uint_eq((unsigned char)sp.name[n - 1], 0xa9);
	ck_assert_mem_eq(sp.name, big, n);

	/* a long app name keeps its ".run" suffix */
	memset(big, 'a', 200);
	big[200] = '\0';
	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, big, NULL, 0, NULL),
			 0);
	n = strlen(sp.name);
	ck_assert_uint_eq(n, sizeof(sp.name) - 1);
	ck_assert_str_eq(sp.name + n - 4, ".run");
}
END_TEST

START_TEST(span_child_traceparent_carries_this_span)
{
	struct ps_span sp;
	char buf[56], sid[17], want[56];

	ck_assert_int_eq(ps_span_start(&sp, "00-" TID "-" PID "-01", NULL,
				       "app", NULL, 0, NULL), 0);
	ck_assert_int_eq(ps_span_span_id_hex(&sp, sid, sizeof(sid)), 0);
	snprintf(want, sizeof(want), "00-%s-%s-01", TID, sid);
	ck_assert_int_eq(ps_span_child_traceparent(&sp, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, want);
	ck_assert_int_eq(ps_span_child_traceparent(&sp, buf, 55), -ENOSPC);
}
END_TEST

START_TEST(span_child_traceparent_of_new_trace_parses_back)
{
	struct ps_span sp;
	struct ps_traceparent tp;
	char buf[56];

	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, "app", NULL, 0, NULL),
			 0);
	ck_assert_int_eq(ps_span_child_traceparent(&sp, buf, sizeof(buf)), 0);
	ck_assert_int_eq(ps_traceparent_parse(buf, &tp), 0);
	ck_assert_mem_eq(tp.trace_id, sp.trace_id, 16);
	ck_assert_mem_eq(tp.span_id, sp.span_id, 8);
	ck_assert_uint_eq(tp.flags, 0x03);
}
END_TEST

START_TEST(span_id_hex_checks_buffer_size)
{
	struct ps_span sp;
	char buf[33];

	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, "app", NULL, 0, NULL),
			 0);
	ck_assert_int_eq(ps_span_trace_id_hex(&sp, buf, 32), -ENOSPC);
	ck_assert_int_eq(ps_span_span_id_hex(&sp, buf, 16), -ENOSPC);
	ck_assert_int_eq(ps_span_span_id_hex(&sp, buf, 17), 0);
	ck_assert_uint_eq(strlen(buf), 16);
	ck_assert_int_eq(ps_span_start(NULL, NULL, NULL, "a", NULL, 0, NULL),
			 -EINVAL);
}
END_TEST

START_TEST(span_end_records_time_and_exit_code)
{
	struct ps_span sp;

	ck_assert_int_eq(ps_span_start(&sp, NULL, NULL, "app", NULL, 100,
				       NULL), 0);
	ps_span_end(&sp, 250, 3);
	ck_assert_uint_eq(sp.start_ns, 100);
	ck_assert_uint_eq(sp.end_ns, 250);
	ck_assert_int_eq(sp.exit_code, 3);
}
END_TEST

static Suite *
span_suite(void)
{
	Suite *s = suite_create("span");
	TCase *tc = tcase_create("span");

	tcase_add_test(tc, span_new_trace_sets_sampled_and_random_flags);
	tcase_add_test(tc, span_new_traces_get_distinct_ids);
	tcase_add_test(tc, span_join_keeps_trace_and_sets_parent);
	tcase_add_test(tc, span_join_keeps_only_sampled_and_random_bits);
	tcase_add_test(tc, span_join_drops_invalid_tracestate);
	tcase_add_test(tc, span_invalid_traceparent_warns_and_starts_new_trace);
	tcase_add_test(tc, span_name_uses_last_part_of_app_name);
	tcase_add_test(tc, span_name_override_wins);
	tcase_add_test(tc, span_name_is_cut_to_fit_on_a_character_boundary);
	tcase_add_test(tc, span_child_traceparent_carries_this_span);
	tcase_add_test(tc, span_child_traceparent_of_new_trace_parses_back);
	tcase_add_test(tc, span_id_hex_checks_buffer_size);
	tcase_add_test(tc, span_end_records_time_and_exit_code);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(span_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
