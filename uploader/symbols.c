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
 *   modules      the loaded objects from dl_iterate_phdr, sorted by address.
 *                Re-read when an IP falls in none of them, at most once per
 *                RESCAN_NS unless invalidated.  A rescan keeps the symbol
 *                tables of objects still loaded at the same place, so a
 *                dlopen storm does not make libc's table be parsed again.
 *   symbol table per object, read lazily from its ELF file: function
 *                symbols sorted by address, one per address (the best of
 *                its aliases), names copied out so that the file is
 *                unmapped right after parsing.
 *
 * The ELF file may be truncated, hostile or not the one that is loaded:
 * every offset, size, index and string read from it is bounds-checked, and
 * its program headers must match the loaded image's or the object is asked
 * through dladdr instead.  Still not covered: a file truncated in place
 * while it is mapped here raises SIGBUS (as it would in the program itself).
 */
#include "uploader/symbols.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"

#define MAX_MODULES   4096           /* objects tracked; more are ignored */
#define MAX_PHDRS     128            /* program headers copied per object */
#define MAX_SECTIONS  (1u << 20)     /* section headers accepted per file */
#define MAX_SYMS      (4u << 20)     /* function symbols kept per object */
#define MAX_SYMNAMES  (256u << 20)   /* bytes of symbol names per object */
#define MIN_IP_SLOTS  1024u
#define MAX_IP_SLOTS  (1u << 20)     /* power of two */
#define MAX_POOL      (64u << 20)    /* bytes of cached result names */
#define MAX_NAME      16384          /* one result name, NUL included */
#define BACKSCAN      8              /* earlier symbols tried for a cover */
#define RESCAN_NS     1000000000ull

/* struct sym.name: two ranking flags above the offset of the name. */
#define SYM_SIZED   0x80000000u      /* st_size > 0 */
#define SYM_GLOBAL  0x40000000u      /* binding is not STB_LOCAL */
#define SYM_OFF     0x3fffffffu

#if __ELF_NATIVE_CLASS == 64
#define NATIVE_CLASS ELFCLASS64
#else
#define NATIVE_CLASS ELFCLASS32
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_DATA ELFDATA2LSB
#else
#define NATIVE_DATA ELFDATA2MSB
#endif

struct sym {
	uint64_t lo;    /* st_value: link-time address */
	uint32_t len;   /* st_size; if unsized, bytes to the end of its section */
	uint32_t name;  /* SYM_* flags | offset in symtab.names */
};

struct symtab {
	struct sym *v;          /* owned; sorted by lo, one entry per lo */
	uint32_t n, alloc;
	struct ps_buf names;    /* NUL-terminated names, cap MAX_SYMNAMES */
};

enum { MOD_NEW = 0, MOD_READY = 1, MOD_NOFILE = 2 };

struct module {
	uintptr_t lo, hi;       /* absolute range of the PT_LOAD segments */
	uintptr_t bias;         /* dlpi_addr: runtime - link-time address */
	char *path;             /* owned; file to read, NULL if none */
	char *base;             /* owned; shown in "base+0xoff" */
	ElfW(Phdr) *phdr;       /* owned copy; NULL: do not check the file */
	uint32_t phnum;
	int state;              /* MOD_*; tab is filled when MOD_READY */
	struct symtab tab;
};

struct ipent {
	uintptr_t ip;
	uint32_t name;          /* 1 + offset in pool; 0 marks an empty slot */
	uint32_t kind;          /* PS_SYM_FUNC or PS_SYM_UNKNOWN */
};

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

struct ps_symbols {
	uintptr_t skip_lo, skip_hi;
	struct module *mods;    /* owned; nmods entries sorted by lo */
	uint32_t nmods;
	int stale;              /* re-read the object list at the next miss */
	uint64_t last_scan;     /* CLOCK_MONOTONIC ns of the last scan */
	struct ipent *ips;      /* owned; nslots entries */
	uint32_t *interned;     /* owned; nslots entries: 1 + pool offset */
	uint32_t nslots, count; /* count: IPs cached */
	struct ps_buf pool;     /* cached names, cap MAX_POOL */
	demangle_fn demangle;   /* NULL until the process has a C++ runtime */
	struct ps_symbols_stats st;
	char scratch[MAX_NAME]; /* the result being built */
};

/* ---- ELF files ---------------------------------------------------- */

