/* hook_malloc.c -- the malloc-family interposers.
 *
 * Fast path, as in tcmalloc's and jemalloc's sampling: an allocation that
 * is not sampled costs one initial-exec TLS decrement and one predictable
 * branch on top of the next malloc in the lookup order (glibc's, or the
 * program's own allocator).  free and realloc test one byte of the live
 * table's filter, which proves that the block was never sampled, and then
 * forward the call untouched; only a block the filter cannot clear is looked
 * up in the live table.  No lock, no atomic read-modify-write, no system
 * call, and no thread: glibc keeps its single-threaded paths.  Everything
 * that is not the fast path sits in separate, cold functions, so the hooks
 * stay a few instructions long and save few registers.  BENCHMARKS.md
 * section 4 counts them against a bare forwarding interposer.
 *
 * Bootstrap: the real functions come from dlsym(RTLD_NEXT), and dlsym itself
 * calls calloc.  Until resolution is complete, requests are served from a
 * small static pool; free and realloc recognise pool pointers by address
 * and never pass them to the C library.
 *
 * Everything the shim allocates for itself goes through these hooks with
 * the guard held (guard.h), so it is forwarded unsampled.
 */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "shim/alloc.h"
#include "common/guard.h"
#include "common/ps.h"
#include "shim/process.h"
#include "shim/next.h"

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*malloc_usable_size)(void *);
} real;

/* 0 unresolved, 1 resolving, 2 resolved.  The first allocation happens in
 * the dynamic loader's single-threaded start-up, so in practice one thread
 * resolves; any other thread meanwhile is served from the pool. */
static _Atomic int resolved;

/* Bytes this thread may still allocate before its next sample; <= 0 sends
 * the next allocation to the slow path.  Owned by its thread. */
static PS_TLS int64_t t_left;

/* ---- bootstrap pool ------------------------------------------------- */

#define POOL_SIZE (64 * 1024)
static PS_LARGE _Alignas(64) unsigned char pool[POOL_SIZE];
static _Atomic size_t pool_used;

struct pool_hdr {
	size_t size;
	size_t pad;  /* keeps the block 16-byte aligned */
};

/* One compare: below the pool, the difference wraps around to a huge value. */
static inline int
in_pool(const void *p)
{
	return (uintptr_t)p - (uintptr_t)pool < POOL_SIZE;
}

static void *
pool_alloc(size_t n)
{
	size_t need = sizeof(struct pool_hdr) + ((n + 15) & ~(size_t)15);
	size_t off = atomic_fetch_add(&pool_used, need);
	struct pool_hdr *h;

	if (n > POOL_SIZE || off + need > POOL_SIZE) {
		errno = ENOMEM;
		return NULL;
	}
	h = (struct pool_hdr *)(pool + off);
	h->size = n;
	return h + 1;  /* static storage: already zeroed, as calloc needs */
}

static size_t
pool_size(const void *p)
{
	return ((const struct pool_hdr *)p - 1)->size;
}

/* Not PS_NEXT: all of them are resolved before any is used (dlsym itself
 * allocates, and is served from the pool meanwhile). */
#define RESOLVE(name) real.name = (__typeof__(real.name))ps_next(#name)

__attribute__((noinline, cold)) static void
resolve(void)
{
	int expected = 0;

	if (!atomic_compare_exchange_strong(&resolved, &expected, 1))
		return;
	RESOLVE(malloc);
	RESOLVE(free);
	RESOLVE(calloc);
	RESOLVE(realloc);
	RESOLVE(posix_memalign);
	RESOLVE(aligned_alloc);
	RESOLVE(memalign);
	RESOLVE(valloc);
	RESOLVE(pvalloc);
	RESOLVE(malloc_usable_size);
	atomic_store(&resolved, 2);
}

static inline int
ready(void)
{
	if (PS_LIKELY(atomic_load_explicit(&resolved, memory_order_acquire) == 2))
		return 1;
	resolve();
	return atomic_load_explicit(&resolved, memory_order_acquire) == 2;
}

/* ---- sampling -------------------------------------------------------- */

/* The countdown crossed zero: decide, record, and restart it.  Returns p,
 * so that the hooks end in a tail call. */
__attribute__((noinline, cold)) static void *
sample(void *p, size_t n)
{
	/* Shim code (the uploader thread, the constructor, a sample being
	 * taken): never sampled.  The countdown stays spent, so the thread
	 * comes back here -- a cheap test -- until it leaves shim code. */
	if (ps_guard_held())
		return p;
	ps_guard_enter();
	t_left = ps_alloc_slow(p, n);
	ps_process_wake();  /* a fork child's uploader starts here */
	ps_guard_leave();
	return p;
}

