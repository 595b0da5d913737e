/* symbols.c -- instruction pointers to names.  See symbols.h.
 *
 * Three layers, each a cache of the next:
 *
 *   IP cache     ip -> (kind, name), open addressing, load factor <= 1/2.
 *                Names live once each in a pool (interned), because the
 *                many IPs of one hot function share a name.  The table
 *                doubles up to MAX_IP_SLOTS; when that is full, or the pool
 *                reaches MAX_POOL bytes, the whole cache is emptied and
 *                refills from the layers below (counted in `flushes`).  A
 *                profile rarely has that many distinct IPs, and emptying is
 *                simpler and more predictable than any eviction order.
 *   modules      the loaded objects (modules.h).
 *   symbol table per object, read lazily from its ELF file (elf.h).
 */
#include "symbolize/symbols.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "symbolize/dwarf.h"
#include "symbolize/elf.h"
#include "symbolize/modules.h"
#include "symbolize/symcache.h"

#define MIN_IP_SLOTS  1024u
#define MAX_IP_SLOTS  (1u << 20)     /* power of two */
#define MAX_POOL      (64u << 20)    /* bytes of cached result names */
#define MAX_NAME      16384          /* one result name, NUL included */
#define MAX_CACHED_OBJECTS 256       /* objects with a symbol cache open */
#define MAX_PENDING   1024           /* functions to complete in the symbol cache */

struct ipent {
	uintptr_t ip;
	uint32_t name;          /* 1 + offset in pool; 0 marks an empty slot */
	uint32_t kind;          /* PS_SYM_FUNC or PS_SYM_UNKNOWN */
};

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

struct ps_symbols {
	uintptr_t skip_lo, skip_hi;
	struct ps_modules mods; /* owned */
	struct ipent *ips;      /* owned; nslots entries */
	uint32_t *interned;     /* owned; nslots entries: 1 + pool offset */
	uint32_t nslots, count; /* count: IPs cached */
	struct ps_buf pool;     /* cached names, cap MAX_POOL */
	demangle_fn demangle;   /* NULL until the process has a C++ runtime */
	struct ps_dwarf *dwarf; /* shared_dwarf, or owned when dwarf_own;
				 * NULL: no source lines */
	int dwarf_own;
	struct ps_buf src;      /* strings of the last ps_symbols_source */
	char region[PATH_MAX];  /* file of the last ps_symbols_mapping outside
				 * every object */
	/* The symbol caches (symcache.h) of the build IDs met: references to
	 * the process's shared ones, kept when the object is unloaded (it
	 * may come back). */
	char cache_dir[PATH_MAX]; /* "": none */
	uint64_t cache_cap;
	int cache_checked;      /* the directory was checked, once */
	struct objcache {
		uint8_t id[64];
		uint32_t idlen;
		struct ps_symcache *c;  /* owned; NULL: could not be opened */
	} *caches;              /* owned, ncaches entries */
	uint32_t ncaches;
	/* Functions where DWARF was asked: the next save looks the rest of
	 * each up, so that the next run finds every address of the function
	 * (the same code, other instructions sampled) without DWARF. */
	struct pending {
		uintptr_t ip;
		struct ps_symcache *c;
	} pending[MAX_PENDING];
	uint32_t npending;
	struct ps_symbols_stats st;
	char scratch[MAX_NAME]; /* the result being built */
};

static void cache_clear(struct ps_symbols *s);

/* The DWARF reader every ps_symbols of the process shares, so that a tree's
 * helper reads libc's DWARF once for all its programs; what it holds of a
 * file goes when the file's symbol table goes (ps_dwarf_drop).  Owned by
 * whoever holds the worker's lock, as every use of symbols is.  Made with
 * the first user's cap: a reader asked for another while it is in use gets
 * one of its own. */
static struct ps_dwarf *shared_dwarf;
static uint64_t shared_cap;
static int shared_debuginfod;
static uint32_t shared_users;

