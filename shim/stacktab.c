/* stacktab.c -- lock-free table of distinct stacks.  See stacktab.h.
 *
 * Open addressing with linear probing over at most MAX_PROBE slots.  A slot
 * goes EMPTY -> CLAIMED -> READY and never back (until a fork child resets
 * the whole table), so a reader that sees READY may read the frames without
 * further checks.  A writer that meets a CLAIMED slot does not wait for it
 * -- the claimer may be the very thread the handler interrupted -- it probes
 * on; at worst a stack is stored twice, and the uploader merges duplicates
 * when it folds stacks by name.
 */
#include "shim/stacktab.h"

#include <errno.h>
#include <string.h>
#include "common/shmem.h"

#define MAX_PROBE 64
/* The counters' room at the head of the mapping: a page, so that the
 * slots that follow start on one (their groups are pages of them). */
#define HEAD 4096
_Static_assert(sizeof(struct ps_stacktab_counters) <= HEAD, "counters fit");

PS_SIGSAFE int
ps_stacktab_init(struct ps_stacktab *t, uint64_t budget)
{
	uint64_t slot_bytes = budget / 8 * 3;
	uint32_t n = 1;
	size_t slots_len, used_len;
	void *p;

	while ((uint64_t)n * 2 * sizeof(struct ps_stack_slot) <= slot_bytes && n < (1u << 24))
		n *= 2;
	if (n < 256)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->nslots = n;
	/* The counters, then the slots on a page boundary. */
	slots_len = HEAD + (PS_NSPECIAL + (size_t)n) * sizeof(struct ps_stack_slot);
	slots_len = (slots_len + 4095) & ~(size_t)4095;
	used_len = ((PS_NSPECIAL + (size_t)n) / PS_ST_GROUP + 1 + 4095) & ~(size_t)4095;
	if (slots_len + used_len >= budget)
		return -EINVAL;
	t->npool = (uint32_t)((budget - slots_len - used_len) / sizeof(uintptr_t));
	t->map_len = slots_len + used_len + (size_t)t->npool * sizeof(uintptr_t);
	p = ps_shmem_new(t->map_len);
	if (!p)
		return -ENOMEM;
	t->c = p;
	t->slots = (struct ps_stack_slot *)((char *)p + HEAD);
	t->used = (_Atomic uint8_t *)((char *)p + slots_len);
	t->pool = (uintptr_t *)((char *)p + slots_len + used_len);
	return 0;
}

/* 1 if [p, p + len) lies within the len_map bytes from map. */
static int
within(const char *p, size_t len, const char *map, size_t map_len)
{
	return p >= map && (size_t)(p - map) <= map_len && len <= map_len - (size_t)(p - map);
}

int
ps_stacktab_view(struct ps_stacktab *view, const struct ps_stacktab *t, void *map)
{
	char *from = (char *)t->c, *to = map;
	size_t n = PS_NSPECIAL + (size_t)t->nslots;

	if (!t->nslots || (t->nslots & (t->nslots - 1)) || t->nslots > (1u << 24) ||
	    !within((char *)t->slots, n * sizeof(struct ps_stack_slot), from, t->map_len) ||
	    !within((char *)t->used, n / PS_ST_GROUP + 1, from, t->map_len) ||
	    !within((char *)t->pool, (size_t)t->npool * sizeof(uintptr_t), from, t->map_len) ||
	    !within(from, sizeof(struct ps_stacktab_counters), from, t->map_len))
		return -EINVAL;
	*view = *t;
	view->c = map;
	view->slots = (struct ps_stack_slot *)(to + ((char *)t->slots - from));
	view->used = (_Atomic uint8_t *)(to + ((char *)t->used - from));
	view->pool = (uintptr_t *)(to + ((char *)t->pool - from));
	return 0;
}

/* Written once: by the constructor, before the handler is installed or any
 * hook samples, or by the `first` function of a program whose tables wait
 * for its first record; read by every thread. */
static struct ps_stacktab *_Atomic current;
static void (*_Atomic first)(void);

PS_SIGSAFE void
ps_stacktab_publish(struct ps_stacktab *t)
{
	atomic_store_explicit(&current, t, memory_order_release);
}

PS_SIGSAFE void
ps_stacktab_defer(void (*fn)(void))
{
	atomic_store_explicit(&first, fn, memory_order_release);
}

PS_SIGSAFE struct ps_stacktab *
ps_stacktab_current(void)
{
	struct ps_stacktab *t = atomic_load_explicit(&current, memory_order_acquire);
	void (*fn)(void);

	if (PS_UNLIKELY(!t) && (fn = atomic_load_explicit(&first, memory_order_acquire))) {
		fn();
		t = atomic_load_explicit(&current, memory_order_acquire);
	}
	return t;
}

int
ps_stacktab_reset(struct ps_stacktab *t)
{
	/* Fresh zero pages: the counters with the rest. */
	return ps_shmem_renew(t->c, t->map_len);
}

