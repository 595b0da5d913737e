/* fold.c -- fold raw stacks into stacks of function names.  See fold.h. */
#include "uploader/fold.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uploader/symbols.h"
#include "shim/unwind.h"

#define MAX_NAMES   (1u << 20)
#define MAX_ENTRIES (1u << 20)
#define MAX_FRAMES  (1u << 24)
#define NAME_LEN    1024

static const char *const special_names[PS_NSPECIAL] = {
	[PS_SLOT_FULL] = "[pyroshim: stack table full]",
	[PS_SLOT_BUSY] = "[pyroshim: inside the profiler]",
};

static uint64_t
hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ull;

	while (n--)
		h = (h ^ *s++) * 1099511628211ull;
	return h;
}

/* Grow an array of `size`-byte items to hold `need`, up to `max`. */
static int
grow(void *pp, uint32_t *cap, uint32_t need, uint32_t max, size_t size)
{
	void **p = pp;
	uint32_t nc = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	if (need > max)
		return -ENOMEM;
	while (nc < need)
		nc = nc > max / 2 ? max : nc * 2;
	q = realloc(*p, (size_t)nc * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = nc;
	return 0;
}

/* Rebuild an open-addressing index of `n` ids with keys from keyfn. */
static int
reindex(uint32_t **idx, uint32_t *cap, uint32_t n,
	uint64_t (*keyfn)(const struct ps_fold *, uint32_t), const struct ps_fold *f)
{
	uint32_t nc = 256, i, j;
	uint32_t *t;

	while (nc < n * 2)
		nc *= 2;
	t = calloc(nc, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		for (j = (uint32_t)keyfn(f, i) & (nc - 1); t[j]; j = (j + 1) & (nc - 1))
			;
		t[j] = i + 1;
	}
	free(*idx);
	*idx = t;
	*cap = nc;
	return 0;
}

static uint64_t
name_key(const struct ps_fold *f, uint32_t id)
{
	return hash_bytes(f->names[id], strlen(f->names[id]));
}

static uint64_t
entry_key(const struct ps_fold *f, uint32_t id)
{
	return hash_bytes(&f->frames[f->e[id].frames], f->e[id].depth * sizeof(uint32_t));
}

/* Folded text reserves ';' and line ends; keep names printable for it. */
static void
clean_name(char *s)
{
	for (; *s; s++)
		if (*s == ';' || *s == '\n' || *s == '\r')
			*s = ' ';
}

static int
intern(struct ps_fold *f, const char *name, uint32_t *id)
{
	uint64_t h = hash_bytes(name, strlen(name));
	uint32_t j, k;
	char *copy;

	if (f->name_index_cap) {
		for (j = (uint32_t)h & (f->name_index_cap - 1); (k = f->name_index[j]);
		     j = (j + 1) & (f->name_index_cap - 1)) {
			if (!strcmp(f->names[k - 1], name)) {
				*id = k - 1;
				return 0;
			}
		}
	}
	if (grow(&f->names, &f->names_cap, f->nnames + 1, MAX_NAMES, sizeof(char *)))
		return -ENOMEM;
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	clean_name(copy);
	f->names[f->nnames] = copy;
	*id = f->nnames++;
	if (f->nnames * 2 > f->name_index_cap)
		return reindex(&f->name_index, &f->name_index_cap, f->nnames, name_key, f);
	for (j = (uint32_t)h & (f->name_index_cap - 1); f->name_index[j];
	     j = (j + 1) & (f->name_index_cap - 1))
		;
	f->name_index[j] = *id + 1;
	return 0;
}

/* Find or add the entry whose frames are ids[0..depth). */
static int
entry_for(struct ps_fold *f, const uint32_t *ids, uint32_t depth, uint32_t *out)
{
	uint64_t h = hash_bytes(ids, depth * sizeof(uint32_t));
	struct ps_fold_entry *e;
	uint32_t j, k;

	for (j = f->entry_index_cap ? (uint32_t)h & (f->entry_index_cap - 1) : 0;
	     f->entry_index_cap && (k = f->entry_index[j]); j = (j + 1) & (f->entry_index_cap - 1)) {
		e = &f->e[k - 1];
		if (e->depth == depth && !memcmp(&f->frames[e->frames], ids, depth * sizeof(*ids))) {
			*out = k - 1;
			return 0;
		}
	}
	if (grow(&f->e, &f->cap, f->n + 1, MAX_ENTRIES, sizeof(*f->e)) ||
	    grow(&f->frames, &f->frames_cap, f->nframes + depth, MAX_FRAMES, sizeof(uint32_t)))
		return -ENOMEM;
	e = &f->e[f->n];
	memset(e, 0, sizeof(*e));
	e->frames = f->nframes;
	e->depth = depth;
	memcpy(&f->frames[f->nframes], ids, depth * sizeof(*ids));
	f->nframes += depth;
	*out = f->n++;
	if (f->n * 2 > f->entry_index_cap)
		return reindex(&f->entry_index, &f->entry_index_cap, f->n, entry_key, f);
	for (j = (uint32_t)h & (f->entry_index_cap - 1); f->entry_index[j];
	     j = (j + 1) & (f->entry_index_cap - 1))
		;
	f->entry_index[j] = *out + 1;
	return 0;
}

int
ps_fold_init(struct ps_fold *f, uint32_t nslots, uintptr_t skip_lo, uintptr_t skip_hi)
{
	memset(f, 0, sizeof(*f));
	f->nslots = nslots;
	f->slot_map = calloc(nslots, sizeof(*f->slot_map));
	if (!f->slot_map)
		return -ENOMEM;
	if (ps_symbols_new(&f->syms, skip_lo, skip_hi)) {
		free(f->slot_map);
		f->slot_map = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Symbolize one raw stack into name ids, leaf first, dropping the shim's
 * own frames.  Returns the depth. */
static int
symbolize(struct ps_fold *f, const uintptr_t *ips, int depth, int truncated, uint32_t *ids)
{
	char name[NAME_LEN];
	uint32_t n = 0;
	int i, kind;

	for (i = 0; i < depth; i++) {
		kind = ps_symbols_lookup(f->syms, ips[i], name, sizeof(name));
		if (kind == PS_SYM_SHIM)
			continue;
		if (kind < 0)
			snprintf(name, sizeof(name), "[unknown]+0x%lx", (unsigned long)ips[i]);
		if (intern(f, name, &ids[n]))
			return -ENOMEM;
		n++;
	}
	if (n == 0 || truncated) {
		if (intern(f, n ? "[truncated]" : "[no stack]", &ids[n]))
			return -ENOMEM;
		n++;
	}
	return (int)n;
}

static int
map_slot(struct ps_fold *f, const struct ps_stacktab *st, uint32_t i)
{
	uint32_t ids[PS_MAX_DEPTH + 1], entry;
	const uintptr_t *ips;
	int depth, trunc, n;

	if (i < PS_NSPECIAL) {
		if (intern(f, special_names[i], &ids[0]))
			return -ENOMEM;
		n = 1;
	} else {
		if (!ps_stacktab_get(st, i, &ips, &depth, &trunc))
			return 0;
		n = symbolize(f, ips, depth, trunc, ids);
		if (n < 0)
			return n;
	}
	if (entry_for(f, ids, (uint32_t)n, &entry))
		return -ENOMEM;
	f->slot_map[i] = entry + 1;
	return 0;
}

struct live_ctx {
	struct ps_fold *f;
};

static void
add_live(void *arg, uint32_t stack, uint64_t size, uint64_t weight)
{
	struct ps_fold *f = ((struct live_ctx *)arg)->f;
	struct ps_fold_entry *e;

	if (stack >= f->nslots || !f->slot_map[stack])
		return;
	e = &f->e[f->slot_map[stack] - 1];
	e->v[PS_F_INUSE_OBJS] += (int64_t)weight;
	e->v[PS_F_INUSE_BYTES] += (int64_t)(((double)size * (double)weight) / PS_FIXED_ONE + 0.5);
}

int
ps_fold_update(struct ps_fold *f, const struct ps_stacktab *st, struct ps_livetab *lt)
{
	static const int from[PS_NVALUES] = { PS_F_CPU_SAMPLES, PS_F_CPU_NS, PS_F_ALLOC_OBJS,
					      PS_F_ALLOC_BYTES };
	struct live_ctx lc = { f };
	struct ps_fold_entry *e;
	uint32_t i, n = ps_stacktab_size(st);
	int rc = 0, k;

	f->dropped = 0;
	for (i = 0; i < n && i < f->nslots; i++)
		if (!f->slot_map[i] && map_slot(f, st, i))
			rc = -ENOMEM;
	for (i = 0; i < f->n; i++)
		memset(f->e[i].v, 0, sizeof(f->e[i].v));
	for (i = 0; i < n && i < f->nslots; i++) {
		if (!f->slot_map[i]) {
			if (i >= PS_NSPECIAL && st->slots[i].state == PS_ST_READY)
				f->dropped++;
			continue;
		}
		e = &f->e[f->slot_map[i] - 1];
		for (k = 0; k < PS_NVALUES; k++)
			e->v[from[k]] += (int64_t)atomic_load_explicit(&st->slots[i].v[k],
								       memory_order_relaxed);
	}
	if (lt)
		ps_livetab_each(lt, add_live, &lc);
	return rc;
}

int64_t
ps_fold_total(const struct ps_fold *f, const int64_t (*vals)[PS_F_NVALUES], int v)
{
	int64_t t = 0;
	uint32_t i;

	for (i = 0; i < f->n; i++)
		t += vals ? vals[i][v] : f->e[i].v[v];
	return t;
}

int
ps_fold_folded(const struct ps_fold *f, const int64_t (*vals)[PS_F_NVALUES], int v,
	       int64_t div, struct ps_buf *out)
{
	const struct ps_fold_entry *e;
	int64_t val;
	uint32_t i, d;
	int rc;

	for (i = 0; i < f->n; i++) {
		e = &f->e[i];
		val = vals ? vals[i][v] : e->v[v];
		if (div > 1)
			val = (val + div / 2) / div;
		if (val <= 0)
			continue;
		for (d = e->depth; d > 0; d--) {
			rc = ps_buf_puts(out, f->names[f->frames[e->frames + d - 1]]);
			if (!rc)
				rc = ps_buf_puts(out, d > 1 ? ";" : "");
			if (rc)
				return rc;
		}
		rc = ps_buf_printf(out, " %lld\n", (long long)val);
		if (rc)
			return rc;
	}
	return 0;
}
