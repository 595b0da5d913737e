/* check_headers.c -- PYROSCOPE_HTTP_HEADERS JSON parsing. */
#include "uploader/headers.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ps_headers h;
static struct ps_report rep;

static void
setup(void)
{
	memset(&h, 0x55, sizeof(h));    /* parse must not rely on zeroing */
	memset(&rep, 0x55, sizeof(rep));
}

static void
parse_bad(const char *json)
{
	ck_assert_msg(ps_headers_parse_json(json, &h, &rep) == -EINVAL,
		      "accepted: %s", json);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_uint_eq(rep.dropped, 0);
	ck_assert_ptr_null(ps_headers_line(&h, 0));
}

START_TEST(headers_parse_object_of_strings_in_order)
{
	const char *v[PS_HEADERS_MAX];

	ck_assert_int_eq(ps_headers_parse_json(
		" {\"X-Foo\" : \"bar\",\n\t\"X-Baz\":\"q r\"} \n", &h, &rep), 2);
	ck_assert_str_eq(ps_headers_line(&h, 0), "X-Foo: bar");
	ck_assert_str_eq(ps_headers_line(&h, 1), "X-Baz: q r");
	ck_assert_ptr_null(ps_headers_line(&h, 2));
	ck_assert_uint_eq(rep.dropped, 0);
	ck_assert_uint_eq(ps_headers_vector(&h, v), 2);
	ck_assert_str_eq(v[1], "X-Baz: q r");
}
END_TEST

START_TEST(headers_parse_empty_object_null_and_blank)
{
	ck_assert_int_eq(ps_headers_parse_json("{}", &h, &rep), 0);
	ck_assert_int_eq(ps_headers_parse_json(" { } ", &h, NULL), 0);
	ck_assert_int_eq(ps_headers_parse_json(NULL, &h, &rep), 0);
	ck_assert_int_eq(ps_headers_parse_json("  \n", &h, &rep), 0);
	ck_assert_int_eq(ps_headers_parse_json("", &h, &rep), 0);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_int_eq(ps_headers_parse_json("{}", NULL, &rep), -EINVAL);
}
END_TEST

START_TEST(headers_decode_simple_escapes)
{
	ck_assert_int_eq(ps_headers_parse_json(
		"{\"X-A\":\"q\\\"b\\\\s\\/t\\tend\"}", &h, &rep), 1);
	ck_assert_str_eq(ps_headers_line(&h, 0), "X-A: q\"b\\s/t\tend");
}
END_TEST