struct elf {
	const uint8_t *p;       /* the mapped file */
	size_t size;
	const ElfW(Shdr) *sh;   /* shnum validated section headers */
	size_t shnum;
};

static int
in_file(const struct elf *e, uint64_t off, uint64_t len, size_t align)
{
	return off <= e->size && len <= e->size - off && off % align == 0;
}

static int
elf_open(struct elf *e)
{
	const ElfW(Ehdr) *eh = (const void *)e->p;

	if (e->size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	if (eh->e_ident[EI_CLASS] != NATIVE_CLASS || eh->e_ident[EI_DATA] != NATIVE_DATA)
		return -ENOEXEC;
	if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
	    !in_file(e, eh->e_shoff, sizeof(ElfW(Shdr)), _Alignof(ElfW(Shdr))))
		return -ENOEXEC;
	e->sh = (const void *)(e->p + eh->e_shoff);
	/* With 0xff00 sections or more, the count is in section 0. */
	e->shnum = eh->e_shnum ? eh->e_shnum : e->sh[0].sh_size;
	if (e->shnum == 0 || e->shnum > MAX_SECTIONS ||
	    !in_file(e, eh->e_shoff, e->shnum * sizeof(ElfW(Shdr)), 1))
		return -ENOEXEC;
	return 0;
}

/* The file must describe the loaded image: same PT_LOAD segments. */
static int
phdrs_match(const struct elf *e, const ElfW(Phdr) *mem, uint32_t n)
{
	const ElfW(Ehdr) *eh = (const void *)e->p;
	const ElfW(Phdr) *f;
	uint32_t i;

	if (!mem)
		return 0;
	if (eh->e_phentsize != sizeof(*f) || eh->e_phnum != n ||
	    !in_file(e, eh->e_phoff, (uint64_t)n * sizeof(*f), _Alignof(ElfW(Phdr))))
		return -ESTALE;
	f = (const void *)(e->p + eh->e_phoff);
	for (i = 0; i < n; i++) {
		if (mem[i].p_type != f[i].p_type)
			return -ESTALE;
		if (f[i].p_type == PT_LOAD && (mem[i].p_vaddr != f[i].p_vaddr ||
		    mem[i].p_memsz != f[i].p_memsz || mem[i].p_offset != f[i].p_offset))
			return -ESTALE;
	}
	return 0;
}

static const ElfW(Shdr) *
find_section(const struct elf *e, uint32_t type)
{
	size_t i;

	for (i = 0; i < e->shnum; i++)
		if (e->sh[i].sh_type == type)
			return &e->sh[i];
	return NULL;
}

/* The NUL-terminated name at off in string section strs, or NULL. */
static const char *
str_at(const struct elf *e, const ElfW(Shdr) *strs, uint64_t off)
{
	const char *p;

	if (off >= strs->sh_size)
		return NULL;
	p = (const char *)e->p + strs->sh_offset + off;
	return memchr(p, 0, strs->sh_size - off) ? p : NULL;
}

/* Is s a function (or a code label, for the unsized fallback) inside an
 * executable section?  Sets *room to the bytes from it to the section end. */
static int
is_code(const struct elf *e, const ElfW(Sym) *s, uint64_t *room)
{
	int type = ELF64_ST_TYPE(s->st_info);
	const ElfW(Shdr) *sec;

	if (type != STT_FUNC && type != STT_GNU_IFUNC && (type != STT_NOTYPE || s->st_size))
		return 0;
	if (s->st_shndx == SHN_UNDEF || s->st_shndx >= SHN_LORESERVE || s->st_shndx >= e->shnum)
		return 0;
	sec = &e->sh[s->st_shndx];
	if (!(sec->sh_flags & SHF_EXECINSTR) || s->st_value < sec->sh_addr ||
	    s->st_value - sec->sh_addr >= sec->sh_size)
		return 0;
	*room = sec->sh_size - (s->st_value - sec->sh_addr);
	return 1;
}

