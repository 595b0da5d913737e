/* hook_malloc.c -- the malloc-family interposers.
 *
 * Fast path (an allocation that is not sampled): one initial-exec TLS
 * decrement and a branch, then the next malloc in the lookup order (glibc's,
 * or whatever allocator the program itself brings).  No lock, no atomic
 * shared with other threads, no system call.  free adds one relaxed load of
 * the live table's counter (and, while sampled blocks are live, one byte of
 * its filter).
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
static _Alignas(64) unsigned char pool[POOL_SIZE];
static _Atomic size_t pool_used;

struct pool_hdr {
	size_t size;
	size_t pad;  /* keeps the block 16-byte aligned */
};

static int
in_pool(const void *p)
{
	return (const unsigned char *)p >= pool && (const unsigned char *)p < pool + POOL_SIZE;
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

static void
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

/* The countdown crossed zero: decide, record, and restart it. */
static void
slow(void *p, size_t n)
{
	/* Shim code (the uploader thread, the constructor, a sample being
	 * taken): never sampled.  The countdown stays spent, so the thread
	 * comes back here -- a cheap test -- until it leaves shim code. */
	if (ps_guard_held())
		return;
	ps_guard_enter();
	t_left = ps_alloc_slow(p, n);
	ps_process_wake();  /* a fork child's uploader starts here */
	ps_guard_leave();
}

static inline void
account(void *p, size_t n)
{
	t_left -= (int64_t)n;
	if (PS_UNLIKELY(t_left <= 0))
		slow(p, n);
}

static inline void
forget(void *p)
{
	struct ps_livetab *lt = ps_alloc_livetab();

	if (lt)
		(void)ps_livetab_remove(lt, p);
}

/* ---- the interposers ------------------------------------------------- */

PS_EXPORT void *
malloc(size_t n)
{
	void *p;

	if (PS_UNLIKELY(!ready()))
		return pool_alloc(n);
	p = real.malloc(n);
	account(p, n);
	return p;
}

PS_EXPORT void
free(void *p)
{
	if (!p || PS_UNLIKELY(in_pool(p)))
		return;
	forget(p);
	if (PS_LIKELY(ready()))
		real.free(p);
}

PS_EXPORT void *
calloc(size_t nmemb, size_t size)
{
	size_t n;
	void *p;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	if (PS_UNLIKELY(!ready()))
		return pool_alloc(n);
	p = real.calloc(nmemb, size);
	account(p, n);
	return p;
}

PS_EXPORT void *
realloc(void *old, size_t n)
{
	struct ps_live_entry e;
	struct ps_livetab *lt;
	int was;
	void *p;

	if (PS_UNLIKELY(in_pool(old))) {
		p = malloc(n ? n : 1);
		if (p)
			memcpy(p, old, pool_size(old) < n ? pool_size(old) : n);
		return p;
	}
	if (PS_UNLIKELY(!ready()))
		return old ? NULL : pool_alloc(n);
	lt = old ? ps_alloc_livetab() : NULL;
	was = lt && atomic_load_explicit(&lt->live, memory_order_relaxed) &&
	      ps_livetab_take(lt, old, &e);
	p = real.realloc(old, n);
	if (p) {
		account(p, n);
	} else if (was && n != 0) {
		/* The block was not moved nor freed: it is still live. */
		(void)ps_livetab_insert(lt, old, e.size, e.weight, e.stack);
	}
	return p;
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
