/* Unit tests of the lock-free tables: stacktab (distinct stacks and their
 * counters) and livetab (live sampled blocks), and the allocation weight. */
#include <check.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "common/expo.h"
#include "shim/alloc.h"
#include "shim/livetab.h"
#include "common/shmem.h"
#include "shim/stacktab.h"

static uint64_t one_cpu[PS_NVALUES] = { 1, 10, 0, 0 };

START_TEST(stacktab_dedups_and_counts)
{
	struct ps_stacktab t;
	uintptr_t a[3] = { 1, 2, 3 }, b[3] = { 1, 2, 4 };
	const uintptr_t *ips;
	uint32_t sa, sb;
	int depth, trunc;

	ck_assert_int_eq(ps_stacktab_init(&t, 1 << 20), 0);
	sa = ps_stacktab_add(&t, a, 3, 0, one_cpu);
	ck_assert_uint_eq(ps_stacktab_add(&t, a, 3, 0, one_cpu), sa);
	sb = ps_stacktab_add(&t, b, 3, 1, one_cpu);
	ck_assert_uint_ne(sa, sb);
	ck_assert_uint_ge(sa, PS_NSPECIAL);
	ck_assert_uint_eq(atomic_load(&t.slots[sa].v[PS_V_CPU_SAMPLES]), 2);
	ck_assert_uint_eq(atomic_load(&t.slots[sa].v[PS_V_CPU_NS]), 20);
	ck_assert_int_eq(ps_stacktab_get(&t, sb, &ips, &depth, &trunc), 1);
	ck_assert_int_eq(depth, 3);
	ck_assert_int_eq(trunc, 1);
	ck_assert_uint_eq(ips[2], 4);
	ck_assert_int_eq(ps_stacktab_get(&t, PS_SLOT_FULL, &ips, &depth, &trunc), 0);
}
END_TEST

START_TEST(stacktab_marks_the_groups_that_hold_a_stack)
{
	struct ps_stacktab t;
	uintptr_t a[2] = { 5, 6 };
	uint32_t sa, i, used = 0;

	ck_assert_int_eq(ps_stacktab_init(&t, 1 << 20), 0);
	/* The special slots are always read; no other group before a stack. */
	ck_assert(ps_stacktab_group_used(&t, PS_SLOT_BUSY));
	for (i = PS_NSPECIAL; i < ps_stacktab_size(&t); i++)
		used += (uint32_t)ps_stacktab_group_used(&t, i);
	ck_assert_uint_eq(used, 0);
	sa = ps_stacktab_add(&t, a, 2, 0, one_cpu);
	for (i = PS_NSPECIAL; i < ps_stacktab_size(&t); i++)
		if (ps_stacktab_group_used(&t, i))
			used++;
	/* Exactly the stack's group (fewer slots in group 0, whose first are
	 * the special ones). */
	ck_assert(ps_stacktab_group_used(&t, sa));
	ck_assert_uint_le(used, PS_ST_GROUP);
	ck_assert_uint_ge(used, PS_ST_GROUP - PS_NSPECIAL);
}
END_TEST

START_TEST(stacktab_counts_drop_when_full)
{
	struct ps_stacktab t;
	uintptr_t s[1];
	uint64_t total = 0, full;
	uint32_t i, n = 0;

	ck_assert_int_eq(ps_stacktab_init(&t, 256 << 10), 0);
	for (i = 0; i < 4 * t.nslots; i++) {
		s[0] = 0x1000 + i;
		if (ps_stacktab_add(&t, s, 1, 0, one_cpu) == PS_SLOT_FULL)
			n++;
		total++;
	}
	full = atomic_load(&t.slots[PS_SLOT_FULL].v[PS_V_CPU_SAMPLES]);
	ck_assert_uint_ge(n, 3 * t.nslots);         /* most could not fit */
	ck_assert_uint_eq(full, n);                 /* but none was lost */
	ck_assert_uint_eq(atomic_load(&t.c->dropped), n);
	ck_assert_int_eq(ps_stacktab_reset(&t), 0);
	ck_assert_uint_eq(atomic_load(&t.slots[PS_SLOT_FULL].v[PS_V_CPU_SAMPLES]), 0);
	(void)total;
}
END_TEST

