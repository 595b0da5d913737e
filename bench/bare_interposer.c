/* bare_interposer: the floor any per-call allocation profiler stands on.
 *
 * A preloadable library that interposes malloc, free, calloc and realloc,
 * forwards each to the next definition (dlsym(RTLD_NEXT) pointers) and,
 * on the allocating calls, counts the bytes down in an initial-exec TLS
 * counter -- the sampling countdown of Go, tcmalloc and jemalloc -- and
 * never samples anything: when the count crosses zero it just restarts.
 * No thread, no table, no signal.  BENCHMARKS.md section 4 reports the
 * shim next to it, so what the shim adds over the bare interposition can
 * be told apart from what interposing costs at all.
 *
 * Built by bench/build.sh with the shim's code-generation flags (-O2
 * -fPIC -fvisibility=hidden) into build/bench/libbare_interposer.so.
 *
 * Bootstrap: dlsym itself calls calloc, so until the pointers are resolved
 * requests come from a small static pool that free and realloc recognise
 * by address (as the shim does).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MEAN   (512 * 1024)

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int resolved;   /* written once by the first allocating thread */

/* Bytes this thread may allocate before its next (pretend) sample. */
static __thread __attribute__((tls_model("initial-exec"))) int64_t left = MEAN;

static _Alignas(16) unsigned char pool[16384];
static size_t pool_used;  /* only the start-up thread allocates from it */

static void *
pool_alloc(size_t n)
{
	void *p = pool + pool_used;

	n = (n + 15) & ~(size_t)15;
	if (n > sizeof(pool) - pool_used)
		return NULL;
	pool_used += n;
	return p;  /* static storage: already zero, as calloc needs */
}

static int
in_pool(const void *p)
{
	return (uintptr_t)p - (uintptr_t)pool < sizeof(pool);
}

__attribute__((noinline, cold)) static int
resolve_slow(void)
{
	if (resolved < 0)
		return 0;
	resolved = -1;  /* dlsym's own calloc goes to the pool */
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	resolved = 1;
	return 1;
}

static inline int
resolve(void)
{
	return __builtin_expect(resolved > 0, 1) || resolve_slow();
}

static inline void
count(size_t n)
{
	left -= (int64_t)n;
	if (__builtin_expect(left <= 0, 0))
		left = MEAN;
}

EXPORT void *
malloc(size_t n)
{
	void *p;

	if (!resolve())
		return pool_alloc(n);
	p = real_malloc(n);
	count(n);
	return p;
}

EXPORT void
free(void *p)
{
	if (__builtin_expect(in_pool(p), 0) || !resolve())
		return;  /* a pool block, or free(NULL) before the first malloc */
	real_free(p);
}

EXPORT void *
calloc(size_t nmemb, size_t size)
{
	size_t n;
	void *p;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	if (!resolve())
		return pool_alloc(n);
	p = real_calloc(nmemb, size);
	count(n);
	return p;
}

EXPORT void *
realloc(void *old, size_t n)
{
	void *p;

	if (__builtin_expect(in_pool(old), 0)) {
		size_t room = (size_t)(pool + sizeof(pool) - (unsigned char *)old);

		p = malloc(n);
		if (p)
			memcpy(p, old, n < room ? n : room);
		return p;
	}
	if (!resolve())
		return NULL;
	p = real_realloc(old, n);
	count(n);
	return p;
}
