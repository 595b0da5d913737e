/* Unit tests of the symbol cache (symbolize/symcache.c) and of the ranges
 * that symbolize/dwarf.c gives it: every address of a range must get from
 * libdw the answer the range keeps (checked over inlined code of libc and
 * of this program); the file round-trips, merges two writers, is bounded;
 * and nothing untrusted is read: a flipped byte anywhere, another build ID,
 * a symbolic link, a file or directory of another user or open to others. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/dwarf.h"
#include "symbolize/elf.h"
#include "symbolize/symcache.h"

/* ---- helpers ------------------------------------------------------------ */

/* One answer, copied: ps_dwarf's strings live until its next look-up. */
struct answer {
	int n;
	struct {
		char name[256], linkage[256], file[PATH_MAX];
		int has_linkage, line, decl;
	} f[16];
};

static void
copy_answer(struct answer *a, const struct ps_dwarf_frame *f, int n)
{
	int i;

	memset(a, 0, sizeof(*a));
	a->n = n;
	for (i = 0; i < n; i++) {
		snprintf(a->f[i].name, sizeof(a->f[i].name), "%s", f[i].name);
		a->f[i].has_linkage = f[i].linkage != NULL;
		snprintf(a->f[i].linkage, sizeof(a->f[i].linkage), "%s",
			 f[i].linkage ? f[i].linkage : "");
		snprintf(a->f[i].file, sizeof(a->f[i].file), "%s", f[i].file);
		a->f[i].line = f[i].line;
		a->f[i].decl = f[i].decl_line;
	}
}

static int
same_answer(const struct answer *a, const struct answer *b)
{
	return !memcmp(a, b, sizeof(*a));
}

struct object {
	const char *want;       /* basename part to match */
	char path[PATH_MAX];
	uintptr_t bias;
};

static int
find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct object *o = arg;

	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, o->want))
		return 0;
	snprintf(o->path, sizeof(o->path), "%s", info->dlpi_name);
	o->bias = info->dlpi_addr;
	return 1;
}

/* A function of libc itself: under ASan, dlsym(RTLD_DEFAULT) finds the
 * sanitizer's interceptors of malloc, qsort, fopen... instead. */
static uintptr_t
libc_fn(const char *name)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *p;

	ck_assert_ptr_nonnull(h);
	p = dlsym(h, name);
	ck_assert_ptr_nonnull(p);
	dlclose(h);
	return (uintptr_t)p;
}

static char top[64], dir[PATH_MAX];

/* dir: a cache directory, made as the uploader makes it. */
static void
make_dir(void)
{
	const char *why;

	snprintf(top, sizeof(top), "/tmp/check_symcache.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(dir, sizeof(dir), "%s/xdg/pyroshim", top);
	ck_assert_int_eq(ps_symcache_dir_check(dir, &why), 0);
}

static void
remove_dir(void)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
}

static const uint8_t id1[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
				 13, 14, 15, 16 };
static const uint8_t id2[20] = { 0xfe, 0xed, 0xfa, 0xce, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
				 13, 14, 15, 16 };

static void
id_path(const uint8_t *id, char *out)
{
	int n = snprintf(out, PATH_MAX, "%s/", dir), i;

	for (i = 0; i < 20; i++)
		n += snprintf(out + n, 3, "%02x", id[i]);
}

static const struct ps_dwarf_frame chain2[2] = {
	{ "inner", NULL, "/src/a.h", 12, 10 },
	{ "outer", "_Z5outerv", "/src/a.c", 40, 33 },
};
static const struct ps_dwarf_frame chain1[1] = {
	{ "other", NULL, "/src/b.c", 7, 5 },
};

/* A cache of id with three ranges, saved. */
static void
write_three(const uint8_t *id)
{
	struct ps_symcache *c;

	ck_assert_int_eq(ps_symcache_open(dir, id, 20, 1 << 20, &c), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x1000, 0x1010, 0x1004, chain2, 2), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x2000, 0x2008, 0x2000, chain1, 1), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x3000, 0x3001, 0x3000, NULL, 0), 0);
	ck_assert_int_eq(ps_symcache_save(c), 0);
	ps_symcache_free(c);
}

static struct ps_symcache_stats
open_stats(const uint8_t *id)
{
	struct ps_symcache_stats st;
	struct ps_symcache *c;

	ck_assert_int_eq(ps_symcache_open(dir, id, 20, 1 << 20, &c), 0);
	ps_symcache_get_stats(c, &st);
	ps_symcache_free(c);
	return st;
}

/* ---- ranges against libdw ------------------------------------------------ */

/* The address to check after b in [lo, hi): short ranges byte by byte,
 * long ones at both ends and in the middle; hi when done. */
static uintptr_t
next_probe(uintptr_t b, uintptr_t lo, uintptr_t hi)
{
	if (hi - lo <= 32)
		return b + 1;
	if (b == lo)
		return lo + (hi - lo) / 2;
	return b < hi - 1 ? hi - 1 : hi;
}

/* Walk `len` bytes from `start` in object o: for every range libdw gives,
 * its ends, its middle and (when short) every byte must get the same
 * answer.  Returns the ranges checked; *inlined counts those whose answer
 * holds an inlined frame. */
