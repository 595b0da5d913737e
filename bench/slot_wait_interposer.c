/* slot_wait_interposer: a prototype of the other design of issue 23's
 * block profile, to measure it against the shim's (BENCHMARKS.md section 13).
 *
 * No clock on the program's thread.  Each interposed waiting call publishes
 * "this thread is in read() from here" in a per-thread slot, seqlock style:
 *
 *     slot.seq += 1 (odd: in a call); slot.site = call site;
 *     the C library's call;
 *     slot.seq += 1 (even: out)
 *
 * and a helper thread wakes on a wall-clock tick (SLOT_TICK_HZ, default 100;
 * 0: no helper), reads every registered slot, and counts one tick of waiting
 * for a slot whose seq is odd and did not change while it read the site: a
 * wait of d ns is seen about d * HZ / 1e9 times, so a wait shorter than the
 * tick is seen with probability d * HZ / 1e9 and no wait's own length is
 * ever known.  A thread registers its slot on its first call.  Mutexes look
 * at glibc's lock word first, as the shim does: a free one publishes nothing.
 *
 * What the helper does with a tick (a stack, a table) is left out: it only
 * counts, so this measures the program thread's fast path and the helper's
 * wake-ups, not a complete profiler.  Interposes the same calls as
 * bare_wait_interposer.c.  Built by bench/build.sh with the shim's flags
 * into build/bench/libslot_wait_interposer.so.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_SLOTS 1024

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

struct slot {
	_Atomic uint64_t seq;        /* odd while the thread is in a call */
	const void *_Atomic site;    /* the call site (return address) */
	const void *_Atomic fn;      /* the waiting call */
};

static __thread __attribute__((tls_model("initial-exec"))) struct slot me;
static __thread __attribute__((tls_model("initial-exec"))) int registered;
static struct slot *_Atomic slots[MAX_SLOTS];
static _Atomic int nslots;
/* What the helper saw: ticks in a call, and torn reads it discarded. */
static _Atomic uint64_t seen, torn;

__attribute__((noinline, cold)) static void
register_slot(void)
{
	int i = atomic_fetch_add(&nslots, 1);

	registered = 1;
	if (i < MAX_SLOTS)
		atomic_store_explicit(&slots[i], &me, memory_order_release);
}

static inline void
enter(const void *fn, const void *site)
{
	uint64_t s = atomic_load_explicit(&me.seq, memory_order_relaxed);

	if (__builtin_expect(!registered, 0))
		register_slot();
	atomic_store_explicit(&me.seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);  /* x86: a compiler barrier */
	atomic_store_explicit(&me.fn, fn, memory_order_relaxed);
	atomic_store_explicit(&me.site, site, memory_order_relaxed);
}

static inline void
leave(void)
{
	uint64_t s = atomic_load_explicit(&me.seq, memory_order_relaxed);

	atomic_store_explicit(&me.seq, s + 1, memory_order_release);
}

#define PUBLISHED(fn, call)                                             \
	do {                                                            \
		__typeof__(call) r_;                                    \
		enter((const void *)real_##fn, __builtin_return_address(0)); \
		r_ = call;                                              \
		leave();                                                \
		return r_;                                              \
	} while (0)

EXPORT ssize_t
read(int fd, void *b, size_t n)
{
	NEXT(read);
	PUBLISHED(read, real_read(fd, b, n));
}

EXPORT ssize_t
write(int fd, const void *b, size_t n)
{
	NEXT(write);
	PUBLISHED(write, real_write(fd, b, n));
}

EXPORT int
pthread_mutex_lock(pthread_mutex_t *m)
{
	NEXT(pthread_mutex_lock);
	if (__builtin_expect(!__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED), 1))
		return real_pthread_mutex_lock(m);
	PUBLISHED(pthread_mutex_lock, real_pthread_mutex_lock(m));
}

EXPORT int
pthread_join(pthread_t t, void **ret)
{
	NEXT(pthread_join);
	PUBLISHED(pthread_join, real_pthread_join(t, ret));
}

/* The helper: one pass over the slots per tick. */
static void *
helper(void *arg)
{
	long ns = 1000000000L / (long)(intptr_t)arg;
	struct timespec tick = { ns / 1000000000L, ns % 1000000000L };

	for (;;) {
		int n = atomic_load_explicit(&nslots, memory_order_acquire);

		clock_nanosleep(CLOCK_MONOTONIC, 0, &tick, NULL);
		for (int i = 0; i < n && i < MAX_SLOTS; i++) {
			struct slot *s = atomic_load_explicit(&slots[i], memory_order_acquire);
			uint64_t a, b;

			if (!s)
				continue;
			a = atomic_load_explicit(&s->seq, memory_order_acquire);
			if (!(a & 1))
				continue;
			(void)atomic_load_explicit(&s->fn, memory_order_relaxed);
			(void)atomic_load_explicit(&s->site, memory_order_relaxed);
			atomic_thread_fence(memory_order_acquire);
			b = atomic_load_explicit(&s->seq, memory_order_relaxed);
			atomic_fetch_add_explicit(a == b ? &seen : &torn, 1, memory_order_relaxed);
		}
	}
	return NULL;
}

__attribute__((constructor)) static void
start(void)
{
	const char *e = getenv("SLOT_TICK_HZ");
	long hz = e ? atol(e) : 100;
	pthread_t t;

	if (hz > 0 && hz <= 1000000 &&
	    pthread_create(&t, NULL, helper, (void *)(intptr_t)hz) == 0)
		pthread_detach(t);
}