/* Count n bytes allocated at p; the one branch of the fast path. */
static inline void *
account(void *p, size_t n)
{
	t_left -= (int64_t)n;
	if (PS_UNLIKELY(t_left <= 0))
		return sample(p, n);
	return p;
}

/* p may be a sampled block (its filter byte is set): drop it from the live
 * table before the C library can hand its address out again. */
__attribute__((noinline, cold)) static void
forget(void *p)
{
	struct ps_livetab *lt = ps_alloc_livetab();

	if (lt)
		(void)ps_livetab_remove_slow(lt, p);
}

/* ---- the interposers ------------------------------------------------- */

PS_EXPORT void *
malloc(size_t n)
{
	if (PS_UNLIKELY(!ready()))
		return pool_alloc(n);
	return account(real.malloc(n), n);
}

PS_EXPORT void
free(void *p)
{
	if (PS_UNLIKELY(in_pool(p)))
		return;
	if (PS_UNLIKELY(ps_alloc_maybe_sampled(p)))
		forget(p);
	if (PS_LIKELY(ready()))
		real.free(p);
}

/* calloc before the real functions are resolved (dlsym's own). */
__attribute__((noinline, cold)) static void *
calloc_pool(size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return pool_alloc(n);
}

PS_EXPORT void *
calloc(size_t nmemb, size_t size)
{
	void *p;

	if (PS_UNLIKELY(!ready()))
		return calloc_pool(nmemb, size);
	p = real.calloc(nmemb, size);  /* checks nmemb * size for overflow */
	if (PS_UNLIKELY(!p))
		return NULL;
	return account(p, nmemb * size);
}

/* realloc of a pool block: move it to the C library's heap. */
__attribute__((noinline, cold)) static void *
realloc_pool(void *old, size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p)
		memcpy(p, old, pool_size(old) < n ? pool_size(old) : n);
	return p;
}

/* realloc of a block that may be sampled: the old block leaves the live
 * table as free would take it out, and comes back if the C library's
 * realloc fails and leaves it in place. */
__attribute__((noinline, cold)) static void *
realloc_sampled(void *old, size_t n)
{
	struct ps_livetab *lt = ps_alloc_livetab();
	struct ps_live_entry e;
	int was = lt && ps_livetab_take(lt, old, &e);
	void *p = real.realloc(old, n);

	if (p)
		return account(p, n);
	if (was && n != 0)
		(void)ps_livetab_insert(lt, old, e.size, e.weight, e.stack);
	return NULL;
}

PS_EXPORT void *
realloc(void *old, size_t n)
{
	void *p;

	if (PS_UNLIKELY(in_pool(old)))
		return realloc_pool(old, n);
	if (PS_UNLIKELY(!ready()))
		return old ? NULL : pool_alloc(n);
	if (PS_UNLIKELY(ps_alloc_maybe_sampled(old)))
		return realloc_sampled(old, n);
	p = real.realloc(old, n);
	if (PS_UNLIKELY(!p))
		return NULL;
	return account(p, n);
}

PS_EXPORT void *
reallocarray(void *old, size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(old, n);
}

PS_EXPORT int
posix_memalign(void **out, size_t align, size_t n)
{
	int rc;

	if (PS_UNLIKELY(!ready()))
		return ENOMEM;
	rc = real.posix_memalign(out, align, n);
	if (rc == 0)
		account(*out, n);
	return rc;
}

#define ALIGNED_HOOK(name, params, args, size)              \
	PS_EXPORT void *name params                         \
	{                                                   \
		void *p;                                    \
		if (PS_UNLIKELY(!ready())) {                \
			errno = ENOMEM;                     \
			return NULL;                        \
		}                                           \
		p = real.name args;                         \
		if (p)                                      \
			account(p, size);                   \
		return p;                                   \
	}

ALIGNED_HOOK(aligned_alloc, (size_t align, size_t n), (align, n), n)
ALIGNED_HOOK(memalign, (size_t align, size_t n), (align, n), n)
ALIGNED_HOOK(valloc, (size_t n), (n), n)
ALIGNED_HOOK(pvalloc, (size_t n), (n), n)

PS_EXPORT size_t
malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (PS_UNLIKELY(in_pool(p)))
		return pool_size(p);
	if (PS_UNLIKELY(!ready()))
		return 0;
	return real.malloc_usable_size(p);
}

/* Resolve the real functions before the profiler starts (constructor). */
void ps_hook_malloc_resolve(void);
void
ps_hook_malloc_resolve(void)
{
	(void)ready();
}
