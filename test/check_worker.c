/* check_worker.c -- the uploader's schedule (uploader/worker.h) over
 * hand-built tables: a periodic pass nobody asks for, the last pass at
 * exit (flush, and _exit's async-signal-safe way), and a fork child's
 * uploader of its own.  The worker is the real one: a helper process (or
 * a thread) writing files into a temporary directory.  No timing is
 * asserted: every wait is bounded and generous. */
#include "uploader/worker.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/shmem.h"
#include "handmade.h"

#define SEC 1000000000ull

static struct ps_config cfg;
/* In shared memory, as init.c keeps it: the helper process sees the
 * table's counters move. */
static struct ps_stacktab *tab;
#define st (*tab)
/* One export state per case, all kept (its fold is never freed; under
 * CK_FORK=no every case runs in this one process). */
static struct ps_export xs[16];
static int nxs;
#define x (xs[nxs - 1])
static char dir[64];

/* Each case runs in a process of its own (check's fork mode): the
 * worker's state starts fresh. */
static void
setup(void)
{
	tab = ps_shmem_new(sizeof(*tab));
	ck_assert_ptr_nonnull(tab);
	hm_table(&st);
	hm_config(&cfg, "check_worker");
	hm_tmpdir(dir, "check_worker");
	ck_assert_int_lt(nxs, 16);
	nxs++;
	hm_export(&x, &cfg, NULL, dir, getpid());
}

static void
teardown(void)
{
	hm_rmdir(dir);
}

/* The cpu.folded file of pid, or NULL. */
static const char *
folded_of(int pid)
{
	static char text[1024];
	char name[64];

	snprintf(name, sizeof(name), "app.%d.cpu.folded", pid);
	return hm_read(dir, name, text, sizeof(text)) ? text : NULL;
}

/* Wait, at most `seconds`, for pid's file to say `want`. */
static int
wait_for(int pid, const char *want, int seconds)
{
	struct timespec tick = { 0, 50 * 1000 * 1000 };

	for (int i = 0; i < seconds * 20; i++) {
		const char *t = folded_of(pid);

		if (t && !strcmp(t, want))
			return 1;
		nanosleep(&tick, NULL);
	}
	return 0;
}

START_TEST(worker_writes_a_periodic_pass_unasked)
{
	hm_cpu(&st, hm_leaf_a, 2, 10);
	ck_assert_int_eq(ps_worker_start(&x, SEC / 5, 5 * SEC), 0);
	ck_assert(wait_for(getpid(), "hm_main;hm_work;hm_leaf_a 20000000\n", 60));
	/* Later samples reach the files at a later pass. */
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ck_assert(wait_for(getpid(), "hm_main;hm_work;hm_leaf_a 30000000\n", 60));
	ps_worker_flush(5 * SEC, 1);
}
END_TEST

START_TEST(worker_final_flush_writes_everything_before_it_returns)
{
	/* An interval of an hour: only the last pass can write. */
	ck_assert_int_eq(ps_worker_start(&x, 3600 * SEC, 30 * SEC), 0);
	hm_cpu(&st, hm_leaf_a, 3, 10);
	ps_worker_flush(30 * SEC, 1);
	ck_assert_str_eq(folded_of(getpid()), "hm_main;hm_work;hm_leaf_a 30000000\n");
}
END_TEST

START_TEST(worker_exit_writes_the_last_pass_the_async_signal_safe_way)
{
	ck_assert_int_eq(ps_worker_start(&x, 3600 * SEC, 30 * SEC), 0);
	hm_cpu(&st, hm_leaf_b, 1, 10);
	ps_worker_set_exit(3);
	ps_worker_exit(30 * SEC);
	ck_assert_str_eq(folded_of(getpid()), "hm_main;hm_work;hm_leaf_b 10000000\n");
}
END_TEST

START_TEST(worker_final_flush_with_nothing_recorded_writes_nothing)
{
	ck_assert_int_eq(ps_worker_start(&x, 3600 * SEC, 30 * SEC), 0);
	ps_worker_flush(30 * SEC, 1);
	ck_assert_ptr_null(folded_of(getpid()));
}
END_TEST

/* The fork child's side, as init.c's fork handler, first record and exit
 * hooks do it: own tables, own export state; in a tree, joined at its
 * first record, else its uploader started at its end. */
static void
child(int use_exit)
{
	struct ps_stacktab copy = st;
	int rc;

	ps_export_abandon(&x);
	x.pid = getpid();
	rc = ps_worker_child();
	if (rc < 0)
		_exit(2);
	/* The table's struct gets a shared page of its own, then the
	 * table is emptied: fresh tables, made now or (rc 1) at the first
	 * record. */
	if (ps_shmem_renew(tab, sizeof(*tab)))
		_exit(2);
	st = copy;
	if (ps_stacktab_reset(&st))
		_exit(2);
	if (rc == 0)
		ps_worker_child_announce();
	else if (ps_worker_defer_take())
		ps_worker_join_deferred(1);
	else
		_exit(2);
	hm_cpu(&st, hm_leaf_b, 4, 10);
	if (use_exit)
		ps_worker_exit(30 * SEC);
	else
		ps_worker_flush(30 * SEC, 1);
	_exit(0);
}

static void
fork_case(int use_exit)
{
	int status;
	pid_t pid;

	ck_assert_int_eq(ps_worker_start(&x, 3600 * SEC, 30 * SEC), 0);
	hm_cpu(&st, hm_leaf_a, 1, 10);
	ps_worker_fork_prepare();   /* as init.c's fork handlers */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		child(use_exit);
	ps_worker_forked();
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* With a helper, the child is a program of the parent's tree: it
	 * joined the tree's helper at its first record, and its samples are in the
	 * files of its program name, the parent's (group.h), written when
	 * the leader ends.  Without one (thread mode) the child has files
	 * of its own -- except at _exit, which starts no thread (worker.h). */
	if (ps_worker_is_helper()) {
		ck_assert_ptr_null(folded_of(pid));
		ps_worker_flush(30 * SEC, 1);
		ck_assert_str_eq(folded_of(getpid()), "hm_main;hm_work;hm_leaf_a 10000000\n"
				 "hm_main;hm_work;hm_leaf_b 40000000\n");
		return;
	}
	if (use_exit)
		ck_assert_ptr_null(folded_of(pid));
	else
		ck_assert_str_eq(folded_of(pid), "hm_main;hm_work;hm_leaf_b 40000000\n");
	/* The parent's uploader is untouched: its last pass has its own. */
	ps_worker_flush(30 * SEC, 1);
	ck_assert_str_eq(folded_of(getpid()), "hm_main;hm_work;hm_leaf_a 10000000\n");
}

START_TEST(worker_fork_child_gets_an_uploader_of_its_own_at_flush)
{
	fork_case(0);
}
END_TEST

START_TEST(worker_fork_child_gets_an_uploader_of_its_own_at_exit)
{
	fork_case(1);
}
END_TEST

static Suite *
worker_suite(void)
{
	Suite *s = suite_create("worker");
	TCase *tc = tcase_create("worker");

	tcase_set_timeout(tc, 180);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, worker_writes_a_periodic_pass_unasked);
	tcase_add_test(tc, worker_final_flush_writes_everything_before_it_returns);
	tcase_add_test(tc, worker_exit_writes_the_last_pass_the_async_signal_safe_way);
	tcase_add_test(tc, worker_final_flush_with_nothing_recorded_writes_nothing);
	tcase_add_test(tc, worker_fork_child_gets_an_uploader_of_its_own_at_flush);
	tcase_add_test(tc, worker_fork_child_gets_an_uploader_of_its_own_at_exit);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(worker_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
