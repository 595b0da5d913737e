/* symbols.c -- instruction pointers to names.  See symbols.h.
 *
 * Two layers here, each a cache of the next, over the object side
 * (symbolizer.h):
 *
 *   IP cache     ip -> (kind, name), open addressing, load factor <= 1/2.
 *                Names live once each in a pool (interned), because the
 *                many IPs of one hot function share a name.  The table
 *                doubles up to MAX_IP_SLOTS; when that is full, or the pool
 *                reaches MAX_POOL bytes, the whole cache is emptied and
 *                refills from the layers below (counted in `flushes`).  A
 *                profile rarely has that many distinct IPs, and emptying is
 *                simpler and more predictable than any eviction order.
 *   modules      the loaded objects (modules.h), each with its file's
 *                ps_object got at the first look-up in it; an address
 *                becomes a file offset through the loaded image's own
 *                program headers.
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
#include "common/hash.h"
#include "symbolize/modules.h"

#define MIN_IP_SLOTS  1024u
#define MAX_IP_SLOTS  (1u << 20)     /* power of two */
#define MAX_POOL      (64u << 20)    /* bytes of cached result names */
#define MAX_NAME      16384          /* one result name, NUL included */

struct ipent {
	uintptr_t ip;
	uint32_t name;          /* 1 + offset in pool; 0 marks an empty slot */
	uint32_t kind;          /* PS_SYM_FUNC or PS_SYM_UNKNOWN */
};

struct ps_symbols {
	uintptr_t skip_lo, skip_hi;
	struct ps_modules mods; /* owned */
	struct ps_symbolizer *z; /* owned: the object side */
	struct ipent *ips;      /* owned; nslots entries */
	uint32_t *interned;     /* owned; nslots entries: 1 + pool offset */
	uint32_t nslots, count; /* count: IPs cached */
	struct ps_buf pool;     /* cached names, cap MAX_POOL */
	char region[PATH_MAX];  /* file of the last ps_symbols_mapping outside
				 * every object */
	struct ps_symbols_stats st;
	char scratch[MAX_NAME]; /* the result being built */
};

static void cache_clear(struct ps_symbols *s);

/* The module of ip; the IP cache is emptied when a re-read of the object
 * list found one gone or moved. */
static struct ps_module *
find_module(struct ps_symbols *s, uintptr_t ip)
{
	struct ps_module *m = ps_modules_find(&s->mods, ip);

	if (s->mods.moved) {
		s->mods.moved = 0;
		cache_clear(s);
	}
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

	rc = ps_object_get(m->path, m->phdr, m->phnum, &m->obj);
	if (rc == 0)
		s->st.shared++;
	else
		s->st.files++;
	/* Out of memory is not the file's fault: read it again next time. */
	m->state = rc >= 0 ? PS_MOD_READY : rc == -ENOMEM ? PS_MOD_NEW : PS_MOD_NOFILE;
	return rc == -ENOMEM ? rc : 0;
}

/* The PT_LOAD segment of m that holds ip, or NULL (in none, or m has no
 * program headers). */
static const ElfW(Phdr) *
load_segment(const struct ps_module *m, uintptr_t ip)
{
	uintptr_t a = ip - m->bias;
	uint32_t i;

	for (i = 0; m->phdr && i < m->phnum; i++)
		if (m->phdr[i].p_type == PT_LOAD && a >= m->phdr[i].p_vaddr &&
		    a - m->phdr[i].p_vaddr < m->phdr[i].p_memsz)
			return &m->phdr[i];
	return NULL;
}

/* The file offset of ip, which m contains: its place in the loaded
 * segment that holds it.  Returns 0 and sets *off, or -ENOENT. */
static int
file_offset(const struct ps_module *m, uintptr_t ip, uint64_t *off)
{
	const ElfW(Phdr) *ph = load_segment(m, ip);

	if (!ph)
		return -ENOENT;
	*off = ph->p_offset + (ip - m->bias - ph->p_vaddr);
	return 0;
}

/* Name ip, which m contains, into s->scratch.  Returns PS_SYM_*, or
 * -ENOMEM when the object's symbols could not be read for want of memory
 * (nothing is cached then, so a later look-up tries again). */