static int
push_sym(struct symtab *t, uint64_t lo, uint64_t len, uint32_t flags, const char *name)
{
	size_t off = t->names.len;
	struct sym *v;
	uint32_t na;
	int rc;

	if (t->n == t->alloc) {
		na = t->alloc ? 2 * t->alloc : 1024;
		v = realloc(t->v, (size_t)na * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->alloc = na;
	}
	rc = ps_buf_append(&t->names, name, strlen(name) + 1);
	if (rc < 0)
		return rc;
	t->v[t->n].lo = lo;
	t->v[t->n].len = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
	t->v[t->n].name = flags | (uint32_t)off;
	t->n++;
	return 0;
}

/* Add the function symbols of symbol section ss.  A malformed section adds
 * nothing; -E2BIG (name bytes cap) stops quietly.  Returns 0 or -ENOMEM. */
static int
collect(const struct elf *e, const ElfW(Shdr) *ss, struct symtab *t)
{
	const ElfW(Shdr) *strs;
	const ElfW(Sym) *sym;
	const char *name;
	uint64_t room;
	size_t i, n;
	int rc;

	if (!ss || ss->sh_entsize != sizeof(*sym) || ss->sh_link >= e->shnum ||
	    !in_file(e, ss->sh_offset, ss->sh_size, _Alignof(ElfW(Sym))))
		return 0;
	strs = &e->sh[ss->sh_link];
	if (strs->sh_type != SHT_STRTAB || !in_file(e, strs->sh_offset, strs->sh_size, 1))
		return 0;
	sym = (const void *)(e->p + ss->sh_offset);
	n = ss->sh_size / sizeof(*sym);
	for (i = 1; i < n && t->n < MAX_SYMS; i++) {
		if (!is_code(e, &sym[i], &room))
			continue;
		name = str_at(e, strs, sym[i].st_name);
		/* "$x"/"$d": ARM mapping symbols, not functions. */
		if (!name || !name[0] || name[0] == '$')
			continue;
		rc = push_sym(t, sym[i].st_value, sym[i].st_size ? sym[i].st_size : room,
			      (sym[i].st_size ? SYM_SIZED : 0) |
			      (ELF64_ST_BIND(sym[i].st_info) != STB_LOCAL ? SYM_GLOBAL : 0), name);
		if (rc == -E2BIG)
			return 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static size_t
underscores(const char *s)
{
	size_t n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

/* By address; among aliases the best first: sized, then global, then fewer
 * leading underscores ("malloc" over "__libc_malloc"), then table order. */
static int
cmp_sym(const void *pa, const void *pb, void *names)
{
	const struct sym *a = pa, *b = pb;
	uint32_t fa = a->name & ~SYM_OFF, fb = b->name & ~SYM_OFF;
	size_t ua, ub;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	if (fa != fb)
		return fa > fb ? -1 : 1;
	ua = underscores((const char *)names + (a->name & SYM_OFF));
	ub = underscores((const char *)names + (b->name & SYM_OFF));
	if (ua != ub)
		return ua < ub ? -1 : 1;
	if ((a->name & SYM_OFF) != (b->name & SYM_OFF))
		return (a->name & SYM_OFF) < (b->name & SYM_OFF) ? -1 : 1;
	return 0;
}

static void
sort_syms(struct symtab *t)
{
	struct sym *v;
	uint32_t i, n = 0;

	if (!t->n)
		return;
	qsort_r(t->v, t->n, sizeof(*t->v), cmp_sym, t->names.data);
	for (i = 0; i < t->n; i++)
		if (n == 0 || t->v[i].lo != t->v[n - 1].lo)
			t->v[n++] = t->v[i];
	t->n = n;
	v = realloc(t->v, (size_t)n * sizeof(*v));
	if (v) {
		t->v = v;
		t->alloc = n;
	}
}

static void
symtab_free(struct symtab *t)
{
	free(t->v);
	ps_buf_free(&t->names);
	memset(t, 0, sizeof(*t));
}

/* The separate debug file of e, found by its GNU build id the way gdb
 * finds it: /usr/lib/debug/.build-id/xx/yyyy.debug (Debian's -dbg and
 * -dbgsym packages install there).  Stripped system libraries -- libc
 * first of all -- keep only their exported symbols in .dynsym; the debug
 * file has the .symtab with every static function.  Returns 0 or -ENOENT. */
static int
debug_file_path(const struct elf *e, char *out, size_t len)
{
	const ElfW(Nhdr) *nh;
	const uint8_t *desc;
	uint64_t off, end;
	size_t i, k, n;

	for (i = 0; i < e->shnum; i++) {
		if (e->sh[i].sh_type != SHT_NOTE || !in_file(e, e->sh[i].sh_offset, e->sh[i].sh_size, 4))
			continue;
		off = e->sh[i].sh_offset;
		end = off + e->sh[i].sh_size;
		while (off + sizeof(*nh) <= end) {
			nh = (const void *)(e->p + off);
			desc = e->p + off + sizeof(*nh) + ((nh->n_namesz + 3) & ~3u);
			if (desc + nh->n_descsz > e->p + end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(e->p + off + sizeof(*nh), "GNU", 4) && nh->n_descsz >= 2 &&
			    nh->n_descsz <= 64) {
				n = (size_t)snprintf(out, len, "/usr/lib/debug/.build-id/%02x/", desc[0]);
				for (k = 1; k < nh->n_descsz && n + 3 < len; k++)
					n += (size_t)snprintf(out + n, len - n, "%02x", desc[k]);
				return n + 7 < len && snprintf(out + n, len - n, ".debug") > 0 ? 0 : -ENOENT;
			}
			off = (uint64_t)(desc - e->p) + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return -ENOENT;
}

/* Read the function symbols of the ELF file at path into t (empty on
 * entry).  mem/phnum: the loaded image's program headers, or NULL.
 * `debug`: path is a separate debug file (do not look for another).
 * Returns 0, -errno of open/fstat/mmap, -ENOEXEC, -ESTALE, -ENOMEM. */
static int
load_file_at(const char *path, const ElfW(Phdr) *mem, uint32_t phnum, struct symtab *t,
	     int debug)
{
	char dbg[PATH_MAX];
	struct elf e = { 0 };
	struct stat sb;
	void *p;
	int fd, rc;

	/* O_NONBLOCK: a FIFO put in a file's place must not block the exit. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)sizeof(ElfW(Ehdr))) {
		close(fd);
		return -ENOEXEC;
	}
	p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	rc = -errno;
	close(fd);
	if (p == MAP_FAILED)
		return rc;
	e.p = p;
	e.size = (size_t)sb.st_size;
	t->names = (struct ps_buf)PS_BUF_INIT(MAX_SYMNAMES);
	rc = elf_open(&e);
	if (rc == 0)
		rc = phdrs_match(&e, mem, phnum);
	if (rc == 0)
		rc = collect(&e, find_section(&e, SHT_SYMTAB), t);
	if (rc == 0 && t->n == 0 && !debug && debug_file_path(&e, dbg, sizeof(dbg)) == 0) {
		/* The debug file's symbols have the same link-time addresses. */
		symtab_free(t);
		if (load_file_at(dbg, NULL, 0, t, 1) != 0 || t->n == 0) {
			symtab_free(t);
			t->names = (struct ps_buf)PS_BUF_INIT(MAX_SYMNAMES);
		}
	}
	if (rc == 0 && t->n == 0)
		rc = collect(&e, find_section(&e, SHT_DYNSYM), t);
	munmap(p, e.size);
	if (rc < 0) {
		symtab_free(t);
		return rc;
	}
	sort_syms(t);
	return 0;
}

/* The symbol covering off (a link-time address), or NULL.  A sized symbol
 * that contains off wins over an unsized one before it. */
static int
load_file(const char *path, const ElfW(Phdr) *mem, uint32_t phnum, struct symtab *t)
{
	return load_file_at(path, mem, phnum, t, 0);
}

static const struct sym *
find_sym(const struct symtab *t, uint64_t off)
{
	const struct sym *c;
	uint32_t lo = 0, hi = t->n, mid, i, k;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (t->v[mid].lo <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	i = lo - 1;
	for (k = 0; k < BACKSCAN && k <= i; k++) {
		c = &t->v[i - k];
		if ((c->name & SYM_SIZED) && off - c->lo < c->len)
			return c;
	}
	c = &t->v[i];
	return !(c->name & SYM_SIZED) && off - c->lo < c->len ? c : NULL;
}

int
ps_symbols_load_file_for_test(const char *path, size_t *nsyms)
{
	struct symtab t = { 0 };
	int rc;

	rc = load_file(path, NULL, 0, &t);
	*nsyms = t.n;
	symtab_free(&t);
	return rc;
}

/* ---- loaded objects ----------------------------------------------- */

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Range of the PT_LOAD segments; 0 if the object has none. */
static int
load_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
	const ElfW(Phdr) *ph;
	uintptr_t a;
	int i;

	*lo = UINTPTR_MAX;
	*hi = 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || ph->p_memsz == 0)
			continue;
		a = info->dlpi_addr + ph->p_vaddr;
		if (a < *lo)
			*lo = a;
		if (a + ph->p_memsz > *hi)
			*hi = a + ph->p_memsz;
	}
	return *hi > *lo;
}

static void
module_free(struct module *m)
{
	free(m->path);
	free(m->base);
	free(m->phdr);
	symtab_free(&m->tab);
}

static void
modules_free(struct module *v, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		module_free(&v[i]);
	free(v);
}

static char *
dup_basename(const char *path)
{
	const char *slash = strrchr(path, '/');

	return strdup(slash ? slash + 1 : path);
}

/* path and base of an object.  The main program has an empty name: its file
 * is /proc/self/exe (readable even once deleted) and its name is where that
 * link points.  Other nameless objects have no file. */
static int
module_names(struct module *m, const char *name, int first)
{
	char exe[4096];
	ssize_t n;

	if (name[0] && !strchr(name, '/')) {
		/* linux-vdso.so.1: no file, and never a name to look up in
		 * the working directory. */
		m->path = NULL;
		m->base = strdup(name);
		m->state = MOD_NOFILE;
		return m->base ? 0 : -ENOMEM;
	} else if (name[0]) {
		m->path = strdup(name);
		m->base = dup_basename(name);
	} else if (first) {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = '\0';
		m->path = strdup("/proc/self/exe");
		m->base = dup_basename(n > 0 ? exe : "[exe]");
	} else {
		m->path = NULL;
		m->base = strdup("[anon]");
		m->state = MOD_NOFILE;
		return m->base ? 0 : -ENOMEM;
	}
	return m->path && m->base ? 0 : -ENOMEM;
}

struct scan {
	struct module *v;       /* owned until handed to ps_symbols */
	uint32_t n, alloc;
	int calls;
	int err;
};

static int
scan_add(struct scan *sc, struct dl_phdr_info *info, int first)
{
	struct module m = { 0 };
	struct module *v;

	if (!load_range(info, &m.lo, &m.hi))
		return 0;
	m.bias = info->dlpi_addr;
	if (module_names(&m, info->dlpi_name ? info->dlpi_name : "", first) < 0)
		goto fail;
	if (info->dlpi_phnum <= MAX_PHDRS) {
		m.phnum = info->dlpi_phnum;
		m.phdr = malloc(m.phnum * sizeof(*m.phdr));
		if (!m.phdr)
			goto fail;
		memcpy(m.phdr, info->dlpi_phdr, m.phnum * sizeof(*m.phdr));
	}
	if (sc->n == sc->alloc) {
		v = realloc(sc->v, (sc->alloc ? 2 * sc->alloc : 64) * sizeof(*v));
		if (!v)
			goto fail;
		sc->v = v;
		sc->alloc = sc->alloc ? 2 * sc->alloc : 64;
	}
	sc->v[sc->n++] = m;
	return 0;
fail:
	module_free(&m);
	return -ENOMEM;
}

/* Runs with the loader lock held: copies, nothing more. */
static int
scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct scan *sc = data;
	int first = sc->calls++ == 0;

	(void)size;
	if (sc->n >= MAX_MODULES)
		return 1;
	sc->err = scan_add(sc, info, first);
	return sc->err ? 1 : 0;
}

static int
cmp_module(const void *pa, const void *pb)
{
	const struct module *a = pa, *b = pb;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return 0;
}

/* The module of v[0..n) that contains ip, or NULL. */
static struct module *
module_at(struct module *v, uint32_t n, uintptr_t ip)
{
	uint32_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (v[mid].lo <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && ip < v[lo - 1].hi ? &v[lo - 1] : NULL;
}

/* Move the symbol tables of objects still loaded at the same place from
 * the old list to the new.  Returns how many were kept. */
static uint32_t
carry_over(struct ps_symbols *s, struct module *v, uint32_t n)
{
	struct module *old;
	uint32_t i, kept = 0;

	for (i = 0; i < n; i++) {
		old = module_at(s->mods, s->nmods, v[i].lo);
		if (!old || old->lo != v[i].lo || old->hi != v[i].hi || old->bias != v[i].bias)
			continue;
		if ((old->path == NULL) != (v[i].path == NULL) ||
		    (old->path && strcmp(old->path, v[i].path) != 0))
			continue;
		v[i].state = old->state;
		v[i].tab = old->tab;
		memset(&old->tab, 0, sizeof(old->tab));
		old->state = MOD_NEW;
		kept++;
	}
	return kept;
}

/* ---- objects the program loaded after the helper was forked ---------- */

/* The program whose objects are looked up, when it is not this process (the
 * uploader's helper process: uploader/worker.h).  Written once by the
 * helper before its loop; 0 in the program itself. */
static pid_t watched;

void
ps_symbols_watch(pid_t pid)
{
	watched = pid;
}

/* 1 if [lo, hi) lies in one of v[0..n). */
static int
covered(const struct module *v, uint32_t n, uintptr_t lo)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (lo >= v[i].lo && lo < v[i].hi)
			return 1;
	return 0;
}

/* An executable mapping of `path` at [lo, ...) from file offset `off`: read
 * the file's program headers to find its load bias, and add it as the
 * loader would have described it. */
static void
scan_mapped_file(struct scan *sc, const char *path, uintptr_t lo, uint64_t off)
{
	ElfW(Phdr) ph[MAX_PHDRS];
	struct dl_phdr_info info = { 0 };
	ElfW(Ehdr) eh;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	int fd, i;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_phentsize != sizeof(ElfW(Phdr)) ||
	    eh.e_phnum == 0 || eh.e_phnum > MAX_PHDRS ||
	    pread(fd, ph, eh.e_phnum * sizeof(ph[0]), (off_t)eh.e_phoff) !=
		    (ssize_t)(eh.e_phnum * sizeof(ph[0]))) {
		close(fd);
		return;
	}
	close(fd);
	for (i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || (ph[i].p_offset & ~(page - 1)) != off)
			continue;
		info.dlpi_addr = lo - (ph[i].p_vaddr & ~(page - 1));
		info.dlpi_name = path;
		info.dlpi_phdr = ph;
		info.dlpi_phnum = eh.e_phnum;
		sc->err = scan_add(sc, &info, 0);
		return;
	}
}