START_TEST(stacktab_frame_pool_exhaustion_is_counted)
{
	struct ps_stacktab t;
	uintptr_t s[128];
	uint32_t i, full = 0;

	ck_assert_int_eq(ps_stacktab_init(&t, 256 << 10), 0);
	for (i = 0; i < t.nslots; i++) {
		for (int k = 0; k < 128; k++)
			s[k] = (uintptr_t)i * 1000 + (uintptr_t)k;
		if (ps_stacktab_add(&t, s, 128, 1, one_cpu) == PS_SLOT_FULL)
			full++;
	}
	ck_assert_uint_gt(full, 0);
	ck_assert_uint_le(atomic_load(&t.c->pool_used), t.npool + 128);
	ck_assert_uint_eq(atomic_load(&t.slots[PS_SLOT_FULL].v[PS_V_CPU_SAMPLES]), full);
}
END_TEST

static struct ps_stacktab shared;

static void *
adder(void *arg)
{
	uintptr_t s[2] = { 7, 0 };

	for (int i = 0; i < 20000; i++) {
		s[1] = (uintptr_t)(i % 50);
		ps_stacktab_add(&shared, s, 2, 0, one_cpu);
	}
	return arg;
}

START_TEST(stacktab_concurrent_adds_lose_nothing)
{
	pthread_t t[4];
	uint64_t sum = 0;
	uint32_t i, distinct = 0;

	ck_assert_int_eq(ps_stacktab_init(&shared, 1 << 20), 0);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, adder, NULL), 0);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < ps_stacktab_size(&shared); i++) {
		sum += atomic_load(&shared.slots[i].v[PS_V_CPU_SAMPLES]);
		if (atomic_load(&shared.slots[i].state) == PS_ST_READY)
			distinct++;
	}
	ck_assert_uint_eq(sum, 4 * 20000);
	ck_assert_uint_ge(distinct, 50);   /* a race may store a stack twice */
	ck_assert_uint_le(distinct, 50 * 4);
}
END_TEST

static void
sum_live(void *arg, uint32_t stack, uint64_t size, uint64_t weight)
{
	uint64_t *acc = arg;

	acc[0]++;
	acc[1] += size;
	acc[2] += stack + weight;
}

START_TEST(livetab_insert_remove_and_each)
{
	struct ps_livetab t;
	uint64_t acc[3] = { 0, 0, 0 };
	char blocks[100];

	ck_assert_int_eq(ps_livetab_init(&t), 0);
	ck_assert_int_eq(ps_livetab_remove(&t, &blocks[0]), 0);  /* empty table */
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(ps_livetab_insert(&t, &blocks[i], 10, 1, 5), 0);
	ck_assert_uint_eq(atomic_load(&t.c->live), 100);
	for (int i = 0; i < 100; i += 2)
		ck_assert_int_eq(ps_livetab_remove(&t, &blocks[i]), 1);
	ck_assert_int_eq(ps_livetab_remove(&t, &blocks[0]), 0);  /* already gone */
	ps_livetab_each(&t, sum_live, acc);
	ck_assert_uint_eq(acc[0], 50);
	ck_assert_uint_eq(acc[1], 500);
	ck_assert_uint_eq(acc[2], 50 * 6);
	/* Tombstones are reused: many insert/remove cycles never fill it. */
	for (int r = 0; r < 20000; r++) {
		ck_assert_int_eq(ps_livetab_insert(&t, &blocks[0], 1, 1, 1), 0);
		ck_assert_int_eq(ps_livetab_remove(&t, &blocks[0]), 1);
	}
	ck_assert_uint_eq(atomic_load(&t.c->dropped), 0);
	ck_assert_int_eq(ps_livetab_reset(&t), 0);
	ck_assert_uint_eq(atomic_load(&t.c->live), 0);
}
END_TEST

static void
count_live(void *arg, uint32_t stack, uint64_t size, uint64_t weight)
{
	(void)stack;
	(void)size;
	(void)weight;
	(*(int *)arg)++;
}

/* Pages of [p, p + len) resident in this process. */
static int
resident_pages(void *p, size_t len)
{
	unsigned char v[1024];
	size_t n = (len + 4095) / 4096, i;
	int r = 0;

	ck_assert_uint_le(n, sizeof(v));
	ck_assert_int_eq(mincore(p, len, v), 0);
	for (i = 0; i < n; i++)
		r += v[i] & 1;
	return r;
}

/* A pass reads only the pages of slots that ever held an entry: the
 * others would be allocated and zeroed by the read (shared memory). */
