/* alloc_api: every interposed malloc-family function, with its results and
 * failures printed in a form that does not depend on addresses, so the
 * output with and without the shim can be compared byte for byte.
 *
 * Each allocating call sits in its own noinline function (api_<name>), so
 * a profile that records every allocation must show each of them.
 * Exit status: 0, or the number of failed checks. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
static void *volatile sink;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			printf("FAIL line %d: %s\n", __LINE__, #cond);     \
			failures++;                                        \
		}                                                          \
	} while (0)

static const char *
errname(int e)
{
	switch (e) {
	case 0: return "0";
	case ENOMEM: return "ENOMEM";
	case EINVAL: return "EINVAL";
	default: return "other";
	}
}

/* A NULL-or-not result and errno as the caller sees them. */
static void
report(const char *what, const void *p, int err)
{
	printf("%s: %s errno=%s\n", what, p ? "ptr" : "NULL", p ? "-" : errname(err));
}

static int
aligned(const void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

static void
fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static int
same(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return 0;
	return 1;
}

/* Successful calls and bytes requested per function: with every
 * allocation recorded, the profile must show exactly these. */
enum { F_MALLOC, F_CALLOC, F_REALLOC, F_REALLOCARRAY, F_POSIX_MEMALIGN, F_ALIGNED_ALLOC,
       F_MEMALIGN, F_VALLOC, F_PVALLOC, F_N };
static const char *const fname[F_N] = {
	"api_malloc", "api_calloc", "api_realloc", "api_reallocarray", "api_posix_memalign",
	"api_aligned_alloc", "api_memalign", "api_valloc", "api_pvalloc",
};
static unsigned long long calls[F_N], bytes[F_N];

static void *
count(int f, void *p, size_t n)
{
	sink = p;
	if (p) {
		calls[f]++;
		bytes[f] += n;
	}
	return p;
}

__attribute__((noinline)) void *
api_malloc(size_t n)
{
	return count(F_MALLOC, malloc(n), n);
}

__attribute__((noinline)) void *
api_calloc(size_t a, size_t b)
{
	return count(F_CALLOC, calloc(a, b), a * b);
}

__attribute__((noinline)) void *
api_realloc(void *o, size_t n)
{
	return count(F_REALLOC, realloc(o, n), n);
}

__attribute__((noinline)) void *
api_reallocarray(void *o, size_t a, size_t b)
{
	return count(F_REALLOCARRAY, reallocarray(o, a, b), a * b);
}

__attribute__((noinline)) int
api_posix_memalign(void **o, size_t a, size_t n)
{
	int r = posix_memalign(o, a, n);

	if (r == 0)
		count(F_POSIX_MEMALIGN, *o, n);
	return r;
}

__attribute__((noinline)) void *
api_aligned_alloc(size_t a, size_t n)
{
	return count(F_ALIGNED_ALLOC, aligned_alloc(a, n), n);
}

__attribute__((noinline)) void *
api_memalign(size_t a, size_t n)
{
	return count(F_MEMALIGN, memalign(a, n), n);
}

__attribute__((noinline)) void *
api_valloc(size_t n)
{
	return count(F_VALLOC, valloc(n), n);
}

__attribute__((noinline)) void *
api_pvalloc(size_t n)
{
	return count(F_PVALLOC, pvalloc(n), n);
}

static void
basics(void)
{
	unsigned char *p, *q;
	size_t i;

	CHECK(malloc_usable_size(NULL) == 0);
	for (i = 0; i <= 5000; i += 37) {
		p = api_malloc(i);
		CHECK(p != NULL);
		CHECK(malloc_usable_size(p) >= i);
		fill(p, i, (unsigned)i);
		CHECK(same(p, i, (unsigned)i));
		free(p);
	}
	p = api_calloc(1000, 33);
	CHECK(p != NULL);
	for (i = 0; i < 33000; i++)
		if (p[i])
			break;
	CHECK(i == 33000);
	CHECK(malloc_usable_size(p) >= 33000);
	free(p);
	/* calloc must zero recycled memory too. */
	p = api_malloc(4000);
	memset(p, 0xa5, 4000);
	free(p);
	p = api_calloc(4000, 1);
	CHECK(p && p[0] == 0 && p[3999] == 0);
	free(p);
	/* Growing and shrinking keep the contents. */
	p = api_realloc(NULL, 100);  /* realloc(NULL, n) is malloc */
	CHECK(p != NULL);
	fill(p, 100, 3);
	for (i = 200; i < 300000; i = i * 3 / 2) {
		q = api_realloc(p, i);
		CHECK(q != NULL);
		if (!q)
			return;
		CHECK(same(q, 100, 3));
		p = q;
	}
	q = api_realloc(p, 50);
	CHECK(q && same(q, 50, 3));
	p = q;
	q = api_reallocarray(p, 1000, 8);
	CHECK(q && same(q, 50, 3) && malloc_usable_size(q) >= 8000);
	p = q;
	free(p);
	printf("basics done\n");
}

static void
aligned_ones(void)
{
	static const size_t aligns[] = { 8, 16, 32, 64, 256, 4096, 65536 };
	size_t page = (size_t)sysconf(_SC_PAGESIZE), i;
	void *p;
	int rc;

	for (i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		size_t a = aligns[i];

		p = NULL;
		rc = api_posix_memalign(&p, a, 1000);
		CHECK(rc == 0 && p && aligned(p, a) && malloc_usable_size(p) >= 1000);
		free(p);
		p = api_aligned_alloc(a, 3 * a);
		CHECK(p && aligned(p, a) && malloc_usable_size(p) >= 3 * a);
		free(p);
		p = api_memalign(a, 77);
		CHECK(p && aligned(p, a) && malloc_usable_size(p) >= 77);
		free(p);
	}
	p = api_valloc(1000);
	CHECK(p && aligned(p, page) && malloc_usable_size(p) >= 1000);
	free(p);
	p = api_pvalloc(1000);
	CHECK(p && aligned(p, page) && malloc_usable_size(p) >= page);
	free(p);
	/* A realloc of an aligned block is an ordinary block again. */
	p = api_memalign(4096, 64);
	fill(p, 64, 9);
	p = api_realloc(p, 100000);
	CHECK(p && same(p, 64, 9));
	free(p);
	printf("aligned done\n");
}

/* Failures and odd arguments: print exactly what the C library says. */
static void
edges(void)
{
	static const size_t odd[] = { 0, 3, 24, 48, 100, sizeof(void *) / 2 };
	void *p, *q;
	size_t i;
	int rc;

	errno = 0;
	p = api_malloc(SIZE_MAX / 2);
	report("malloc(SIZE_MAX/2)", p, errno);
	CHECK(!p && errno == ENOMEM);
	errno = 0;
	p = api_calloc(SIZE_MAX / 4, 8);
	report("calloc overflow", p, errno);
	CHECK(!p && errno == ENOMEM);
	errno = 0;
	p = api_calloc(1ull << 40, 1ull << 30);
	report("calloc overflow 2", p, errno);
	CHECK(!p && errno == ENOMEM);
	q = api_malloc(10);
	errno = 0;
	p = api_reallocarray(q, SIZE_MAX / 4, 8);
	report("reallocarray overflow", p, errno);
	CHECK(!p && errno == ENOMEM);
	errno = 0;
	p = api_realloc(q, SIZE_MAX / 2);  /* fails: q is untouched */
	report("realloc(q, SIZE_MAX/2)", p, errno);
	CHECK(!p && errno == ENOMEM);
	free(q);
	q = api_malloc(10);
	errno = 0;
	p = api_realloc(q, 0);  /* glibc: frees q, returns NULL */
	printf("realloc(q, 0): %s\n", p ? "ptr" : "NULL");
	free(p);
	p = api_malloc(0);
	printf("malloc(0): %s\n", p ? "ptr" : "NULL");
	free(p);
	p = api_calloc(0, 0);
	printf("calloc(0, 0): %s\n", p ? "ptr" : "NULL");
	free(p);
	free(NULL);
	for (i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		char what[64];

		q = (void *)&what;
		rc = api_posix_memalign(&q, odd[i], 64);
		printf("posix_memalign(align %zu): %s%s\n", odd[i], errname(rc),
		       rc && q != (void *)&what ? " (out changed)" : "");
		if (rc == 0)
			free(q);
		if (odd[i] == 3 || odd[i] == 24)
			CHECK(rc == EINVAL);
		errno = 0;
		p = api_aligned_alloc(odd[i], 64);
		snprintf(what, sizeof(what), "aligned_alloc(align %zu)", odd[i]);
		report(what, p, errno);
		free(p);
		errno = 0;
		p = api_memalign(odd[i], 64);
		snprintf(what, sizeof(what), "memalign(align %zu)", odd[i]);
		report(what, p, errno);
		free(p);
	}
	errno = 0;
	rc = api_posix_memalign(&p, 64, SIZE_MAX / 2);
	printf("posix_memalign huge: %s\n", errname(rc));
	CHECK(rc == ENOMEM);
	errno = 0;
	p = api_aligned_alloc(64, SIZE_MAX / 2);
	report("aligned_alloc huge", p, errno);
	errno = 0;
	p = api_memalign(64, SIZE_MAX / 2);
	report("memalign huge", p, errno);
	errno = 0;
	p = api_valloc(SIZE_MAX / 2);
	report("valloc huge", p, errno);
	errno = 0;
	p = api_pvalloc(SIZE_MAX / 2);
	report("pvalloc huge", p, errno);
	/* errno is left alone by a successful allocation. */
	errno = 12345;
	p = api_malloc(100);
	CHECK(errno == 12345);
	free(p);
	errno = 0;
}

int
main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1;

	/* Rounds make the default-rate run sample some of these too. */
	for (int r = 0; r < rounds; r++) {
		basics();
		aligned_ones();
	}
	edges();
	for (int f = 0; f < F_N; f++)
		printf("count %s %llu %llu\n", fname[f], calls[f], bytes[f]);
	printf("failures: %d\n", failures);
	return failures;
}
