/* check_text.c -- the shared character classes and parsers (common/text.h),
 * and entries shared by reference count (common/shared.h). */
#include "common/shared.h"
#include "common/text.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

START_TEST(hexval_reads_both_cases_and_rejects_the_rest)
{
	ck_assert_int_eq(ps_hexval('0'), 0);
	ck_assert_int_eq(ps_hexval('9'), 9);
	ck_assert_int_eq(ps_hexval('a'), 10);
	ck_assert_int_eq(ps_hexval('F'), 15);
	ck_assert_int_eq(ps_hexval('g'), -1);
	ck_assert_int_eq(ps_hexval('G'), -1);
	ck_assert_int_eq(ps_hexval('\0'), -1);
	ck_assert_int_eq(ps_hexval('/'), -1);
}
END_TEST

/* What snprintf(dst, len, "%s%s%lu", ...) would write and return, cut
 * where it would be cut. */
START_TEST(cat_builds_what_snprintf_would_and_says_when_it_did_not_fit)
{
	char b[8];
	size_t n;

	n = ps_cat_u(b, sizeof(b), ps_cat(b, sizeof(b), 0, "fd/"), 42);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(b, "fd/42");
	n = ps_cat_u(b, sizeof(b), ps_cat(b, sizeof(b), 0, "/proc/"), 123456);
	ck_assert_uint_eq(n, 12);     /* strlen("/proc/123456") */
	ck_assert_str_eq(b, "/proc/1");   /* cut to fit */
	n = ps_cat(b, sizeof(b), ps_cat(b, sizeof(b), 0, "abcdefgh"), "ij");
	ck_assert_uint_eq(n, 10);
	ck_assert_str_eq(b, "abcdefg");
	ck_assert_uint_eq(ps_cat_u(b, sizeof(b), 0, 0), 1);
	ck_assert_str_eq(b, "0");
	ck_assert_uint_eq(ps_cat(b, sizeof(b), 0, ""), 0);
	ck_assert_str_eq(b, "");
	/* A digest: always 16 digits, leading zeros kept. */
	{
		char d[17];

		ck_assert_uint_eq(ps_cat_x64(d, sizeof(d), 0, 0x0123456789abcdefull), 16);
		ck_assert_str_eq(d, "0123456789abcdef");
		ck_assert_uint_eq(ps_cat_x64(d, sizeof(d), 0, 0xff), 16);
		ck_assert_str_eq(d, "00000000000000ff");
		ck_assert_uint_eq(ps_cat_x64(b, sizeof(b), 0, ~0ull), 16);
		ck_assert_str_eq(b, "fffffff");   /* cut to fit */
	}
}
END_TEST

START_TEST(tchar_is_the_rfc9110_token_set)
{
	const char *yes = "az09AZ!#$%&'*+-.^_`|~";

	for (const char *p = yes; *p; p++)
		ck_assert_msg(ps_is_tchar(*p), "%c", *p);
	for (const char *p = " \t\"(),/:;<=>?@[\\]{}\x7f"; *p; p++)
		ck_assert_msg(!ps_is_tchar(*p), "%c", *p);
	ck_assert(!ps_is_tchar('\0'));
}
END_TEST

