/* check_tags.c -- tag lists, ps_tags_add, app names and series names. */
#include "uploader/tags.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ps_tags t;
static struct ps_report rep;

static void
setup(void)
{
	memset(&t, 0, sizeof(t));
	memset(&rep, 0, sizeof(rep));
}

/* Parse spec into the fresh set; return the count. */
static int
parse(const char *spec)
{
	int rc = ps_tags_parse(&t, spec, &rep);

	ck_assert_int_ge(rc, 0);
	return rc;
}

START_TEST(tags_parse_keeps_valid_members_in_order)
{
	ck_assert_int_eq(parse("env=dev,region=eu-west-1,ver=1.2.3"), 3);
	ck_assert_uint_eq(t.n, 3);
	ck_assert_str_eq(t.tag[0].key, "env");
	ck_assert_str_eq(t.tag[0].value, "dev");
	ck_assert_str_eq(t.tag[1].key, "region");
	ck_assert_str_eq(t.tag[1].value, "eu-west-1");
	ck_assert_str_eq(t.tag[2].key, "ver");
	ck_assert_str_eq(t.tag[2].value, "1.2.3");
	ck_assert_uint_eq(rep.dropped, 0);
}
END_TEST

START_TEST(tags_parse_trims_whitespace_around_keys_and_values)
{
	ck_assert_int_eq(parse("  env = dev ,\tteam=core infra\n"), 2);
	ck_assert_str_eq(t.tag[0].key, "env");
	ck_assert_str_eq(t.tag[0].value, "dev");
	ck_assert_str_eq(t.tag[1].key, "team");
	ck_assert_str_eq(t.tag[1].value, "core infra");
}
END_TEST

START_TEST(tags_parse_ignores_empty_members_silently)
{
	ck_assert_int_eq(parse(",a=1,, ,b=2,"), 2);
	ck_assert_uint_eq(rep.dropped, 0);
	ck_assert_int_eq(parse(""), 0);
	ck_assert_int_eq(parse(NULL), 0);
	ck_assert_uint_eq(t.n, 2);
}
END_TEST

START_TEST(tags_parse_drops_bad_names)
{
	ck_assert_int_eq(parse("a-b=1,=2,sp ace=3,é=4,ok.name_1=5"), 1);
	ck_assert_str_eq(t.tag[0].key, "ok.name_1");
	ck_assert_uint_eq(rep.dropped, 4);
	ck_assert_uint_eq(rep.listed, 4);
	ck_assert_int_eq(rep.item[0].why, PS_TAGS_DROP_BAD_NAME);
	ck_assert_str_eq(rep.item[0].name, "a-b");
	ck_assert_int_eq(rep.item[1].why, PS_TAGS_DROP_BAD_NAME);
	ck_assert_str_eq(rep.item[1].name, "");
	ck_assert_str_eq(rep.item[2].name, "sp ace");
	ck_assert_str_eq(rep.item[3].name, "??");     /* non-ASCII masked */
}
END_TEST

START_TEST(tags_parse_drops_reserved_double_underscore_names)
{
	ck_assert_int_eq(parse("__name__=x,__foo=y,_ok=z"), 1);
	ck_assert_str_eq(t.tag[0].key, "_ok");
	ck_assert_uint_eq(rep.dropped, 2);
	ck_assert_int_eq(rep.item[0].why, PS_TAGS_DROP_RESERVED);
	ck_assert_str_eq(rep.item[0].name, "__name__");
	ck_assert_int_eq(rep.item[1].why, PS_TAGS_DROP_RESERVED);
}
END_TEST

START_TEST(tags_parse_drops_values_with_braces_equals_or_controls)
{
	ck_assert_int_eq(parse("a={x,b=y},c=p=q,d=line\nbreak,e=t\tab,f=ok"), 1);
	ck_assert_str_eq(t.tag[0].key, "f");
	/* "a={x" "b=y}" "c=p=q" "d=line\nbreak" "e=t\tab" */
	ck_assert_uint_eq(rep.dropped, 5);
	ck_assert_int_eq(rep.item[0].why, PS_TAGS_DROP_BAD_VALUE);
	ck_assert_str_eq(rep.item[0].name, "a");
	ck_assert_str_eq(rep.item[1].name, "b");
	ck_assert_str_eq(rep.item[2].name, "c");
	ck_assert_str_eq(rep.item[3].name, "d");
	ck_assert_uint_eq(rep.listed, PS_REPORT_ITEMS);
}
END_TEST

START_TEST(tags_parse_splits_value_with_comma_into_a_member_without_equals)
{
	ck_assert_int_eq(parse("a=b,c"), 1);
	ck_assert_str_eq(t.tag[0].value, "b");
	ck_assert_uint_eq(rep.dropped, 1);
	ck_assert_int_eq(rep.item[0].why, PS_TAGS_DROP_SYNTAX);
	ck_assert_str_eq(rep.item[0].name, "c");
}
END_TEST

