/* check_traceparent.c -- W3C Trace Context parsing, formatting, tracestate
 * validation, hex and random ids.  The traceparent cases follow the W3C
 * trace-context test suite (test/test.py: test_traceparent_*). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/traceparent.h"

#define TID "0af7651916cd43dd8448eb211c80319c"
#define PID "b7ad6b7169203331"
#define VALID "00-" TID "-" PID "-01"

static const uint8_t tid_bytes[16] = {
	0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd,
	0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c,
};
static const uint8_t pid_bytes[8] = {
	0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31,
};

START_TEST(traceparent_parses_version_00)
{
	struct ps_traceparent tp;

	ck_assert_int_eq(ps_traceparent_parse(VALID, &tp), 0);
	ck_assert_mem_eq(tp.trace_id, tid_bytes, 16);
	ck_assert_mem_eq(tp.span_id, pid_bytes, 8);
	ck_assert_uint_eq(tp.flags, 0x01);
}
END_TEST

START_TEST(traceparent_keeps_unknown_flag_bits_when_parsing)
{
	struct ps_traceparent tp;

	ck_assert_int_eq(ps_traceparent_parse("00-" TID "-" PID "-ff", &tp), 0);
	ck_assert_uint_eq(tp.flags, 0xff);
	ck_assert_int_eq(ps_traceparent_parse("00-" TID "-" PID "-00", &tp), 0);
	ck_assert_uint_eq(tp.flags, 0x00);
}
END_TEST

START_TEST(traceparent_accepts_future_version_with_more_fields)
{
	struct ps_traceparent tp;

	ck_assert_int_eq(ps_traceparent_parse("cc-" TID "-" PID
			"-01-what-the-future-will-be-like", &tp), 0);
	ck_assert_mem_eq(tp.trace_id, tid_bytes, 16);
	ck_assert_mem_eq(tp.span_id, pid_bytes, 8);
	ck_assert_uint_eq(tp.flags, 0x01);
}
END_TEST

START_TEST(traceparent_accepts_future_version_of_exactly_55_chars)
{
	struct ps_traceparent tp;

	ck_assert_int_eq(ps_traceparent_parse("cc-" TID "-" PID "-00", &tp), 0);
	ck_assert_int_eq(ps_traceparent_parse("01-" TID "-" PID "-00-", &tp),
			 0);
}
END_TEST

/* Every invalid kind, one table, each run as its own test iteration. */
static const char *const invalid[] = {
	"",
	"00",
	/* version */
	"ff-" TID "-" PID "-01",
	"0A-" TID "-" PID "-01",
	"0-" TID "-" PID "-01",
	"000-" TID "-" PID "-01",
	"0g-" TID "-" PID "-01",
	"xx-" TID "-" PID "-01",
	/* uppercase hex */
	"00-0AF7651916CD43DD8448EB211C80319C-" PID "-01",
	"00-" TID "-B7AD6B7169203331-01",
	"00-" TID "-" PID "-0A",
	/* all-zero ids */
	"00-00000000000000000000000000000000-" PID "-01",
	"00-" TID "-0000000000000000-01",
	/* wrong lengths */
	"00-0af7651916cd43dd8448eb211c80319-" PID "-01",
	"00-0af7651916cd43dd8448eb211c80319cc-" PID "-01",
	"00-" TID "-b7ad6b716920333-01",
	"00-" TID "-b7ad6b71692033311-01",
	"00-" TID "-" PID "-1",
	"00-" TID "-" PID "-011",
	"00-" TID "-" PID,
	"00-" TID "-" PID "-",
	/* wrong separators */
	"00_" TID "-" PID "-01",
	"00-" TID "_" PID "-01",
	"00-" TID "-" PID "_01",
	"00 " TID " " PID " 01",
	"00" TID PID "01",
	/* non-hex characters */
	"00-0af7651916cd43dd8448eb211c80319z-" PID "-01",
	"00-" TID "-b7ad6b716920333.-01",
	"00-" TID "-" PID "-0x",
	"00-0af7651916cd43dd8448eb211c80319\xc3\xa9-" PID "-01",
	/* version 00 must end after the flags */
	"00-" TID "-" PID "-01-",
	"00-" TID "-" PID "-01-what-the-future-will-be-like",
	"00-" TID "-" PID "-01x",
	/* a future version still needs '-' or the end after the flags */
	"cc-" TID "-" PID "-01.what-the-future-will-be-like",
	"cc-" TID "-" PID "-01what",
	"cc-" TID "-" PID "-0",
	/* surrounding whitespace is not trimmed */
	" " VALID,
	VALID " ",
};