/* Add the watched program's executable file mappings that the scan does
 * not cover: objects it loaded after the helper was forked.  They are read
 * from /proc/PID/maps, which needs no ptrace rights; -ESRCH once the
 * program is gone (the caller then keeps the list it had). */
static int
scan_watched(struct scan *sc)
{
	char path[64], line[PATH_MAX + 128], perms[8], file[PATH_MAX];
	unsigned long lo, hi;
	unsigned long long off;
	uint32_t base_n = sc->n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)watched);
	f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	while (!sc->err && sc->n < MAX_MODULES && fgets(line, sizeof(line), f)) {
		file[0] = '\0';
		if (sscanf(line, "%lx-%lx %7s %llx %*s %*s %4095[^\n]", &lo, &hi, perms, &off,
			   file) < 4 || !strchr(perms, 'x') || file[0] != '/')
			continue;
		if (covered(sc->v, sc->n, lo) || covered(sc->v + base_n, sc->n - base_n, lo))
			continue;
		scan_mapped_file(sc, file, lo, off);
	}
	fclose(f);
	return sc->err;
}

/* Move the modules of the current list that the scan does not cover into
 * it (their owned parts with them). */
static void
keep_learned(struct ps_symbols *s, struct scan *sc)
{
	struct module *v;
	uint32_t i, n = sc->n;

	for (i = 0; i < s->nmods && !sc->err; i++) {
		if (covered(sc->v, n, s->mods[i].lo))
			continue;
		if (sc->n == sc->alloc) {
			v = realloc(sc->v, (sc->alloc ? 2 * sc->alloc : 64) * sizeof(*v));
			if (!v) {
				sc->err = -ENOMEM;
				return;
			}
			sc->v = v;
			sc->alloc = sc->alloc ? 2 * sc->alloc : 64;
		}
		sc->v[sc->n++] = s->mods[i];
		memset(&s->mods[i], 0, sizeof(s->mods[i]));
	}
}

