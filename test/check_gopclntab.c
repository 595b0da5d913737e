/* Unit tests of the Go function-table reader (shim/gopclntab.c): a table
 * built here in the Go 1.18+ layout, the look-ups the signal handler does
 * (function by pc, SP delta at a pc), names, and tables that are
 * truncated, reordered or corrupt; then a real stripped Go binary named
 * through symbolize/elf.c. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/gopclntab.h"
#include "symbolize/symbols.h"

#define TEXT 0x401000u

/* Offsets inside the table built by build(). */
enum { NAMES = 72, PCTAB = 96, FUNCTAB = 128, FUNCS = FUNCTAB + 3 * 8, SIZE = FUNCS + 2 * 40 };

static uint8_t tab[SIZE];

static void
put32(size_t off, uint32_t v)
{
	memcpy(tab + off, &v, 4);
}

static void
put64(size_t off, uint64_t v)
{
	memcpy(tab + off, &v, 8);
}

/* Two functions: main.framed at TEXT [0, 0x20) whose prologue is 4 bytes
 * (SP delta 0), body 0x18 bytes (delta 24), epilogue 4 bytes (delta 0);
 * main.leaf at [0x20, 0x30), frameless (delta 0 throughout). */
static void
build(uint32_t magic)
{
	static const uint8_t pcsp_framed[] = { 2, 4, 48, 0x18, 47, 4, 0 };
	static const uint8_t pcsp_leaf[] = { 2, 0x10, 0 };
	int i;

	memset(tab, 0, sizeof(tab));
	put32(0, magic);
	tab[6] = 1;                     /* PC quantum */
	tab[7] = 8;                     /* pointer size */
	put64(8, 2);                    /* nfunc */
	put64(8 + 3 * 8, NAMES);        /* funcnameOffset */
	put64(8 + 6 * 8, PCTAB);        /* pctabOffset */
	put64(8 + 7 * 8, FUNCTAB);      /* pclnOffset */
	memcpy(tab + NAMES, "main.framed\0main.leaf", 22);
	memcpy(tab + PCTAB + 1, pcsp_framed, sizeof(pcsp_framed));
	memcpy(tab + PCTAB + 10, pcsp_leaf, sizeof(pcsp_leaf));
	for (i = 0; i < 2; i++) {
		put32(FUNCTAB + i * 8, (uint32_t)i * 0x20);
		put32(FUNCTAB + i * 8 + 4, (uint32_t)(FUNCS - FUNCTAB + i * 40));
		put32(FUNCS + i * 40, (uint32_t)i * 0x20);         /* entryoff */
		put32(FUNCS + i * 40 + 4, i ? 12 : 0);             /* nameoff */
		put32(FUNCS + i * 40 + 16, i ? 10 : 1);            /* pcsp */
	}
	put32(FUNCTAB + 2 * 8, 0x30);   /* end of the text */
}

static struct ps_gopcln
opened(void)
{
	struct ps_gopcln t;

	build(PS_GOPCLN_MAGIC_118);
	ck_assert_int_eq(ps_gopcln_open(&t, tab, sizeof(tab), TEXT), 0);
	return t;
}

static int32_t
delta_at(const struct ps_gopcln *t, uint64_t pc)
{
	int32_t d = -7;
	int i = ps_gopcln_find(t, pc);

	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(ps_gopcln_spdelta(t, (uint32_t)i, pc, &d), 0);
	return d;
}

START_TEST(gopclntab_finds_function_by_pc)
{
	struct ps_gopcln t = opened();
	uint64_t lo, len;

	ck_assert_int_eq(ps_gopcln_find(&t, TEXT), 0);
	ck_assert_int_eq(ps_gopcln_find(&t, TEXT + 0x1f), 0);
	ck_assert_int_eq(ps_gopcln_find(&t, TEXT + 0x20), 1);
	ck_assert_int_eq(ps_gopcln_find(&t, TEXT + 0x2f), 1);
	ck_assert_int_eq(ps_gopcln_find(&t, TEXT + 0x30), -1);
	ck_assert_int_eq(ps_gopcln_find(&t, TEXT - 1), -1);
	ck_assert_int_eq(ps_gopcln_find(&t, 0), -1);
	ps_gopcln_range(&t, 1, &lo, &len);
	ck_assert_uint_eq(lo, TEXT + 0x20);
	ck_assert_uint_eq(len, 0x10);
}
END_TEST

