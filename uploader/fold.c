/* fold.c -- raw stacks into stacks of locations, and folded text.  See
 * fold.h.
 *
 * Four interned tables, each an array with an open-addressing index of
 * ids + 1 (load factor <= 1/2, rebuilt when it doubles): names (strings),
 * functions (name, system name, file, first line), locations (by
 * address) and entries (by their location ids).  Mappings are few and
 * found by a linear scan.
 */
#include "uploader/fold.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hash.h"
#include "symbolize/symbols.h"
#include "shim/unwind.h"

#define MAX_NAMES   (1u << 22)
#define MAX_ENTRIES (1u << 20)
#define MAX_FRAMES  (1u << 24)
#define MAX_LOCS    (1u << 22)
#define MAX_LINES   (1u << 24)
#define MAX_FUNCS   (1u << 22)
#define MAX_MAPS    (1u << 16)
#define NAME_LEN    1024

/* Frames that stand for no address: their location ids are f->pseudo[]. */
enum { P_FULL = PS_SLOT_FULL, P_BUSY = PS_SLOT_BUSY, P_TRUNC = PS_NSPECIAL, P_NOSTACK };

static const char *const pseudo_names[PS_FOLD_NPSEUDO] = {
	[P_FULL] = "[pyroshim: stack table full]",
	[P_BUSY] = "[pyroshim: inside the profiler]",
	[P_TRUNC] = "[truncated]",
	[P_NOSTACK] = "[no stack]",
};


/* ---- one open-addressing index, four uses ----------------------------- */

typedef uint64_t (*key_fn)(const struct ps_fold *, uint32_t id);
typedef int (*eq_fn)(const struct ps_fold *, uint32_t id, const void *key);

struct index {
	uint32_t **idx;
	uint32_t *cap;
	key_fn key;
	eq_fn eq;
};

/* The id whose key equals `key` (hash h), or UINT32_MAX. */
static uint32_t
index_find(const struct ps_fold *f, const struct index *x, uint64_t h, const void *key)
{
	uint32_t j, k, cap = *x->cap;

	if (!cap)
		return UINT32_MAX;
	for (j = (uint32_t)h & (cap - 1); (k = (*x->idx)[j]); j = (j + 1) & (cap - 1))
		if (x->eq(f, k - 1, key))
			return k - 1;
	return UINT32_MAX;
}

/* Index id (hash h); n ids exist now.  Rebuilds at load factor 1/2. */
static int
index_add(const struct ps_fold *f, const struct index *x, uint64_t h, uint32_t id, uint32_t n)
{
	uint32_t nc = 256, i, j, *t;

	if (n * 2 > *x->cap) {
		while (nc < n * 2)
			nc *= 2;
		t = calloc(nc, sizeof(*t));
		if (!t)
			return -ENOMEM;
		for (i = 0; i < n; i++) {
			for (j = (uint32_t)x->key(f, i) & (nc - 1); t[j]; j = (j + 1) & (nc - 1))
				;
			t[j] = i + 1;
		}
		free(*x->idx);
		*x->idx = t;
		*x->cap = nc;
		return 0;
	}
	for (j = (uint32_t)h & (*x->cap - 1); (*x->idx)[j]; j = (j + 1) & (*x->cap - 1))
		;
	(*x->idx)[j] = id + 1;
	return 0;
}

/* ---- names ------------------------------------------------------------ */

static uint64_t
name_key(const struct ps_fold *f, uint32_t id)
{
	return ps_hash_bytes(f->names[id], strlen(f->names[id]));
}

static int
name_eq(const struct ps_fold *f, uint32_t id, const void *key)
{
	return strcmp(f->names[id], key) == 0;
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
	struct index x = { &f->name_index, &f->name_index_cap, name_key, name_eq };
	uint64_t h = ps_hash_bytes(name, strlen(name));
	char *copy;

	*id = index_find(f, &x, h, name);
	if (*id != UINT32_MAX)
		return 0;
	if (ps_grow(&f->names, &f->names_cap, f->nnames + 1, MAX_NAMES, sizeof(char *)))
		return -ENOMEM;
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	clean_name(copy);
	f->name_bytes += strlen(copy) + 1 + 16;   /* malloc's header, about */
	f->names[f->nnames] = copy;
	*id = f->nnames++;
	/* Cleaning may have changed the key: index what is stored. */
	return index_add(f, &x, name_key(f, *id), *id, f->nnames);
}

