/* check_push.c -- the push API's labels and PushRequest bodies. */
#include "uploader/push.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ps_tags t;

static void
tags(const char *spec)
{
	struct ps_report rep = { 0 };

	memset(&t, 0, sizeof(t));
	ck_assert_int_ge(ps_tags_parse(&t, spec, &rep), 0);
}

/* A protobuf reader just big enough for PushRequest: field `want` of
 * wire type 2 number `nth` in p[0..n); returns its bytes, or NULL. */
static const uint8_t *
field(const uint8_t *p, size_t n, unsigned want, unsigned nth, size_t *len)
{
	size_t i = 0;

	while (i < n) {
		uint64_t key = 0, l = 0;
		int sh = 0;

		do
			key |= (uint64_t)(p[i] & 0x7f) << sh, sh += 7;
		while (p[i++] & 0x80);
		ck_assert_uint_eq(key & 7, 2);
		sh = 0;
		do
			l |= (uint64_t)(p[i] & 0x7f) << sh, sh += 7;
		while (p[i++] & 0x80);
		ck_assert_uint_le(i + l, n);
		if ((key >> 3) == want && nth-- == 0) {
			*len = l;
			return p + i;
		}
		i += l;
	}
	return NULL;
}

START_TEST(push_labels_are_sorted_with_name_delta_service_and_tags)
{
	struct ps_push_label l[PS_PUSH_MAX_LABELS];
	unsigned dropped;
	size_t n;

	tags("env=dev,region.name=eu,zone=a");
	n = ps_push_labels("process_cpu", "app", &t, l, &dropped);
	ck_assert_uint_eq(n, 7);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_str_eq(l[0].name, "__delta__");
	ck_assert_str_eq(l[0].value, "false");
	ck_assert_str_eq(l[1].name, "__name__");
	ck_assert_str_eq(l[1].value, "process_cpu");
	ck_assert_str_eq(l[2].name, "env");
	ck_assert_str_eq(l[3].name, "pyroscope_spy");
	ck_assert_str_eq(l[4].name, "region_name");
	ck_assert_str_eq(l[4].value, "eu");
	ck_assert_str_eq(l[5].name, "service_name");
	ck_assert_str_eq(l[5].value, "app");
	ck_assert_str_eq(l[6].name, "zone");
}
END_TEST

START_TEST(push_labels_service_name_tag_wins_and_clashes_are_dropped)
{
	struct ps_push_label l[PS_PUSH_MAX_LABELS];
	unsigned dropped;
	size_t n, i;

	tags("service_name=svc,a.b=1,a_b=2,9lives=x");
	n = ps_push_labels("memory", "app", &t, l, &dropped);
	ck_assert_uint_eq(dropped, 2);  /* a_b after a.b, and 9lives */
	ck_assert_uint_eq(n, 5);
	for (i = 0; i < n; i++) {
		if (!strcmp(l[i].name, "service_name"))
			ck_assert_str_eq(l[i].value, "svc");
		if (!strcmp(l[i].name, "a_b"))
			ck_assert_str_eq(l[i].value, "1");
	}
}
END_TEST

START_TEST(push_labels_stop_at_the_servers_thirty)
{
	struct ps_push_label l[PS_PUSH_MAX_LABELS];
	char spec[1024] = "";
	unsigned dropped, i;
	size_t n;

	for (i = 0; i < 30; i++)
		snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), "%sk%u=v", i ? "," : "", i);
	tags(spec);
	n = ps_push_labels("memory", "app", &t, l, &dropped);
	ck_assert_uint_eq(n, 30);
	ck_assert_uint_eq(dropped, 4);
}
END_TEST

START_TEST(push_request_holds_one_series_one_sample_and_an_id)
{
	struct ps_push_label l[PS_PUSH_MAX_LABELS];
	struct ps_buf b = PS_BUF_INIT(1 << 20);
	const uint8_t *series, *lab, *sample, *raw, *id, *name;
	size_t slen, llen, smplen, rlen, idlen, nlen;
	unsigned dropped;
	size_t n;

	tags("env=dev");
	n = ps_push_labels("process_cpu", "app", &t, l, &dropped);
	ck_assert_int_eq(ps_push_request(l, n, "\x1f\x8bprofile", 9, &b), 0);
	series = field(b.data, b.len, 1, 0, &slen);
	ck_assert_ptr_nonnull(series);
	ck_assert_uint_eq(slen + (size_t)(series - b.data), b.len);  /* one series only */
	lab = field(series, slen, 1, 1, &llen);
	name = field(lab, llen, 1, 0, &nlen);
	ck_assert_int_eq((int)nlen, 8);
	ck_assert_int_eq(memcmp(name, "__name__", 8), 0);
	ck_assert_ptr_null(field(series, slen, 2, 1, &smplen));
	sample = field(series, slen, 2, 0, &smplen);
	raw = field(sample, smplen, 1, 0, &rlen);
	ck_assert_uint_eq(rlen, 9);
	ck_assert_int_eq(memcmp(raw, "\x1f\x8bprofile", 9), 0);
	id = field(sample, smplen, 2, 0, &idlen);
	ck_assert_uint_eq(idlen, 36);
	ck_assert_int_eq(id[14], '4');  /* UUID version 4 */
	ps_buf_free(&b);
}
END_TEST

START_TEST(push_request_refuses_an_empty_profile_and_restores_the_buffer)
{
	struct ps_buf b = PS_BUF_INIT(64);
	struct ps_push_label l = { "__name__", "memory" };

	ck_assert_int_eq(ps_push_request(&l, 1, "x", 0, &b), -EINVAL);
	ck_assert_int_eq(ps_push_request(&l, 1, "0123456789012345678901234567890123456789"
					 "0123456789", 50, &b), -E2BIG);
	ck_assert_uint_eq(b.len, 0);
	ps_buf_free(&b);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("push");
	TCase *tc = tcase_create("push");
	SRunner *r;
	int failed;

	tcase_add_test(tc, push_labels_are_sorted_with_name_delta_service_and_tags);
	tcase_add_test(tc, push_labels_service_name_tag_wins_and_clashes_are_dropped);
	tcase_add_test(tc, push_labels_stop_at_the_servers_thirty);
	tcase_add_test(tc, push_request_holds_one_series_one_sample_and_an_id);
	tcase_add_test(tc, push_request_refuses_an_empty_profile_and_restores_the_buffer);
	suite_add_tcase(s, tc);
	r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
