/* bare_wait_interposer: the floor any per-call profiler of waits stands on.
 *
 * A preloadable library that interposes the waiting calls bench/wait_loop.c
 * makes -- read, write, pthread_mutex_lock, pthread_join -- and forwards
 * each to the next definition through a dlsym(RTLD_NEXT) pointer looked up
 * on first use, as the shim's interposers do (shim/next.h): one relaxed
 * load, a test, and the call.  No clock, no thread, no table.
 * BENCHMARKS.md section 13 reports the shim's block and mutex profiles next
 * to it, so what they add can be told apart from what interposing costs.
 *
 * Built by bench/build.sh with the shim's code-generation flags (-O2 -fPIC
 * -fvisibility=hidden) into build/bench/libbare_wait_interposer.so.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* real_<fn>: the next definition of fn, looked up once (threads racing
 * there store the same value). */
#define NEXT(fn)                                                        \
	static void *_Atomic slot_##fn;                                 \
	__typeof__(fn) *real_##fn = (__typeof__(fn) *)next(&slot_##fn, #fn)

static inline void *
next(void *_Atomic *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_relaxed);

	if (__builtin_expect(!p, 0)) {
		p = dlsym(RTLD_NEXT, name);
		atomic_store_explicit(slot, p, memory_order_relaxed);
	}
	return p;
}

EXPORT ssize_t
read(int fd, void *b, size_t n)
{
	NEXT(read);
	return real_read(fd, b, n);
}

EXPORT ssize_t
write(int fd, const void *b, size_t n)
{
	NEXT(write);
	return real_write(fd, b, n);
}

EXPORT int
pthread_mutex_lock(pthread_mutex_t *m)
{
	NEXT(pthread_mutex_lock);
	return real_pthread_mutex_lock(m);
}

EXPORT int
pthread_join(pthread_t t, void **ret)
{
	NEXT(pthread_join);
	return real_pthread_join(t, ret);
}
