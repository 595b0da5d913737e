/* symbolizer.c -- frames at an offset of an object file.  See symbolizer.h.
 *
 * A look-up goes down three levels, each shared by every reader of the
 * process and each a cache of the next:
 *
 *   symbol table   per file identity (elf.h): the function at the offset;
 *   answer cache   per build ID, on disk (symcache.h): its line and
 *                  inlined callers, when a run before asked DWARF;
 *   DWARF          per file identity (dwarf.h), once nothing above knew.
 *
 * Every function DWARF was asked about is remembered (`pending`), and the
 * next save looks the rest of it up, so that a later run finds every
 * instruction of it answered although other ones are sampled.  Once DWARF
 * was asked at all, the objects offered (ps_symbolizer_fill: every object
 * a sample landed in) are looked up whole in a save that may (one that no
 * program waits for), function after function, once per build ID; an
 * object whose every function is answered is marked complete, and a
 * later run asks its DWARF nothing, even about code no run sampled before.
 */
#include "symbolize/symbolizer.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "symbolize/dwarf.h"
#include "symbolize/elf.h"
#include "symbolize/symcache.h"

#define MAX_NAME      16384          /* one result name, NUL included */
#define MAX_CACHED_OBJECTS 256       /* objects with a symbol cache open */
#define MAX_PENDING   1024           /* functions to complete in the symbol cache */
#define MAX_WHOLE     64             /* objects to look up whole */

struct ps_object {
	const struct ps_symtab *tab;   /* a reference (ps_elf_get) */
	uint32_t refs;                 /* the getter's, and one per pending entry */
	char path[];                   /* the file, for DWARF */
};

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

struct ps_symbolizer {
	demangle_fn demangle;   /* NULL: none (yet) */
	int demangle_tried;     /* looked for, once */
	struct ps_dwarf *dwarf; /* shared_dwarf, or owned when dwarf_own;
				 * NULL: no source lines */
	int dwarf_own;
	struct ps_buf src;      /* strings of the last ps_symbolize */
	/* The symbol caches (symcache.h) of the build IDs met: references to
	 * the process's shared ones, kept while the reader lives (an object
	 * unloaded may come back). */
	char cache_dir[PATH_MAX]; /* "": none */
	uint64_t cache_cap;
	int cache_checked;      /* the directory was checked, once */
	struct objcache {
		uint8_t id[64];
		uint32_t idlen;
		struct ps_symcache *c;  /* owned; NULL: could not be opened */
	} *caches;              /* owned, ncaches entries */
	uint32_t ncaches;
	/* Functions where DWARF was asked, for the next save to complete. */
	struct pending {
		struct ps_object *o;    /* a reference */
		uint64_t addr;          /* link-time address */
		struct ps_symcache *c;
	} pending[MAX_PENDING];
	uint32_t npending;
	struct ps_symbolizer_stats st;
	char scratch[MAX_NAME]; /* a demangled name being built */
};

/* The DWARF reader every ps_symbolizer of the process shares, so that a
 * tree's helper reads libc's DWARF once for all its programs; what it
 * holds of a file goes when the file's symbol table goes (ps_dwarf_drop).
 * Owned by whoever holds the worker's lock, as every use of symbols is.
 * Made with the first user's cap: a reader asked for another while it is
 * in use gets one of its own. */
static struct ps_dwarf *shared_dwarf;
static uint64_t shared_cap;
static int shared_debuginfod;
static uint32_t shared_users;

/* Objects to look up whole, each from its symbol `next` on: the
 * process's, not one reader's.  In a tree's helper the programs whose
 * samples asked DWARF are mostly members, and a member's saves are not
 * the one that may take the time (the last, of the tree's leader): kept
 * per reader, what they offered went with them, and every later run of
 * the tree opened libc's DWARF again.  Owned by whoever holds the
 * worker's lock, as every use of symbols is. */
static struct whole {
	struct ps_object *o;    /* a reference */
	struct ps_symcache *c;  /* a reference (ps_symcache_hold) */
	uint32_t next;          /* index in o's symbol table */
} whole[MAX_WHOLE] PS_LARGE;
static uint32_t nwhole;

/* ---- objects ------------------------------------------------------------ */

int
ps_object_get(const char *path, const ElfW(Phdr) *phdr, uint32_t phnum, struct ps_object **out)
{
	size_t n = strlen(path) + 1;
	struct ps_object *o = malloc(sizeof(*o) + n);
	int rc;

	if (!o)
		return -ENOMEM;
	rc = ps_elf_get(path, phdr, phnum, &o->tab);
	if (rc < 0) {
		free(o);
		return rc;
	}
	o->refs = 1;
	memcpy(o->path, path, n);
	*out = o;
	return rc;
}