/* The module of ip; the IP cache is emptied when a re-read of the object
 * list found one gone or moved. */
static struct ps_module *
find_module(struct ps_symbols *s, uintptr_t ip)
{
	uint64_t scans = s->mods.scans;
	struct ps_module *m = ps_modules_find(&s->mods, ip);

	if (s->mods.moved) {
		s->mods.moved = 0;
		cache_clear(s);
	}
	/* A C++ runtime may have been loaded since the last walk. */
	if (!s->demangle && s->mods.scans != scans)
		s->demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
	return m;
}

/* ---- IP cache ----------------------------------------------------- */

static void
cache_clear(struct ps_symbols *s)
{
	memset(s->ips, 0, s->nslots * sizeof(*s->ips));
	memset(s->interned, 0, s->nslots * sizeof(*s->interned));
	s->count = 0;
	ps_buf_reset(&s->pool);
}

/* The slot of ip in ips[n], or the empty slot where it would go. */
static uint32_t
ip_slot(const struct ipent *ips, uint32_t n, uintptr_t ip)
{
	uint32_t i;

	for (i = ps_hash_mix(ip) & (n - 1); ips[i].name; i = (i + 1) & (n - 1))
		if (ips[i].ip == ip)
			break;
	return i;
}

/* The slot of name in the intern table in[n], or the empty slot where it
 * would go.  pool: the cached names. */
static uint32_t
name_slot(const uint32_t *in, uint32_t n, const uint8_t *pool, const char *name)
{
	uint32_t i;

	for (i = ps_hash_bytes(name, strlen(name)) & (n - 1); in[i]; i = (i + 1) & (n - 1))
		if (strcmp((const char *)pool + in[i] - 1, name) == 0)
			break;
	return i;
}

static struct ipent *
cache_find(struct ps_symbols *s, uintptr_t ip)
{
	uint32_t i = ip_slot(s->ips, s->nslots, ip);

	return s->ips[i].name ? &s->ips[i] : NULL;
}

/* Rebuild both tables with n slots.  Returns 0 or -ENOMEM (unchanged). */
static int
cache_resize(struct ps_symbols *s, uint32_t n)
{
	struct ipent *ips = calloc(n, sizeof(*ips));
	uint32_t *in = calloc(n, sizeof(*in));
	const char *name;
	uint32_t i;

	if (!ips || !in) {
		free(ips);
		free(in);
		return -ENOMEM;
	}
	/* Keys are distinct, so each lands on an empty slot. */
	for (i = 0; i < s->nslots; i++) {
		if (s->ips[i].name)
			ips[ip_slot(ips, n, s->ips[i].ip)] = s->ips[i];
		if (!s->interned[i])
			continue;
		name = (const char *)s->pool.data + s->interned[i] - 1;
		in[name_slot(in, n, s->pool.data, name)] = s->interned[i];
	}
	free(s->ips);
	free(s->interned);
	s->ips = ips;
	s->interned = in;
	s->nslots = n;
	return 0;
}

/* Offset of name in the pool, adding it if new.  There are never more
 * names than cached IPs, so the table always has an empty slot.
 * Returns the offset, -E2BIG (pool full) or -ENOMEM. */
static int64_t
intern(struct ps_symbols *s, const char *name)
{
	uint32_t i = name_slot(s->interned, s->nslots, s->pool.data, name);
	size_t off = s->pool.len;
	int rc;

	if (s->interned[i])
		return s->interned[i] - 1;
	rc = ps_buf_append(&s->pool, name, strlen(name) + 1);
	if (rc < 0)
		return rc;
	s->interned[i] = (uint32_t)off + 1;
	return (int64_t)off;
}