START_TEST(gopclntab_names_functions)
{
	struct ps_gopcln t = opened();

	ck_assert_str_eq(ps_gopcln_name(&t, 0), "main.framed");
	ck_assert_str_eq(ps_gopcln_name(&t, 1), "main.leaf");
}
END_TEST

START_TEST(gopclntab_gives_sp_delta_through_prologue_body_and_epilogue)
{
	struct ps_gopcln t = opened();
	int32_t d;

	ck_assert_int_eq(delta_at(&t, TEXT), 0);
	ck_assert_int_eq(delta_at(&t, TEXT + 3), 0);
	ck_assert_int_eq(delta_at(&t, TEXT + 4), 24);
	ck_assert_int_eq(delta_at(&t, TEXT + 0x1b), 24);
	ck_assert_int_eq(delta_at(&t, TEXT + 0x1c), 0);
	ck_assert_int_eq(delta_at(&t, TEXT + 0x1f), 0);
	ck_assert_int_eq(delta_at(&t, TEXT + 0x20), 0);
	ck_assert_int_eq(delta_at(&t, TEXT + 0x2f), 0);
	/* A pc outside the function asked about. */
	ck_assert_int_eq(ps_gopcln_spdelta(&t, 0, TEXT + 0x20, &d), -ENOENT);
	ck_assert_int_eq(ps_gopcln_spdelta(&t, 1, TEXT + 0x1f, &d), -ENOENT);
}
END_TEST

START_TEST(gopclntab_accepts_go120_magic_and_rejects_others)
{
	struct ps_gopcln t;

	build(PS_GOPCLN_MAGIC_120);
	ck_assert_int_eq(ps_gopcln_open(&t, tab, sizeof(tab), TEXT), 0);
	build(0xfffffffa);              /* Go 1.16: another layout */
	ck_assert_int_eq(ps_gopcln_open(&t, tab, sizeof(tab), TEXT), -ENOEXEC);
	build(PS_GOPCLN_MAGIC_118);
	tab[7] = 4;                     /* a 32-bit table */
	ck_assert_int_eq(ps_gopcln_open(&t, tab, sizeof(tab), TEXT), -ENOEXEC);
}
END_TEST

START_TEST(gopclntab_rejects_truncated_tables)
{
	struct ps_gopcln t;
	size_t n;

	build(PS_GOPCLN_MAGIC_118);
	/* Cut before the end of the function table (2 * nfunc + 1 words):
	 * refused.  Cut after it: opened, but every look-up beyond the cut
	 * fails cleanly (a heap copy of exactly n bytes, so an overread is an
	 * error under ASan). */
	for (n = 0; n < sizeof(tab); n++) {
		uint8_t *cut = malloc(n ? n : 1);
		int32_t d;
		int rc;

		ck_assert_ptr_nonnull(cut);
		memcpy(cut, tab, n);
		rc = ps_gopcln_open(&t, cut, n, TEXT);
		if (n < FUNCTAB + 5 * 4)
			ck_assert_int_eq(rc, -ENOEXEC);
		if (rc == 0) {
			(void)ps_gopcln_name(&t, 0);
			(void)ps_gopcln_name(&t, 1);
			/* main.leaf's record ends at FUNCS + 60. */
			if (n < FUNCS + 60)
				ck_assert_int_eq(ps_gopcln_spdelta(&t, 1, TEXT + 0x24, &d), -ENOENT);
		}
		free(cut);
	}
}
END_TEST