void
ps_object_put(struct ps_object *o)
{
	if (!o || --o->refs > 0)
		return;
	ps_elf_put(o->tab);
	free(o);
}

uint32_t
ps_object_build_id(const struct ps_object *o, const uint8_t **id)
{
	*id = o->tab->build_id;
	return o->tab->build_id_len;
}

int
ps_object_has_functions(const struct ps_object *o)
{
	return o->tab->n > 0;
}

/* ---- readers ------------------------------------------------------------ */

int
ps_symbolizer_new(struct ps_symbolizer **out)
{
	struct ps_symbolizer *z = calloc(1, sizeof(*z));

	if (!z)
		return -ENOMEM;
	z->src = (struct ps_buf)PS_BUF_INIT(PS_MAX_INLINE * 3 * MAX_NAME);
	*out = z;
	return 0;
}

void
ps_symbolizer_free(struct ps_symbolizer *z)
{
	if (!z)
		return;
	if (z->dwarf_own)
		ps_dwarf_free(z->dwarf);
	else if (z->dwarf)
		shared_users--;
	while (z->npending > 0)
		ps_object_put(z->pending[--z->npending].o);
	/* The files this one alone held are let go now. */
	ps_dwarf_drop(shared_dwarf, ps_elf_file_alive);
	for (uint32_t i = 0; i < z->ncaches; i++)
		ps_symcache_put(z->caches[i].c);
	free(z->caches);
	ps_buf_free(&z->src);
	free(z);
}

/* Let go of whole[0]. */
static void
whole_drop(void)
{
	ps_object_put(whole[0].o);
	ps_symcache_put(whole[0].c);
	memmove(&whole[0], &whole[1], --nwhole * sizeof(whole[0]));
}

void
ps_symbolizer_release_shared(void)
{
	if (shared_users == 0) {
		while (nwhole > 0)
			whole_drop();
		ps_dwarf_free(shared_dwarf);
		shared_dwarf = NULL;
	}
}

int
ps_symbolizer_use_dwarf(struct ps_symbolizer *z, uint64_t mem_cap, int debuginfod)
{
	int rc;

	if (z->dwarf || mem_cap == 0)
		return 0;
	if (shared_dwarf && shared_users == 0 &&
	    (shared_cap != mem_cap || shared_debuginfod != debuginfod)) {
		ps_dwarf_free(shared_dwarf);
		shared_dwarf = NULL;
	}
	if (!shared_dwarf) {
		rc = ps_dwarf_new(&shared_dwarf, mem_cap, debuginfod);
		if (rc)
			return rc;
		shared_cap = mem_cap;
		shared_debuginfod = debuginfod;
	}
	if (shared_cap != mem_cap || shared_debuginfod != debuginfod) {
		z->dwarf_own = 1;
		return ps_dwarf_new(&z->dwarf, mem_cap, debuginfod);
	}
	z->dwarf = shared_dwarf;
	shared_users++;
	return 0;
}

int
ps_symbolizer_use_cache(struct ps_symbolizer *z, const char *dir, uint64_t cap)
{
	if (!dir || !dir[0] || cap == 0)
		return 0;
	if ((size_t)snprintf(z->cache_dir, sizeof(z->cache_dir), "%s", dir) >= sizeof(z->cache_dir)) {
		z->cache_dir[0] = '\0';
		return -ENAMETOOLONG;
	}
	z->cache_cap = cap;
	return 0;
}

void
ps_symbolizer_get_stats(const struct ps_symbolizer *z, struct ps_symbolizer_stats *st)
{
	struct ps_dwarf_stats ds = { 0 };

	*st = z->st;
	st->dwarf_over_cap = z->dwarf ? ps_dwarf_over_cap(z->dwarf) : 0;
	if (z->dwarf)
		ps_dwarf_get_stats(z->dwarf, &ds);
	st->dwarf_loaded = ds.loaded;
	st->dwarf_no_debug = ds.no_debug;
	st->dwarf_opened = ds.opened;
}

/* ---- names -------------------------------------------------------------- */

/* A function name into z->scratch, demangled when it is a C++ one and
 * __cxa_demangle is there: in the process already, else in the C++
 * runtime loaded once for it; the mangled name otherwise.  A tree's
 * helper is a copy of the tree's first program (a shell, often), not of
 * the C++ program it names, which found no __cxa_demangle and left every
 * name mangled.  (In thread mode, a pid 1 or a subreaper, this loads the
 * runtime into the program itself, as DWARF loads libdw.) */