/* ---- functions -------------------------------------------------------- */

static uint64_t
func_key(const struct ps_fold *f, uint32_t id)
{
	return ps_hash_bytes(&f->funcs[id], sizeof(f->funcs[id]));
}

static int
func_eq(const struct ps_fold *f, uint32_t id, const void *key)
{
	return memcmp(&f->funcs[id], key, sizeof(f->funcs[id])) == 0;
}

static int
func_for(struct ps_fold *f, const struct ps_fold_func *fn, uint32_t *id)
{
	struct index x = { &f->func_index, &f->func_index_cap, func_key, func_eq };
	uint64_t h = ps_hash_bytes(fn, sizeof(*fn));

	*id = index_find(f, &x, h, fn);
	if (*id != UINT32_MAX)
		return 0;
	if (ps_grow(&f->funcs, &f->funcs_cap, f->nfuncs + 1, MAX_FUNCS, sizeof(*f->funcs)))
		return -ENOMEM;
	f->funcs[f->nfuncs] = *fn;
	*id = f->nfuncs++;
	return index_add(f, &x, h, *id, f->nfuncs);
}

/* A function and a line: one Line of a location.  `label` is its frame in
 * folded text: the function's name, or "name (file:line)". */
static int
add_line(struct ps_fold *f, const struct ps_src_frame *sf)
{
	char label[NAME_LEN + 64];
	struct ps_fold_func fn = { 0 };
	struct ps_fold_line *l;
	uint32_t func, lab;

	if (intern(f, sf->name, &fn.name) || intern(f, sf->system_name, &fn.system_name) ||
	    intern(f, sf->file, &fn.file))
		return -ENOMEM;
	fn.start_line = sf->start_line;
	if (func_for(f, &fn, &func))
		return -ENOMEM;
	lab = fn.name;
	if (f->folded_lines && sf->file[0]) {
		snprintf(label, sizeof(label), "%s (%s:%d)", sf->name, sf->file, sf->line);
		if (intern(f, label, &lab))
			return -ENOMEM;
	}
	if (ps_grow(&f->lines, &f->lines_cap, f->nlines + 1, MAX_LINES, sizeof(*f->lines)))
		return -ENOMEM;
	l = &f->lines[f->nlines++];
	l->func = func;
	l->line = sf->line;
	l->label = lab;
	return 0;
}

/* ---- mappings ---------------------------------------------------------- */

/* The mapping of ip into *map (index + 1, 0 when ip is in no mapped
 * region).  Returns 0, or -ENOMEM (nothing is kept: a later pass asks
 * again). */
static int
map_for(struct ps_fold *f, uintptr_t ip, uint32_t *map)
{
	struct ps_map_info mi;
	struct ps_fold_map *m;
	uint32_t i;
	int rc = ps_symbols_mapping(f->syms, ip, &mi);

	*map = 0;
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		return 0;
	for (i = 0; i < f->nmaps; i++)
		if (f->maps[i].start == mi.start && f->maps[i].limit == mi.limit &&
		    f->maps[i].offset == mi.offset && !strcmp(f->names[f->maps[i].file], mi.file)) {
			*map = i + 1;
			return 0;
		}
	if (ps_grow(&f->maps, &f->maps_cap, f->nmaps + 1, MAX_MAPS, sizeof(*f->maps)))
		return -ENOMEM;
	m = &f->maps[f->nmaps];
	memset(m, 0, sizeof(*m));
	m->start = mi.start;
	m->limit = mi.limit;
	m->offset = mi.offset;
	m->has_functions = (uint8_t)mi.has_functions;
	if (intern(f, mi.file, &m->file) || intern(f, mi.build_id, &m->build_id))
		return -ENOMEM;
	*map = ++f->nmaps;
	return 0;
}

/* ---- locations --------------------------------------------------------- */

static uint64_t
loc_key(const struct ps_fold *f, uint32_t id)
{
	return ps_hash_mix(f->locs[id].addr);
}

static int
loc_eq(const struct ps_fold *f, uint32_t id, const void *key)
{
	return f->locs[id].addr == *(const uintptr_t *)key;
}