static int
check_window(struct ps_dwarf *d, const struct object *o, uintptr_t start, size_t len,
	     int *inlined)
{
	struct ps_dwarf_frame f[16];
	struct answer want, got;
	uintptr_t a = start, b, valid[2], v2[2];
	int n, ranges = 0;

	while (a < start + len) {
		n = ps_dwarf_lookup(d, o->path, 0, o->bias, a, f, 16, valid);
		ck_assert_int_ge(n, 0);
		if (valid[1] <= valid[0] || n == 0) {
			a++;
			continue;
		}
		ck_assert_msg(valid[0] <= a && a < valid[1], "%s+%lx outside its range", o->path,
			      (unsigned long)(a - o->bias));
		copy_answer(&want, f, n);
		*inlined += n > 1;
		for (b = valid[0]; b < valid[1];) {
			ck_assert_int_eq(ps_dwarf_lookup(d, o->path, 0, o->bias, b, f, 16, v2), n);
			copy_answer(&got, f, n);
			ck_assert_msg(same_answer(&want, &got),
				      "%s+%lx: %s:%d, but %s:%d at +%lx in the same range",
				      o->path, (unsigned long)(a - o->bias), want.f[0].file,
				      want.f[0].line, got.f[0].file, got.f[0].line,
				      (unsigned long)(b - o->bias));
			b = next_probe(b, valid[0], valid[1]);
		}
		ranges++;
		a = valid[1];
	}
	return ranges;
}

START_TEST(symcache_ranges_agree_with_dwarf)
{
	/* libc's (libc6-dbg's DWARF, -O2 with inlining) and this program's. */
	static const char *const libc_funcs[] = { "malloc", "qsort", "strtod", "getaddrinfo",
						  "vfprintf" };
	struct object libc = { .want = "libc.so.6" }, self = { .want = "" };
	struct ps_dwarf *d;
	int ranges = 0, inlined = 0;
	size_t i;

	ck_assert_int_eq(dl_iterate_phdr(find_object, &libc), 1);
	ck_assert_int_eq(ps_dwarf_new(&d, 1ull << 30, 0), 0);
	for (i = 0; i < sizeof(libc_funcs) / sizeof(*libc_funcs); i++)
		ranges += check_window(d, &libc, libc_fn(libc_funcs[i]), 4096, &inlined);
	/* The executable: the first object dl_iterate_phdr reports. */
	ck_assert_int_eq(dl_iterate_phdr(find_object, &self), 1);
	ck_assert_int_gt(readlink("/proc/self/exe", self.path, sizeof(self.path) - 1), 0);
	ranges += check_window(d, &self, (uintptr_t)check_window, 1024, &inlined);
	/* libc6-dbg is installed by the README's setup: without it libc has
	 * no lines and only this program's ranges are checked. */
	ck_assert_msg(ranges > 200, "only %d ranges checked", ranges);
	ck_assert_msg(inlined > 20, "only %d ranges with inlined frames", inlined);
	ps_dwarf_free(d);
}
END_TEST

/* ---- a whole function at once ------------------------------------------- */

struct pieces {
	uintptr_t lo[4096], hi[4096];
	struct answer *a;
	int n, gap;
};

static int
take_piece(void *arg, uintptr_t lo, uintptr_t hi, const struct ps_dwarf_frame *f, int n)
{
	struct pieces *p = arg;

	ck_assert_uint_lt(lo, hi);
	if (p->n && lo != p->hi[p->n - 1])
		p->gap = 1;
	if (p->n == 4096)
		return 1;
	p->lo[p->n] = lo;
	p->hi[p->n] = hi;
	copy_answer(&p->a[p->n], f, n);
	p->n++;
	return 0;
}

/* The extent [*lo, *hi) (runtime) of the ELF symbol of o that holds addr,
 * as the uploader reads it (libc's internal functions from libc6-dbg's
 * symbol table). */
static void
sym_extent(const struct object *o, uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	struct ps_symtab t = { 0 };
	const struct ps_sym *s;

	ck_assert_int_eq(ps_elf_load(o->path, NULL, 0, &t), 0);
	s = ps_elf_find_sym(&t, addr - o->bias);
	ck_assert_ptr_nonnull(s);
	*lo = o->bias + s->lo;
	*hi = *lo + s->len;
	ps_symtab_free(&t);
}

/* The pieces of the last check_function. */
static struct pieces walked;

/* Every piece ps_dwarf_function gives must be what ps_dwarf_lookup answers
 * at each of its addresses (short pieces byte by byte, long ones at both
 * ends and the middle), the pieces back to back.  Returns the pieces (in
 * `walked`); *inlined counts those with an inlined frame. */
static int
check_function(struct ps_dwarf *d, const struct object *o, uintptr_t addr, int *inlined)
{
	struct pieces *p = &walked;
	struct ps_dwarf_frame f[16];
	struct answer got;
	uintptr_t b, v[2], lo, hi;
	int i, n;

	p->n = p->gap = 0;
	if (!p->a)
		p->a = calloc(4096, sizeof(*p->a));
	ck_assert_ptr_nonnull(p->a);
	sym_extent(o, addr, &lo, &hi);
	n = ps_dwarf_function(d, o->path, 0, o->bias, addr, lo, hi, 16, take_piece, p);
	ck_assert_int_eq(n, p->n);
	if (n == 0)
		return 0;
	ck_assert_msg(!p->gap, "%s+%lx: pieces not back to back", o->path,
		      (unsigned long)(addr - o->bias));
	ck_assert_uint_le(p->lo[0], addr);
	ck_assert_uint_gt(p->hi[p->n - 1], addr);
	for (i = 0; i < p->n; i++) {
		*inlined += p->a[i].n > 1;
		for (b = p->lo[i]; b < p->hi[i];) {
			n = ps_dwarf_lookup(d, o->path, 0, o->bias, b, f, 16, v);
			copy_answer(&got, f, n);
			ck_assert_msg(same_answer(&p->a[i], &got),
				      "%s+%lx: the walk says %s:%d (%d frames), a look-up %s:%d (%d)",
				      o->path, (unsigned long)(b - o->bias), p->a[i].f[0].file,
				      p->a[i].f[0].line, p->a[i].n, got.f[0].file, got.f[0].line, got.n);
			b = next_probe(b, p->lo[i], p->hi[i]);
		}
	}
	return p->n;
}