/* Remember ip -> (kind, name).  Failure only means it is not cached. */
static void
cache_put(struct ps_symbols *s, uintptr_t ip, const char *name, int kind)
{
	uint32_t i;
	int64_t off;

	if (2 * (s->count + 1) > s->nslots &&
	    (s->nslots >= MAX_IP_SLOTS || cache_resize(s, 2 * s->nslots) < 0)) {
		cache_clear(s);
		s->st.flushes++;
	}
	off = intern(s, name);
	if (off == -E2BIG) {
		cache_clear(s);
		s->st.flushes++;
		off = intern(s, name);
	}
	if (off < 0)
		return;
	i = ip_slot(s->ips, s->nslots, ip);
	s->ips[i].ip = ip;
	s->ips[i].name = (uint32_t)off + 1;
	s->ips[i].kind = (uint32_t)kind;
	s->count++;
}

/* ---- names -------------------------------------------------------- */

/* Copy src into dst[len], cutting it at len - 1 bytes. */
static void
copy_out(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* "prefix+0x<hex>" into s->scratch. */
static void
put_offset(struct ps_symbols *s, const char *prefix, uintptr_t v)
{
	char hex[2 * sizeof(v) + 4], *p = hex + sizeof(hex);
	size_t n;

	*--p = '\0';
	do {
		*--p = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	*--p = 'x';
	*--p = '0';
	*--p = '+';
	copy_out(s->scratch, sizeof(s->scratch) - sizeof(hex), prefix);
	n = strlen(s->scratch);
	memcpy(s->scratch + n, p, (size_t)(hex + sizeof(hex) - p));
}

/* A function name into s->scratch, demangled when it is a C++ one and the
 * process has __cxa_demangle; the mangled name otherwise. */
static void
put_func(struct ps_symbols *s, const char *raw)
{
	char *d = NULL, *at;
	int status = -1;

	if (s->demangle && raw[0] == '_' && raw[1] == 'Z')
		d = s->demangle(raw, NULL, NULL, &status);
	copy_out(s->scratch, sizeof(s->scratch), d && status == 0 ? d : raw);
	free(d);
	/* A .symtab names versioned definitions "name@@GLIBC_2.34": the
	 * function is "name", as in .dynsym and in every other profiler.
	 * "name@plt" (elf.c's PLT stubs) is kept. */
	at = strchr(s->scratch, '@');
	if (at && at != s->scratch && strcmp(at, "@plt") != 0)
		*at = '\0';
}

/* For a program this process is no copy of, only its vDSO can be named
 * through this process's dladdr: the kernel maps the same one into every
 * process, at another address.  1 if ip, in module m, was. */
static int
vdso_dladdr(const struct ps_module *m, uintptr_t ip, Dl_info *di)
{
	uintptr_t mine = (uintptr_t)getauxval(AT_SYSINFO_EHDR);

	return mine && strcmp(m->shown, "[vdso]") == 0 &&
	       dladdr((void *)(mine + (ip - m->lo)), di) && di->dli_sname && di->dli_saddr;
}

static int
load_module(struct ps_symbols *s, struct ps_module *m)
{
	int rc;

	rc = ps_elf_get(m->path, m->phdr, m->phnum, &m->tab);
	if (rc == 0)
		s->st.shared++;
	else
		s->st.files++;
	/* Out of memory is not the file's fault: read it again next time. */
	m->state = rc >= 0 ? PS_MOD_READY : rc == -ENOMEM ? PS_MOD_NEW : PS_MOD_NOFILE;
	return rc == -ENOMEM ? rc : 0;
}

/* Name ip, which m contains, into s->scratch.  Returns PS_SYM_*, or
 * -ENOMEM when the object's symbols could not be read for want of memory
 * (nothing is cached then, so a later look-up tries again). */
static int
resolve(struct ps_symbols *s, struct ps_module *m, uintptr_t ip)
{
	const struct ps_sym *sym;
	Dl_info di;

	if (m->state == PS_MOD_NEW && load_module(s, m))
		return -ENOMEM;
	if (m->state == PS_MOD_READY) {
		sym = ps_elf_find_sym(m->tab, ip - m->bias);
		if (sym) {
			put_func(s, (char *)m->tab->names.data + (sym->name & PS_SYM_OFF));
			return PS_SYM_FUNC;
		}
	} else if (s->mods.only ? vdso_dladdr(m, ip, &di) :
		   (dladdr((void *)ip, &di) && di.dli_sname && di.dli_saddr)) {
		put_func(s, di.dli_sname);
		return PS_SYM_FUNC;
	}
	put_offset(s, m->base, ip - m->bias);
	return PS_SYM_UNKNOWN;
}

/* Name ip, which m contains, into s->scratch through the IP cache.
 * Returns PS_SYM_*. */
static int
resolve_cached(struct ps_symbols *s, struct ps_module *m, uintptr_t ip)
{
	const struct ipent *e = cache_find(s, ip);
	int kind;

	if (e) {
		s->st.cache_hits++;
		copy_out(s->scratch, sizeof(s->scratch), (char *)s->pool.data + e->name - 1);
		return (int)e->kind;
	}
	kind = resolve(s, m, ip);
	if (kind >= 0)
		cache_put(s, ip, s->scratch, kind);
	return kind;
}

/* ---- public ------------------------------------------------------- */

int
ps_symbols_new(struct ps_symbols **out, uintptr_t skip_lo, uintptr_t skip_hi)
{
	struct ps_symbols *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->skip_lo = skip_lo;
	s->skip_hi = skip_hi;
	s->mods.stale = 1;
	s->pool = (struct ps_buf)PS_BUF_INIT(MAX_POOL);
	s->src = (struct ps_buf)PS_BUF_INIT(PS_MAX_INLINE * 3 * MAX_NAME);
	if (cache_resize(s, MIN_IP_SLOTS) < 0) {
		free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void
ps_symbols_watch(struct ps_symbols *s, pid_t pid, int only, const struct ps_maps_left *left)
{
	s->mods.watched = pid;
	if (left)
		s->mods.left = *left;
	s->mods.only = only;
	s->mods.stale = 1;
}

void
ps_symbols_free(struct ps_symbols *s)
{
	if (!s)
		return;
	ps_modules_free(&s->mods);
	if (s->dwarf_own)
		ps_dwarf_free(s->dwarf);
	else if (s->dwarf)
		shared_users--;
	/* The files this one alone held are let go now. */
	ps_dwarf_drop(shared_dwarf, ps_elf_file_alive);
	for (uint32_t i = 0; i < s->ncaches; i++)
		ps_symcache_put(s->caches[i].c);
	free(s->caches);
	ps_buf_free(&s->src);
	free(s->ips);
	free(s->interned);
	ps_buf_free(&s->pool);
	free(s);
}

int
ps_symbols_lookup(struct ps_symbols *s, uintptr_t ip, char *buf, size_t len)
{
	const struct ipent *e;
	struct ps_module *m;
	int kind;

	if (!s || !buf || !len)
		return -EINVAL;
	s->st.lookups++;
	if (ip >= s->skip_lo && ip < s->skip_hi) {
		copy_out(buf, len, "[pyroshim]");
		return PS_SYM_SHIM;
	}
	e = cache_find(s, ip);
	if (e) {
		s->st.cache_hits++;
		copy_out(buf, len, (char *)s->pool.data + e->name - 1);
		return (int)e->kind;
	}
	m = find_module(s, ip);
	if (!m && s->mods.err)
		return s->mods.err;     /* the object list is incomplete */
	if (!m) {
		/* Not cached: a later rescan may find an object for it. */
		put_offset(s, "[unknown]", ip);
		copy_out(buf, len, s->scratch);
		return PS_SYM_UNKNOWN;
	}
	kind = resolve_cached(s, m, ip);
	copy_out(buf, len, s->scratch);
	return kind;
}

void
ps_symbols_release_shared(void)
{
	if (shared_users == 0) {
		ps_dwarf_free(shared_dwarf);
		shared_dwarf = NULL;
	}
}

void
ps_symbols_learn(struct ps_symbols *s)
{
	if (s)
		(void)ps_modules_scan(&s->mods);
}

void
ps_symbols_invalidate(struct ps_symbols *s)
{
	if (!s)
		return;
	cache_clear(s);
	s->mods.stale = 1;
}

void
ps_symbols_get_stats(const struct ps_symbols *s, struct ps_symbols_stats *st)
{
	struct ps_dwarf_stats ds = { 0 };

	*st = s->st;
	st->dwarf_over_cap = s->dwarf ? ps_dwarf_over_cap(s->dwarf) : 0;
	if (s->dwarf)
		ps_dwarf_get_stats(s->dwarf, &ds);
	st->dwarf_loaded = ds.loaded;
	st->dwarf_no_debug = ds.no_debug;
	st->dwarf_opened = ds.opened;
	st->modules = s->mods.n;
	st->scans = s->mods.scans;
	st->cached = s->count;
}

int
ps_symbols_use_dwarf(struct ps_symbols *s, uint64_t mem_cap, int debuginfod)
{
	int rc;

	if (s->dwarf || mem_cap == 0)
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
		s->dwarf_own = 1;
		return ps_dwarf_new(&s->dwarf, mem_cap, debuginfod);
	}
	s->dwarf = shared_dwarf;
	shared_users++;
	return 0;
}

int
ps_symbols_use_cache(struct ps_symbols *s, const char *dir, uint64_t cap)
{
	if (!dir || !dir[0] || cap == 0)
		return 0;
	if ((size_t)snprintf(s->cache_dir, sizeof(s->cache_dir), "%s", dir) >= sizeof(s->cache_dir)) {
		s->cache_dir[0] = '\0';
		return -ENAMETOOLONG;
	}
	s->cache_cap = cap;
	return 0;
}

/* The symbol cache of m's object, opened at its first look-up; NULL when
 * there is none (no cache, no build ID, the directory not usable). */
static struct ps_symcache *
object_cache(struct ps_symbols *s, const struct ps_module *m)
{
	const struct ps_symtab *t = m->tab;
	struct ps_symcache_stats cs;
	struct objcache *v;
	const char *why;
	uint32_t i;
	int rc, opened;

	if (!s->cache_dir[0] || m->state != PS_MOD_READY || t->build_id_len == 0 ||
	    t->build_id_len > sizeof(v->id))
		return NULL;
	if (!s->cache_checked) {
		s->cache_checked = 1;
		rc = ps_symcache_dir_check(s->cache_dir, &why);
		if (rc) {
			ps_info("symbol cache %s not used: %s", s->cache_dir, why);
			s->cache_dir[0] = '\0';
			return NULL;
		}
	}
	for (i = 0; i < s->ncaches; i++)
		if (s->caches[i].idlen == t->build_id_len &&
		    !memcmp(s->caches[i].id, t->build_id, t->build_id_len))
			return s->caches[i].c;
	if (s->ncaches >= MAX_CACHED_OBJECTS)
		return NULL;
	v = realloc(s->caches, (s->ncaches + 1) * sizeof(*v));
	if (!v)
		return NULL;
	s->caches = v;
	v = &v[s->ncaches];
	memcpy(v->id, t->build_id, t->build_id_len);
	v->idlen = t->build_id_len;
	v->c = NULL;
	if (ps_symcache_get(s->cache_dir, t->build_id, t->build_id_len, s->cache_cap, &v->c,
			    &opened))
		v->c = NULL;
	s->ncaches++;
	if (v->c && !opened)
		s->st.cache_shared++;
	if (v->c && opened) {
		ps_symcache_get_stats(v->c, &cs);
		s->st.cache_files += (uint32_t)cs.loaded;
		if (cs.rejected) {
			s->st.cache_rejected++;
			ps_info("symbol cache: the file for %s was not used (not this user's, "
				"corrupt, or of another build ID); it will be replaced", m->shown);
		}
	}
	return v->c;
}

/* complete()'s way into the cache. */
struct fill {
	struct ps_symcache *c;
	uintptr_t bias;
	uint64_t added;
};

static int
fill_one(void *arg, uintptr_t lo, uintptr_t hi, const struct ps_dwarf_frame *f, int n)
{
	struct fill *x = arg;
	uint64_t a = lo - x->bias, end = hi - x->bias;
	int rc;

	/* Every gap between the ranges kept already (add cuts at the next). */
	while ((a = ps_symcache_gap(x->c, a, end)) < end) {
		rc = ps_symcache_add(x->c, a, end, a, f, n);
		if (rc)
			return rc == -ENOSPC || rc == -ENOMEM;
		x->added++;
	}
	return 0;
}

/* Put every answer of the function at ip (the DWARF function within its
 * ELF symbol's extent) into c, unless c holds them all already. */
static void
complete(struct ps_symbols *s, uintptr_t ip, struct ps_symcache *c)
{
	struct ps_module *m = find_module(s, ip);
	struct fill x = { c, 0, 0 };
	const struct ps_sym *sym;

	if (!m || m->state != PS_MOD_READY || object_cache(s, m) != c)
		return;
	sym = ps_elf_find_sym(m->tab, ip - m->bias);
	if (!sym || !(sym->name & PS_SYM_SIZED) ||
	    ps_symcache_gap(c, sym->lo, sym->lo + sym->len) == sym->lo + sym->len)
		return;
	x.bias = m->bias;
	(void)ps_dwarf_function(s->dwarf, m->path, ps_elf_file_id(m->tab), m->bias, ip,
				m->bias + sym->lo, m->bias + sym->lo + sym->len, PS_MAX_INLINE,
				fill_one, &x);
	s->st.src_filled += x.added;
}

void
ps_symbols_save(struct ps_symbols *s, uint64_t fill_ns)
{
	uint64_t deadline = ps_clock_ns(CLOCK_MONOTONIC) + fill_ns;
	uint32_t i;
	int rc;

	if (!s)
		return;
	while (s->npending > 0 && ps_clock_ns(CLOCK_MONOTONIC) < deadline) {
		s->npending--;
		complete(s, s->pending[s->npending].ip, s->pending[s->npending].c);
	}
	for (i = 0; i < s->ncaches; i++) {
		rc = ps_symcache_save(s->caches[i].c);
		if (rc == -ENOSPC)
			s->st.cache_full = 1;
		else if (rc)
			ps_debug("symbol cache not written: %s", strerror(-rc));
	}
}

/* Append str (NUL included) to s->src; its offset, or -1 when full. */
static int64_t
src_put(struct ps_symbols *s, const char *str)
{
	size_t off = s->src.len;

	if (ps_buf_append(&s->src, str, strlen(str) + 1) < 0)
		return -1;
	return (int64_t)off;
}

/* A DWARF frame's names into s->src: demangled name, system name. */
static void
src_names(struct ps_symbols *s, const struct ps_dwarf_frame *df, int64_t *name, int64_t *sys)
{
	if (df->linkage) {
		put_func(s, df->linkage);
		*name = src_put(s, s->scratch);
		*sys = src_put(s, df->linkage);
	} else {
		*name = *sys = src_put(s, df->name);
	}
}

int
ps_symbols_source(struct ps_symbols *s, uintptr_t ip, struct ps_src_frame *out, int max)
{
	struct ps_dwarf_frame df[PS_MAX_INLINE];
	int64_t off[PS_MAX_INLINE][3], sym;
	struct ps_symcache *c;
	struct ps_module *m;
	uintptr_t valid[2];
	uint64_t end;
	int n, i;

	if (!s || !out || max <= 0)
		return -EINVAL;
	if (!s->dwarf || (ip >= s->skip_lo && ip < s->skip_hi))
		return 0;
	m = find_module(s, ip);
	/* Only code that a symbol names: elsewhere (PLT stubs included)
	 * libdw may answer with the nearest line of some other function. */
	if (!m || !m->path || resolve_cached(s, m, ip) != PS_SYM_FUNC || strstr(s->scratch, "@plt"))
		return 0;
	/* The symbol's name now: the inlined frames' names reuse scratch. */
	ps_buf_reset(&s->src);
	sym = src_put(s, s->scratch);
	max = max < PS_MAX_INLINE ? max : PS_MAX_INLINE;
	c = object_cache(s, m);
	n = c ? ps_symcache_find(c, ip - m->bias, df, max, &end) : -ENOENT;
	if (n >= 0) {
		s->st.src_cached++;
	} else {
		s->st.src_lookups++;
		n = ps_dwarf_lookup(s->dwarf, m->path, ps_elf_file_id(m->tab), m->bias, ip, df, max,
				    valid);
		if (c && valid[1] > valid[0] && n >= 0 &&
		    ps_symcache_add(c, valid[0] - m->bias, valid[1] - m->bias, ip - m->bias, df, n) == -ENOSPC)
			s->st.cache_full = 1;
		if (c && n >= 0 && valid[1] > valid[0] && s->npending < MAX_PENDING)
			s->pending[s->npending++] = (struct pending){ ip, c };
	}
	if (n <= 0 || sym < 0)
		return n < 0 ? n : 0;
	for (i = 0; i < n; i++) {
		if (i == n - 1) {
			/* The function that holds the code: the symbol's name. */
			off[i][0] = sym;
			off[i][1] = df[i].linkage ? src_put(s, df[i].linkage) : sym;
		} else {
			src_names(s, &df[i], &off[i][0], &off[i][1]);
		}
		off[i][2] = src_put(s, df[i].file);
		if (off[i][0] < 0 || off[i][1] < 0 || off[i][2] < 0)
			return 0;
	}
	/* Pointers only now: the buffer may have moved while it grew. */
	for (i = 0; i < n; i++) {
		out[i].name = (const char *)s->src.data + off[i][0];
		out[i].system_name = (const char *)s->src.data + off[i][1];
		out[i].file = (const char *)s->src.data + off[i][2];
		out[i].line = df[i].line;
		out[i].start_line = df[i].decl_line;
	}
	return n;
}

int
ps_symbols_mapping(struct ps_symbols *s, uintptr_t ip, struct ps_map_info *out)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo;
	const ElfW(Phdr) *ph;
	struct ps_module *m;
	uint32_t i;

	if (!s || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	m = find_module(s, ip);
	if (!m && s->mods.err)
		return s->mods.err;
	if (!m) {
		/* JIT code or anonymous memory: the region it is in. */
		out->file = s->region;
		return ps_modules_region(&s->mods, ip, &out->start, &out->limit, &out->offset, s->region,
					 sizeof(s->region));
	}
	if (m->state == PS_MOD_NEW && load_module(s, m))
		return -ENOMEM;
	out->start = m->lo;
	out->limit = m->hi;
	for (i = 0; m->phdr && i < m->phnum; i++) {
		ph = &m->phdr[i];
		lo = m->bias + ph->p_vaddr;
		if (ph->p_type != PT_LOAD || ip < lo || ip - lo >= ph->p_memsz)
			continue;
		out->start = lo & ~(page - 1);
		out->limit = (lo + ph->p_memsz + page - 1) & ~(page - 1);
		out->offset = ph->p_offset & ~(uint64_t)(page - 1);
		break;
	}
	out->file = m->shown;
	/* The vDSO is named through dladdr; a file by its symbol table. */
	out->has_functions = m->state == PS_MOD_READY ? m->tab->n > 0 : 1;
	for (i = 0; m->tab && i < m->tab->build_id_len; i++)
		snprintf(out->build_id + 2 * i, 3, "%02x", m->tab->build_id[i]);
	return 0;
}