START_TEST(gopclntab_rejects_entries_out_of_order)
{
	struct ps_gopcln t;

	build(PS_GOPCLN_MAGIC_118);
	put32(FUNCTAB + 8, 0x40);       /* second entry beyond the end */
	ck_assert_int_eq(ps_gopcln_open(&t, tab, sizeof(tab), TEXT), -ENOEXEC);
	build(PS_GOPCLN_MAGIC_118);
	put64(8, 1u << 30);             /* more functions than the table holds */
	ck_assert_int_eq(ps_gopcln_open(&t, tab, sizeof(tab), TEXT), -ENOEXEC);
}
END_TEST

START_TEST(gopclntab_survives_corrupt_function_records)
{
	struct ps_gopcln t = opened();
	int32_t d;

	put32(FUNCS + 40 + 4, 0x7fffffff);      /* name offset past the end */
	ck_assert_ptr_null(ps_gopcln_name(&t, 1));
	put32(FUNCS + 4, 0xffffffff);           /* negative name offset */
	ck_assert_ptr_null(ps_gopcln_name(&t, 0));
	put32(FUNCTAB + 12, 0xfffffff0);        /* _func past the end */
	ck_assert_ptr_null(ps_gopcln_name(&t, 1));
	ck_assert_int_eq(ps_gopcln_spdelta(&t, 1, TEXT + 0x20, &d), -ENOENT);
	put32(FUNCS + 16, 0xffffff);            /* pcsp past the end */
	ck_assert_int_eq(ps_gopcln_spdelta(&t, 0, TEXT, &d), -ENOENT);
	/* A varint that never ends, then one that runs off the table. */
	build(PS_GOPCLN_MAGIC_118);
	memset(tab + PCTAB + 1, 0xff, 8);
	ck_assert_int_eq(ps_gopcln_spdelta(&t, 0, TEXT, &d), -ENOENT);
	build(PS_GOPCLN_MAGIC_118);
	tab[SIZE - 2] = tab[SIZE - 1] = 0x80;   /* the record's unread tail */
	put32(FUNCS + 40 + 16, SIZE - 2 - PCTAB);
	ck_assert_int_eq(ps_gopcln_spdelta(&t, 1, TEXT + 0x20, &d), -ENOENT);
	/* A table that ends before the pc: not covered. */
	build(PS_GOPCLN_MAGIC_118);
	tab[PCTAB + 11] = 4;                    /* leaf's table covers 4 bytes */
	ck_assert_int_eq(ps_gopcln_spdelta(&t, 1, TEXT + 0x28, &d), -ENOENT);
}
END_TEST

/* A Go binary built with -ldflags=-s (no .symtab) is still named, from its
 * .gopclntab (the Makefile builds build/prog/gogen-stripped when Go is
 * installed). */
START_TEST(gopclntab_names_stripped_go_binary)
{
	const char *path = "build/prog/gogen-stripped";
	size_t n = 0;

	if (access(path, R_OK) != 0) {
		fprintf(stderr, "skipped: no %s (Go is not installed)\n", path);
		return;
	}
	ck_assert_int_eq(ps_symbols_load_file_for_test(path, &n), 0);
	/* The program and the runtime: thousands of functions, where .dynsym
	 * alone has a few dozen. */
	ck_assert_msg(n > 1000, "only %zu symbols: .gopclntab not read", n);
}
END_TEST

static Suite *
gopclntab_suite(void)
{
	Suite *s = suite_create("gopclntab");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, gopclntab_finds_function_by_pc);
	tcase_add_test(tc, gopclntab_names_functions);
	tcase_add_test(tc, gopclntab_gives_sp_delta_through_prologue_body_and_epilogue);
	tcase_add_test(tc, gopclntab_accepts_go120_magic_and_rejects_others);
	tcase_add_test(tc, gopclntab_rejects_truncated_tables);
	tcase_add_test(tc, gopclntab_rejects_entries_out_of_order);
	tcase_add_test(tc, gopclntab_survives_corrupt_function_records);
	tcase_add_test(tc, gopclntab_names_stripped_go_binary);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(gopclntab_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