START_TEST(tags_parse_drops_empty_and_invalid_utf8_values)
{
	ck_assert_int_eq(parse("a=,b=  ,c=\xc3\x28,d=caf\xc3\xa9"), 1);
	ck_assert_str_eq(t.tag[0].key, "d");
	ck_assert_str_eq(t.tag[0].value, "caf\xc3\xa9");
	ck_assert_uint_eq(rep.dropped, 3);
}
END_TEST

START_TEST(tags_parse_keeps_first_of_duplicate_names)
{
	ck_assert_int_eq(parse("env=dev,env=prod"), 1);
	ck_assert_str_eq(ps_tags_get(&t, "env"), "dev");
	ck_assert_int_eq(rep.item[0].why, PS_TAGS_DROP_DUPLICATE);
	/* a second list does not override the first either */
	ck_assert_int_eq(parse("env=staging,x=1"), 1);
	ck_assert_str_eq(ps_tags_get(&t, "env"), "dev");
	ck_assert_uint_eq(rep.dropped, 2);
}
END_TEST

START_TEST(tags_parse_drops_the_31st_tag)
{
	char spec[1024];
	size_t o = 0;
	int i;

	for (i = 0; i < PS_TAGS_MAX + 1; i++)
		o += (size_t)snprintf(spec + o, sizeof(spec) - o, "k%d=v%d,", i, i);
	ck_assert_int_eq(parse(spec), PS_TAGS_MAX);
	ck_assert_str_eq(t.tag[PS_TAGS_MAX - 1].key, "k29");
	ck_assert_ptr_null(ps_tags_get(&t, "k30"));
	ck_assert_uint_eq(rep.dropped, 1);
	ck_assert_int_eq(rep.item[0].why, PS_TAGS_DROP_FULL);
	ck_assert_str_eq(rep.item[0].name, "k30");
}
END_TEST