START_TEST(function_walk_agrees_with_lookups)
{
	static const char *const libc_funcs[] = { "malloc", "qsort", "strtod", "getaddrinfo",
						  "vfprintf", "fclose", "fopen" };
	struct object libc = { .want = "libc.so.6" }, self = { .want = "" };
	struct ps_dwarf *d;
	int pieces = 0, inlined = 0;
	size_t i;

	ck_assert_int_eq(dl_iterate_phdr(find_object, &libc), 1);
	ck_assert_int_eq(dl_iterate_phdr(find_object, &self), 1);
	ck_assert_int_gt(readlink("/proc/self/exe", self.path, sizeof(self.path) - 1), 0);
	ck_assert_int_eq(ps_dwarf_new(&d, 1ull << 30, 0), 0);
	for (i = 0; i < sizeof(libc_funcs) / sizeof(*libc_funcs); i++)
		pieces += check_function(d, &libc, libc_fn(libc_funcs[i]), &inlined);
	pieces += check_function(d, &self, (uintptr_t)check_window, &inlined);
	pieces += check_function(d, &self, (uintptr_t)check_function, &inlined);
	ck_assert_msg(pieces > 300, "only %d pieces", pieces);
	ck_assert_msg(inlined > 20, "only %d pieces with inlined frames", inlined);
	ps_dwarf_free(d);
}
END_TEST

/* Where DWARF has no subprogram, the ELF symbol's extent is walked: libc's
 * memmove (assembly with a line table; dlsym runs its IFUNC resolver, so
 * this is the variant this machine uses) gets its rows, all of it; this
 * program's _start (crt1, in no compilation unit) one range without
 * lines. */
START_TEST(function_walk_covers_assembly_by_its_symbol)
{
	struct object libc = { .want = "libc.so.6" }, self = { .want = "" };
	uintptr_t lo, hi, start = (uintptr_t)getauxval(AT_ENTRY);
	struct ps_dwarf *d;
	int inlined = 0, n;

	ck_assert_int_eq(dl_iterate_phdr(find_object, &libc), 1);
	ck_assert_int_eq(dl_iterate_phdr(find_object, &self), 1);
	ck_assert_int_gt(readlink("/proc/self/exe", self.path, sizeof(self.path) - 1), 0);
	ck_assert_int_eq(ps_dwarf_new(&d, 1ull << 30, 0), 0);
	n = check_function(d, &libc, libc_fn("memmove"), &inlined);
	sym_extent(&libc, libc_fn("memmove"), &lo, &hi);
	ck_assert_msg(n > 10, "memmove: %d pieces", n);
	ck_assert_uint_eq(walked.lo[0], lo);
	ck_assert_uint_eq(walked.hi[n - 1], hi);
	ck_assert_int_eq(walked.a[0].n, 1);
	ck_assert_int_gt(walked.a[0].f[0].line, 0);
	n = check_function(d, &self, start, &inlined);
	sym_extent(&self, start, &lo, &hi);
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(walked.lo[0], lo);
	ck_assert_uint_eq(walked.hi[0], hi);
	ck_assert_int_eq(walked.a[0].n, 0);
	ck_assert_int_eq(inlined, 0);
	ps_dwarf_free(d);
}
END_TEST

/* One file, two programs: a reader that knows the file's identity answers
 * a second program that maps it elsewhere (libc at another load bias, as
 * ASLR puts it) with the same frames, its ranges moved by the
 * difference, from the object it reported for the first; the function
 * walk too.  ps_dwarf_drop lets the object go once the file is gone. */
static int
one_alive(uint64_t id)
{
	return id == 1;
}

static int
none_alive(uint64_t id)
{
	(void)id;
	return 0;
}