/* A new location: one Line naming `name` at line 0, until DWARF says more. */
static int
new_loc(struct ps_fold *f, uintptr_t addr, uint32_t map, const char *name, uint32_t *id)
{
	struct ps_src_frame sf = { name, name, "", 0, 0 };
	struct ps_fold_loc *l;

	if (ps_grow(&f->locs, &f->locs_cap, f->nlocs + 1, MAX_LOCS, sizeof(*f->locs)))
		return -ENOMEM;
	if (add_line(f, &sf))
		return -ENOMEM;
	l = &f->locs[f->nlocs];
	memset(l, 0, sizeof(*l));
	l->addr = addr;
	l->map = map;
	l->sym = f->lines[f->nlines - 1].label;
	l->line0 = f->nlines - 1;
	l->nlines = 1;
	/* Only code in an object file can have DWARF. */
	l->resolved = !map || !f->dwarf_budget_ns;
	if (!l->resolved)
		f->unresolved++;
	*id = f->nlocs++;
	return 0;
}

/* The location of ip: 1 and *id, 0 if ip is the shim's own, or -ENOMEM. */
static int
loc_for(struct ps_fold *f, uintptr_t ip, uint32_t *id)
{
	struct index x = { &f->loc_index, &f->loc_index_cap, loc_key, loc_eq };
	char name[NAME_LEN];
	uint32_t map;
	int kind;

	*id = index_find(f, &x, ps_hash_mix(ip), &ip);
	if (*id != UINT32_MAX)
		return 1;
	kind = ps_symbols_lookup(f->syms, ip, name, sizeof(name));
	if (kind == PS_SYM_SHIM)
		return 0;
	/* Out of memory: no location is made, so the slot stays unmapped and
	 * the next pass names it for good. */
	if (kind == -ENOMEM || map_for(f, ip, &map))
		return -ENOMEM;
	if (kind < 0)
		snprintf(name, sizeof(name), "[unknown]+0x%lx", (unsigned long)ip);
	if (new_loc(f, ip, map, name, id))
		return -ENOMEM;
	if (index_add(f, &x, ps_hash_mix(ip), *id, f->nlocs))
		return -ENOMEM;
	return 1;
}

static int
pseudo_loc(struct ps_fold *f, int which, uint32_t *id)
{
	if (f->pseudo[which]) {
		*id = f->pseudo[which] - 1;
		return 0;
	}
	if (new_loc(f, 0, 0, pseudo_names[which], id))
		return -ENOMEM;
	f->pseudo[which] = *id + 1;
	return 0;
}

/* Look the source lines of waiting locations up, oldest first, for at
 * most the pass's budget.  A location gets its DWARF chain (innermost
 * first) in place of its one function-level line. */
static int
resolve_lines(struct ps_fold *f)
{
	struct ps_src_frame sf[PS_MAX_INLINE];
	uint64_t t0 = ps_clock_ns(CLOCK_MONOTONIC);
	struct ps_fold_loc *l;
	uint32_t i, line0;
	int n, k;

	for (i = f->resolve_from; i < f->nlocs && f->unresolved; i++) {
		l = &f->locs[i];
		if (l->resolved)
			continue;
		if (ps_clock_ns(CLOCK_MONOTONIC) - t0 > f->dwarf_budget_ns)
			break;
		n = ps_symbols_source(f->syms, l->addr, sf, PS_MAX_INLINE);
		line0 = f->nlines;
		for (k = 0; k < n; k++)
			if (add_line(f, &sf[k]))
				return -ENOMEM;
		l = &f->locs[i];
		if (n > 0) {
			l->line0 = line0;
			l->nlines = (uint16_t)n;
			if (sf[0].line > 0)
				f->maps[l->map - 1].has_lines = 1;
		}
		l->resolved = 1;
		f->unresolved--;
	}
	while (f->resolve_from < f->nlocs && f->locs[f->resolve_from].resolved)
		f->resolve_from++;
	return 0;
}

/* ---- entries ----------------------------------------------------------- */

static uint64_t
entry_key(const struct ps_fold *f, uint32_t id)
{
	return ps_hash_bytes(&f->frames[f->e[id].frames], f->e[id].depth * sizeof(uint32_t));
}