START_TEST(livetab_each_reads_only_groups_that_held_an_entry)
{
	static int blocks[3];
	size_t len = (size_t)PS_LIVE_SLOTS * sizeof(struct ps_live_slot);
	struct ps_livetab t;
	int n = 0, i;

	ck_assert_int_eq(ps_livetab_init(&t), 0);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(ps_livetab_insert(&t, &blocks[i], 8, 1, 1), 0);
	ck_assert_int_le(resident_pages(t.slots, len), 3);
	ps_livetab_each(&t, count_live, &n);
	ck_assert_int_eq(n, 3);
	ck_assert_int_le(resident_pages(t.slots, len), 3);
	ps_shmem_free(t.c, t.map_len);
}
END_TEST

/* A second mapping of a ps_shmem_new mapping, from its descriptor. */
static void *
again(void *p, size_t len)
{
	void *m;

	ck_assert_int_ge(ps_shmem_fd(p), 0);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, ps_shmem_fd(p), 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	return m;
}

/* Both tables read through a view: the same memory mapped a second time,
 * elsewhere, from its memfd, as the tree's helper maps a program's tables.  The writer's mapping is then unmapped,
 * so everything read -- counters included -- comes through the view. */
START_TEST(tables_read_through_a_view_at_another_address)
{
	struct ps_stacktab t, v;
	struct ps_livetab l, lv;
	uintptr_t a[3] = { 7, 8, 9 };
	const uintptr_t *ips;
	static int block;
	int depth, trunc, n = 0;
	uint64_t dropped;
	uint32_t sa;
	void *m;

	/* Room in the descriptor list, whatever the tests before left. */
	ps_shmem_close_fds();
	ck_assert_int_eq(ps_stacktab_init(&t, 256 << 10), 0);
	m = again(t.c, t.map_len);
	ck_assert_ptr_ne(m, (void *)t.c);
	ck_assert_int_eq(ps_stacktab_view(&v, &t, m), 0);
	ck_assert(ps_stacktab_empty(&v));
	sa = ps_stacktab_add(&t, a, 3, 0, one_cpu);
	while (ps_stacktab_add(&t, a, 1, 0, one_cpu) != PS_SLOT_FULL)
		a[0]++;  /* a new stack each time, until the table is full */
	dropped = atomic_load(&t.c->dropped);
	ck_assert_uint_gt(dropped, 0);
	ps_shmem_free(t.c, t.map_len);
	ck_assert(!ps_stacktab_empty(&v));
	ck_assert_int_eq(ps_stacktab_get(&v, sa, &ips, &depth, &trunc), 1);
	ck_assert_int_eq(depth, 3);
	ck_assert_uint_eq(ips[2], 9);
	ck_assert(ps_stacktab_group_used(&v, sa));
	ck_assert_uint_eq(atomic_load(&v.c->dropped), dropped);

	ck_assert_int_eq(ps_livetab_init(&l), 0);
	m = again(l.c, l.map_len);
	ck_assert_int_eq(ps_livetab_view(&lv, &l, m), 0);
	ck_assert_int_eq(ps_livetab_insert(&l, &block, 8, 1, sa), 0);
	ps_shmem_free(l.c, l.map_len);
	ck_assert_uint_eq(atomic_load(&lv.c->live), 1);
	ck_assert(ps_livetab_filter_hit(lv.filter, &block));
	ps_livetab_each(&lv, count_live, &n);
	ck_assert_int_eq(n, 1);
}
END_TEST

/* A table described by another process is read only if it lies within
 * its mapping. */
START_TEST(tables_views_refuse_what_is_not_within_the_mapping)
{
	struct ps_stacktab t, bad, v;
	struct ps_livetab l, lbad, lv;

	ck_assert_int_eq(ps_stacktab_init(&t, 256 << 10), 0);
	bad = t;
	bad.nslots = 3;
	ck_assert_int_eq(ps_stacktab_view(&v, &bad, t.c), -EINVAL);
	bad = t;
	bad.npool++;
	ck_assert_int_eq(ps_stacktab_view(&v, &bad, t.c), -EINVAL);
	bad = t;
	bad.slots = (struct ps_stack_slot *)((char *)t.c - 64);
	ck_assert_int_eq(ps_stacktab_view(&v, &bad, t.c), -EINVAL);
	bad = t;
	bad.map_len = 4096;
	ck_assert_int_eq(ps_stacktab_view(&v, &bad, t.c), -EINVAL);
	ck_assert_int_eq(ps_stacktab_view(&v, &t, t.c), 0);

	ck_assert_int_eq(ps_livetab_init(&l), 0);
	lbad = l;
	lbad.map_len += 4096;
	ck_assert_int_eq(ps_livetab_view(&lv, &lbad, l.c), -EINVAL);
	lbad = l;
	lbad.used++;
	ck_assert_int_eq(ps_livetab_view(&lv, &lbad, l.c), -EINVAL);
	ck_assert_int_eq(ps_livetab_view(&lv, &l, l.c), 0);
	ps_shmem_free(t.c, t.map_len);
	ps_shmem_free(l.c, l.map_len);
}
END_TEST