START_TEST(dwarf_one_file_at_two_addresses)
{
	static const char *const libc_funcs[] = { "malloc", "qsort", "strtod", "vfprintf" };
	const uintptr_t moved = 0x7000000;
	struct object libc = { .want = "libc.so.6" };
	struct ps_dwarf_frame f[16];
	struct ps_dwarf_stats st;
	struct answer want, got;
	struct pieces *p = &walked;
	uintptr_t a, v[2], w[2], lo, hi, plo[64], phi[64];
	struct ps_dwarf *d;
	int i, k, n, m, checked = 0, np;

	ck_assert_int_eq(dl_iterate_phdr(find_object, &libc), 1);
	ck_assert_int_eq(ps_dwarf_new(&d, 1ull << 30, 0), 0);
	for (i = 0; i < (int)(sizeof(libc_funcs) / sizeof(*libc_funcs)); i++) {
		for (a = libc_fn(libc_funcs[i]); a < libc_fn(libc_funcs[i]) + 256; a += 7) {
			n = ps_dwarf_lookup(d, libc.path, 1, libc.bias, a, f, 16, v);
			copy_answer(&want, f, n);
			m = ps_dwarf_lookup(d, libc.path, 1, libc.bias + moved, a + moved, f, 16, w);
			copy_answer(&got, f, m);
			ck_assert_msg(same_answer(&want, &got), "libc+%lx: another answer at +%lx",
				      (unsigned long)(a - libc.bias), (unsigned long)moved);
			ck_assert_uint_eq(w[0], v[0] + (v[1] > v[0] ? moved : 0));
			ck_assert_uint_eq(w[1], v[1] + (v[1] > v[0] ? moved : 0));
			checked += n > 0;
		}
	}
	ck_assert_msg(checked > 100, "only %d addresses with lines", checked);
	ps_dwarf_get_stats(d, &st);
	ck_assert_uint_eq(st.objects, 1);        /* reported once */
	/* The function walk: the same pieces, moved. */
	if (!p->a)
		p->a = calloc(4096, sizeof(*p->a));
	ck_assert_ptr_nonnull(p->a);
	a = libc_fn("qsort");
	sym_extent(&libc, a, &lo, &hi);
	p->n = p->gap = 0;
	np = ps_dwarf_function(d, libc.path, 1, libc.bias, a, lo, hi, 16, take_piece, p);
	ck_assert_int_gt(np, 0);
	for (k = 0; k < np && k < 64; k++) {
		plo[k] = p->lo[k];
		phi[k] = p->hi[k];
	}
	p->n = p->gap = 0;
	ck_assert_int_eq(ps_dwarf_function(d, libc.path, 1, libc.bias + moved, a + moved,
					   lo + moved, hi + moved, 16, take_piece, p), np);
	for (k = 0; k < np && k < 64; k++) {
		ck_assert_uint_eq(p->lo[k], plo[k] + moved);
		ck_assert_uint_eq(p->hi[k], phi[k] + moved);
	}
	ps_dwarf_drop(d, one_alive);
	ps_dwarf_get_stats(d, &st);
	ck_assert_uint_eq(st.objects, 1);
	ps_dwarf_drop(d, none_alive);
	ps_dwarf_get_stats(d, &st);
	ck_assert_uint_eq(st.objects, 0);
	ps_dwarf_free(d);
}
END_TEST

/* ---- the file ------------------------------------------------------------ */

START_TEST(symcache_round_trips_and_cuts_overlaps)
{
	struct ps_dwarf_frame f[16];
	struct ps_symcache_stats st;
	struct ps_symcache *c;
	struct stat sb;
	uint64_t end;
	char path[PATH_MAX];
	const char *why;

	make_dir();
	ck_assert_int_eq(ps_symcache_dir_check(dir, &why), 0);
	ck_assert_int_eq(stat(dir, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0700);
	write_three(id1);
	id_path(id1, path);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0600);

	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &c), 0);
	ps_symcache_get_stats(c, &st);
	ck_assert_int_eq(st.loaded, 1);
	ck_assert_int_eq(st.rejected, 0);
	ck_assert_uint_eq(st.ranges, 3);
	ck_assert_int_eq(ps_symcache_find(c, 0x100f, f, 16, &end), 2);
	ck_assert_uint_eq(end, 0x1010);
	ck_assert_str_eq(f[0].name, "inner");
	ck_assert_ptr_null(f[0].linkage);
	ck_assert_str_eq(f[1].linkage, "_Z5outerv");
	ck_assert_str_eq(f[1].file, "/src/a.c");
	ck_assert_int_eq(f[1].line, 40);
	ck_assert_int_eq(f[1].decl_line, 33);
	ck_assert_int_eq(ps_symcache_find(c, 0x3000, f, 16, &end), 0);
	ck_assert_int_eq(ps_symcache_find(c, 0x1010, f, 16, &end), -ENOENT);
	ck_assert_int_eq(ps_symcache_find(c, 0xfff, f, 16, &end), -ENOENT);
	/* At most max frames, innermost first. */
	ck_assert_int_eq(ps_symcache_find(c, 0x1000, f, 1, &end), 1);
	ck_assert_str_eq(f[0].name, "inner");
	/* A new range is cut where it meets kept ones. */
	ck_assert_int_eq(ps_symcache_add(c, 0x1008, 0x2004, 0x1800, chain1, 1), 0);
	ck_assert_int_eq(ps_symcache_find(c, 0x100f, f, 16, &end), 2);
	ck_assert_int_eq(ps_symcache_find(c, 0x1010, f, 16, &end), 1);
	ck_assert_uint_eq(end, 0x2000);
	ck_assert_int_eq(ps_symcache_add(c, 0x10, 0x20, 0x30, chain1, 1), -EINVAL);
	/* The first address no range holds: across back-to-back ranges. */
	ck_assert_uint_eq(ps_symcache_gap(c, 0x1000, 0x3001), 0x2008);
	ck_assert_uint_eq(ps_symcache_gap(c, 0x2008, 0x3001), 0x2008);
	ck_assert_uint_eq(ps_symcache_gap(c, 0xfff, 0x3001), 0xfff);
	ck_assert_uint_eq(ps_symcache_gap(c, 0x1005, 0x1008), 0x1008);
	ck_assert_uint_eq(ps_symcache_gap(c, 0x3000, 0x3002), 0x3001);
	ps_symcache_free(c);
	ck_assert_uint_eq(open_stats(id1).ranges, 4);
	remove_dir();
}
END_TEST

