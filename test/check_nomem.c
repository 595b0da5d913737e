/* check_nomem.c -- the uploader path with each allocation failing in
 * turn (zlib's infcover and curl's torture mode do the same).
 *
 * This binary defines malloc, calloc, realloc and free: they count every
 * allocation, make the Nth one fail on demand, and keep the set of blocks
 * allocated since arming, so that what is still held at the end is known.
 * The C library routes its own allocations (strdup, fopen, zlib's
 * through calloc) here too.
 *
 * The path, over hand-built tables: two export passes (fold, pprof
 * encoding, gzip, the local files, the remote queue with its multipart
 * bodies) and the final flush of the queue through the upload seam.  For
 * each N, with the Nth allocation failing:
 *   - nothing crashes;
 *   - the local files end complete (the second pass writes them again);
 *   - every request the clean run sends is sent, or the loss is counted
 *     (dropped, deferred, fold or file errors);
 *   - no more blocks are held afterwards than after the clean run: a
 *     failure leaks nothing.
 */
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

/* ---- the failing allocator ------------------------------------------- */

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void __libc_free(void *);

#define LIVE_SLOTS (1u << 17)
#define TOMB ((void *)1)

static int armed;
static long nalloc, fail_at;
static int hit;
static void *live[LIVE_SLOTS];
static long nlive;

static size_t
slot_of(const void *p)
{
	return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 47) & (LIVE_SLOTS - 1);
}

static void
track(void *p)
{
	size_t i = slot_of(p);

	while (live[i] && live[i] != TOMB)
		i = (i + 1) & (LIVE_SLOTS - 1);
	live[i] = p;
	if (++nlive > (long)LIVE_SLOTS / 2)
		abort();        /* the test's own limit, not the code's */
}

static int
untrack(void *p)
{
	size_t i = slot_of(p);

	while (live[i]) {
		if (live[i] == p) {
			live[i] = TOMB;
			nlive--;
			return 1;
		}
		i = (i + 1) & (LIVE_SLOTS - 1);
	}
	return 0;
}

/* 1 if this allocation is the one to fail. */
static int
fails(void)
{
	if (!armed)
		return 0;
	if (++nalloc != fail_at)
		return 0;
	hit = 1;
	errno = ENOMEM;
	return 1;
}

void *
malloc(size_t n)
{
	void *p;

	if (fails())
		return NULL;
	p = __libc_malloc(n);
	if (p && armed)
		track(p);
	return p;
}

void *
calloc(size_t n, size_t size)
{
	void *p;

	if (fails())
		return NULL;
	p = __libc_calloc(n, size);
	if (p && armed)
		track(p);
	return p;
}

void *
realloc(void *old, size_t n)
{
	int mine;
	void *p;

	if (fails())
		return NULL;
	p = __libc_realloc(old, n);
	if (!p && old && n)
		return NULL;    /* the old block stays */
	mine = old ? untrack(old) : armed;
	if (p && mine && armed)
		track(p);
	return p;
}

void
free(void *p)
{
	if (p)
		(void)untrack(p);
	__libc_free(p);
}

static void
arm(long n)
{
	memset(live, 0, sizeof(live));
	nlive = 0;
	nalloc = 0;
	hit = 0;
	fail_at = n;
	armed = 1;
}

/* ---- the path -------------------------------------------------------- */

#define SEC 1000000000ull

static struct ps_config cfg;
static struct ps_stacktab st;
static struct ps_livetab lt;
static char dir[64];
static long sent;

static const char *
env(const char *name)
{
	if (!strcmp(name, "PYROSCOPE_SERVER_ADDRESS"))
		return "http://127.0.0.1:4040";
	if (!strcmp(name, "PYROSCOPE_TAGS"))
		return "env=dev";
	/* Source lines off: libdw holds what it allocated until dwfl_end,
	 * and after a failed allocation of its own it holds something else,
	 * which the count of blocks held cannot tell from a leak of ours.
	 * The DWARF path is covered by check_symbols and test_lines. */
	if (!strcmp(name, "PYROSCOPE_DWARF_MEMORY"))
		return "0";
	return NULL;
}

static int
fake_post(const struct ps_http_request *rq, struct ps_http_response *rs)
{
	(void)rq;
	sent++;
	rs->status = 200;
	rs->retry_after_s = -1;
	rs->message[0] = '\0';
	return 0;
}

static uint64_t
fake_clock(void)
{
	return 1000 * SEC;
}

static const char *const folded_files[] = {
	"app.7.cpu.folded", "app.7.alloc_objects.folded", "app.7.alloc_space.folded",
	"app.7.inuse_objects.folded", "app.7.inuse_space.folded",
};
static const char *const pprof_files[] = { "app.7.cpu.pb.gz", "app.7.alloc.pb.gz" };

struct outcome {
	char folded[PS_ARRAY_LEN(folded_files)][256];
	int pprof_ok;
	long sent;
	uint64_t counted;       /* losses and retries said in a counter */
	long held;              /* blocks still held at the end */
	long allocations;
};

static void
clear_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' || strstr(e->d_name, ".tmp"))
			(void)unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static int
cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of text, sorted: the fold's order is its own business. */
static void
sort_lines(char *text, size_t len)
{
	char copy[256], *line[32], *p = copy;
	size_t n = 0, off = 0;

	snprintf(copy, sizeof(copy), "%s", text);
	while (*p && n < PS_ARRAY_LEN(line)) {
		line[n++] = p;
		p = strchrnul(p, '\n');
		if (*p)
			*p++ = '\0';
	}
	qsort(line, n, sizeof(line[0]), cmp_line);
	for (size_t i = 0; i < n; i++)
		off += (size_t)snprintf(text + off, len - off, "%s\n", line[i]);
}

/* Two passes and the final flush with allocation n failing (0: none). */
static void
run(long n, struct outcome *o)
{
	static struct ps_export x;
	struct ps_remote *r;
	unsigned queued = 0;
	int write_failed = 0;

	clear_dir();
	memset(o, 0, sizeof(*o));
	hm_export(&x, &cfg, &lt, dir, 7);
	ck_assert_int_eq(ps_remote_setup(&x.remote, &cfg, NULL, x.start_ns), 0);
	x.remote.up.post = fake_post;
	x.remote.up.now = fake_clock;
	sent = 0;

	arm(n);
	(void)ps_export_run(&x, 0);
	write_failed += ps_group_pass() != 0;
	ps_group_send(0, 0, NULL);
	(void)ps_export_run(&x, 1);
	write_failed += ps_group_pass() != 0;
	ps_group_send(1, fake_clock() + 5 * SEC, NULL);
	/* The uploads go through the program's group (group.h). */
	r = ps_group_remote(&x);
	o->counted = write_failed + x.fold_errors + x.remote.up.deferred;
	if (r) {
		o->counted += r->up.dropped + r->up.deferred + r->up.failed + r->up.retries;
		queued = r->up.n;
	}
	ps_group_free_all();
	armed = 0;
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(queued, 0);           /* the final flush empties the queue */

	o->allocations = nalloc;
	o->held = nlive;
	o->sent = sent;
	for (size_t i = 0; i < PS_ARRAY_LEN(folded_files); i++) {
		(void)hm_read(dir, folded_files[i], o->folded[i], sizeof(o->folded[i]));
		sort_lines(o->folded[i], sizeof(o->folded[i]));
	}
	o->pprof_ok = 1;
	for (size_t i = 0; i < PS_ARRAY_LEN(pprof_files); i++) {
		char head[4];

		(void)hm_read(dir, pprof_files[i], head, sizeof(head));
		o->pprof_ok &= head[0] == '\x1f';
	}
}

START_TEST(nomem_each_failure_is_counted_and_leaks_nothing)
{
	struct outcome clean, o;
	long n, failures = 0;

	hm_tmpdir(dir, "check_nomem");
	hm_table(&st);
	ck_assert_int_eq(ps_livetab_init(&lt), 0);
	memset(&cfg, 0, sizeof(cfg));   /* loading does not clear (config.h) */
	ck_assert_int_ge(ps_config_load(&cfg, env, "app"), 0);
	hm_cpu(&st, hm_leaf_a, 3, 10);
	hm_cpu(&st, hm_leaf_b, 1, 10);
	hm_alloc_samples(&st, &lt, 4, 100, 2);

	/* Until two runs allocate alike: the first runs also make what lives
	 * as long as the process (the C library's and the symbolizer's
	 * once-only state; libz, loaded by the first, changes what the next
	 * failing dlsym allocates for dlerror). */
	run(0, &clean);
	for (n = 0; n < 5; n++) {
		run(0, &o);
		if (o.allocations == clean.allocations)
			break;
		clean = o;
	}
	ck_assert(!hit);
	ck_assert_int_eq(clean.counted, 0);
	ck_assert_str_eq(clean.folded[0], "hm_main;hm_work;hm_leaf_a 30000000\n"
					  "hm_main;hm_work;hm_leaf_b 10000000\n");
	ck_assert_str_eq(clean.folded[3], "hm_main;hm_alloc 2\n");
	ck_assert(clean.pprof_ok);
	ck_assert_int_eq(clean.sent, 3);        /* cpu, alloc; alloc again (in use) */
	ck_assert_int_gt(clean.allocations, 10);

	for (n = 1; n <= clean.allocations + 1; n++) {
		run(n, &o);
		if (!hit)
			break;
		failures++;
		/* The second pass names everything the first could not: a
		 * failure never leaves "+0x" names for good. */
		for (size_t i = 0; i < PS_ARRAY_LEN(folded_files); i++)
			ck_assert_msg(!strcmp(o.folded[i], clean.folded[i]),
				      "allocation %ld failing: %s is \"%s\"", n, folded_files[i],
				      o.folded[i]);
		ck_assert_msg(o.pprof_ok, "allocation %ld failing: a pprof file is missing", n);
		ck_assert_msg(o.sent == clean.sent || o.counted > 0,
			      "allocation %ld failing: %ld requests sent of %ld, no loss counted",
			      n, o.sent, clean.sent);
		/* Fewer is no leak: the C library may skip a cache of its own
		 * (dlerror's message) when its allocation is the one failing. */
		ck_assert_msg(o.held <= clean.held,
			      "allocation %ld failing: %ld blocks held at the end, %ld in the clean run",
			      n, o.held, clean.held);
	}
	ck_assert_int_eq(failures, clean.allocations);
	hm_rmdir(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("nomem");
	TCase *tc = tcase_create("nomem");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, nomem_each_failure_is_counted_and_leaks_nothing);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
