/* modules.c -- the loaded objects.  See modules.h. */
#include "symbolize/modules.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/symbols.h"

#define MAX_MODULES   4096           /* objects tracked; more are ignored */
#define MAX_PHDRS     128            /* program headers copied per object */
#define RESCAN_NS     1000000000ull

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
module_free(struct ps_module *m)
{
	free(m->path);
	free(m->base);
	free(m->shown);
	free(m->phdr);
	ps_object_put(m->obj);
}

static void
modules_free(struct ps_module *v, uint32_t n)
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
module_names(struct ps_module *m, const char *name, int first)
{
	char exe[4096];
	ssize_t n;

	if (name[0] && !strchr(name, '/')) {
		/* linux-vdso.so.1: no file, and never a name to look up in
		 * the working directory. */
		m->path = NULL;
		m->base = strdup(name);
		m->shown = strdup(strstr(name, "vdso") ? "[vdso]" : name);
		m->state = PS_MOD_NOFILE;
		return m->base && m->shown ? 0 : -ENOMEM;
	} else if (name[0]) {
		m->path = strdup(name);
		m->base = dup_basename(name);
		m->shown = strdup(name);
	} else if (first) {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = '\0';
		m->path = strdup("/proc/self/exe");
		m->base = dup_basename(n > 0 ? exe : "[exe]");
		m->shown = strdup(n > 0 ? exe : "[exe]");
	} else {
		m->path = NULL;
		m->base = strdup("[anon]");
		m->shown = strdup("[anon]");
		m->state = PS_MOD_NOFILE;
		return m->base && m->shown ? 0 : -ENOMEM;
	}
	return m->path && m->base && m->shown ? 0 : -ENOMEM;
}

struct scan {
	struct ps_module *v;       /* owned until handed to ps_symbols */
	uint32_t n, alloc;
	int calls;
	int err;
};

static int
scan_add(struct scan *sc, struct dl_phdr_info *info, int first)
{
	struct ps_module m = { 0 };
	struct ps_module *v;

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
	const struct ps_module *a = pa, *b = pb;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return 0;
}

/* The module of v[0..n) that contains ip, or NULL. */
static struct ps_module *
module_at(struct ps_module *v, uint32_t n, uintptr_t ip)
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
carry_over(struct ps_modules *s, struct ps_module *v, uint32_t n)
{
	struct ps_module *old;
	uint32_t i, kept = 0;

	for (i = 0; i < n; i++) {
		old = module_at(s->v, s->n, v[i].lo);
		if (!old || old->lo != v[i].lo || old->hi != v[i].hi || old->bias != v[i].bias)
			continue;
		if ((old->path == NULL) != (v[i].path == NULL) ||
		    (old->path && strcmp(old->path, v[i].path) != 0))
			continue;
		v[i].state = old->state;
		v[i].obj = old->obj;
		old->obj = NULL;
		old->state = PS_MOD_NEW;
		kept++;
	}
	return kept;
}

/* ---- objects the program loaded after the helper was forked ---------- */

/* 1 if [lo, hi) lies in one of v[0..n). */
static int
covered(const struct ps_module *v, uint32_t n, uintptr_t lo)
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

/* The watched program's vDSO, named as dl_iterate_phdr names this
 * process's: an object without a file. */
static void
scan_vdso(struct scan *sc, uintptr_t lo, uintptr_t hi)
{
	ElfW(Phdr) ph = { .p_type = PT_LOAD, .p_flags = PF_X, .p_memsz = hi - lo };
	struct dl_phdr_info info = { 0 };

	info.dlpi_addr = lo;
	info.dlpi_name = "linux-vdso.so.1";
	info.dlpi_phdr = &ph;
	info.dlpi_phnum = 1;
	sc->err = scan_add(sc, &info, 0);
}

/* The length of the lines the watched program left at its end, at most
 * their capacity; 0 while there are none. */
static uint32_t
left_len(const struct ps_modules *s)
{
	uint32_t n = s->left.text ? atomic_load_explicit(s->left.len, memory_order_acquire) : 0;

	return n < s->left.cap ? n : s->left.cap;
}

/* The watched program's maps (this process's if none is watched): the
 * lines it left at its end once they are there (*left 1), else its
 * /proc/PID/maps.  NULL when neither can be read. */
static FILE *
open_maps(const struct ps_modules *s, int *left)
{
	char path[64];
	uint32_t n = left_len(s);

	*left = n != 0;
	if (n)
		return fmemopen((void *)s->left.text, n, "r");
	snprintf(path, sizeof(path), "/proc/%d/maps", s->watched ? (int)s->watched : (int)getpid());
	return fopen(path, "re");
}