START_TEST(stacktab_get_refuses_a_stack_beyond_the_pool)
{
	/* The helper reads other processes' tables: a stray write there
	 * (a wild frame index or depth) is a stack it does not read, not a
	 * read outside its mapping. */
	struct ps_stacktab t;
	uintptr_t a[3] = { 1, 2, 3 };
	const uintptr_t *ips;
	uint32_t sa;
	int depth, trunc;

	ck_assert_int_eq(ps_stacktab_init(&t, 256 << 10), 0);
	sa = ps_stacktab_add(&t, a, 3, 0, one_cpu);
	ck_assert_int_eq(ps_stacktab_get(&t, sa, &ips, &depth, &trunc), 1);
	t.slots[sa].frames = 0x7fffffff;
	ck_assert_int_eq(ps_stacktab_get(&t, sa, &ips, &depth, &trunc), 0);
	t.slots[sa].frames = t.npool - 2;
	ck_assert_int_eq(ps_stacktab_get(&t, sa, &ips, &depth, &trunc), 0);
	t.slots[sa].frames = t.npool - 3;
	ck_assert_int_eq(ps_stacktab_get(&t, sa, &ips, &depth, &trunc), 1);
	ps_shmem_free(t.c, t.map_len);
}
END_TEST

START_TEST(livetab_take_returns_the_entry)
{
	struct ps_livetab t;
	struct ps_live_entry e = { 0, 0, 0 };
	char block;

	ck_assert_int_eq(ps_livetab_init(&t), 0);
	ck_assert_int_eq(ps_livetab_insert(&t, &block, 123, 456, 7), 0);
	ck_assert_int_eq(ps_livetab_take(&t, &block, &e), 1);
	ck_assert_uint_eq(e.stack, 7);
	ck_assert_uint_eq(e.size, 123);
	ck_assert_uint_eq(e.weight, 456);
	ck_assert_int_eq(ps_livetab_take(&t, &block, &e), 0);
	ck_assert_uint_eq(atomic_load(&t.c->live), 0);
}
END_TEST

START_TEST(livetab_full_counts_drop)
{
	struct ps_livetab t;
	uint32_t i, fails = 0;

	ck_assert_int_eq(ps_livetab_init(&t), 0);
	for (i = 0; i < PS_LIVE_SLOTS + 1000; i++)
		if (ps_livetab_insert(&t, (void *)(uintptr_t)(0x10000 + 16 * (uintptr_t)i), 1, 1, 1))
			fails++;
	ck_assert_uint_ge(fails, 1000);
	ck_assert_uint_eq(atomic_load(&t.c->dropped), fails);
}
END_TEST

/* The free hook forwards a block untouched when its filter byte is clear:
 * the filter must never clear a live sampled block (in-use would keep a
 * freed block), and it must clear again once the blocks are gone. */
START_TEST(livetab_filter_never_clears_a_live_block_and_clears_after_removal)
{
	struct ps_livetab t;
	uintptr_t base = 0x7f0000000000u;
	uint32_t i, set = 0;

	ck_assert_int_eq(ps_livetab_init(&t), 0);
	/* 3000 blocks spread over 64 MiB: many share a filter byte. */
	for (i = 0; i < 3000; i++)
		ck_assert_int_eq(ps_livetab_insert(&t, (void *)(base + (uintptr_t)i * 22336), 1, 1, 1),
				 0);
	for (i = 0; i < 3000; i++)
		ck_assert(ps_livetab_filter_hit(t.filter, (void *)(base + (uintptr_t)i * 22336)));
	for (i = 0; i < PS_LIVE_FILTER; i++)
		set += atomic_load(&t.filter[i]) != 0;
	ck_assert_uint_le(set, 3000);
	for (i = 0; i < 3000; i++)
		ck_assert_int_eq(ps_livetab_remove(&t, (void *)(base + (uintptr_t)i * 22336)), 1);
	for (i = 0; i < PS_LIVE_FILTER; i++)
		ck_assert_uint_eq(atomic_load(&t.filter[i]), 0);
	/* Neighbouring 16-byte granules share a cache line of the filter. */
	ck_assert_uint_eq(ps_livetab_filter_index((void *)(base + 0x1230)) / 64,
			  ps_livetab_filter_index((void *)(base + 0x1230 + 16 * 7)) / 64);
}
END_TEST

