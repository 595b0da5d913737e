/* alloc_sites: allocation sites with known byte totals, for the allocation
 * profile's accuracy test.
 *
 * site_big allocates exactly 3x the bytes of site_small; both free every
 * block at once.  site_leak keeps its blocks until exit.  Every site cycles
 * through the same sizes, 64 B to 64 KiB in powers of two, so the sampling
 * weight 1/(1-exp(-size/mean)) is exercised from ~8000 down to ~1.06.
 * Blocks are touched (first and last byte) so the allocations are real.
 *
 * usage: alloc_sites SMALL_MIB LEAK_MIB REPORT.json
 * Writes {"site": {"bytes": B, "objects": N}, ...} to REPORT.json. */
#include <stdio.h>
#include <stdlib.h>

#define NSIZES 11  /* 64 << 0 .. 64 << 10 = 64 KiB */

struct truth {
	unsigned long long bytes, objects;
};

static void *volatile sink;

/* Allocate (and free, unless keep) blocks cycling through the sizes until
 * `total` bytes have been allocated; the last block is cut to land on it
 * exactly.  Each site below is its own function so the profile can tell
 * them apart; -fno-inline keeps them. */
static void
churn(unsigned long long total, struct truth *t, void **keep, size_t *nkeep)
{
	unsigned long long done = 0;
	unsigned i = 0;

	while (done < total) {
		size_t n = (size_t)64 << (i++ % NSIZES);
		char *p;

		if (n > total - done)
			n = (size_t)(total - done);
		p = malloc(n);
		if (!p)
			exit(3);
		p[0] = 1;
		p[n - 1] = 2;
		sink = p;
		done += n;
		t->objects++;
		if (keep)
			keep[(*nkeep)++] = p;
		else
			free(p);
	}
	t->bytes += done;
}

__attribute__((noinline)) void
site_small(unsigned long long total, struct truth *t)
{
	churn(total, t, NULL, NULL);
}

__attribute__((noinline)) void
site_big(unsigned long long total, struct truth *t)
{
	churn(total, t, NULL, NULL);
}

__attribute__((noinline)) void
site_leak(unsigned long long total, struct truth *t, void **keep, size_t *nkeep)
{
	churn(total, t, keep, nkeep);
}

int
main(int argc, char **argv)
{
	struct truth small = { 0, 0 }, big = { 0, 0 }, leak = { 0, 0 };
	unsigned long long mib = 1ull << 20, s, l;
	size_t nkeep = 0;
	void **keep;
	FILE *f;
	int r;

	if (argc != 4)
		return 2;
	s = strtoull(argv[1], NULL, 10) * mib;
	l = strtoull(argv[2], NULL, 10) * mib;
	/* Enough room for blocks of 64 B at worst. */
	keep = calloc(l / 64 + 1, sizeof(*keep));
	if (!keep)
		return 3;
	/* Interleave the sites in rounds, so that a slow drift of anything
	 * (the rate, the thread's random stream) hits them all alike. */
	for (r = 0; r < 16; r++) {
		site_small(s / 16, &small);
		site_big(3 * s / 16, &big);
		site_leak(l / 16, &leak, keep, &nkeep);
	}
	f = fopen(argv[3], "w");
	if (!f)
		return 4;
	fprintf(f, "{\"site_small\": {\"bytes\": %llu, \"objects\": %llu},\n"
		   " \"site_big\": {\"bytes\": %llu, \"objects\": %llu},\n"
		   " \"site_leak\": {\"bytes\": %llu, \"objects\": %llu}}\n",
		small.bytes, small.objects, big.bytes, big.objects, leak.bytes, leak.objects);
	if (fclose(f))
		return 4;
	/* The leak stays live at exit: `keep` itself is the only thing the
	 * program still points at, which is the point. */
	sink = keep;
	return 0;
}