static const char *
func_name(struct ps_symbolizer *z, const char *raw)
{
	char *d = NULL, *at;
	int status = -1;
	size_t n;
	void *dl;

	if (raw[0] == '_' && raw[1] == 'Z' && !z->demangle && !z->demangle_tried) {
		z->demangle_tried = 1;
		z->demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!z->demangle && (dl = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL)))
			z->demangle = (demangle_fn)dlsym(dl, "__cxa_demangle");
		if (!z->demangle)
			ps_info("symbols: no C++ runtime (libstdc++.so.6) to demangle names with");
	}
	if (z->demangle && raw[0] == '_' && raw[1] == 'Z')
		d = z->demangle(raw, NULL, NULL, &status);
	raw = d && status == 0 ? d : raw;
	n = strlen(raw);
	if (n >= sizeof(z->scratch))
		n = sizeof(z->scratch) - 1;
	memcpy(z->scratch, raw, n);
	z->scratch[n] = '\0';
	free(d);
	/* A .symtab names versioned definitions "name@@GLIBC_2.34": the
	 * function is "name", as in .dynsym and in every other profiler.
	 * "name@plt" (elf.c's PLT stubs) is kept. */
	at = strchr(z->scratch, '@');
	if (at && at != z->scratch && strcmp(at, "@plt") != 0)
		*at = '\0';
	return z->scratch;
}

const char *
ps_symbolize_name(struct ps_symbolizer *z, const char *raw)
{
	return func_name(z, raw);
}

/* Append str (NUL included) to z->src; its offset, or -1 when full. */
static int64_t
src_put(struct ps_symbolizer *z, const char *str)
{
	size_t off = z->src.len;

	if (ps_buf_append(&z->src, str, strlen(str) + 1) < 0)
		return -1;
	return (int64_t)off;
}

/* ---- the symbol cache --------------------------------------------------- */

/* The symbol cache of o, opened at its first look-up; NULL when there is
 * none (no cache, no build ID, the directory not usable). */
static struct ps_symcache *
object_cache(struct ps_symbolizer *z, const struct ps_object *o)
{
	const struct ps_symtab *t = o->tab;
	struct ps_symcache_stats cs;
	struct objcache *v;
	const char *why;
	uint32_t i;
	int rc, opened;

	if (!z->cache_dir[0] || t->build_id_len == 0 || t->build_id_len > sizeof(v->id))
		return NULL;
	if (!z->cache_checked) {
		z->cache_checked = 1;
		rc = ps_symcache_dir_check(z->cache_dir, &why);
		if (rc) {
			ps_info("symbol cache %s not used: %s", z->cache_dir, why);
			z->cache_dir[0] = '\0';
			return NULL;
		}
	}
	for (i = 0; i < z->ncaches; i++)
		if (z->caches[i].idlen == t->build_id_len &&
		    !memcmp(z->caches[i].id, t->build_id, t->build_id_len))
			return z->caches[i].c;
	if (z->ncaches >= MAX_CACHED_OBJECTS)
		return NULL;
	v = realloc(z->caches, (z->ncaches + 1) * sizeof(*v));
	if (!v)
		return NULL;
	z->caches = v;
	v = &v[z->ncaches];
	memcpy(v->id, t->build_id, t->build_id_len);
	v->idlen = t->build_id_len;
	v->c = NULL;
	if (ps_symcache_get(z->cache_dir, t->build_id, t->build_id_len, z->cache_cap, &v->c,
			    &opened))
		v->c = NULL;
	z->ncaches++;
	if (v->c && !opened)
		z->st.cache_shared++;
	if (v->c && opened) {
		ps_symcache_get_stats(v->c, &cs);
		z->st.cache_files += (uint32_t)cs.loaded;
		if (cs.rejected) {
			z->st.cache_rejected++;
			ps_info("symbol cache: the file for %s was not used (not this user's, "
				"corrupt, or of another build ID); it will be replaced", o->path);
		}
	}
	return v->c;
}

/* complete()'s way into the cache. */
struct fill {
	struct ps_symcache *c;
	uint64_t added;
};

static int
fill_one(void *arg, uintptr_t lo, uintptr_t hi, const struct ps_dwarf_frame *f, int n)
{
	struct fill *x = arg;
	uint64_t a = lo;
	int rc;

	/* Every gap between the ranges kept already (add cuts at the next). */
	while ((a = ps_symcache_gap(x->c, a, hi)) < hi) {
		rc = ps_symcache_add(x->c, a, hi, a, f, n);
		if (rc)
			return rc == -ENOSPC || rc == -ENOMEM;
		x->added++;
	}
	return 0;
}