START_TEST(alloc_weight_unbiases_by_size)
{
	uint64_t mean = 524288;

	/* A block of the mean size is sampled with p = 1 - 1/e. */
	ck_assert_uint_eq(ps_alloc_weight(mean, mean),
			  (uint64_t)(PS_FIXED_ONE / (1 - exp(-1.0)) + 0.5));
	/* Small blocks stand for about mean/size blocks. */
	ck_assert(fabs((double)ps_alloc_weight(64, mean) / PS_FIXED_ONE - mean / 64.0) < 1.0);
	/* Huge blocks are always sampled: weight 1. */
	ck_assert_uint_eq(ps_alloc_weight(1u << 30, mean), PS_FIXED_ONE);
	/* Every allocation recorded: weight 1. */
	ck_assert_uint_eq(ps_alloc_weight(64, 1), PS_FIXED_ONE);
	ck_assert_uint_eq(ps_alloc_weight(0, mean), PS_FIXED_ONE);
}
END_TEST

/* The samplers' arithmetic without libm (common/expo.h) against libm's,
 * over every binade u is drawn from and the whole range of x where
 * 1 - e^-x is not 1: within 4 units in the last place. */
START_TEST(expo_agrees_with_libm)
{
	uint64_t r = 0x9e3779b97f4a7c15ull;
	double u, x, want, got;
	int i;

	ck_assert(ps_expo_neglog(1.0) == 0.0);
	ck_assert(ps_expo_p(0.0) == 0.0 && ps_expo_p(-1.0) == 0.0 && ps_expo_p(NAN) == 0.0);
	ck_assert(ps_expo_p(800.0) == 1.0 && ps_expo_p(INFINITY) == 1.0);
	for (i = 0; i < 200000; i++) {
		r ^= r >> 12;
		r ^= r << 25;
		r ^= r >> 27;
		u = ((double)((r * 0x2545f4914f6cdd1dull) >> 11) + 1.0) *
		    (1.0 / 9007199254740992.0);
		u = ldexp(u, -(i % 60));            /* small u too */
		want = -log(u);
		got = ps_expo_neglog(u);
		ck_assert_msg(fabs(got - want) <= 4 * DBL_EPSILON * fmax(want, 1e-300),
			      "-ln(%a): %a, libm %a", u, got, want);
		x = ldexp(u, (i % 72) - 62);        /* x from 2^-122 to about 700 */
		want = -expm1(-x);
		got = ps_expo_p(x);
		ck_assert_msg(fabs(got - want) <= 4 * DBL_EPSILON * want,
			      "1 - e^-%a: %a, libm %a", x, got, want);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("tables");
	TCase *tc = tcase_create("tables");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, stacktab_dedups_and_counts);
	tcase_add_test(tc, stacktab_marks_the_groups_that_hold_a_stack);
	tcase_add_test(tc, stacktab_counts_drop_when_full);
	tcase_add_test(tc, stacktab_frame_pool_exhaustion_is_counted);
	tcase_add_test(tc, stacktab_concurrent_adds_lose_nothing);
	tcase_add_test(tc, livetab_insert_remove_and_each);
	tcase_add_test(tc, stacktab_get_refuses_a_stack_beyond_the_pool);
	tcase_add_test(tc, livetab_take_returns_the_entry);
	tcase_add_test(tc, livetab_each_reads_only_groups_that_held_an_entry);
	tcase_add_test(tc, livetab_full_counts_drop);
	tcase_add_test(tc, livetab_filter_never_clears_a_live_block_and_clears_after_removal);
	tcase_add_test(tc, tables_read_through_a_view_at_another_address);
	tcase_add_test(tc, tables_views_refuse_what_is_not_within_the_mapping);
	tcase_add_test(tc, alloc_weight_unbiases_by_size);
	tcase_add_test(tc, expo_agrees_with_libm);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