struct entry_key {
	const uint32_t *ids;
	uint32_t depth;
};

static int
entry_eq(const struct ps_fold *f, uint32_t id, const void *key)
{
	const struct entry_key *k = key;
	const struct ps_fold_entry *e = &f->e[id];

	return e->depth == k->depth &&
	       !memcmp(&f->frames[e->frames], k->ids, k->depth * sizeof(*k->ids));
}

/* Find or add the entry whose frames are ids[0..depth). */
static int
entry_for(struct ps_fold *f, const uint32_t *ids, uint32_t depth, uint32_t *out)
{
	struct index x = { &f->entry_index, &f->entry_index_cap, entry_key, entry_eq };
	struct entry_key k = { ids, depth };
	uint64_t h = ps_hash_bytes(ids, depth * sizeof(uint32_t));
	struct ps_fold_entry *e;

	*out = index_find(f, &x, h, &k);
	if (*out != UINT32_MAX)
		return 0;
	if (ps_grow(&f->e, &f->cap, f->n + 1, MAX_ENTRIES, sizeof(*f->e)) ||
	    ps_grow(&f->frames, &f->frames_cap, f->nframes + depth, MAX_FRAMES, sizeof(uint32_t)))
		return -ENOMEM;
	e = &f->e[f->n];
	memset(e, 0, sizeof(*e));
	e->frames = f->nframes;
	e->depth = depth;
	memcpy(&f->frames[f->nframes], ids, depth * sizeof(*ids));
	f->nframes += depth;
	*out = f->n++;
	return index_add(f, &x, h, *out, f->n);
}

void
ps_fold_free(struct ps_fold *f)
{
	uint32_t i;

	ps_symbols_free(f->syms);
	for (i = 0; i < f->nnames; i++)
		free(f->names[i]);
	free(f->names);
	free(f->name_index);
	free(f->e);
	free(f->entry_index);
	free(f->frames);
	free(f->locs);
	free(f->loc_index);
	free(f->lines);
	free(f->funcs);
	free(f->func_index);
	free(f->maps);
	free(f->slot_map);
	memset(f, 0, sizeof(*f));
}

int
ps_fold_init(struct ps_fold *f, uint32_t nslots, uintptr_t skip_lo, uintptr_t skip_hi)
{
	uint32_t empty;

	memset(f, 0, sizeof(*f));
	f->nslots = nslots;
	f->slot_map = calloc(nslots, sizeof(*f->slot_map));
	/* names[0] is "": a function without a file, a mapping without a
	 * build ID. */
	if (!f->slot_map || ps_symbols_new(&f->syms, skip_lo, skip_hi) || intern(f, "", &empty)) {
		ps_fold_free(f);
		return -ENOMEM;
	}
	return 0;
}

int
ps_fold_first_mapping(struct ps_fold *f, uintptr_t entry)
{
	uint32_t map;

	return map_for(f, entry, &map);
}

int
ps_fold_configure(struct ps_fold *f, int folded_lines, uint64_t dwarf_memory, int debuginfod,
		  uint64_t budget_ns)
{
	f->folded_lines = folded_lines;
	f->dwarf_budget_ns = dwarf_memory ? budget_ns : 0;
	return ps_symbolizer_use_dwarf(ps_symbols_symbolizer(f->syms), dwarf_memory, debuginfod);
}

/* Map one raw stack to location ids, leaf first, dropping the shim's own
 * frames.  Returns the depth or -ENOMEM. */