static int
resolve(struct ps_symbols *s, struct ps_module *m, uintptr_t ip)
{
	struct ps_src_frame f;
	uint64_t off;
	Dl_info di;

	if (m->state == PS_MOD_NEW && load_module(s, m))
		return -ENOMEM;
	if (m->state == PS_MOD_READY) {
		if (file_offset(m, ip, &off) == 0 && ps_symbolize(s->z, m->obj, off, 0, &f, 1) > 0) {
			copy_out(s->scratch, sizeof(s->scratch), f.name);
			return PS_SYM_FUNC;
		}
	} else if (s->mods.only ? vdso_dladdr(m, ip, &di) :
		   (dladdr((void *)ip, &di) && di.dli_sname && di.dli_saddr)) {
		copy_out(s->scratch, sizeof(s->scratch), ps_symbolize_name(s->z, di.dli_sname));
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
	if (ps_symbolizer_new(&s->z) < 0 || cache_resize(s, MIN_IP_SLOTS) < 0) {
		ps_symbolizer_free(s->z);
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
	ps_symbolizer_free(s->z);
	free(s->ips);
	free(s->interned);
	ps_buf_free(&s->pool);
	free(s);
}

struct ps_symbolizer *
ps_symbols_symbolizer(struct ps_symbols *s)
{
	return s->z;
}

void
ps_symbols_save(struct ps_symbols *s, uint64_t fill_ns, int (*busy)(void))
{
	struct ps_symbolizer_stats st;
	struct ps_module *m;
	uint32_t i;

	if (!s)
		return;
	/* Once DWARF was asked, every object a sample of the program landed
	 * in (its file read: PS_MOD_READY) is offered to be looked up whole,
	 * by whichever save may take the time: a later run then opens no
	 * DWARF for any code of it.  Not the objects no sample met: the
	 * shim's own dependencies (libunwind, liblzma; the helper's libdw)
	 * are among them, and are not the program's. */
	ps_symbolizer_get_stats(s->z, &st);
	for (i = 0; st.src_lookups && i < s->mods.n; i++) {
		m = &s->mods.v[i];
		if (m->state == PS_MOD_READY && !(m->lo < s->skip_hi && m->hi > s->skip_lo))
			ps_symbolizer_fill(s->z, m->obj);
	}
	ps_symbolizer_save(s->z, fill_ns, busy);
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
ps_symbols_learn(struct ps_symbols *s)
{
	/* Once: a session's first look-up (its entry point's mapping, when
	 * the fold is made) reads the list already, and each read makes the
	 * kernel print the whole of /proc/PID/maps. */
	if (s && s->mods.scans == 0)
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
	*st = s->st;
	ps_symbolizer_get_stats(s->z, &st->obj);
	st->modules = s->mods.n;
	st->scans = s->mods.scans;
	st->cached = s->count;
}

int
ps_symbols_source(struct ps_symbols *s, uintptr_t ip, struct ps_src_frame *out, int max)
{
	struct ps_module *m;
	uint64_t off;
	int n;

	if (!s || !out || max <= 0)
		return -EINVAL;
	if (ip >= s->skip_lo && ip < s->skip_hi)
		return 0;
	m = find_module(s, ip);
	if (!m || (m->state == PS_MOD_NEW && load_module(s, m)) || m->state != PS_MOD_READY ||
	    file_offset(m, ip, &off))
		return 0;
	n = ps_symbolize(s->z, m->obj, off, PS_FRAMES_LINES, out, max);
	/* The function alone is what ps_symbols_lookup said already. */
	return n == 1 && !out[0].file[0] && !out[0].line ? 0 : n > 0 ? n : 0;
}

int
ps_symbols_mapping(struct ps_symbols *s, uintptr_t ip, struct ps_map_info *out)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo;
	const ElfW(Phdr) *ph;
	struct ps_module *m;
	const uint8_t *id;
	uint32_t i, idlen;

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
	ph = load_segment(m, ip);
	if (ph) {
		lo = m->bias + ph->p_vaddr;
		out->start = lo & ~(page - 1);
		out->limit = (lo + ph->p_memsz + page - 1) & ~(page - 1);
		out->offset = ph->p_offset & ~(uint64_t)(page - 1);
	}
	out->file = m->shown;
	/* The vDSO is named through dladdr; a file by its symbol table. */
	out->has_functions = m->state == PS_MOD_READY ? ps_object_has_functions(m->obj) : 1;
	idlen = m->state == PS_MOD_READY ? ps_object_build_id(m->obj, &id) : 0;
	for (i = 0; i < idlen; i++)
		snprintf(out->build_id + 2 * i, 3, "%02x", id[i]);
	return 0;
}