static void cache_clear(struct ps_symbols *s);

static int
rescan(struct ps_symbols *s)
{
	struct scan sc = { 0 };

	s->st.scans++;
	s->last_scan = now_ns();
	s->stale = 0;
	dl_iterate_phdr(scan_cb, &sc);
	if (!sc.err && watched && scan_watched(&sc) == -ESRCH) {
		/* The program is gone: what was learned of it stays. */
		watched = 0;
		keep_learned(s, &sc);
	}
	if (sc.err) {
		modules_free(sc.v, sc.n);
		return sc.err;
	}
	qsort(sc.v, sc.n, sizeof(*sc.v), cmp_module);
	/* An object gone or moved: cached names of its IPs may be wrong now. */
	if (carry_over(s, sc.v, sc.n) < s->nmods)
		cache_clear(s);
	modules_free(s->mods, s->nmods);
	s->mods = sc.v;
	s->nmods = sc.n;
	if (!s->demangle)
		s->demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
	return 0;
}

static struct module *
find_module(struct ps_symbols *s, uintptr_t ip)
{
	struct module *m;

	/* A failed rescan keeps the old list, and is not retried until due. */
	if (s->stale && rescan(s) < 0)
		return module_at(s->mods, s->nmods, ip);
	m = module_at(s->mods, s->nmods, ip);
	if (m || now_ns() - s->last_scan < RESCAN_NS)
		return m;
	if (rescan(s) < 0)
		return NULL;
	return module_at(s->mods, s->nmods, ip);
}