static int
locate(struct ps_fold *f, const uintptr_t *ips, int depth, int truncated, uint32_t *ids)
{
	uint32_t n = 0;
	int i, rc;

	for (i = 0; i < depth; i++) {
		rc = loc_for(f, ips[i], &ids[n]);
		if (rc < 0)
			return rc;
		n += (uint32_t)rc;
	}
	if (n == 0 || truncated) {
		if (pseudo_loc(f, n ? P_TRUNC : P_NOSTACK, &ids[n]))
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
		if (pseudo_loc(f, (int)i, &ids[0]))
			return -ENOMEM;
		n = 1;
	} else {
		if (!ps_stacktab_get(st, i, &ips, &depth, &trunc))
			return 0;
		n = locate(f, ips, depth, trunc, ids);
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
	static const int from[PS_NVALUES] = {
		[PS_V_CPU_SAMPLES] = PS_F_CPU_SAMPLES, [PS_V_CPU_NS] = PS_F_CPU_NS,
		[PS_V_ALLOC_OBJS] = PS_F_ALLOC_OBJS,   [PS_V_ALLOC_BYTES] = PS_F_ALLOC_BYTES,
		[PS_V_BLOCK_COUNT] = PS_F_BLOCK_COUNT, [PS_V_BLOCK_NS] = PS_F_BLOCK_NS,
		[PS_V_MUTEX_COUNT] = PS_F_MUTEX_COUNT, [PS_V_MUTEX_NS] = PS_F_MUTEX_NS,
	};
	struct live_ctx lc = { f };
	struct ps_fold_entry *e;
	uint32_t i, n = ps_stacktab_size(st);
	int rc = 0, k;

	f->dropped = 0;
	for (i = 0; i < n && i < f->nslots; i++) {
		if (!ps_stacktab_group_used(st, i))
			i |= PS_ST_GROUP - 1;   /* nothing there: the next group */
		else if (!f->slot_map[i] && map_slot(f, st, i))
			rc = -ENOMEM;
	}
	if (f->unresolved && resolve_lines(f))
		rc = -ENOMEM;
	for (i = 0; i < f->n; i++)
		memset(f->e[i].v, 0, sizeof(f->e[i].v));
	for (i = 0; i < n && i < f->nslots; i++) {
		if (!f->slot_map[i]) {
			if (!ps_stacktab_group_used(st, i))
				i |= PS_ST_GROUP - 1;
			else if (i >= PS_NSPECIAL && st->slots[i].state == PS_ST_READY)
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

/* ---- the store of what ended ------------------------------------------- */

/* src's name id in dst. */
static int
absorb_name(struct ps_fold *dst, const struct ps_fold *src, uint32_t id, uint32_t *out)
{
	return intern(dst, src->names[id], out);
}

/* src's mapping i copied into dst: map_new[i] = its index + 1. */
static int
absorb_map(struct ps_fold *dst, const struct ps_fold *src, uint32_t i, uint32_t *map_new)
{
	const struct ps_fold_map *sm = &src->maps[i];

	if (ps_grow(&dst->maps, &dst->maps_cap, dst->nmaps + 1, MAX_MAPS, sizeof(*dst->maps)))
		return -ENOMEM;
	dst->maps[dst->nmaps] = *sm;
	if (absorb_name(dst, src, sm->file, &dst->maps[dst->nmaps].file) ||
	    absorb_name(dst, src, sm->build_id, &dst->maps[dst->nmaps].build_id))
		return -ENOMEM;
	map_new[i] = ++dst->nmaps;
	return 0;
}

/* src's location `id` copied into dst, its mapping through map_new. */
static int
absorb_loc(struct ps_fold *dst, const struct ps_fold *src, uint32_t id, const uint32_t *map_new,
	   uint32_t *out)
{
	const struct ps_fold_loc *l = &src->locs[id];
	const struct ps_fold_line *sl;
	struct ps_fold_func fn;
	struct ps_fold_loc nl = { .addr = l->addr, .resolved = 1, .nlines = l->nlines };
	uint32_t k;

	nl.map = l->map ? map_new[l->map - 1] : 0;
	if (absorb_name(dst, src, l->sym, &nl.sym) ||
	    ps_grow(&dst->lines, &dst->lines_cap, dst->nlines + l->nlines, MAX_LINES,
		    sizeof(*dst->lines)) ||
	    ps_grow(&dst->locs, &dst->locs_cap, dst->nlocs + 1, MAX_LOCS, sizeof(*dst->locs)))
		return -ENOMEM;
	nl.line0 = dst->nlines;
	for (k = 0; k < l->nlines; k++) {
		sl = &src->lines[l->line0 + k];
		fn = src->funcs[sl->func];
		if (absorb_name(dst, src, fn.name, &fn.name) ||
		    absorb_name(dst, src, fn.system_name, &fn.system_name) ||
		    absorb_name(dst, src, fn.file, &fn.file) ||
		    func_for(dst, &fn, &dst->lines[nl.line0 + k].func) ||
		    absorb_name(dst, src, sl->label, &dst->lines[nl.line0 + k].label))
			return -ENOMEM;
		dst->lines[nl.line0 + k].line = sl->line;
	}
	dst->nlines += l->nlines;
	dst->locs[dst->nlocs] = nl;
	*out = dst->nlocs++;
	return 0;
}

/* Entry i's values: from vals, or its own. */
static const int64_t *
row(const struct ps_fold *f, const int64_t (*vals)[PS_F_NVALUES], uint32_t i)
{
	return vals ? vals[i] : f->e[i].v;
}

static int
any_value(const int64_t *v)
{
	int k;

	for (k = 0; k < PS_F_NVALUES; k++)
		if (v[k])
			return 1;
	return 0;
}

int
ps_fold_absorb(struct ps_fold *dst, const struct ps_fold *src,
	       const int64_t (*vals)[PS_F_NVALUES], uint32_t tag)
{
	uint32_t *loc_new = calloc(src->nlocs + 1, sizeof(*loc_new));
	uint32_t *map_new = calloc(src->nmaps + 1, sizeof(*map_new));
	const struct ps_fold_entry *e;
	uint32_t i, d, id, empty;
	int rc = -ENOMEM;

	if (!loc_new || !map_new || (!dst->nnames && intern(dst, "", &empty)))
		goto out;
	/* The mappings first, in src's order, where its executable comes
	 * first: pprof takes the first mapping for the main binary. */
	for (i = 0; i < src->n; i++)
		for (d = 0; any_value(row(src, vals, i)) && d < src->e[i].depth; d++) {
			id = src->frames[src->e[i].frames + d];
			if (src->locs[id].map)
				map_new[src->locs[id].map - 1] = 1;
		}
	for (i = 0; i < src->nmaps; i++)
		if (map_new[i] && absorb_map(dst, src, i, map_new))
			goto out;
	for (i = 0; i < src->n; i++) {
		e = &src->e[i];
		if (!any_value(row(src, vals, i)))
			continue;
		for (d = 0; d < e->depth; d++) {
			id = src->frames[e->frames + d];
			if (!loc_new[id]) {
				if (absorb_loc(dst, src, id, map_new, &loc_new[id]))
					goto out;
				loc_new[id]++;
			}
		}
		if (ps_grow(&dst->e, &dst->cap, dst->n + 1, MAX_ENTRIES, sizeof(*dst->e)) ||
		    ps_grow(&dst->frames, &dst->frames_cap, dst->nframes + e->depth, MAX_FRAMES,
			    sizeof(uint32_t)))
			goto out;
		for (d = 0; d < e->depth; d++)
			dst->frames[dst->nframes + d] = loc_new[src->frames[e->frames + d]] - 1;
		dst->e[dst->n] = *e;
		dst->e[dst->n].frames = dst->nframes;
		dst->e[dst->n].tag = tag;
		memcpy(dst->e[dst->n].v, row(src, vals, i), sizeof(dst->e[dst->n].v));
		dst->nframes += e->depth;
		dst->n++;
	}
	rc = 0;
out:
	free(loc_new);
	free(map_new);
	return rc;
}

size_t
ps_fold_bytes(const struct ps_fold *f)
{
	size_t b = (size_t)f->names_cap * sizeof(*f->names) + (size_t)f->cap * sizeof(*f->e) +
		   (size_t)f->frames_cap * 4 + (size_t)f->locs_cap * sizeof(*f->locs) +
		   (size_t)f->lines_cap * sizeof(*f->lines) + (size_t)f->funcs_cap * sizeof(*f->funcs) +
		   (size_t)f->maps_cap * sizeof(*f->maps) +
		   ((size_t)f->name_index_cap + f->func_index_cap + f->entry_index_cap +
		    f->loc_index_cap) * 4 + (size_t)f->nslots * 4;

	return b + f->name_bytes;
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

/* ---- folded text ------------------------------------------------------- */

/* Stacks of frame labels, leaf first, merged: what one folded line says. */
struct flat {
	uint32_t *pool;          /* labels of every stack */
	uint32_t npool, pool_cap;
	struct flat_stack {
		uint32_t off, depth;
		int64_t val;
	} *v;
	uint32_t n, cap;
	uint32_t *idx;           /* open addressing: stack + 1 */
	uint32_t idx_cap;        /* power of two, > 2 n */
};

/* The labels of entry e, leaf first (inlined frames innermost first). */
static uint32_t
labels_of(const struct ps_fold *f, const struct ps_fold_entry *e, uint32_t *out, uint32_t max)
{
	const struct ps_fold_loc *l;
	uint32_t d, k, n = 0;

	for (d = 0; d < e->depth; d++) {
		l = &f->locs[f->frames[e->frames + d]];
		for (k = 0; k < l->nlines && n < max; k++)
			out[n++] = f->lines[l->line0 + k].label;
	}
	return n;
}

static int
flat_add(struct flat *fl, const uint32_t *lab, uint32_t depth, int64_t val)
{
	uint64_t h = ps_hash_bytes(lab, depth * sizeof(*lab));
	struct flat_stack *s;
	uint32_t j, k, i, nc;

	for (j = (uint32_t)h & (fl->idx_cap - 1); (k = fl->idx[j]); j = (j + 1) & (fl->idx_cap - 1)) {
		s = &fl->v[k - 1];
		if (s->depth == depth && !memcmp(&fl->pool[s->off], lab, depth * sizeof(*lab))) {
			s->val += val;
			return 0;
		}
	}
	if (ps_grow(&fl->v, &fl->cap, fl->n + 1, MAX_ENTRIES, sizeof(*fl->v)) ||
	    ps_grow(&fl->pool, &fl->pool_cap, fl->npool + depth, MAX_FRAMES * 2, sizeof(*fl->pool)))
		return -ENOMEM;
	fl->v[fl->n] = (struct flat_stack){ fl->npool, depth, val };
	memcpy(&fl->pool[fl->npool], lab, depth * sizeof(*lab));
	fl->npool += depth;
	fl->idx[j] = ++fl->n;
	if (fl->n * 2 <= fl->idx_cap)
		return 0;
	/* Rebuild at twice the size. */
	nc = fl->idx_cap * 2;
	free(fl->idx);
	fl->idx = calloc(nc, sizeof(*fl->idx));
	if (!fl->idx)
		return -ENOMEM;
	fl->idx_cap = nc;
	for (i = 0; i < fl->n; i++) {
		s = &fl->v[i];
		h = ps_hash_bytes(&fl->pool[s->off], s->depth * sizeof(*fl->pool));
		for (j = (uint32_t)h & (nc - 1); fl->idx[j]; j = (j + 1) & (nc - 1))
			;
		fl->idx[j] = i + 1;
	}
	return 0;
}

static int
flat_print(const struct ps_fold *f, const struct flat *fl, int64_t div, struct ps_buf *out)
{
	const struct flat_stack *s;
	uint32_t i, d;
	int64_t val;
	int rc;

	for (i = 0; i < fl->n; i++) {
		s = &fl->v[i];
		val = div > 1 ? (s->val + div / 2) / div : s->val;
		if (val <= 0)
			continue;
		for (d = s->depth; d > 0; d--) {
			rc = ps_buf_puts(out, f->names[fl->pool[s->off + d - 1]]);
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

int
ps_fold_folded(const struct ps_fold *f, const int64_t (*vals)[PS_F_NVALUES], int v,
	       int64_t div, struct ps_buf *out)
{
	uint32_t lab[(PS_MAX_DEPTH + 1) * PS_MAX_INLINE], depth, i;
	struct flat fl = { 0 };
	int64_t val;
	int rc = -ENOMEM;

	fl.idx_cap = 256;
	fl.idx = calloc(fl.idx_cap, sizeof(*fl.idx));
	if (!fl.idx)
		goto out;
	for (i = 0; i < f->n; i++) {
		val = vals ? vals[i][v] : f->e[i].v[v];
		if (val == 0)
			continue;
		depth = labels_of(f, &f->e[i], lab, PS_ARRAY_LEN(lab));
		if (flat_add(&fl, lab, depth, val))
			goto out;
	}
	rc = flat_print(f, &fl, div, out);
out:
	free(fl.idx);
	free(fl.v);
	free(fl.pool);
	return rc;
}
