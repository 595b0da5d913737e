/* check_export.c -- one export pass over hand-built tables
 * (uploader/export.h) and the files its group writes (uploader/group.h):
 * their names and contents. */
#include "uploader/export.h"
#include "uploader/group.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handmade.h"

static struct ps_config cfg;
static struct ps_stacktab st;
static struct ps_livetab lt;
/* One export state per case, all kept (its fold is never freed). */
#define NXS 32         /* every case's, when they run in one process (sanitize) */
static struct ps_export xs[NXS];
static int nxs;
#define x (xs[nxs - 1])
static char dir[64];

static void
setup(void)
{
	hm_table(&st);
	ck_assert_int_eq(ps_livetab_init(&lt), 0);
	hm_config(&cfg, "check_export");
	/* Function names only: an export lives as long as the process and is
	 * never torn down, and libdw's search trees would look "possibly
	 * lost" to valgrind.  Source lines are check_symbols' and
	 * test_lines.py's. */
	cfg.dwarf_memory = 0;
	hm_tmpdir(dir, "check_export");
	ck_assert_int_lt(nxs, NXS);
	nxs++;
	hm_export(&x, &cfg, &lt, dir, 4242);
}

static void
teardown(void)
{
	ps_group_free_all();
	hm_rmdir(dir);
}

/* A pass, then the files (as the worker's loop does). */
static int
pass(struct ps_export *e, int final)
{
	int rc = ps_export_run(e, final);

	return rc ? rc : ps_group_pass();
}

/* Contents of dir/name, NUL-terminated, static; NULL if absent. */
static const char *
file(const char *name)
{
	static char text[8192];

	return hm_read(dir, name, text, sizeof(text)) ? text : NULL;
}

static int
files_in_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

START_TEST(export_writes_nothing_for_a_process_that_recorded_nothing)
{
	ck_assert_int_eq(pass(&x, 1), 0);
	ck_assert_int_eq(files_in_dir(), 0);
}
END_TEST

START_TEST(export_writes_the_cpu_files_of_a_cpu_only_run)
{
	hm_cpu(&st, hm_leaf_a, 2, 10);
	ck_assert_int_eq(pass(&x, 0), 0);
	ck_assert_str_eq(file("app.4242.cpu.folded"), "hm_main;hm_work;hm_leaf_a 20000000\n");
	ck_assert_mem_eq(file("app.4242.cpu.pb.gz"), "\x1f\x8b", 2);   /* gzip */
	ck_assert_ptr_null(file("app.4242.alloc.pb.gz"));   /* no allocation sampled */
	ck_assert_int_eq(files_in_dir(), 2);
}
END_TEST

START_TEST(export_writes_every_allocation_series)
{
	hm_alloc_samples(&st, &lt, 4, 100, 1);
	ck_assert_int_eq(pass(&x, 0), 0);
	ck_assert_str_eq(file("app.4242.alloc_objects.folded"), "hm_main;hm_alloc 4\n");
	ck_assert_str_eq(file("app.4242.alloc_space.folded"), "hm_main;hm_alloc 400\n");
	ck_assert_str_eq(file("app.4242.inuse_objects.folded"), "hm_main;hm_alloc 1\n");
	ck_assert_str_eq(file("app.4242.inuse_space.folded"), "hm_main;hm_alloc 100\n");
	ck_assert_ptr_nonnull(file("app.4242.alloc.pb.gz"));
	ck_assert_ptr_null(file("app.4242.cpu.folded"));
}
END_TEST

START_TEST(export_files_cover_the_whole_run_so_far)
{
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_eq(pass(&x, 0), 0);
	hm_cpu(&st, hm_leaf_a, 2, 10);
	ck_assert_int_eq(pass(&x, 1), 0);
	ck_assert_str_eq(file("app.4242.cpu.folded"), "hm_main;hm_work;hm_leaf_a 30000000\n");
	ck_assert_uint_eq(x.passes, 2);
}
END_TEST