struct range_query {
	uintptr_t addr, lo, hi;
	int found;
};

static int
range_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct range_query *q = data;
	uintptr_t lo, hi;

	(void)size;
	if (!load_range(info, &lo, &hi) || q->addr < lo || q->addr >= hi)
		return 0;
	q->lo = lo;
	q->hi = hi;
	q->found = 1;
	return 1;
}

int
ps_symbols_object_range(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
	struct range_query q = { (uintptr_t)addr, 0, 0, 0 };

	dl_iterate_phdr(range_cb, &q);
	if (!q.found)
		return -ENOENT;
	*lo = q.lo;
	*hi = q.hi;
	return 0;
}

/* ---- IP cache ----------------------------------------------------- */

static uint64_t
mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static uint64_t
hash_str(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*p)
		h = (h ^ (uint8_t)*p++) * 0x100000001b3ull;
	return h;
}

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

	for (i = mix(ip) & (n - 1); ips[i].name; i = (i + 1) & (n - 1))
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

	for (i = hash_str(name) & (n - 1); in[i]; i = (i + 1) & (n - 1))
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
	 * function is "name", as in .dynsym and in every other profiler. */
	at = strchr(s->scratch, '@');
	if (at && at != s->scratch)
		*at = '\0';
}

static void
load_module(struct ps_symbols *s, struct module *m)
{
	s->st.files++;
	if (load_file(m->path, m->phdr, m->phnum, &m->tab) == 0)
		m->state = MOD_READY;
	else
		m->state = MOD_NOFILE;
}

