/* livetab.c -- lock-free table of live sampled blocks.  See livetab.h. */
#include "shim/livetab.h"
#include "common/shmem.h"

#include <errno.h>
#include <string.h>

#define MAX_PROBE 64
/* The counters' room at the head of the mapping: a page, so that the
 * slots that follow start on one (their groups are pages of them). */
#define HEAD 4096
_Static_assert(sizeof(struct ps_livetab_counters) <= HEAD, "counters fit");
enum { K_EMPTY = 0, K_TOMB = 1, K_BUSY = 2 };

PS_SIGSAFE int
ps_livetab_init(struct ps_livetab *t)
{
	size_t slots = (size_t)PS_LIVE_SLOTS * sizeof(struct ps_live_slot);
	void *p;

	memset(t, 0, sizeof(*t));
	t->map_len = HEAD + slots + PS_LIVE_FILTER + PS_LIVE_SLOTS / PS_LIVE_GROUP;
	p = ps_shmem_new(t->map_len);
	if (!p)
		return -ENOMEM;
	t->c = p;
	t->slots = (struct ps_live_slot *)((char *)p + HEAD);
	t->filter = (_Atomic uint8_t *)((char *)p + HEAD + slots);
	t->used = t->filter + PS_LIVE_FILTER;
	return 0;
}

int
ps_livetab_view(struct ps_livetab *view, const struct ps_livetab *t, void *map)
{
	char *from = (char *)t->c, *to = map;
	size_t slots = (size_t)PS_LIVE_SLOTS * sizeof(struct ps_live_slot);

	/* The layout is fixed: only where it starts is another process's. */
	if (t->map_len != HEAD + slots + PS_LIVE_FILTER + PS_LIVE_SLOTS / PS_LIVE_GROUP ||
	    (char *)t->slots != from + HEAD || (char *)t->filter != from + HEAD + slots ||
	    t->used != t->filter + PS_LIVE_FILTER)
		return -EINVAL;
	*view = *t;
	view->c = map;
	view->slots = (struct ps_live_slot *)(to + HEAD);
	view->filter = (_Atomic uint8_t *)(to + HEAD + slots);
	view->used = view->filter + PS_LIVE_FILTER;
	return 0;
}

int
ps_livetab_reset(struct ps_livetab *t)
{
	/* Fresh zero pages: the counters with the rest. */
	return ps_shmem_renew(t->c, t->map_len);
}

/* Counting filter: saturates at 255 and then stays there, which only costs
 * a useless probe now and then. */
static void
filter_add(struct ps_livetab *t, const void *p, int delta)
{
	_Atomic uint8_t *f = &t->filter[ps_livetab_filter_index(p)];
	uint8_t v = atomic_load_explicit(f, memory_order_relaxed);

	do {
		if (v == 255 || (delta < 0 && v == 0))
			return;
	} while (!atomic_compare_exchange_weak_explicit(f, &v, (uint8_t)(v + delta),
							memory_order_relaxed,
							memory_order_relaxed));
}

int
ps_livetab_insert(struct ps_livetab *t, const void *p, uint64_t size, uint64_t weight,
		  uint32_t stack)
{
	uint32_t b = ps_livetab_bucket(p, PS_LIVE_SLOTS), i, at;
	_Atomic uint8_t *used;
	struct ps_live_slot *s;
	uint32_t seq;
	uintptr_t k;

	for (i = 0; i < MAX_PROBE; i++) {
		at = (b + i) & (PS_LIVE_SLOTS - 1);
		s = &t->slots[at];
		k = atomic_load_explicit(&s->key, memory_order_relaxed);
		if (k != K_EMPTY && k != K_TOMB)
			continue;
		if (!atomic_compare_exchange_strong_explicit(&s->key, &k, K_BUSY,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		used = &t->used[at / PS_LIVE_GROUP];
		if (!atomic_load_explicit(used, memory_order_relaxed))
			atomic_store_explicit(used, 1, memory_order_relaxed);
		seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
		atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
		atomic_store_explicit(&s->stack, stack, memory_order_relaxed);
		atomic_store_explicit(&s->size, size, memory_order_relaxed);
		atomic_store_explicit(&s->weight, weight, memory_order_relaxed);
		atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
		filter_add(t, p, 1);
		atomic_fetch_add_explicit(&t->c->live, 1, memory_order_relaxed);
		atomic_store_explicit(&s->key, (uintptr_t)p, memory_order_release);
		return 0;
	}
	atomic_fetch_add_explicit(&t->c->dropped, 1, memory_order_relaxed);
	return -ENOSPC;
}

int
ps_livetab_remove_slow(struct ps_livetab *t, const void *p)
{
	return ps_livetab_take(t, p, NULL);
}

int
ps_livetab_take(struct ps_livetab *t, const void *p, struct ps_live_entry *out)
{
	uint32_t b = ps_livetab_bucket(p, PS_LIVE_SLOTS), i;
	struct ps_live_slot *s;
	uintptr_t k;

	for (i = 0; i < MAX_PROBE; i++) {
		s = &t->slots[(b + i) & (PS_LIVE_SLOTS - 1)];
		k = atomic_load_explicit(&s->key, memory_order_acquire);
		if (k == K_EMPTY)
			return 0;
		if (k != (uintptr_t)p)
			continue;
		/* Nobody else touches the slot while it holds p: read first. */
		if (out) {
			out->stack = atomic_load_explicit(&s->stack, memory_order_relaxed);
			out->size = atomic_load_explicit(&s->size, memory_order_relaxed);
			out->weight = atomic_load_explicit(&s->weight, memory_order_relaxed);
		}
		if (!atomic_compare_exchange_strong_explicit(&s->key, &k, K_TOMB,
							     memory_order_release,
							     memory_order_relaxed))
			return 0;
		filter_add(t, p, -1);
		atomic_fetch_sub_explicit(&t->c->live, 1, memory_order_relaxed);
		return 1;
	}
	return 0;
}

void
ps_livetab_each(struct ps_livetab *t,
		void (*fn)(void *arg, uint32_t stack, uint64_t size, uint64_t weight), void *arg)
{
	struct ps_live_slot *s;
	uint64_t size, weight;
	uint32_t i, stack, seq;
	uintptr_t k;

	/* Nothing live (no sampled block, or all freed): the table is not
	 * read, so its never-touched pages are never faulted in.  An insert
	 * racing with this pass is seen by the next one. */
	if (!atomic_load_explicit(&t->c->live, memory_order_relaxed))
		return;
	for (i = 0; i < PS_LIVE_SLOTS; i++) {
		if (i % PS_LIVE_GROUP == 0 &&
		    !atomic_load_explicit(&t->used[i / PS_LIVE_GROUP], memory_order_relaxed)) {
			i += PS_LIVE_GROUP - 1;
			continue;
		}
		s = &t->slots[i];
		k = atomic_load_explicit(&s->key, memory_order_acquire);
		if (k <= K_BUSY)
			continue;
		seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		stack = atomic_load_explicit(&s->stack, memory_order_relaxed);
		size = atomic_load_explicit(&s->size, memory_order_relaxed);
		weight = atomic_load_explicit(&s->weight, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		/* Re-check: the block may have been freed, or freed and its
		 * address inserted again, while we read it. */
		if ((seq & 1) || atomic_load_explicit(&s->seq, memory_order_relaxed) != seq ||
		    atomic_load_explicit(&s->key, memory_order_relaxed) != k)
			continue;
		fn(arg, stack, size, weight);
	}
}