/* Add the watched program's executable file mappings that the scan does
 * not cover: objects it loaded after the helper was forked.  They are read
 * from /proc/PID/maps, which needs no ptrace rights, or from the lines it
 * left at its end; -ESRCH once the program is gone without leaving any
 * (the caller then keeps the list it had). */
static int
scan_watched(struct scan *sc, struct ps_modules *s)
{
	char line[PATH_MAX + 128], perms[8], file[PATH_MAX];
	unsigned long lo, hi;
	unsigned long long off;
	uint32_t base_n = sc->n;
	int left;
	FILE *f;

	f = open_maps(s, &left);
	if (!f && !left && left_len(s))   /* it left them as it went */
		f = open_maps(s, &left);
	if (!f)
		return -ESRCH;
	while (!sc->err && sc->n < MAX_MODULES && fgets(line, sizeof(line), f)) {
		file[0] = '\0';
		if (sscanf(line, "%lx-%lx %7s %llx %*s %*s %4095[^\n]", &lo, &hi, perms, &off,
			   file) < 4 || !strchr(perms, 'x') || (file[0] != '/' && strcmp(file, "[vdso]")))
			continue;
		if (covered(sc->v, sc->n, lo) || covered(sc->v + base_n, sc->n - base_n, lo))
			continue;
		if (file[0] == '/')
			scan_mapped_file(sc, file, lo, off);
		else
			scan_vdso(sc, lo, hi);
	}
	fclose(f);
	/* It ended while they were read (a zombie's are empty): its own
	 * lines at the next look-up. */
	if (!left && left_len(s))
		s->stale = 1;
	return sc->err;
}

int
ps_modules_region(const struct ps_modules *s, uintptr_t ip, uintptr_t *lo, uintptr_t *hi,
		  uint64_t *off, char *name, size_t len)
{
	char line[PATH_MAX + 128], file[PATH_MAX];
	unsigned long a, b;
	unsigned long long o;
	int rc = -ENOENT, left;
	FILE *f;

	f = open_maps(s, &left);
	if (!f)
		return -ENOENT;
	while (rc && fgets(line, sizeof(line), f)) {
		file[0] = '\0';
		if (sscanf(line, "%lx-%lx %*s %llx %*s %*s %4095[^\n]", &a, &b, &o, file) < 3 ||
		    ip < a || ip >= b)
			continue;
		*lo = a;
		*hi = b;
		*off = o;
		snprintf(name, len, "%s", file[0] ? file : "//anon");
		rc = 0;
	}
	fclose(f);
	return rc;
}

/* Move the modules of the current list that the scan does not cover into
 * it (their owned parts with them). */
static void
keep_learned(struct ps_modules *s, struct scan *sc)
{
	struct ps_module *v;
	uint32_t i, n = sc->n;

	for (i = 0; i < s->n && !sc->err; i++) {
		if (covered(sc->v, n, s->v[i].lo))
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
		sc->v[sc->n++] = s->v[i];
		memset(&s->v[i], 0, sizeof(s->v[i]));
	}
}

int
ps_modules_scan(struct ps_modules *s)
{
	struct scan sc = { 0 };

	s->scans++;
	s->last_scan = ps_clock_ns(CLOCK_MONOTONIC);
	s->stale = 0;
	if (!s->only)
		dl_iterate_phdr(scan_cb, &sc);
	if (!sc.err && s->watched && scan_watched(&sc, s) == -ESRCH) {
		/* The program is gone: what was learned of it stays. */
		s->watched = 0;
		keep_learned(s, &sc);
	}
	s->err = sc.err == -ENOMEM ? -ENOMEM : 0;
	if (sc.err) {
		/* Out of memory: walk again at the next find, not in a second. */
		s->stale = s->err != 0;
		modules_free(sc.v, sc.n);
		return sc.err;
	}
	qsort(sc.v, sc.n, sizeof(*sc.v), cmp_module);
	/* An object gone or moved: cached names of its IPs may be wrong now. */
	if (carry_over(s, sc.v, sc.n) < s->n)
		s->moved = 1;
	modules_free(s->v, s->n);
	s->v = sc.v;
	s->n = sc.n;
	return 0;
}

struct ps_module *
ps_modules_find(struct ps_modules *s, uintptr_t ip)
{
	struct ps_module *m;

	/* A failed rescan keeps the old list, and is not retried until due. */
	if (s->stale && ps_modules_scan(s) < 0)
		return module_at(s->v, s->n, ip);
	m = module_at(s->v, s->n, ip);
	if (m || ps_clock_ns(CLOCK_MONOTONIC) - s->last_scan < RESCAN_NS)
		return m;
	if (ps_modules_scan(s) < 0)
		return NULL;
	return module_at(s->v, s->n, ip);
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

void
ps_modules_free(struct ps_modules *s)
{
	modules_free(s->v, s->n);
	memset(s, 0, sizeof(*s));
}