/* Name ip, which m contains, into s->scratch.  Returns PS_SYM_*. */
static int
resolve(struct ps_symbols *s, struct module *m, uintptr_t ip)
{
	const struct sym *sym;
	Dl_info di;

	if (m->state == MOD_NEW)
		load_module(s, m);
	if (m->state == MOD_READY) {
		sym = find_sym(&m->tab, ip - m->bias);
		if (sym) {
			put_func(s, (char *)m->tab.names.data + (sym->name & SYM_OFF));
			return PS_SYM_FUNC;
		}
	} else if (dladdr((void *)ip, &di) && di.dli_sname && di.dli_saddr) {
		put_func(s, di.dli_sname);
		return PS_SYM_FUNC;
	}
	put_offset(s, m->base, ip - m->bias);
	return PS_SYM_UNKNOWN;
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
	s->stale = 1;
	s->pool = (struct ps_buf)PS_BUF_INIT(MAX_POOL);
	if (cache_resize(s, MIN_IP_SLOTS) < 0) {
		free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void
ps_symbols_free(struct ps_symbols *s)
{
	if (!s)
		return;
	modules_free(s->mods, s->nmods);
	free(s->ips);
	free(s->interned);
	ps_buf_free(&s->pool);
	free(s);
}

int
ps_symbols_lookup(struct ps_symbols *s, uintptr_t ip, char *buf, size_t len)
{
	const struct ipent *e;
	struct module *m;
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
	if (!m) {
		/* Not cached: a later rescan may find an object for it. */
		put_offset(s, "[unknown]", ip);
		copy_out(buf, len, s->scratch);
		return PS_SYM_UNKNOWN;
	}
	kind = resolve(s, m, ip);
	cache_put(s, ip, s->scratch, kind);
	copy_out(buf, len, s->scratch);
	return kind;
}

void
ps_symbols_invalidate(struct ps_symbols *s)
{
	if (!s)
		return;
	cache_clear(s);
	s->stale = 1;
}

void
ps_symbols_get_stats(const struct ps_symbols *s, struct ps_symbols_stats *st)
{
	*st = s->st;
	st->modules = s->nmods;
	st->cached = s->count;
}