/* 1 if c answers every address of sym, a sized symbol. */
static int
answered(const struct ps_symcache *c, const struct ps_sym *sym)
{
	return ps_symcache_gap(c, sym->lo, sym->lo + sym->len) == sym->lo + sym->len;
}

/* Put every answer of the function at link-time address addr of o (the
 * DWARF function within its ELF symbol's extent), read from d, into c,
 * unless c holds them all already.  Addresses are link-time ones: bias 0.
 * Returns the number of ranges added. */
static uint64_t
complete(struct ps_dwarf *d, const struct ps_object *o, uint64_t addr, struct ps_symcache *c)
{
	const struct ps_sym *sym = ps_elf_find_sym(o->tab, addr);
	struct fill x = { c, 0 };

	if (!sym || !(sym->name & PS_SYM_SIZED) || answered(c, sym))
		return 0;
	(void)ps_dwarf_function(d, o->path, ps_elf_file_id(o->tab), 0, addr, sym->lo,
				sym->lo + sym->len, PS_MAX_INLINE, fill_one, &x);
	return x.added;
}

/* Look the functions of w's object up in the shared reader from w->next
 * on, until the deadline or busy() says the caller has other work.
 * Returns 1 once every one was (the cache then marked walked, and
 * complete if every sized function is answered: DWARF had them all) or
 * it would not fit the directory (*full set); else 0. */
static int
whole_object(struct whole *w, uint64_t deadline, int (*busy)(void), uint64_t *filled, int *full)
{
	const struct ps_symtab *t = w->o->tab;
	struct ps_symcache_stats cs;
	const struct ps_sym *s;
	uint32_t i;

	for (; w->next < t->n; w->next++) {
		if (ps_clock_ns(CLOCK_MONOTONIC) >= deadline || busy())
			return 0;
		*filled += complete(shared_dwarf, w->o, t->v[w->next].lo, w->c);
		ps_symcache_get_stats(w->c, &cs);
		if (!cs.fits) {
			*full = 1;
			return 1;   /* never written: not worth the work */
		}
	}
	for (i = 0; i < t->n; i++) {
		s = &t->v[i];
		if ((s->name & PS_SYM_SIZED) && !answered(w->c, s))
			break;
	}
	ps_symcache_set_flags(w->c, PS_SYMCACHE_WALKED | (i == t->n ? PS_SYMCACHE_COMPLETE : 0));
	return 1;
}

/* Write c (ps_symcache_save), *full set if it reached its bound. */
static void
save_cache(struct ps_symcache *c, int *full)
{
	int rc = ps_symcache_save(c);

	if (rc == -ENOSPC)
		*full = 1;
	else if (rc)
		ps_debug("symbol cache not written: %s", strerror(-rc));
}

/* The objects offered, looked up whole one after the other until the
 * deadline or busy(); each written once done, and the one stopped in as
 * far as it got: a later walk skips the functions answered. */
static void
walk(uint64_t deadline, int (*busy)(void), uint64_t *filled, int *full)
{
	int done;

	while (shared_dwarf && nwhole > 0) {
		done = whole_object(&whole[0], deadline, busy, filled, full);
		save_cache(whole[0].c, full);
		if (!done)
			return;
		whole_drop();
	}
}

void
ps_symbolizer_forget_offers(void)
{
	nwhole = 0;
}

void
ps_symbolizer_walk(uint64_t ns, int (*busy)(void))
{
	uint64_t filled = 0;
	int full = 0;

	if (nwhole == 0)
		return;
	walk(ps_clock_ns(CLOCK_MONOTONIC) + ns, busy, &filled, &full);
	ps_debug("symbol cache: %llu ranges added to complete whole objects, %u objects left%s",
		 (unsigned long long)filled, nwhole, full ? ", full" : "");
}

void
ps_symbolizer_fill(struct ps_symbolizer *z, struct ps_object *o)
{
	struct ps_symcache *c;
	uint32_t i;

	if (!z->dwarf || z->dwarf != shared_dwarf || z->st.src_lookups == 0 || nwhole >= MAX_WHOLE ||
	    !o->tab->n)
		return;
	c = object_cache(z, o);
	if (!c || (ps_symcache_flags(c) & PS_SYMCACHE_WALKED))
		return;
	for (i = 0; i < nwhole; i++)
		if (whole[i].c == c)
			return;
	if (!ps_elf_dwarf_possible(o->path))
		return;
	o->refs++;
	ps_symcache_hold(c);
	whole[nwhole++] = (struct whole){ o, c, 0 };
}