START_TEST(symcache_rejects_every_corrupted_byte)
{
	struct ps_symcache_stats st;
	unsigned char img[4096];
	char path[PATH_MAX];
	ssize_t n, i;
	int fd;

	make_dir();
	write_three(id1);
	id_path(id1, path);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = read(fd, img, sizeof(img));
	close(fd);
	ck_assert_int_gt(n, 96);
	ck_assert_int_lt(n, (ssize_t)sizeof(img));
	for (i = 0; i <= n; i++) {
		fd = open(path, O_WRONLY | O_TRUNC);
		ck_assert_int_ge(fd, 0);
		if (i < n)
			img[i] ^= 0x41;
		/* i == n: the file cut short by one byte. */
		ck_assert_int_eq(write(fd, img, (size_t)(i < n ? n : n - 1)), i < n ? n : n - 1);
		close(fd);
		if (i < n)
			img[i] ^= 0x41;
		st = open_stats(id1);
		ck_assert_msg(st.ranges == 0 && st.rejected == 1 && st.loaded == 0,
			      "byte %zd flipped: %u ranges read", i, st.ranges);
	}
	remove_dir();
}
END_TEST

START_TEST(symcache_rejects_another_build_id_and_untrusted_files)
{
	char p1[PATH_MAX], p2[PATH_MAX], cmd[3 * PATH_MAX];
	struct ps_symcache_stats st;

	make_dir();
	write_three(id1);
	id_path(id1, p1);
	id_path(id2, p2);
	/* The right name, another object's contents. */
	snprintf(cmd, sizeof(cmd), "cp -p '%s' '%s'", p1, p2);
	ck_assert_int_eq(system(cmd), 0);
	st = open_stats(id2);
	ck_assert_int_eq(st.rejected, 1);
	ck_assert_uint_eq(st.ranges, 0);
	/* A symbolic link to a valid file. */
	ck_assert_int_eq(unlink(p2), 0);
	ck_assert_int_eq(rename(p1, p2), 0);
	ck_assert_int_eq(symlink(p2, p1), 0);
	st = open_stats(id1);
	ck_assert_int_eq(st.rejected, 1);
	ck_assert_uint_eq(st.ranges, 0);
	/* Writable by others. */
	ck_assert_int_eq(unlink(p1), 0);
	ck_assert_int_eq(rename(p2, p1), 0);
	ck_assert_int_eq(chmod(p1, 0666), 0);
	st = open_stats(id1);
	ck_assert_int_eq(st.rejected, 1);
	ck_assert_int_eq(chmod(p1, 0600), 0);
	ck_assert_uint_eq(open_stats(id1).ranges, 3);
	/* Another user's (only root can give a file away). */
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(p1, 65534, 65534), 0);
		st = open_stats(id1);
		ck_assert_int_eq(st.rejected, 1);
		ck_assert_uint_eq(st.ranges, 0);
	}
	remove_dir();
}
END_TEST

START_TEST(symcache_directory_must_be_private)
{
	char link[PATH_MAX + 8];
	const char *why;

	make_dir();
	/* Made with its parent, mode 0700. */
	ck_assert_int_eq(ps_symcache_dir_check(dir, &why), 0);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(ps_symcache_dir_check(dir, &why), -EPERM);
	ck_assert_msg(strstr(why, "open to other users") != NULL, "%s", why);
	ck_assert_int_eq(chmod(dir, 0700), 0);
	snprintf(link, sizeof(link), "%s.lnk", dir);
	ck_assert_int_eq(symlink(dir, link), 0);
	ck_assert_int_eq(ps_symcache_dir_check(link, &why), -EPERM);
	ck_assert_str_eq(why, "a symbolic link");
	ck_assert_int_eq(ps_symcache_dir_check("relative/dir", &why), -EINVAL);
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(dir, 65534, 65534), 0);
		ck_assert_int_eq(ps_symcache_dir_check(dir, &why), -EPERM);
		ck_assert_str_eq(why, "owned by another user");
	}
	ck_assert_int_eq(unlink(link), 0);
	remove_dir();
}
END_TEST

START_TEST(symcache_merges_two_writers)
{
	struct ps_dwarf_frame f[16];
	struct ps_symcache *a, *b, *c;
	uint64_t end;
	const char *why;

	make_dir();
	ck_assert_int_eq(ps_symcache_dir_check(dir, &why), 0);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &a), 0);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &b), 0);
	ck_assert_int_eq(ps_symcache_add(a, 0x100, 0x110, 0x100, chain1, 1), 0);
	ck_assert_int_eq(ps_symcache_add(b, 0x200, 0x210, 0x200, chain2, 2), 0);
	ck_assert_int_eq(ps_symcache_save(a), 0);
	ck_assert_int_eq(ps_symcache_save(b), 0);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &c), 0);
	ck_assert_int_eq(ps_symcache_find(c, 0x105, f, 16, &end), 1);
	ck_assert_int_eq(ps_symcache_find(c, 0x205, f, 16, &end), 2);
	/* b knows a's range now too; a saving nothing new writes nothing. */
	ck_assert_int_eq(ps_symcache_find(b, 0x105, f, 16, &end), 1);
	ps_symcache_free(a);
	ps_symcache_free(b);
	ps_symcache_free(c);
	remove_dir();
}
END_TEST

