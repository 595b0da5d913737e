/* check_httpreq.c -- the listener's request parser and query helpers. */
#include "uploader/httpreq.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct ps_httpreq rq;

static int
parse(const char *s)
{
	return ps_httpreq_parse(s, strlen(s), &rq);
}

START_TEST(httpreq_accepts_what_alloy_sends)
{
	ck_assert_int_eq(parse("GET /debug/pprof/profile?seconds=14 HTTP/1.1\r\nHost: h:6060\r\n"
			       "User-Agent: Alloy/v1.11.0\r\nAccept-Encoding: gzip\r\n\r\n"), 0);
	ck_assert_str_eq(rq.path, "/debug/pprof/profile");
	ck_assert_str_eq(rq.query, "seconds=14");
	ck_assert_int_eq(rq.head, 0);
	ck_assert_int_eq(parse("HEAD /debug/pprof/heap HTTP/1.0\n\n"), 0);
	ck_assert_int_eq(rq.head, 1);
	ck_assert_str_eq(rq.query, "");
}
END_TEST

START_TEST(httpreq_waits_for_the_empty_line)
{
	ck_assert_int_eq(parse("GET /debug/pprof/heap HTTP/1.1\r\nHost: x\r\n"), -EAGAIN);
	ck_assert_int_eq(parse("GET /debug/pp"), -EAGAIN);
	ck_assert_int_eq(parse(""), -EAGAIN);
}
END_TEST

START_TEST(httpreq_maps_each_refusal_to_its_status)
{
	static const struct {
		const char *req;
		int status;
	} c[] = {
		{ "POST /debug/pprof/heap HTTP/1.1\r\nHost: x\r\n\r\n", 405 },
		{ "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
		{ "GET /x HTTP/2.0\r\nHost: x\r\n\r\n", 505 },
		{ "GET /x HTTP/1.1x\r\nHost: x\r\n\r\n", 505 },
		{ "GET /x HTP\r\n\r\n", 400 },
		{ "GET /x\r\n\r\n", 400 },
		{ "GET /x HTTP/1.1\r\n\r\n", 400 },                        /* no Host */
		{ "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 },
		{ "GET http://h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400 },
		{ "GET /x#f HTTP/1.1\r\nHost: h\r\n\r\n", 400 },
		{ "GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nab", 400 },
		{ "GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", 400 },
		{ "GET /x HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400 },
		{ "GET /x HTTP/1.1\r\nHo st: h\r\n\r\n", 400 },
		{ "G(T /x HTTP/1.1\r\nHost: h\r\n\r\n", 400 },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ck_assert_msg(parse(c[i].req) == c[i].status, "%s: %d", c[i].req, parse(c[i].req));
		ck_assert_ptr_nonnull(rq.why);
	}
	ck_assert_int_eq(parse("GET /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"), 0);
}
END_TEST

START_TEST(httpreq_refuses_a_head_over_8k)
{
	char *big = malloc(PS_HTTPREQ_MAX + 100);

	memset(big, 'a', PS_HTTPREQ_MAX + 99);
	memcpy(big, "GET /x HTTP/1.1\r\nX: ", 20);
	big[PS_HTTPREQ_MAX + 99] = '\0';
	ck_assert_int_eq(parse(big), 431);
	free(big);
}
END_TEST

START_TEST(httpreq_query_decodes_and_refuses_repeats)
{
	char v[16];

	ck_assert_int_eq(ps_httpreq_query("a=1&seconds=%31%34&b", "seconds", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "14");
	ck_assert_int_eq(ps_httpreq_query("a=1", "seconds", v, sizeof(v)), 0);
	ck_assert_int_eq(ps_httpreq_query("seconds=1&seconds=2", "seconds", v, sizeof(v)), -1);
	ck_assert_int_eq(ps_httpreq_query("seconds=%zz", "seconds", v, sizeof(v)), -1);
	ck_assert_int_eq(ps_httpreq_query("seconds=%00", "seconds", v, sizeof(v)), -1);
	ck_assert_int_eq(ps_httpreq_query("seconds=12345678901234567", "seconds", v, sizeof(v)), -1);
	ck_assert_int_eq(ps_httpreq_query("seconds", "seconds", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "");
}
END_TEST

START_TEST(httpreq_seconds_is_a_positive_whole_number_up_to_max)
{
	unsigned s = 0;

	ck_assert_int_eq(ps_httpreq_seconds("14", 300, &s), 0);
	ck_assert_uint_eq(s, 14);
	ck_assert_int_eq(ps_httpreq_seconds("300", 300, &s), 0);
	ck_assert_int_eq(ps_httpreq_seconds("301", 300, &s), -ERANGE);
	ck_assert_int_eq(ps_httpreq_seconds("9999999999", 300, &s), -ERANGE);
	ck_assert_int_eq(ps_httpreq_seconds("0", 300, &s), -EINVAL);
	ck_assert_int_eq(ps_httpreq_seconds("014", 300, &s), -EINVAL);
	ck_assert_int_eq(ps_httpreq_seconds("-1", 300, &s), -EINVAL);
	ck_assert_int_eq(ps_httpreq_seconds("1.5", 300, &s), -EINVAL);
	ck_assert_int_eq(ps_httpreq_seconds(" 1", 300, &s), -EINVAL);
	ck_assert_int_eq(ps_httpreq_seconds("", 300, &s), -EINVAL);
	ck_assert_uint_eq(s, 300);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("httpreq");
	TCase *tc = tcase_create("httpreq");
	SRunner *r;
	int failed;

	tcase_add_test(tc, httpreq_accepts_what_alloy_sends);
	tcase_add_test(tc, httpreq_waits_for_the_empty_line);
	tcase_add_test(tc, httpreq_maps_each_refusal_to_its_status);
	tcase_add_test(tc, httpreq_refuses_a_head_over_8k);
	tcase_add_test(tc, httpreq_query_decodes_and_refuses_repeats);
	tcase_add_test(tc, httpreq_seconds_is_a_positive_whole_number_up_to_max);
	suite_add_tcase(s, tc);
	r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
