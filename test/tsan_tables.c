/* tsan_tables.c -- ThreadSanitizer hammer of the lock-free tables.
 *
 * shim/stacktab.c and shim/livetab.c are written by every host thread
 * (SIGPROF handler, allocation hooks) while the uploader thread scans
 * them.  Here 4 writer threads do the same -- add stacks from a shared set,
 * insert and remove live blocks, reusing addresses as malloc does -- while
 * a reader thread scans both tables in a loop the way the uploader does.
 * Built with -fsanitize=thread (`make sanitize`), any unsynchronised
 * access is reported; the program itself also checks what it reads:
 *   - every published stack is one of the known stacks, whole (a torn or
 *     early read of the frames would not be);
 *   - every live entry the reader is handed has a size and weight that
 *     belong to its stack (the writer derives both from one number, so a
 *     mix of two entries is visible);
 *   - at the end the counters add up exactly: no sample lost or counted
 *     twice, and the live table holds exactly the blocks not yet freed.
 * Exit status 0 when all holds; TSan makes it non-zero on a report
 * (halt_on_error is set by test/sanitize.sh).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/livetab.h"
#include "shim/stacktab.h"

#define WRITERS  4
#define ROUNDS   60000          /* per writer; about 2 s under TSan */
#define NSTACKS  3000           /* distinct stacks, fits the table */
#define WINDOW   256            /* live blocks per writer */
#define MAXDEPTH 32

static struct ps_stacktab st;
static struct ps_livetab lt;
static atomic_int writers_left = WRITERS;
static pthread_barrier_t start;     /* writers begin once the reader runs */
static atomic_ulong bad_stacks, bad_remove, torn, scans;

/* Stack k: depth 1 + k % MAXDEPTH, frame i = k << 20 | i << 4 | 0x8. */
static int
make_stack(unsigned k, uintptr_t *ips)
{
	int depth = 1 + (int)(k % MAXDEPTH);

	for (int i = 0; i < depth; i++)
		ips[i] = (uintptr_t)k << 20 | (uintptr_t)i << 4 | 0x8;
	return depth;
}

static int
stack_ok(const uintptr_t *ips, int depth)
{
	uintptr_t want[MAXDEPTH];
	unsigned k = (unsigned)(ips[0] >> 20);

	return k < NSTACKS && depth == make_stack(k, want) &&
	       !memcmp(ips, want, (size_t)depth * sizeof(*ips));
}

/* A live entry's fields all derive from one generation number g. */
static uint64_t size_of(uint32_t g) { return (uint64_t)g * 3 + 1; }
static uint64_t weight_of(uint32_t g) { return (uint64_t)g + 7; }

static void *
writer(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg, seed = id * 7919 + 1;
	const uint64_t vals[PS_NVALUES] = { 1, 10, 0, 0 };
	uintptr_t ips[MAXDEPTH];
	int live[WINDOW] = { 0 };

	pthread_barrier_wait(&start);
	for (uint32_t r = 0; r < ROUNDS; r++) {
		unsigned k = (seed = seed * 1103515245 + 12345) >> 8;
		int depth = make_stack(k % NSTACKS, ips);
		unsigned w = k % WINDOW;
		/* Addresses are reused, as malloc reuses them. */
		const void *p = (const void *)((uintptr_t)(id + 1) << 40 | (uintptr_t)w << 4);
		uint32_t g = id << 24 | r;

		ps_stacktab_add(&st, ips, depth, 0, vals);
		if (live[w] && ps_livetab_remove(&lt, p) != 1)
			atomic_fetch_add(&bad_remove, 1);
		live[w] = ps_livetab_insert(&lt, p, size_of(g), weight_of(g), g) == 0;
	}
	atomic_fetch_sub(&writers_left, 1);
	return NULL;
}

static void
check_entry(void *arg, uint32_t stack, uint64_t size, uint64_t weight)
{
	(*(unsigned long *)arg)++;
	if (size != size_of(stack) || weight != weight_of(stack))
		atomic_fetch_add(&torn, 1);
}

/* One pass over both tables, as the uploader's fold does. */
static unsigned long
scan(uint64_t *samples)
{
	unsigned long entries = 0;
	const uintptr_t *ips;
	int depth, trunc;

	*samples = 0;
	for (uint32_t i = 0; i < ps_stacktab_size(&st); i++) {
		*samples += atomic_load_explicit(&st.slots[i].v[PS_V_CPU_SAMPLES],
						 memory_order_relaxed);
		if (ps_stacktab_get(&st, i, &ips, &depth, &trunc) &&
		    (!stack_ok(ips, depth) || trunc))
			atomic_fetch_add(&bad_stacks, 1);
	}
	ps_livetab_each(&lt, check_entry, &entries);
	return entries;
}

static void *
reader(void *arg)
{
	uint64_t samples;

	(void)arg;
	pthread_barrier_wait(&start);
	while (atomic_load(&writers_left) > 0) {
		scan(&samples);
		atomic_fetch_add(&scans, 1);
	}
	return NULL;
}

int
main(void)
{
	pthread_t w[WRITERS], r;
	unsigned long entries;
	uint64_t samples;
	int fail = 0;

	if (ps_stacktab_init(&st, 4u << 20) || ps_livetab_init(&lt)) {
		fprintf(stderr, "tsan_tables: cannot map the tables\n");
		return 1;
	}
	if (pthread_barrier_init(&start, NULL, WRITERS + 1) ||
	    pthread_create(&r, NULL, reader, NULL))
		return 1;
	for (uintptr_t i = 0; i < WRITERS; i++)
		if (pthread_create(&w[i], NULL, writer, (void *)i))
			return 1;
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	pthread_join(r, NULL);

	entries = scan(&samples);
	fail |= samples != (uint64_t)WRITERS * ROUNDS;
	fail |= atomic_load(&st.c->dropped) != 0;
	fail |= entries != atomic_load(&lt.c->live) || atomic_load(&lt.c->dropped) != 0;
	fail |= entries != (unsigned long)WRITERS * WINDOW;
	fail |= atomic_load(&bad_stacks) != 0 || atomic_load(&bad_remove) != 0;
	fail |= atomic_load(&torn) != 0;
	/* The reader overlapped the writers at least once, or nothing was
	 * tested. */
	fail |= atomic_load(&scans) < 1;
	printf("tsan_tables: %s: %lu scans, %llu samples (want %llu), %lu live "
	       "(want %u), %lu bad stacks, %lu failed removes, %lu torn live "
	       "entries\n",
	       fail ? "FAILED" : "ok", atomic_load(&scans),
	       (unsigned long long)samples, (unsigned long long)WRITERS * ROUNDS,
	       entries, WRITERS * WINDOW, atomic_load(&bad_stacks),
	       atomic_load(&bad_remove), atomic_load(&torn));
	return fail;
}