START_TEST(export_never_overwrites_an_earlier_image_of_the_same_pid)
{
	char path[256];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/app.4242.cpu.pb.gz", dir);
	fp = fopen(path, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_eq(pass(&x, 0), 0);
	ck_assert_str_eq(file("app.4242.1.cpu.folded"), "hm_main;hm_work;hm_leaf_a 10000000\n");
	ck_assert_str_eq(file("app.4242.cpu.pb.gz"), "");   /* untouched */
}
END_TEST

START_TEST(export_counts_a_directory_it_cannot_use_and_writes_nothing)
{
	char plain[128];
	FILE *fp;

	snprintf(plain, sizeof(plain), "%s/plain", dir);
	fp = fopen(plain, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	snprintf(x.dir, sizeof(x.dir), "%s/sub", plain);
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_ne(pass(&x, 0), 0);
	ck_assert_int_eq(files_in_dir(), 1);    /* the plain file only */
}
END_TEST

START_TEST(export_comments_say_what_was_dropped)
{
	uint64_t v[PS_NVALUES] = { 3, 30 * HM_MS, 0, 0 };

	hm_cpu(&st, hm_leaf_a, 1, 10);
	ps_stacktab_add_special(&st, PS_SLOT_FULL, v);
	atomic_store(&st.c->dropped, 3);
	ck_assert_int_eq(pass(&x, 0), 0);
	ck_assert_ptr_nonnull(strstr(file("app.4242.cpu.folded"), "table full"));
}
END_TEST

/* A second program of the tree led by x (same name): it folds the same
 * table, so every stack counts twice in the group's files. */
static struct ps_export *
second(int pid)
{
	struct ps_export *y;

	ck_assert_int_lt(nxs, NXS);
	y = &xs[nxs++];
	hm_export(y, &cfg, &lt, dir, pid);
	y->tree = 4242;
	return y;
}

START_TEST(group_files_hold_every_program_of_a_name)
{
	struct ps_export *me = &x, *y;

	hm_cpu(&st, hm_leaf_a, 1, 10);
	y = second(4343);
	ck_assert_int_eq(ps_export_run(y, 0), 0);
	ck_assert_int_eq(pass(me, 0), 0);
	ck_assert_str_eq(file("app.4242.cpu.folded"), "hm_main;hm_work;hm_leaf_a 20000000\n");
	ck_assert_ptr_null(file("app.4343.cpu.folded"));
	ck_assert_int_eq(files_in_dir(), 2);
	/* Another name is another set. */
	snprintf(second(4444)->app, sizeof(x.app), "other");
	ck_assert_int_eq(pass(&xs[nxs - 1], 0), 0);
	ck_assert_str_eq(file("other.4242.cpu.folded"), "hm_main;hm_work;hm_leaf_a 10000000\n");
}
END_TEST

START_TEST(group_keeps_a_program_that_ended)
{
	struct ps_export *me = &x, *y = second(4343);

	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_eq(ps_export_run(y, 1), 0);
	ps_group_leave(y);
	ps_export_free(y);
	ck_assert_int_eq(pass(me, 0), 0);
	ck_assert_str_eq(file("app.4242.cpu.folded"), "hm_main;hm_work;hm_leaf_a 20000000\n");
	/* Later samples count for the live one only. */
	hm_cpu(&st, hm_leaf_b, 1, 10);
	ck_assert_int_eq(pass(me, 0), 0);
	ck_assert_str_eq(file("app.4242.cpu.folded"), "hm_main;hm_work;hm_leaf_a 20000000\n"
			 "hm_main;hm_work;hm_leaf_b 10000000\n");
}
END_TEST

START_TEST(group_closes_a_full_store_and_goes_on_in_the_next_set)
{
	struct ps_export *me = &x, *y;
	int i;

	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_eq(pass(me, 0), 0);
	ps_group_store_bytes = 1;       /* every program that ends closes a set */
	for (i = 0; i < 2; i++) {
		y = second(5000 + i);
		ck_assert_int_eq(ps_export_run(y, 1), 0);
		ps_group_leave(y);
		ps_export_free(y);
	}
	ps_group_store_bytes = PS_GROUP_STORE_BYTES;
	ck_assert_int_eq(ps_group_pass(), 0);
	/* Each closed set holds the program that ended alone; the live one
	 * is in the last set only, never counted twice. */
	ck_assert_str_eq(file("app.4242.cpu.folded"), "hm_main;hm_work;hm_leaf_a 10000000\n");
	ck_assert_str_eq(file("app.4242.1.cpu.folded"), "hm_main;hm_work;hm_leaf_a 10000000\n");
	ck_assert_str_eq(file("app.4242.2.cpu.folded"), "hm_main;hm_work;hm_leaf_a 10000000\n");
	ck_assert_ptr_null(file("app.4242.3.cpu.folded"));
}
END_TEST

START_TEST(group_closing_a_set_removes_what_its_ended_processes_lack)
{
	static struct ps_stacktab st2;
	struct ps_export *me = &x, *y;

	/* The live program: CPU and allocations; the one that ends, CPU
	 * only, from a table of its own. */
	hm_cpu(&st, hm_leaf_a, 1, 10);
	hm_alloc_samples(&st, &lt, 4, 100, 1);
	ck_assert_int_eq(pass(me, 0), 0);
	ck_assert_ptr_nonnull(file("app.4242.alloc_space.folded"));
	ck_assert_int_eq(ps_stacktab_init(&st2, 4u << 20), 0);
	hm_cpu(&st2, hm_leaf_b, 1, 10);
	y = second(4343);
	y->st = &st2;
	ck_assert_int_eq(ps_export_run(y, 1), 0);
	ps_group_store_bytes = 1;
	ps_group_leave(y);
	ps_group_store_bytes = PS_GROUP_STORE_BYTES;
	ps_export_free(y);
	ck_assert_int_eq(ps_group_pass(), 0);
	/* The closed set: the ended program alone, and no allocation file
	 * left with the live one's samples, which are in the next set. */
	ck_assert_str_eq(file("app.4242.cpu.folded"), "hm_main;hm_work;hm_leaf_b 10000000\n");
	ck_assert_ptr_null(file("app.4242.alloc.pb.gz"));
	ck_assert_ptr_null(file("app.4242.alloc_space.folded"));
	ck_assert_str_eq(file("app.4242.1.cpu.folded"), "hm_main;hm_work;hm_leaf_a 10000000\n");
	ck_assert_str_eq(file("app.4242.1.alloc_space.folded"), "hm_main;hm_alloc 400\n");
}
END_TEST

/* The request of queue u whose body is text, and its body. */
static const char *
body_of(const struct ps_upload *u, unsigned i)
{
	static char text[4096];
	const struct ps_upload_item *it;

	ck_assert_uint_lt(i, u->n);
	it = u->q[i];
	ck_assert_uint_lt(it->body.len, sizeof(text));
	memcpy(text, it->body.data, it->body.len);
	text[it->body.len] = '\0';
	return text;
}

/* x with a server (folded text, so that bodies read as text) and tags. */
static void
with_server(struct ps_export *e, struct ps_config *c, const char *tags)
{
	*c = cfg;
	snprintf(c->server, sizeof(c->server), "http://127.0.0.1:9");
	snprintf(c->tags, sizeof(c->tags), "%s", tags);
	c->ingest_folded = 1;
	e->cfg = c;
	ck_assert_int_eq(ps_remote_setup(&e->remote, c, NULL, e->start_ns), 0);
	ck_assert(e->remote.on);
}

START_TEST(group_uploads_one_request_per_name_and_interval)
{
	static struct ps_config c1, c2, c3;
	struct ps_export *me = &x, *y = second(4343), *z = second(4545);
	struct ps_remote *r;

	with_server(me, &c1, "env=dev");
	with_server(y, &c2, "env=dev");
	with_server(z, &c3, "env=prod");
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert_int_eq(ps_export_run(y, 0), 0);
	ck_assert_int_eq(pass(me, 0), 0);
	/* Both programs in one request: the table's one sample, twice. */
	r = ps_group_remote(me);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_eq(ps_group_remote(y), r);
	ck_assert_uint_eq(r->up.n, 1);
	/* (The series is the configured application name, hm_config's.) */
	ck_assert_ptr_nonnull(strstr(r->up.q[0]->url, "name=check_export.cpu%7Benv%3Ddev%7D&"));
	ck_assert_str_eq(body_of(&r->up, 0), "hm_main;hm_work;hm_leaf_a 20000000\n");
	/* y ends with one more sample: its last interval goes with me's. */
	hm_cpu(&st, hm_leaf_b, 1, 10);
	ck_assert_int_eq(ps_export_run(y, 1), 0);
	ps_group_leave(y);
	ps_export_free(y);
	ck_assert_int_eq(pass(me, 0), 0);
	ck_assert_uint_eq(r->up.n, 2);
	ck_assert_str_eq(body_of(&r->up, 1), "hm_main;hm_work;hm_leaf_b 20000000\n");
	/* Other tags are another series: a request of its own. */
	ck_assert_int_eq(pass(z, 0), 0);
	ck_assert_ptr_ne(ps_group_remote(z), r);
	ck_assert_uint_eq(ps_group_remote(z)->up.n, 1);
	ck_assert_str_eq(body_of(&ps_group_remote(z)->up, 0),
			 "hm_main;hm_work;hm_leaf_a 10000000\nhm_main;hm_work;hm_leaf_b 10000000\n");
	ck_assert_uint_eq(r->up.n, 2);
}
END_TEST

static Suite *
export_suite(void)
{
	Suite *s = suite_create("export");
	TCase *tc = tcase_create("export");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, export_writes_nothing_for_a_process_that_recorded_nothing);
	tcase_add_test(tc, export_writes_the_cpu_files_of_a_cpu_only_run);
	tcase_add_test(tc, export_writes_every_allocation_series);
	tcase_add_test(tc, export_files_cover_the_whole_run_so_far);
	tcase_add_test(tc, export_never_overwrites_an_earlier_image_of_the_same_pid);
	tcase_add_test(tc, export_counts_a_directory_it_cannot_use_and_writes_nothing);
	tcase_add_test(tc, export_comments_say_what_was_dropped);
	tcase_add_test(tc, group_files_hold_every_program_of_a_name);
	tcase_add_test(tc, group_keeps_a_program_that_ended);
	tcase_add_test(tc, group_closes_a_full_store_and_goes_on_in_the_next_set);
	tcase_add_test(tc, group_closing_a_set_removes_what_its_ended_processes_lack);
	tcase_add_test(tc, group_uploads_one_request_per_name_and_interval);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(export_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
