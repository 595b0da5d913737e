/* alloc.c -- the sampling decision and the sample.  See alloc.h. */
#include "shim/alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <time.h>

#include "common/expo.h"
#include "shim/unwind.h"

/* Written by ps_alloc_start (constructor, before any sample can be taken)
 * and read by every thread afterwards. */
static struct ps_livetab *live;
static uint64_t mean;
_Atomic(const _Atomic uint8_t *) ps_alloc_filter;
/* PS_ALLOC_*; changed by start and off, read by every slow path. */
static _Atomic int mode;

/* Per-thread generator state; 0 means "not seeded yet". */
static PS_TLS uint64_t t_rng;

PS_SIGSAFE void
ps_alloc_start(struct ps_livetab *lt, uint64_t mean_bytes)
{
	live = lt;
	mean = mean_bytes;
	atomic_store(&ps_alloc_filter, lt->filter);
	atomic_store(&mode, PS_ALLOC_ON);
}

PS_SIGSAFE void
ps_alloc_off(void)
{
	atomic_store(&mode, PS_ALLOC_OFF);
	/* The table is not this process's to change any more (the helper
	 * shares the program's), so free and realloc stop looking in it. */
	atomic_store(&ps_alloc_filter, NULL);
}

int
ps_alloc_mode(void)
{
	return atomic_load_explicit(&mode, memory_order_relaxed);
}

struct ps_livetab *
ps_alloc_livetab(void)
{
	return live;
}

static uint64_t
next_random(void)
{
	/* xorshift64*: good enough to draw sampling distances. */
	t_rng ^= t_rng >> 12;
	t_rng ^= t_rng << 25;
	t_rng ^= t_rng >> 27;
	return t_rng * 0x2545f4914f6cdd1dull;
}

static int64_t
draw(void)
{
	double u;

	if (mean <= 1)
		return 0;
	/* u in (0, 1]: -log(u) is then finite and >= 0. */
	u = ((double)(next_random() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
	return (int64_t)(ps_expo_neglog(u) * (double)mean) + 1;
}

uint64_t
ps_alloc_weight(size_t size, uint64_t mean_bytes)
{
	double p;

	if (mean_bytes <= 1 || size == 0)
		return PS_FIXED_ONE;
	p = ps_expo_p((double)size / (double)mean_bytes);
	if (p <= 0)
		return PS_FIXED_ONE;
	return (uint64_t)((double)PS_FIXED_ONE / p + 0.5);
}

static void
record(void *p, size_t size)
{
	uintptr_t ips[PS_MAX_DEPTH];
	uint64_t vals[PS_NVALUES] = { 0 };
	uint64_t w = ps_alloc_weight(size, mean);
	struct ps_stacktab *tab = ps_stacktab_current();
	uint32_t slot;
	int depth;

	/* None: another thread is making the tables (worker.h,
	 * ps_worker_defer), or they could not be made. */
	if (!tab)
		return;
	ps_unwind_warm_thread();
	depth = ps_unwind_here(ips, PS_MAX_DEPTH);
	vals[PS_V_ALLOC_OBJS] = w;
	vals[PS_V_ALLOC_BYTES] = (uint64_t)(((double)size * (double)w) / PS_FIXED_ONE + 0.5);
	slot = ps_stacktab_add(tab, ips, depth, depth == PS_MAX_DEPTH, vals);
	(void)ps_livetab_insert(live, p, size, w, slot);
}

int64_t
ps_alloc_slow(void *p, size_t size)
{
	int saved = errno;
	int64_t next;

	switch (ps_alloc_mode()) {
	case PS_ALLOC_WAITING:
		next = 0;  /* keep coming back until sampling starts */
		break;
	case PS_ALLOC_ON:
		if (!t_rng) {
			/* First visit of this thread: its sampling points start
			 * at its first byte, like everywhere else on its byte
			 * line.  This block is sampled only if the first point
			 * falls inside it -- never always (over-represented),
			 * never never (a thread that allocates once, or a few
			 * times, would be invisible). */
			t_rng = ((uint64_t)(uintptr_t)&t_rng ^ (uint64_t)clock()) *
				0x9e3779b97f4a7c15ull | 1;
			next = draw();
			if (!p)
				break;
			if (next > (int64_t)size) {
				next -= (int64_t)size;
				break;
			}
		}
		if (p)
			record(p, size);
		next = draw();
		break;
	default:
		next = PS_ALLOC_NEVER;
		break;
	}
	errno = saved;
	return next;
}
