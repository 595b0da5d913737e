/* alloc_sites: allocation sites with exactly known byte counts, to measure
 * a heap profiler's per-site alloc_space error.
 *
 *   site_large  mixed sizes 64 B .. 64 KiB, 3 x the bytes of site_mixed
 *   site_mixed  mixed sizes 64 B .. 64 KiB
 *   site_small  256 B each, many objects (the case sampling finds hardest
 *               to weight: every object is far below the sampling mean)
 *
 * Everything is freed at once, so the heap never grows large.  Prints the
 * exact bytes per site as JSON to REPORT_FILE.
 *
 * usage: alloc_sites MIB_FOR_SITE_MIXED REPORT_FILE
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static size_t
mixed_size(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	/* Log-uniform from 2^6 to 2^16: many small blocks, a few large. */
	return (size_t)1 << (6 + rng % 11);
}

__attribute__((noinline)) static uint64_t
site_large(uint64_t budget)
{
	uint64_t done = 0;

	while (done < budget) {
		size_t n = mixed_size();
		char *p = malloc(n);

		if (!p)
			abort();
		*(volatile char *)p = 1;
		free(p);
		done += n;
	}
	return done;
}

__attribute__((noinline)) static uint64_t
site_mixed(uint64_t budget)
{
	uint64_t done = 0;

	while (done < budget) {
		size_t n = mixed_size();
		char *p = malloc(n);

		if (!p)
			abort();
		*(volatile char *)p = 1;
		free(p);
		done += n;
	}
	return done;
}

__attribute__((noinline)) static uint64_t
site_small(uint64_t budget)
{
	uint64_t done = 0;

	while (done < budget) {
		char *p = malloc(256);

		if (!p)
			abort();
		*(volatile char *)p = 1;
		free(p);
		done += 256;
	}
	return done;
}

int
main(int argc, char **argv)
{
	uint64_t unit, a = 0, b = 0, c = 0;
	FILE *f;

	if (argc != 3)
		return 2;
	unit = (uint64_t)atol(argv[1]) << 20;
	if (!unit)
		return 2;
	/* Interleaved in 64 rounds, so no site sits in one phase of the run. */
	for (int r = 0; r < 64; r++) {
		a += site_large(unit * 3 / 64);
		b += site_mixed(unit / 64);
		c += site_small(unit * 2 / 64);
	}
	f = fopen(argv[2], "w");
	if (!f)
		return 1;
	fprintf(f, "{\"site_large\": %llu, \"site_mixed\": %llu, \"site_small\": %llu}\n",
		(unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
	return fclose(f) ? 1 : 0;
}