START_TEST(symcache_stays_within_its_bound)
{
	struct timespec old[2] = { { 1000000, 0 }, { 1000000, 0 } };
	char p1[PATH_MAX], p2[PATH_MAX], tmp[PATH_MAX + 16];
	struct ps_symcache *c;
	struct stat sb;
	uint64_t size;
	int fd;

	make_dir();
	write_three(id1);
	id_path(id1, p1);
	id_path(id2, p2);
	ck_assert_int_eq(stat(p1, &sb), 0);
	size = (uint64_t)sb.st_size;
	/* id1's file is old; a dead writer's temporary file too. */
	ck_assert_int_eq(utimensat(AT_FDCWD, p1, old, 0), 0);
	snprintf(tmp, sizeof(tmp), "%s/.x.1.tmp", dir);
	fd = open(tmp, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(utimensat(AT_FDCWD, tmp, old, 0), 0);
	/* Room for one file: writing id2's removes id1's, the older. */
	ck_assert_int_eq(ps_symcache_open(dir, id2, 20, size + size / 2, &c), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x1000, 0x1010, 0x1004, chain2, 2), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x2000, 0x2008, 0x2000, chain1, 1), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x3000, 0x3001, 0x3000, NULL, 0), 0);
	ck_assert_int_eq(ps_symcache_save(c), 0);
	ps_symcache_free(c);
	ck_assert_int_eq(stat(p2, &sb), 0);
	ck_assert_int_eq(stat(p1, &sb), -1);
	ck_assert_int_eq(stat(tmp, &sb), -1);
	/* One object alone larger than the bound is not written. */
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 64, &c), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x1000, 0x1010, 0x1004, chain2, 2), 0);
	ck_assert_int_eq(ps_symcache_save(c), -ENOSPC);
	ps_symcache_free(c);
	ck_assert_int_eq(stat(p1, &sb), -1);
	remove_dir();
}
END_TEST

/* A file of many strings, read back and added to: the strings' index is
 * made at the first add for all of them (once, it was made too small and
 * the add never returned). */
START_TEST(symcache_file_of_many_strings_takes_more)
{
	struct ps_dwarf_frame f[1] = { { "", NULL, "/src/many.c", 1, 1 } }, out[16];
	struct ps_symcache *c;
	char name[32];
	uint64_t end;
	uint32_t i;

	make_dir();
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 26, &c), 0);
	for (i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		f[0].name = name;
		f[0].line = (int)i;
		ck_assert_int_eq(ps_symcache_add(c, 0x1000 + 16 * i, 0x1010 + 16 * i, 0x1000 + 16 * i,
						 f, 1), 0);
	}
	ck_assert_int_eq(ps_symcache_save(c), 0);
	ps_symcache_free(c);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 26, &c), 0);
	f[0].name = "f7";   /* known */
	ck_assert_int_eq(ps_symcache_add(c, 0x100000, 0x100010, 0x100000, f, 1), 0);
	f[0].name = "new";
	ck_assert_int_eq(ps_symcache_add(c, 0x200000, 0x200010, 0x200000, f, 1), 0);
	ck_assert_int_eq(ps_symcache_find(c, 0x1000 + 16 * 2999, out, 16, &end), 1);
	ck_assert_str_eq(out[0].name, "f2999");
	ck_assert_int_eq(out[0].line, 2999);
	ck_assert_int_eq(ps_symcache_find(c, 0x200004, out, 16, &end), 1);
	ck_assert_str_eq(out[0].name, "new");
	ck_assert_int_eq(ps_symcache_save(c), 0);
	ps_symcache_free(c);
	remove_dir();
}
END_TEST

/* Marked walked and complete: kept in the file, kept through another
 * writer's merge, and never for a cache past its bound (not written). */
START_TEST(symcache_complete_is_kept_and_merged)
{
	struct ps_symcache_stats st;
	struct ps_symcache *a, *b, *c;
	struct ps_dwarf_frame f[16];
	uint64_t end;

	make_dir();
	write_three(id1);
	/* b opens before the mark and writes after it. */
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &a), 0);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &b), 0);
	ck_assert_uint_eq(ps_symcache_flags(a), 0);
	ps_symcache_set_flags(a, PS_SYMCACHE_WALKED | PS_SYMCACHE_COMPLETE);
	ck_assert_uint_eq(ps_symcache_flags(a), PS_SYMCACHE_WALKED | PS_SYMCACHE_COMPLETE);
	ck_assert_int_eq(ps_symcache_save(a), 0);
	ps_symcache_free(a);
	ck_assert_int_eq(ps_symcache_add(b, 0x5000, 0x5010, 0x5000, chain1, 1), 0);
	ck_assert_int_eq(ps_symcache_save(b), 0);
	ck_assert_uint_eq(ps_symcache_flags(b), PS_SYMCACHE_WALKED | PS_SYMCACHE_COMPLETE);
	ps_symcache_free(b);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &c), 0);
	ck_assert_uint_eq(ps_symcache_flags(c), PS_SYMCACHE_WALKED | PS_SYMCACHE_COMPLETE);
	ps_symcache_get_stats(c, &st);
	ck_assert_uint_eq(st.ranges, 4);
	ck_assert_int_eq(st.fits, 1);
	ck_assert_int_eq(ps_symcache_find(c, 0x5008, f, 16, &end), 1);
	ck_assert_int_eq(ps_symcache_find(c, 0x4000, f, 16, &end), -ENOENT);
	ps_symcache_free(c);
	/* Past the bound: not marked, and said not to fit. */
	ck_assert_int_eq(ps_symcache_open(dir, id2, 20, 64, &c), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x1000, 0x1010, 0x1004, chain2, 2), 0);
	ps_symcache_get_stats(c, &st);
	ck_assert_int_eq(st.fits, 0);
	ck_assert_int_eq(ps_symcache_save(c), -ENOSPC);
	ps_symcache_set_flags(c, PS_SYMCACHE_WALKED);
	ck_assert_uint_eq(ps_symcache_flags(c), 0);
	ps_symcache_free(c);
	remove_dir();
}
END_TEST