PS_SIGSAFE static uint64_t
hash_stack(const uintptr_t *ips, int depth)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)depth;
	int i;

	for (i = 0; i < depth; i++) {
		h ^= ips[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h | 1;  /* 0 never names a stack */
}

PS_SIGSAFE static void
add_values(struct ps_stack_slot *s, const uint64_t *vals)
{
	int i;

	for (i = 0; i < PS_NVALUES; i++)
		if (vals[i])
			atomic_fetch_add_explicit(&s->v[i], vals[i], memory_order_relaxed);
}

PS_SIGSAFE void
ps_stacktab_add_special(struct ps_stacktab *t, uint32_t slot, const uint64_t *vals)
{
	add_values(&t->slots[slot], vals);
}

/* Fill a freshly claimed slot; returns 0, or -1 if the frame pool is full
 * (the slot is then published as an unmatchable empty stack). */
PS_SIGSAFE static int
fill(struct ps_stacktab *t, struct ps_stack_slot *s, const uintptr_t *ips, int depth,
     int truncated, uint64_t h)
{
	uint32_t off = atomic_fetch_add_explicit(&t->c->pool_used, (uint32_t)depth,
						 memory_order_relaxed);
	int ok = off <= t->npool && (uint32_t)depth <= t->npool - off;

	if (ok)
		memcpy(&t->pool[off], ips, (size_t)depth * sizeof(*ips));
	s->frames = ok ? off : 0;
	s->depth = ok ? (uint16_t)depth : 0;
	s->truncated = (uint16_t)truncated;
	s->hash = ok ? h : 0;
	atomic_store_explicit(&s->state, PS_ST_READY, memory_order_release);
	return ok ? 0 : -1;
}

PS_SIGSAFE static int
same(const struct ps_stacktab *t, const struct ps_stack_slot *s, uint64_t h,
     const uintptr_t *ips, int depth)
{
	return s->hash == h && s->depth == depth &&
	       memcmp(&t->pool[s->frames], ips, (size_t)depth * sizeof(*ips)) == 0;
}

PS_SIGSAFE uint32_t
ps_stacktab_add(struct ps_stacktab *t, const uintptr_t *ips, int depth, int truncated,
		const uint64_t *vals)
{
	uint64_t h = hash_stack(ips, depth);
	uint32_t mask = t->nslots - 1, probe = 0, i;
	struct ps_stack_slot *s;
	uint32_t st;

	while (probe < MAX_PROBE) {
		i = PS_NSPECIAL + (((uint32_t)h + probe) & mask);
		s = &t->slots[i];
		st = atomic_load_explicit(&s->state, memory_order_acquire);
		if (st == PS_ST_READY && same(t, s, h, ips, depth)) {
			add_values(s, vals);
			return i;
		}
		if (st != PS_ST_EMPTY) {
			probe++;
			continue;
		}
		/* A full frame pool would only waste the slot. */
		if (atomic_load_explicit(&t->c->pool_used, memory_order_relaxed) >
		    t->npool - (uint32_t)depth)
			break;
		if (!atomic_compare_exchange_strong_explicit(&s->state, &st, PS_ST_CLAIMED,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;  /* lost the race: look at the winner's stack */
		atomic_store_explicit(&t->used[i / PS_ST_GROUP], 1, memory_order_relaxed);
		if (fill(t, s, ips, depth, truncated, h))
			break;
		add_values(s, vals);
		return i;
	}
	atomic_fetch_add_explicit(&t->c->dropped, 1, memory_order_relaxed);
	add_values(&t->slots[PS_SLOT_FULL], vals);
	return PS_SLOT_FULL;
}

int
ps_stacktab_get(const struct ps_stacktab *t, uint32_t i, const uintptr_t **ips, int *depth,
		int *truncated)
{
	const struct ps_stack_slot *s = &t->slots[i];
	uint32_t f;
	uint16_t d;

	if (i < PS_NSPECIAL || i >= ps_stacktab_size(t))
		return 0;
	if (atomic_load_explicit(&s->state, memory_order_acquire) != PS_ST_READY || !s->hash)
		return 0;
	/* Read once and checked: the helper reads the tables of other
	 * processes, whose stray writes must not make it read out of its
	 * mapping. */
	f = *(const volatile uint32_t *)&s->frames;
	d = *(const volatile uint16_t *)&s->depth;
	if ((uint64_t)f + d > t->npool)
		return 0;
	*ips = &t->pool[f];
	*depth = d;
	*truncated = s->truncated;
	return 1;
}

PS_SIGSAFE int
ps_stacktab_empty(const struct ps_stacktab *t)
{
	uint32_t i;
	int k;

	if (!t || !t->c)
		return 1;
	if (atomic_load_explicit(&t->c->pool_used, memory_order_relaxed) != 0)
		return 0;
	for (i = 0; i < PS_NSPECIAL; i++)
		for (k = 0; k < PS_NVALUES; k++)
			if (atomic_load_explicit(&t->slots[i].v[k], memory_order_relaxed))
				return 0;
	return 1;
}