START_TEST(traceparent_rejects_invalid_forms)
{
	struct ps_traceparent tp;

	memset(&tp, 0x5a, sizeof(tp));
	ck_assert_msg(ps_traceparent_parse(invalid[_i], &tp) == -EINVAL,
		      "accepted invalid traceparent \"%s\"", invalid[_i]);
	/* the output is untouched on failure */
	ck_assert_uint_eq(tp.flags, 0x5a);
	ck_assert_uint_eq(tp.trace_id[0], 0x5a);
}
END_TEST

START_TEST(traceparent_rejects_version_ff)
{
	struct ps_traceparent tp;

	ck_assert_int_eq(ps_traceparent_parse("ff-" TID "-" PID "-01", &tp),
			 -EINVAL);
	ck_assert_int_eq(ps_traceparent_parse("ff-" TID "-" PID "-01-more",
					      &tp), -EINVAL);
}
END_TEST

START_TEST(traceparent_rejects_null_arguments)
{
	struct ps_traceparent tp;

	ck_assert_int_eq(ps_traceparent_parse(NULL, &tp), -EINVAL);
	ck_assert_int_eq(ps_traceparent_parse(VALID, NULL), -EINVAL);
}
END_TEST

START_TEST(traceparent_format_round_trips)
{
	struct ps_traceparent tp;
	char buf[56];

	ck_assert_int_eq(ps_traceparent_parse(VALID, &tp), 0);
	ck_assert_int_eq(ps_traceparent_format(&tp, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, VALID);
}
END_TEST

START_TEST(traceparent_reemits_future_version_as_00)
{
	struct ps_traceparent tp;
	char buf[64];

	ck_assert_int_eq(ps_traceparent_parse("cc-" TID "-" PID "-01-extra",
					      &tp), 0);
	ck_assert_int_eq(ps_traceparent_format(&tp, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, VALID);
}
END_TEST

START_TEST(traceparent_format_needs_56_bytes)
{
	struct ps_traceparent tp;
	char buf[56];

	ck_assert_int_eq(ps_traceparent_parse(VALID, &tp), 0);
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(ps_traceparent_format(&tp, buf, 55), -ENOSPC);
	ck_assert_int_eq(buf[0], 'x');
	ck_assert_int_eq(ps_traceparent_format(&tp, buf, 56), 0);
	ck_assert_uint_eq(strlen(buf), 55);
}
END_TEST

/* ---- tracestate ---- */

static const char *const ts_valid[] = {
	"",
	"foo=1",
	"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
	"rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE",
	",foo=1,,  ,bar=2,",
	"tenant@vendor=1",
	"1tenant@vendor=1",
	"a_b-c*d/e=x",
	"foo=a b c",
	"foo=!\"#$%&'()*+-./:;<>?@[\\]^_`{|}~",
};

static const char *const ts_invalid[] = {
	"Foo=1",
	"foo",
	"foo=",
	"=1",
	"foo=1,bar",
	"foo=1=2",
	"foo=a,foo=b",
	"foo=a, bar=1 ,foo=b",
	"1foo=1",
	"fo.o=1",
	"@vendor=1",
	"tenant@=1",
	"tenant@1vendor=1",
	"tenant@vendor@x=1",
	"tenant@vendorvendorvend=1",
	"foo=\x01",
	"foo=\x7f",
	"foo=caf\xc3\xa9",
};

START_TEST(tracestate_accepts_valid_lists)
{
	ck_assert_msg(ps_tracestate_valid(ts_valid[_i]),
		      "rejected \"%s\"", ts_valid[_i]);
}
END_TEST

START_TEST(tracestate_rejects_invalid_lists)
{
	ck_assert_msg(!ps_tracestate_valid(ts_invalid[_i]),
		      "accepted \"%s\"", ts_invalid[_i]);
}
END_TEST

/* "k00=v,k01=v,...": n members. */
static void
make_members(char *buf, int n)
{
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		char m[16];

		snprintf(m, sizeof(m), "%sk%02d=v", i ? "," : "", i);
		strcat(buf, m);
	}
}

START_TEST(tracestate_allows_32_members_not_33)
{
	char buf[512];

	make_members(buf, 32);
	ck_assert(ps_tracestate_valid(buf));
	make_members(buf, 33);
	ck_assert(!ps_tracestate_valid(buf));
}
END_TEST

START_TEST(tracestate_caps_total_length_at_512)
{
	char buf[600];

	memcpy(buf, "k=", 2);
	memset(buf + 2, 'v', 254);      /* a value of 254 */
	buf[256] = '\0';
	strcat(buf, ",l=");
	memset(buf + 259, 'w', 253);    /* 512 characters in total */
	buf[512] = '\0';
	ck_assert_uint_eq(strlen(buf), 512);
	ck_assert(ps_tracestate_valid(buf));
	strcat(buf, "w");
	ck_assert(!ps_tracestate_valid(buf));
}
END_TEST

START_TEST(tracestate_limits_key_and_value_length)
{
	char buf[600];

	memset(buf, 'k', 256);
	strcpy(buf + 256, "=v");
	ck_assert(ps_tracestate_valid(buf));
	memset(buf, 'k', 257);
	strcpy(buf + 257, "=v");
	ck_assert(!ps_tracestate_valid(buf));
	memcpy(buf, "k=", 2);
	memset(buf + 2, 'v', 257);
	buf[259] = '\0';
	ck_assert(!ps_tracestate_valid(buf));
	ck_assert(!ps_tracestate_valid(NULL));
}
END_TEST

/* ---- hex and random ---- */

START_TEST(hex_encode_writes_lowercase_and_nul)
{
	const uint8_t in[] = { 0x00, 0xab, 0xff, 0x10 };
	char out[10];

	memset(out, 'x', sizeof(out));
	ps_hex_encode(in, sizeof(in), out);
	ck_assert_str_eq(out, "00abff10");
	ps_hex_encode(in, 0, out);
	ck_assert_str_eq(out, "");
}
END_TEST

static int
is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

START_TEST(random_ids_are_non_zero_and_differ)
{
	uint8_t a[16] = { 0 }, b[16] = { 0 }, c[1] = { 0 };

	ck_assert_int_eq(ps_trace_random(a, sizeof(a)), 0);
	ck_assert_int_eq(ps_trace_random(b, sizeof(b)), 0);
	ck_assert(!is_zero(a, sizeof(a)));
	ck_assert(!is_zero(b, sizeof(b)));
	ck_assert_mem_ne(a, b, sizeof(a));
	/* one byte is zero 1 time in 256: many draws exercise the redraw */
	for (int i = 0; i < 2000; i++) {
		ck_assert_int_eq(ps_trace_random(c, 1), 0);
		ck_assert_uint_ne(c[0], 0);
	}
}
END_TEST

START_TEST(random_rejects_empty_request)
{
	uint8_t a[1];

	ck_assert_int_eq(ps_trace_random(a, 0), -EINVAL);
	ck_assert_int_eq(ps_trace_random(NULL, 8), -EINVAL);
}
END_TEST

static Suite *
traceparent_suite(void)
{
	Suite *s = suite_create("traceparent");
	TCase *tp = tcase_create("traceparent");
	TCase *ts = tcase_create("tracestate");
	TCase *ids = tcase_create("ids");

	tcase_add_test(tp, traceparent_parses_version_00);
	tcase_add_test(tp, traceparent_keeps_unknown_flag_bits_when_parsing);
	tcase_add_test(tp, traceparent_accepts_future_version_with_more_fields);
	tcase_add_test(tp, traceparent_accepts_future_version_of_exactly_55_chars);
	tcase_add_loop_test(tp, traceparent_rejects_invalid_forms, 0,
			    (int)(sizeof(invalid) / sizeof(invalid[0])));
	tcase_add_test(tp, traceparent_rejects_version_ff);
	tcase_add_test(tp, traceparent_rejects_null_arguments);
	tcase_add_test(tp, traceparent_format_round_trips);
	tcase_add_test(tp, traceparent_reemits_future_version_as_00);
	tcase_add_test(tp, traceparent_format_needs_56_bytes);
	suite_add_tcase(s, tp);

	tcase_add_loop_test(ts, tracestate_accepts_valid_lists, 0,
			    (int)(sizeof(ts_valid) / sizeof(ts_valid[0])));
	tcase_add_loop_test(ts, tracestate_rejects_invalid_lists, 0,
			    (int)(sizeof(ts_invalid) / sizeof(ts_invalid[0])));
	tcase_add_test(ts, tracestate_allows_32_members_not_33);
	tcase_add_test(ts, tracestate_caps_total_length_at_512);
	tcase_add_test(ts, tracestate_limits_key_and_value_length);
	suite_add_tcase(s, ts);

	tcase_add_test(ids, hex_encode_writes_lowercase_and_nul);
	tcase_add_test(ids, random_ids_are_non_zero_and_differ);
	tcase_add_test(ids, random_rejects_empty_request);
	suite_add_tcase(s, ids);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(traceparent_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