/* A cache answers from the file it mapped when it opened: a writer that
 * replaces the file (a temporary file renamed over it), or eviction that
 * unlinks it, leaves those pages alone. */
START_TEST(symcache_mapped_file_survives_its_replacement)
{
	struct ps_symcache *a, *b;
	struct ps_dwarf_frame f[16];
	char path[PATH_MAX];
	uint64_t end;
	size_t n;
	int i;

	make_dir();
	write_three(id1);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &a), 0);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &b), 0);
	ck_assert_int_eq(ps_symcache_add(b, 0x5000, 0x5010, 0x5000, chain1, 1), 0);
	ck_assert_int_eq(ps_symcache_save(b), 0);
	ps_symcache_free(b);
	n = (size_t)snprintf(path, sizeof(path), "%s/", dir);
	for (i = 0; i < 20; i++)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "%02x", id1[i]);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(ps_symcache_find(a, 0x1008, f, 16, &end), 2);
	ck_assert_str_eq(f[0].name, chain2[0].name);
	ck_assert_int_eq(ps_symcache_find(a, 0x2004, f, 16, &end), 1);
	ck_assert_int_eq(ps_symcache_find(a, 0x5008, f, 16, &end), -ENOENT);
	/* And takes more, in arrays of its own. */
	ck_assert_int_eq(ps_symcache_add(a, 0x6000, 0x6010, 0x6000, chain1, 1), 0);
	ck_assert_int_eq(ps_symcache_find(a, 0x1008, f, 16, &end), 2);
	ck_assert_int_eq(ps_symcache_find(a, 0x6008, f, 16, &end), 1);
	ps_symcache_free(a);
	remove_dir();
}
END_TEST

/* Found by the fuzzer once its fix-up matched the file's layout: a file
 * whose ranges had no lines (no frame array) was read in place, and the
 * first range with lines then wrote its frames past a 1-byte copy of the
 * empty array.  (ASan and valgrind see it; `sanitize` runs this.) */
START_TEST(symcache_file_without_frames_takes_ranges_with_frames)
{
	struct ps_dwarf_frame f[16];
	struct ps_symcache *c;
	uint64_t end;

	make_dir();
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &c), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x10, 0x11, 0x10, NULL, 0), 0);
	ck_assert_int_eq(ps_symcache_save(c), 0);
	ps_symcache_free(c);
	ck_assert_int_eq(ps_symcache_open(dir, id1, 20, 1 << 20, &c), 0);
	ck_assert_uint_eq(open_stats(id1).ranges, 1);
	/* One frame: within the capacity of one that the empty array got. */
	ck_assert_int_eq(ps_symcache_add(c, 0x2000, 0x2010, 0x2000, chain1, 1), 0);
	ck_assert_int_eq(ps_symcache_add(c, 0x1000, 0x1010, 0x1000, chain2, 2), 0);
	ck_assert_int_eq(ps_symcache_find(c, 0x1008, f, 16, &end), 2);
	ck_assert_str_eq(f[0].name, chain2[0].name);
	ck_assert_int_eq(ps_symcache_find(c, 0x2008, f, 16, &end), 1);
	ck_assert_int_eq(ps_symcache_find(c, 0x10, f, 16, &end), 0);
	ck_assert_int_eq(ps_symcache_save(c), 0);
	ps_symcache_free(c);
	ck_assert_uint_eq(open_stats(id1).ranges, 3);
	remove_dir();
}
END_TEST

/* ---- no DWARF to find: libdw not loaded --------------------------------- */