START_TEST(headers_decode_unicode_escapes_and_surrogate_pairs)
{
	ck_assert_int_eq(ps_headers_parse_json(
		"{\"X-U\":\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\"}", &h, &rep), 1);
	ck_assert_str_eq(ps_headers_line(&h, 0),
			 "X-U: A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	/* raw UTF-8 passes through unchanged */
	ck_assert_int_eq(ps_headers_parse_json(
		"{\"X-U\":\"caf\xc3\xa9\"}", &h, &rep), 1);
	ck_assert_str_eq(ps_headers_line(&h, 0), "X-U: caf\xc3\xa9");
}
END_TEST

START_TEST(headers_reject_bad_unicode)
{
	parse_bad("{\"X\":\"\\ud83d\"}");               /* lone high surrogate */
	parse_bad("{\"X\":\"\\ud83dx\"}");
	parse_bad("{\"X\":\"\\ud83d\\u0041\"}");        /* high + non-low */
	parse_bad("{\"X\":\"\\ude00\"}");               /* lone low surrogate */
	parse_bad("{\"X\":\"\\u12G4\"}");
	parse_bad("{\"X\":\"\\u12\"}");
	parse_bad("{\"X\":\"\xc3\x28\"}");              /* invalid UTF-8 */
	parse_bad("{\"X\":\"\xc0\xaf\"}");              /* overlong */
	parse_bad("{\"X\":\"\xed\xa0\x80\"}");          /* encoded surrogate */
	parse_bad("{\"X\":\"\xe2\x82\"}");              /* truncated */
}
END_TEST

START_TEST(headers_reject_malformed_json)
{
	parse_bad("[]");
	parse_bad("\"X\"");
	parse_bad("{");
	parse_bad("{\"X\":\"y\"");
	parse_bad("{\"X\":\"y\",}");
	parse_bad("{,}");
	parse_bad("{\"X\" \"y\"}");
	parse_bad("{\"X\":\"y\" \"Z\":\"w\"}");
	parse_bad("{'X':'y'}");
	parse_bad("{X:\"y\"}");
	parse_bad("{\"X\":\"y}");
	parse_bad("{\"X\":\"a\\x\"}");
	parse_bad("{\"X\":\"a\\");
	parse_bad("{\"X\":\"raw\nnewline\"}");
	parse_bad("{\"X\":\"raw\ttab\"}");
}
END_TEST

START_TEST(headers_reject_non_string_values_and_trailing_garbage)
{
	parse_bad("{\"X\":1}");
	parse_bad("{\"X\":true}");
	parse_bad("{\"X\":null}");
	parse_bad("{\"X\":{\"a\":\"b\"}}");
	parse_bad("{\"X\":[\"b\"]}");
	parse_bad("{\"X\":\"y\"} x");
	parse_bad("{\"X\":\"y\"}{}");
	/* a syntax error after many good members still rejects all */
	parse_bad("{\"A\":\"1\",\"B\":\"2\",\"C\":3}");
}
END_TEST

START_TEST(headers_drop_values_that_would_inject_lines)
{
	ck_assert_int_eq(ps_headers_parse_json(
		"{\"X-A\":\"ok\\r\\nX-Evil: 1\",\"X-B\":\"a\\nb\","
		"\"X-C\":\"nul\\u0000byte\",\"X-D\":\"fine\"}", &h, &rep), 1);
	ck_assert_str_eq(ps_headers_line(&h, 0), "X-D: fine");
	ck_assert_uint_eq(rep.dropped, 3);
	ck_assert_uint_eq(rep.listed, 3);
	ck_assert_int_eq(rep.item[0].why, PS_HEADERS_DROP_BAD_VALUE);
	ck_assert_str_eq(rep.item[0].name, "X-A");
	ck_assert_str_eq(rep.item[1].name, "X-B");
	ck_assert_str_eq(rep.item[2].name, "X-C");
}
END_TEST

START_TEST(headers_drop_blank_values_but_keep_tabs_inside)
{
	ck_assert_int_eq(ps_headers_parse_json(
		"{\"X-E\":\"\",\"X-S\":\"  \",\"X-T\":\"a\\tb\"}", &h, &rep), 1);
	ck_assert_str_eq(ps_headers_line(&h, 0), "X-T: a\tb");
	ck_assert_uint_eq(rep.dropped, 2);
	ck_assert_int_eq(rep.item[1].why, PS_HEADERS_DROP_BAD_VALUE);
}
END_TEST

START_TEST(headers_drop_names_that_are_not_tokens)
{
	ck_assert_int_eq(ps_headers_parse_json(
		"{\"Bad Name\":\"1\",\"\":\"2\",\"X:Y\":\"3\",\"X\\r\\nY\":\"4\","
		"\"caf\xc3\xa9\":\"5\",\"!#$%&'*+-.^_`|~09aZ\":\"6\"}",
		&h, &rep), 1);
	ck_assert_str_eq(ps_headers_line(&h, 0), "!#$%&'*+-.^_`|~09aZ: 6");
	ck_assert_uint_eq(rep.dropped, 5);
	ck_assert_uint_eq(rep.listed, PS_REPORT_ITEMS);
	ck_assert_int_eq(rep.item[0].why, PS_HEADERS_DROP_BAD_NAME);
	ck_assert_str_eq(rep.item[0].name, "Bad Name");
	ck_assert_str_eq(rep.item[1].name, "");
	ck_assert_str_eq(rep.item[3].name, "X??Y");     /* CR LF masked */
}
END_TEST

START_TEST(headers_drop_body_framing_headers)
{
	ck_assert_int_eq(ps_headers_parse_json(
		"{\"content-type\":\"text/plain\",\"Content-Length\":\"1\","
		"\"TRANSFER-ENCODING\":\"chunked\",\"Authorization\":\"Bearer t\"}",
		&h, &rep), 1);
	ck_assert_str_eq(ps_headers_line(&h, 0), "Authorization: Bearer t");
	ck_assert_uint_eq(rep.dropped, 3);
	ck_assert_int_eq(rep.item[0].why, PS_HEADERS_DROP_RESERVED);
	ck_assert_int_eq(rep.item[2].why, PS_HEADERS_DROP_RESERVED);
}
END_TEST

START_TEST(headers_keep_first_of_names_equal_ignoring_case)
{
	ck_assert_int_eq(ps_headers_parse_json(
		"{\"X-Scope-OrgID\":\"a\",\"x-scope-orgid\":\"b\",\"X-Scope\":\"c\"}",
		&h, &rep), 2);
	ck_assert_str_eq(ps_headers_line(&h, 0), "X-Scope-OrgID: a");
	ck_assert_str_eq(ps_headers_line(&h, 1), "X-Scope: c");
	ck_assert_uint_eq(rep.dropped, 1);
	ck_assert_int_eq(rep.item[0].why, PS_HEADERS_DROP_DUPLICATE);
	ck_assert_str_eq(rep.item[0].name, "x-scope-orgid");
}
END_TEST

START_TEST(headers_drop_beyond_the_count_cap)
{
	char json[4096];
	size_t o;
	int i;

	o = (size_t)snprintf(json, sizeof(json), "{");
	for (i = 0; i < PS_HEADERS_MAX + 3; i++)
		o += (size_t)snprintf(json + o, sizeof(json) - o, "%s\"X-%d\":\"%d\"",
				      i ? "," : "", i, i);
	snprintf(json + o, sizeof(json) - o, "}");
	ck_assert_int_eq(ps_headers_parse_json(json, &h, &rep), PS_HEADERS_MAX);
	ck_assert_str_eq(ps_headers_line(&h, PS_HEADERS_MAX - 1), "X-31: 31");
	ck_assert_uint_eq(rep.dropped, 3);
	ck_assert_int_eq(rep.item[0].why, PS_HEADERS_DROP_FULL);
	ck_assert_str_eq(rep.item[0].name, "X-32");
}
END_TEST

START_TEST(headers_drop_beyond_the_byte_cap_but_still_check_syntax)
{
	static char json[3 * PS_HEADERS_BYTES];
	size_t big = PS_HEADERS_BYTES - 100;
	size_t o = 0;

	o += (size_t)snprintf(json, sizeof(json), "{\"X-Big\":\"");
	memset(json + o, 'v', big);
	o += big;
	o += (size_t)snprintf(json + o, sizeof(json) - o,
			      "\",\"X-Over\":\"%0200d\",\"X-Small\":\"s\"}", 0);
	ck_assert_int_eq(ps_headers_parse_json(json, &h, &rep), 2);
	ck_assert_uint_eq(strlen(ps_headers_line(&h, 0)), strlen("X-Big: ") + big);
	ck_assert_str_eq(ps_headers_line(&h, 1), "X-Small: s");
	ck_assert_uint_eq(rep.dropped, 1);
	ck_assert_int_eq(rep.item[0].why, PS_HEADERS_DROP_FULL);
	ck_assert_str_eq(rep.item[0].name, "X-Over");
	/* the same, broken after the overflow, is rejected as a whole */
	json[o - 1] = ',';
	parse_bad(json);
}
END_TEST

START_TEST(headers_struct_copies_by_value)
{
	struct ps_headers copy;

	ck_assert_int_eq(ps_headers_parse_json("{\"A\":\"1\",\"B\":\"2\"}",
					       &h, &rep), 2);
	copy = h;
	memset(&h, 0, sizeof(h));
	ck_assert_str_eq(ps_headers_line(&copy, 1), "B: 2");
}
END_TEST

START_TEST(headers_drop_reason_words_exist_for_every_reason)
{
	int why;

	for (why = PS_HEADERS_DROP_BAD_NAME; why <= PS_HEADERS_DROP_FULL; why++)
		ck_assert_str_ne(ps_headers_drop_str((enum ps_headers_drop)why),
				 "dropped");
	ck_assert_str_eq(ps_headers_drop_str((enum ps_headers_drop)0), "dropped");
}
END_TEST

static Suite *
headers_suite(void)
{
	Suite *s = suite_create("headers");
	TCase *tc = tcase_create("headers");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, headers_parse_object_of_strings_in_order);
	tcase_add_test(tc, headers_parse_empty_object_null_and_blank);
	tcase_add_test(tc, headers_decode_simple_escapes);
	tcase_add_test(tc, headers_decode_unicode_escapes_and_surrogate_pairs);
	tcase_add_test(tc, headers_reject_bad_unicode);
	tcase_add_test(tc, headers_reject_malformed_json);
	tcase_add_test(tc, headers_reject_non_string_values_and_trailing_garbage);
	tcase_add_test(tc, headers_drop_values_that_would_inject_lines);
	tcase_add_test(tc, headers_drop_blank_values_but_keep_tabs_inside);
	tcase_add_test(tc, headers_drop_names_that_are_not_tokens);
	tcase_add_test(tc, headers_drop_body_framing_headers);
	tcase_add_test(tc, headers_keep_first_of_names_equal_ignoring_case);
	tcase_add_test(tc, headers_drop_beyond_the_count_cap);
	tcase_add_test(tc, headers_drop_beyond_the_byte_cap_but_still_check_syntax);
	tcase_add_test(tc, headers_struct_copies_by_value);
	tcase_add_test(tc, headers_drop_reason_words_exist_for_every_reason);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(headers_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