START_TEST(tags_parse_drops_overlong_names_and_values)
{
	static char spec[2048];
	char name[PS_TAGS_KEY_MAX + 2], value[PS_TAGS_VALUE_MAX + 2];

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	memset(value, 'v', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	snprintf(spec, sizeof(spec), "%s=1,a=%s,b=%.*s", name, value,
		 PS_TAGS_VALUE_MAX, value);
	ck_assert_int_eq(parse(spec), 1);
	ck_assert_str_eq(t.tag[0].key, "b");
	ck_assert_uint_eq(strlen(t.tag[0].value), PS_TAGS_VALUE_MAX);
	ck_assert_int_eq(rep.item[0].why, PS_TAGS_DROP_BAD_NAME);
	ck_assert_uint_eq(strlen(rep.item[0].name), PS_REPORT_NAME - 1);
	ck_assert_int_eq(rep.item[1].why, PS_TAGS_DROP_TOO_LONG);
}
END_TEST

START_TEST(tags_parse_rejects_null_set)
{
	ck_assert_int_eq(ps_tags_parse(NULL, "a=b", NULL), -EINVAL);
	ck_assert_int_eq(ps_tags_parse(&t, "a=b,bad-=c", NULL), 1);
}
END_TEST

START_TEST(tags_add_never_overwrites)
{
	ck_assert_int_eq(ps_tags_add(&t, "trace_id", "abc"), 0);
	ck_assert_int_eq(ps_tags_add(&t, "trace_id", "def"), 1);
	ck_assert_str_eq(ps_tags_get(&t, "trace_id"), "abc");
	ck_assert_uint_eq(t.n, 1);
}
END_TEST

START_TEST(tags_add_rejects_invalid_and_reports_full)
{
	int i;
	char k[16];

	ck_assert_int_eq(ps_tags_add(&t, "__name__", "x"), -EINVAL);
	ck_assert_int_eq(ps_tags_add(&t, "a b", "x"), -EINVAL);
	ck_assert_int_eq(ps_tags_add(&t, "a", "x}"), -EINVAL);
	ck_assert_int_eq(ps_tags_add(&t, "a", " x"), -EINVAL);
	ck_assert_int_eq(ps_tags_add(&t, "a", ""), -EINVAL);
	ck_assert_int_eq(ps_tags_add(&t, NULL, "x"), -EINVAL);
	ck_assert_uint_eq(t.n, 0);
	for (i = 0; i < PS_TAGS_MAX; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		ck_assert_int_eq(ps_tags_add(&t, k, "v"), 0);
	}
	ck_assert_int_eq(ps_tags_add(&t, "root_span_id", "v"), -ENOSPC);
	ck_assert_int_eq(ps_tags_add(&t, "k3", "w"), 1);
}
END_TEST

/* Sanitise in with a roomy buffer; check the result and the return. */
static void
sanitize_case(const char *in, const char *want, int changed)
{
	char out[64];

	ck_assert_int_eq(ps_app_name_sanitize(in, out, sizeof(out)), changed);
	ck_assert_str_eq(out, want);
}

START_TEST(app_name_sanitize_keeps_allowed_and_replaces_others)
{
	sanitize_case("my-app_1.2/web", "my-app_1.2/web", 0);
	sanitize_case("my app{x}", "my_app_x_", 1);
	sanitize_case("  trimmed\t", "trimmed", 1);
	sanitize_case("caf\xc3\xa9", "caf_", 1);
	sanitize_case("a\xe2\x82\xac" "b", "a_b", 1);
	sanitize_case("", "unknown", 1);
	sanitize_case("   ", "unknown", 1);
	sanitize_case(NULL, "unknown", 1);
}
END_TEST

START_TEST(app_name_sanitize_cuts_to_fit)
{
	char out[8];

	ck_assert_int_eq(ps_app_name_sanitize("abcdefghij", out, sizeof(out)), 1);
	ck_assert_str_eq(out, "abcdefg");
	ck_assert_int_eq(ps_app_name_sanitize("abcdefg", out, sizeof(out)), 0);
	ck_assert_int_eq(ps_app_name_sanitize("abc", out, 7), -EINVAL);
	ck_assert_int_eq(ps_app_name_sanitize("abc", NULL, 64), -EINVAL);
}
END_TEST

START_TEST(format_name_lists_tags_in_order)
{
	char buf[256];

	ck_assert_int_eq(parse("env=dev,service_name=db,zone=b"), 3);
	ck_assert_int_eq(ps_tags_format_name("app", NULL, &t, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "app{env=dev,service_name=db,zone=b}");
}
END_TEST

START_TEST(format_name_adds_folded_suffix)
{
	char buf[256];

	ck_assert_int_eq(ps_tags_format_name("app", "cpu", NULL, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "app.cpu{}");
	ck_assert_int_eq(ps_tags_add(&t, "trace_id", "0af7"), 0);
	ck_assert_int_eq(ps_tags_format_name("a/b", "alloc_space", &t, buf,
					     sizeof(buf)), 0);
	ck_assert_str_eq(buf, "a/b.alloc_space{trace_id=0af7}");
}
END_TEST

START_TEST(format_name_fails_when_it_does_not_fit)
{
	char buf[16];

	ck_assert_int_eq(parse("env=dev"), 1);
	/* "app{env=dev}" is 12 bytes + NUL */
	ck_assert_int_eq(ps_tags_format_name("app", NULL, &t, buf, 13), 0);
	ck_assert_str_eq(buf, "app{env=dev}");
	ck_assert_int_eq(ps_tags_format_name("app", NULL, &t, buf, 12), -ENOSPC);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(ps_tags_format_name("app", "cpu", &t, buf, 16), -ENOSPC);
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(format_name_rejects_unsanitised_app)
{
	char buf[64];

	ck_assert_int_eq(ps_tags_format_name("my app", NULL, NULL, buf, 64), -EINVAL);
	ck_assert_int_eq(ps_tags_format_name("", NULL, NULL, buf, 64), -EINVAL);
	ck_assert_int_eq(ps_tags_format_name("a", "c{", NULL, buf, 64), -EINVAL);
	ck_assert_int_eq(ps_tags_format_name(NULL, NULL, NULL, buf, 64), -EINVAL);
}
END_TEST

START_TEST(drop_reason_words_exist_for_every_reason)
{
	int why;

	for (why = PS_TAGS_DROP_SYNTAX; why <= PS_TAGS_DROP_FULL; why++)
		ck_assert_str_ne(ps_tags_drop_str((enum ps_tags_drop)why), "dropped");
	ck_assert_str_eq(ps_tags_drop_str((enum ps_tags_drop)99), "dropped");
}
END_TEST

static Suite *
tags_suite(void)
{
	Suite *s = suite_create("tags");
	TCase *tc = tcase_create("tags");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, tags_parse_keeps_valid_members_in_order);
	tcase_add_test(tc, tags_parse_trims_whitespace_around_keys_and_values);
	tcase_add_test(tc, tags_parse_ignores_empty_members_silently);
	tcase_add_test(tc, tags_parse_drops_bad_names);
	tcase_add_test(tc, tags_parse_drops_reserved_double_underscore_names);
	tcase_add_test(tc, tags_parse_drops_values_with_braces_equals_or_controls);
	tcase_add_test(tc, tags_parse_splits_value_with_comma_into_a_member_without_equals);
	tcase_add_test(tc, tags_parse_drops_empty_and_invalid_utf8_values);
	tcase_add_test(tc, tags_parse_keeps_first_of_duplicate_names);
	tcase_add_test(tc, tags_parse_drops_the_31st_tag);
	tcase_add_test(tc, tags_parse_drops_overlong_names_and_values);
	tcase_add_test(tc, tags_parse_rejects_null_set);
	tcase_add_test(tc, tags_add_never_overwrites);
	tcase_add_test(tc, tags_add_rejects_invalid_and_reports_full);
	tcase_add_test(tc, app_name_sanitize_keeps_allowed_and_replaces_others);
	tcase_add_test(tc, app_name_sanitize_cuts_to_fit);
	tcase_add_test(tc, format_name_lists_tags_in_order);
	tcase_add_test(tc, format_name_adds_folded_suffix);
	tcase_add_test(tc, format_name_fails_when_it_does_not_fit);
	tcase_add_test(tc, format_name_rejects_unsanitised_app);
	tcase_add_test(tc, drop_reason_words_exist_for_every_reason);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(tags_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