/* Run a shell command made from fmt; it must succeed. */
static void
sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
sh(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	ck_assert_int_lt(vsnprintf(cmd, sizeof(cmd), fmt, ap), (int)sizeof(cmd));
	va_end(ap);
	ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

/* Look up this program's check_window in the copy at path (same layout,
 * same bias) with a fresh reader: the frames found, and what it loaded. */
static int
lookup_copy(const char *path, uintptr_t bias, struct ps_dwarf_stats *st, int debuginfod)
{
	struct ps_dwarf_frame f[16];
	struct ps_dwarf *d;
	uintptr_t valid[2];
	int n;

	ck_assert_int_eq(ps_dwarf_new(&d, 1ull << 30, debuginfod), 0);
	n = ps_dwarf_lookup(d, path, 0, bias, (uintptr_t)check_window + 4, f, 16, valid);
	if (n > 0)
		ck_assert_str_eq(f[n - 1].name, "check_window");
	ps_dwarf_get_stats(d, st);
	ck_assert_uint_eq(st->objects, 1);
	ps_dwarf_free(d);
	return n;
}

/* A stripped copy of this program, and its DWARF wherever libdwfl's
 * search looks (elf.h, ps_elf_dwarf_possible): libdw is loaded and finds
 * it; with the DWARF nowhere, libdw is not loaded at all. */
START_TEST(dwarf_not_loaded_when_there_is_none_to_find)
{
	struct object self = { .want = "" };
	char exe[PATH_MAX] = "", p[PATH_MAX + 64], lnk[PATH_MAX + 64];
	struct ps_dwarf_stats st;

	ck_assert_int_eq(dl_iterate_phdr(find_object, &self), 1);
	ck_assert_int_gt(readlink("/proc/self/exe", exe, sizeof(exe) - 1), 0);
	make_dir();
	sh("mkdir -p '%s/bin/.debug'", top);
	snprintf(p, sizeof(p), "%s/bin/prog", top);
	sh("objcopy --only-keep-debug '%s' '%s/dbg' && objcopy --strip-debug '%s' '%s'", exe, top,
	   exe, p);

	/* The program itself has DWARF. */
	ck_assert_int_gt(lookup_copy(exe, self.bias, &st, 0), 0);
	ck_assert_int_eq(st.loaded, 1);
	ck_assert_uint_eq(st.no_debug, 0);
	/* Stripped, nothing anywhere. */
	ck_assert_int_eq(ps_elf_dwarf_possible(p), 0);
	ck_assert_int_eq(lookup_copy(p, self.bias, &st, 0), 0);
	ck_assert_int_eq(st.loaded, 0);
	ck_assert_uint_eq(st.no_debug, 1);
	/* ...but a debuginfod server might have it (DEBUGINFOD_URLS is unset
	 * here, so libdw's search fails fast). */
	ck_assert_int_eq(lookup_copy(p, self.bias, &st, 1), 0);
	ck_assert_int_eq(st.loaded, 1);
	ck_assert_uint_eq(st.no_debug, 0);

	/* No debuglink: basename.debug beside it, in .debug/, under the
	 * debug root's tails; the basename itself outside its directory. */
	sh("cp '%s/dbg' '%s/bin/prog.debug'", top, top);
	ck_assert_int_gt(lookup_copy(p, self.bias, &st, 0), 0);
	ck_assert_int_eq(st.loaded, 1);
	sh("mv '%s/bin/prog.debug' '%s/bin/.debug/prog'", top, top);
	ck_assert_int_gt(lookup_copy(p, self.bias, &st, 0), 0);
	sh("rm '%s/bin/.debug/prog'", top);
	ck_assert_int_eq(ps_elf_dwarf_possible(p), 0);
	if (access("/usr/lib/debug", W_OK) == 0) {
		/* /usr/lib/debug/<a tail of the directory>/prog(.debug):
		 * "check_symcache.XXXXXX/bin", of /tmp/check_symcache.XXXXXX/bin. */
		const char *tail = top + strlen("/tmp/");

		sh("mkdir -p '/usr/lib/debug/%s/bin' && cp '%s/dbg' '/usr/lib/debug/%s/bin/prog'",
		   tail, top, tail);
		ck_assert_int_gt(lookup_copy(p, self.bias, &st, 0), 0);
		sh("mv '/usr/lib/debug/%s/bin/prog' '/usr/lib/debug/%s/bin/prog.debug'", tail, tail);
		ck_assert_int_eq(ps_elf_dwarf_possible(p), 1);
		sh("rm -r '/usr/lib/debug/%s'", tail);
		ck_assert_int_eq(ps_elf_dwarf_possible(p), 0);
	}

	/* A debuglink, through a symbolic link: the real path counts too. */
	sh("cd '%s' && cp dbg other.dbg && objcopy --add-gnu-debuglink=other.dbg bin/prog && "
	   "mv other.dbg bin/.debug/other.dbg", top);
	snprintf(lnk, sizeof(lnk), "%s/link", top);
	ck_assert_int_eq(symlink(p, lnk), 0);
	ck_assert_int_gt(lookup_copy(lnk, self.bias, &st, 0), 0);
	ck_assert_int_eq(st.loaded, 1);
	sh("rm '%s/bin/.debug/other.dbg'", top);
	ck_assert_int_eq(ps_elf_dwarf_possible(lnk), 0);
	ck_assert_int_eq(lookup_copy(lnk, self.bias, &st, 0), 0);
	ck_assert_int_eq(st.loaded, 0);
	/* The link's name, not the basename, is looked for: prog.debug is
	 * not what libdwfl opens now. */
	sh("cp '%s/dbg' '%s/bin/prog.debug'", top, top);
	ck_assert_int_eq(ps_elf_dwarf_possible(p), 0);
	remove_dir();
}
END_TEST

static Suite *
symcache_suite(void)
{
	Suite *s = suite_create("symcache");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, symcache_ranges_agree_with_dwarf);
	tcase_add_test(tc, function_walk_agrees_with_lookups);
	tcase_add_test(tc, function_walk_covers_assembly_by_its_symbol);
	tcase_add_test(tc, dwarf_one_file_at_two_addresses);
	tcase_add_test(tc, symcache_round_trips_and_cuts_overlaps);
	tcase_add_test(tc, symcache_rejects_every_corrupted_byte);
	tcase_add_test(tc, symcache_file_without_frames_takes_ranges_with_frames);
	tcase_add_test(tc, symcache_rejects_another_build_id_and_untrusted_files);
	tcase_add_test(tc, symcache_directory_must_be_private);
	tcase_add_test(tc, symcache_merges_two_writers);
	tcase_add_test(tc, symcache_stays_within_its_bound);
	tcase_add_test(tc, symcache_complete_is_kept_and_merged);
	tcase_add_test(tc, symcache_mapped_file_survives_its_replacement);
	tcase_add_test(tc, symcache_file_of_many_strings_takes_more);
	tcase_add_test(tc, dwarf_not_loaded_when_there_is_none_to_find);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(symcache_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