START_TEST(trim_drops_only_the_given_class_at_both_ends)
{
	const char *s = " \t\na b\t \n";
	size_t n = strlen(s);

	ps_trim(&s, &n, ps_is_ows);
	ck_assert_uint_eq(n, 7);     /* the newlines are not OWS */
	ck_assert(strncmp(s, "\na b\t \n", n) == 0);
	ps_trim(&s, &n, ps_is_space);
	ck_assert_uint_eq(n, 3);
	ck_assert(strncmp(s, "a b", n) == 0);
	s = " \t ";
	n = 3;
	ps_trim(&s, &n, ps_is_ows);
	ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(pct_decode_decodes_escapes_of_either_case)
{
	char out[16];

	ck_assert_int_eq(ps_pct_decode("a%2fb%2Cc", 9, out, sizeof(out), 0), 5);
	ck_assert_str_eq(out, "a/b,c");
}
END_TEST

START_TEST(pct_decode_rejects_incomplete_escapes)
{
	char out[16];

	ck_assert_int_eq(ps_pct_decode("a%2", 3, out, sizeof(out), 0), -EINVAL);
	ck_assert_int_eq(ps_pct_decode("%zz", 3, out, sizeof(out), 0), -EINVAL);
	ck_assert_int_eq(ps_pct_decode("%", 1, out, sizeof(out), 0), -EINVAL);
	ck_assert(!ps_pct_escapes_ok("ab%4", 4));
	ck_assert(ps_pct_escapes_ok("ab%41", 5));
}
END_TEST

START_TEST(pct_decode_refuses_controls_and_a_tab_unless_allowed)
{
	char out[16];

	ck_assert_int_eq(ps_pct_decode("a%0ab", 5, out, sizeof(out), 1), -EINVAL);
	ck_assert_int_eq(ps_pct_decode("a%7f", 4, out, sizeof(out), 1), -EINVAL);
	ck_assert_int_eq(ps_pct_decode("a%09b", 5, out, sizeof(out), 0), -EINVAL);
	ck_assert_int_eq(ps_pct_decode("a%09b", 5, out, sizeof(out), 1), 3);
	ck_assert_str_eq(out, "a\tb");
}
END_TEST

START_TEST(pct_decode_says_enospc_when_the_result_does_not_fit)
{
	char out[4];

	ck_assert_int_eq(ps_pct_decode("abcd", 4, out, sizeof(out), 0), -ENOSPC);
	ck_assert_int_eq(ps_pct_decode("abc", 3, out, sizeof(out), 0), 3);
	ck_assert_str_eq(out, "abc");
	ck_assert_int_eq(ps_pct_decode("%41%42%43", 9, out, sizeof(out), 0), 3);
	ck_assert_str_eq(out, "ABC");
}
END_TEST

/* ---- common/shared.h ------------------------------------------------- */

struct item {
	int key;
	struct ps_shared sh;
};

static struct item items[5];
static int freed[5];

static void
item_free(struct ps_shared *e)
{
	freed[PS_SHARED_ENTRY(e, struct item, sh)->key]++;
}

static int
listed(const struct ps_shared_set *s, int key)
{
	for (const struct ps_shared *h = s->head; h; h = h->next)
		if (PS_SHARED_ENTRY(h, struct item, sh)->key == key)
			return 1;
	return 0;
}

/* Idle entries stay, held ones never go, the idle released longest ago
 * goes first past max_idle, and one that cannot be found again goes at
 * once. */
START_TEST(shared_keeps_the_last_released_and_frees_the_oldest)
{
	struct ps_shared_set s = { .max_idle = 2, .free = item_free };
	int i;

	memset(freed, 0, sizeof(freed));
	for (i = 0; i < 5; i++) {
		items[i].key = i;
		ps_shared_add(&s, &items[i].sh);
	}
	ps_shared_hold(&s, &items[0].sh);       /* 0 held twice */
	ps_shared_release(&s, &items[0].sh, 1);
	ck_assert_uint_eq(s.idle, 0);
	ps_shared_release(&s, &items[1].sh, 1);
	ps_shared_release(&s, &items[2].sh, 1);
	ck_assert_uint_eq(s.idle, 2);
	ps_shared_hold(&s, &items[1].sh);       /* found again: not idle */
	ck_assert_uint_eq(s.idle, 1);
	ps_shared_release(&s, &items[3].sh, 1);
	ps_shared_release(&s, &items[1].sh, 1); /* idle: 2, 3, 1 -> 2 goes */
	ck_assert_uint_eq(s.idle, 2);
	ck_assert_int_eq(freed[2], 1);
	ck_assert(!listed(&s, 2) && listed(&s, 3) && listed(&s, 1) && listed(&s, 0));
	ps_shared_release(&s, &items[4].sh, 0); /* unfindable: at once */
	ck_assert_int_eq(freed[4], 1);
	ck_assert(!listed(&s, 4));
	ck_assert_uint_eq(s.idle, 2);
	ck_assert_int_eq(freed[0] + freed[1] + freed[3], 0);
	ps_shared_release(&s, &items[0].sh, 1); /* idle: 3, 1, 0 -> 3 goes */
	ck_assert_int_eq(freed[3], 1);
	ck_assert_int_eq(freed[0] + freed[1], 0);
}
END_TEST

static Suite *
text_suite(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("text");

	tcase_add_test(tc, hexval_reads_both_cases_and_rejects_the_rest);
	tcase_add_test(tc, tchar_is_the_rfc9110_token_set);
	tcase_add_test(tc, cat_builds_what_snprintf_would_and_says_when_it_did_not_fit);
	tcase_add_test(tc, trim_drops_only_the_given_class_at_both_ends);
	tcase_add_test(tc, pct_decode_decodes_escapes_of_either_case);
	tcase_add_test(tc, pct_decode_rejects_incomplete_escapes);
	tcase_add_test(tc, pct_decode_refuses_controls_and_a_tab_unless_allowed);
	tcase_add_test(tc, pct_decode_says_enospc_when_the_result_does_not_fit);
	tcase_add_test(tc, shared_keeps_the_last_released_and_frees_the_oldest);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(text_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