void
ps_symbolizer_save(struct ps_symbolizer *z, uint64_t fill_ns, int (*busy)(void))
{
	uint64_t deadline = ps_clock_ns(CLOCK_MONOTONIC) + fill_ns;
	struct pending *p;
	uint32_t i;

	if (!z)
		return;
	while (z->npending > 0) {
		p = &z->pending[--z->npending];
		if (ps_clock_ns(CLOCK_MONOTONIC) < deadline)
			z->st.src_filled += complete(z->dwarf, p->o, p->addr, p->c);
		ps_object_put(p->o);
	}
	/* Then whole objects, each finished before the next one; what the
	 * deadline or other work leaves is for a later save. */
	if (busy)
		walk(deadline, busy, &z->st.src_filled, &z->st.cache_full);
	for (i = 0; i < z->ncaches; i++)
		save_cache(z->caches[i].c, &z->st.cache_full);
}

/* ---- frames ------------------------------------------------------------- */

/* The inlined chain at link-time address addr of o into df[0..max): from
 * the symbol cache, else from DWARF (and then kept in the cache, and the
 * function remembered for the next save to complete).  Returns the number
 * of frames, 0 when there is no line there. */
static int
chain(struct ps_symbolizer *z, struct ps_object *o, uint64_t addr, struct ps_dwarf_frame *df,
      int max)
{
	struct ps_symcache *c = object_cache(z, o);
	uintptr_t valid[2];
	uint64_t end;
	int n;

	n = c ? ps_symcache_find(c, addr, df, max, &end) : -ENOENT;
	if (n >= 0 || (c && (ps_symcache_flags(c) & PS_SYMCACHE_COMPLETE))) {
		z->st.src_cached++;
		return n > 0 ? n : 0;   /* complete: no range, no line */
	}
	z->st.src_lookups++;
	/* Link-time addresses throughout: bias 0. */
	n = ps_dwarf_lookup(z->dwarf, o->path, ps_elf_file_id(o->tab), 0, addr, df, max, valid);
	if (!c || n < 0 || valid[1] <= valid[0])
		return n < 0 ? 0 : n;
	if (ps_symcache_add(c, valid[0], valid[1], addr, df, n) == -ENOSPC)
		z->st.cache_full = 1;
	if (z->npending < MAX_PENDING) {
		o->refs++;
		z->pending[z->npending++] = (struct pending){ o, addr, c };
	}
	return n;
}

int
ps_symbolize(struct ps_symbolizer *z, struct ps_object *o, uint64_t off, unsigned flags,
	     struct ps_src_frame *out, int max)
{
	struct ps_dwarf_frame df[PS_MAX_INLINE];
	int64_t at[PS_MAX_INLINE][3], sym;
	const struct ps_sym *s;
	const char *name;
	uint64_t addr;
	int n = 0, i;

	if (!z || !o || !out || max <= 0)
		return -EINVAL;
	if (ps_elf_addr(o->tab, off, &addr) || !(s = ps_elf_find_sym(o->tab, addr)))
		return 0;
	name = func_name(z, (const char *)o->tab->names.data + (s->name & PS_SYM_OFF));
	max = max < PS_MAX_INLINE ? max : PS_MAX_INLINE;
	if ((flags & PS_FRAMES_LINES) && z->dwarf && !strstr(name, "@plt"))
		n = chain(z, o, addr, df, max);
	if (n <= 0) {
		/* The function alone: nothing to allocate. */
		out[0] = (struct ps_src_frame){ name, name, "", 0, 0 };
		return 1;
	}
	ps_buf_reset(&z->src);
	/* The symbol's name first: the inlined frames' names reuse scratch. */
	sym = src_put(z, name);
	for (i = 0; i < n; i++) {
		if (i == n - 1) {
			/* The function that holds the code: the symbol's name. */
			at[i][0] = sym;
			at[i][1] = df[i].linkage ? src_put(z, df[i].linkage) : sym;
		} else if (df[i].linkage) {
			at[i][0] = src_put(z, func_name(z, df[i].linkage));
			at[i][1] = src_put(z, df[i].linkage);
		} else {
			at[i][0] = at[i][1] = src_put(z, df[i].name);
		}
		at[i][2] = src_put(z, df[i].file);
		if (sym < 0 || at[i][0] < 0 || at[i][1] < 0 || at[i][2] < 0)
			return -ENOMEM;
	}
	/* Pointers only now: the buffer may have moved while it grew. */
	for (i = 0; i < n; i++) {
		out[i].name = (const char *)z->src.data + at[i][0];
		out[i].system_name = (const char *)z->src.data + at[i][1];
		out[i].file = (const char *)z->src.data + at[i][2];
		out[i].line = df[i].line;
		out[i].start_line = df[i].decl_line;
	}
	return n;
}
