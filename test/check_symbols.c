/* Unit tests of symbolization (symbolize/symbols.c, symbolizer.c): names, demangling,
 * special results, truncation, the IP cache, an object file named by offset with no
 * process, and parsing of truncated or corrupted ELF files. */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/elf.h"
#include "symbolize/symbols.h"

/* Static, so only .symtab names it: dladdr cannot.  Not inlined or cloned,
 * so its symbol keeps its plain name and covers a few instructions. */
static __attribute__((noinline, noclone)) int
static_target(volatile int *x)
{
	int i, sum = 0;

	for (i = 0; i < *x; i++)  /* TARGET_BODY_LINE */
		sum += i * *x;
	return sum;
}

static int (*volatile target_ptr)(volatile int *) = static_target;

/* The line of static_target's loop (the "for") marked above, for the
 * source-line tests. */
#define TARGET_BODY_LINE 27

/* Symbols with exact extents, never executed: sym_sized covers 8 bytes of
 * 16, then no symbol covers 8 bytes, then sym_label (no type, no size)
 * runs to the end of its own section.  sym_local_alias, unsized and local,
 * shares sym_sized's address and comes first in .symtab (locals do). */
__asm__(".pushsection .text.check_symbols, \"ax\", %progbits\n"
	".globl sym_sized\n.hidden sym_sized\n.type sym_sized, %function\n"
	"sym_local_alias:\n"
	"sym_sized:\n.zero 16\n.size sym_sized, 8\n"
	".globl sym_label\n.hidden sym_label\n"
	"sym_label:\n.zero 16\n"
	".popsection\n");
extern const char sym_sized[], sym_label[];

static struct ps_symbols *
new_syms(void)
{
	struct ps_symbols *s = NULL;

	ck_assert_int_eq(ps_symbols_new(&s, 0, 0), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

static void *
lib_sym(const char *lib, const char *name)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	void *p;

	ck_assert_msg(h != NULL, "dlopen %s: %s", lib, dlerror());
	p = dlsym(h, name);
	ck_assert_msg(p != NULL, "dlsym %s", name);
	return p;
}

static void
expect_name(struct ps_symbols *s, uintptr_t ip, int kind, const char *want)
{
	char buf[512];

	ck_assert_int_eq(ps_symbols_lookup(s, ip, buf, sizeof(buf)), kind);
	ck_assert_str_eq(buf, want);
}

START_TEST(symbols_names_static_function_from_symtab)
{
	struct ps_symbols *s = new_syms();
	uintptr_t a = (uintptr_t)target_ptr;
	volatile int n = 3;

	ck_assert_int_eq(target_ptr(&n), 9);
	expect_name(s, a, PS_SYM_FUNC, "static_target");
	expect_name(s, a + 2, PS_SYM_FUNC, "static_target");
	ps_symbols_free(s);
}
END_TEST

/* The runtime address of this binary's .plt section + off, from its own
 * section headers (the stubs have no symbol of their own). */
static uintptr_t
own_plt(uint64_t off)
{
	static ElfW(Shdr) sh[256];
	ElfW(Ehdr) eh;
	char names[8192];
	Dl_info di;
	FILE *f = fopen("/proc/self/exe", "rb");
	unsigned i;

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(&eh, sizeof(eh), 1, f), 1);
	ck_assert_uint_le(eh.e_shnum, 256);
	ck_assert_int_eq(fseek(f, (long)eh.e_shoff, SEEK_SET), 0);
	ck_assert_uint_eq(fread(sh, sizeof(sh[0]), eh.e_shnum, f), eh.e_shnum);
	ck_assert_int_eq(fseek(f, (long)sh[eh.e_shstrndx].sh_offset, SEEK_SET), 0);
	ck_assert_uint_gt(fread(names, 1, sizeof(names) - 1, f), 0);
	fclose(f);
	names[sizeof(names) - 1] = '\0';
	ck_assert_int_ne(dladdr((void *)own_plt, &di), 0);
	for (i = 0; i < eh.e_shnum; i++)
		if (sh[i].sh_name < sizeof(names) && !strcmp(names + sh[i].sh_name, ".plt"))
			return (uintptr_t)di.dli_fbase + sh[i].sh_addr + off;
	ck_abort_msg("no .plt in /proc/self/exe");
	return 0;
}

START_TEST(symbols_names_plt_stubs_func_at_plt)
{
	struct ps_symbols *s = new_syms();
	char buf[512];
	int kind;

	/* The first stub, after the resolver's 16 bytes: this test calls
	 * libc through many stubs, and each is named after its target. */
	kind = ps_symbols_lookup(s, own_plt(16) + 4, buf, sizeof(buf));
	ck_assert_int_eq(kind, PS_SYM_FUNC);
	ck_assert_msg(strlen(buf) > 4 && !strcmp(buf + strlen(buf) - 4, "@plt"), "%s", buf);
	/* Source lines are never asked for a stub. */
	ck_assert_int_eq(ps_symbolizer_use_dwarf(ps_symbols_symbolizer(s), 64u << 20, 0), 0);
	{
		struct ps_src_frame f[PS_MAX_INLINE];

		ck_assert_int_eq(ps_symbols_source(s, own_plt(16) + 4, f, PS_MAX_INLINE), 0);
	}
	ps_symbols_free(s);
}
END_TEST

START_TEST(symbols_source_lines_of_own_code)
{
	struct ps_symbols *s = new_syms();
	struct ps_src_frame f[PS_MAX_INLINE];
	struct ps_map_info mi;
	uintptr_t a = (uintptr_t)target_ptr;
	const char *file;
	int n, i, hit = 0;

	/* Off until asked for: a names-only cache loads no DWARF. */
	ck_assert_int_eq(ps_symbols_source(s, a, f, PS_MAX_INLINE), 0);
	ck_assert_int_eq(ps_symbolizer_use_dwarf(ps_symbols_symbolizer(s), 64u << 20, 0), 0);
	for (i = 0; i < 64 && !hit; i++) {
		n = ps_symbols_source(s, a + i, f, PS_MAX_INLINE);
		ck_assert_int_ge(n, 1);
		ck_assert_str_eq(f[n - 1].name, "static_target");
		file = f[n - 1].file;
		ck_assert_msg(strstr(file, "test/check_symbols.c") != NULL, "%s", file);
		ck_assert_int_gt(f[n - 1].start_line, 0);
		hit = f[n - 1].line == TARGET_BODY_LINE;
	}
	ck_assert_msg(hit, "no instruction of static_target on line %d", TARGET_BODY_LINE);
	/* The mapping: the executable segment that holds it, with a build ID. */
	ck_assert_int_eq(ps_symbols_mapping(s, a, &mi), 0);
	ck_assert_uint_le(mi.start, a);
	ck_assert_uint_gt(mi.limit, a);
	ck_assert_uint_eq(mi.start % 4096, 0);
	ck_assert_uint_eq(strlen(mi.build_id) % 2, 0);
	ck_assert_uint_ge(strlen(mi.build_id), 16);
	ck_assert_int_eq(ps_symbols_mapping(s, 16, &mi), -ENOENT);
	ps_symbols_free(s);
}
END_TEST

/* dl_iterate_phdr's first object (the test program): the file offset of
 * address a in it. */
struct offset_of { uintptr_t a; uint64_t off; int found; };

static int
offset_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct offset_of *q = data;
	uintptr_t v = q->a - info->dlpi_addr;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && v >= ph->p_vaddr && v - ph->p_vaddr < ph->p_filesz) {
			q->off = ph->p_offset + (v - ph->p_vaddr);
			q->found = 1;
		}
	}
	return 1;       /* the first object only */
}

START_TEST(symbolizer_names_a_copied_file_by_offset)
{
	struct offset_of q = { (uintptr_t)target_ptr, 0, 0 };
	struct ps_src_frame f[PS_MAX_INLINE];
	struct ps_object *o, *o2, *self;
	struct ps_symbolizer *z;
	const uint8_t *id, *id2;
	char copy[] = "/tmp/check_symbols_copy_XXXXXX", cmd[256];
	uint32_t idlen;
	int fd, n, i, hit = 0;

	/* Another file with the same bytes: no process maps it, so only the
	 * object and the offset can name what is there. */
	fd = mkstemp(copy);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* The program's own file (not /proc/self/exe: under valgrind that is
	 * valgrind's). */
	snprintf(cmd, sizeof(cmd), "cp '%s' %s", program_invocation_name, copy);
	ck_assert_int_eq(system(cmd), 0);
	dl_iterate_phdr(offset_cb, &q);
	ck_assert(q.found);

	ck_assert_int_eq(ps_object_get(copy, NULL, 0, &o), 1);
	ck_assert_int_eq(ps_object_get(copy, NULL, 0, &o2), 0);   /* read once */
	ck_assert_int_ge(ps_object_get(program_invocation_name, NULL, 0, &self), 0);
	idlen = ps_object_build_id(o, &id);
	ck_assert_uint_ge(idlen, 8);
	ck_assert_uint_eq(ps_object_build_id(self, &id2), idlen);
	ck_assert_mem_eq(id, id2, idlen);
	ck_assert(ps_object_has_functions(o));

	ck_assert_int_eq(ps_symbolizer_new(&z), 0);
	n = ps_symbolize(z, o, q.off, 0, f, PS_MAX_INLINE);
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(f[0].name, "static_target");
	ck_assert_str_eq(f[0].file, "");
	ck_assert_int_eq(f[0].line, 0);
	/* The ELF header, and past the file: no function. */
	ck_assert_int_eq(ps_symbolize(z, o, 0, 0, f, PS_MAX_INLINE), 0);
	ck_assert_int_eq(ps_symbolize(z, o, 1ull << 40, 0, f, PS_MAX_INLINE), 0);
	/* Lines only once asked for, then from the copy's own DWARF. */
	ck_assert_int_eq(ps_symbolize(z, o, q.off, PS_FRAMES_LINES, f, PS_MAX_INLINE), 1);
	ck_assert_int_eq(f[0].line, 0);
	ck_assert_int_eq(ps_symbolizer_use_dwarf(z, 64u << 20, 0), 0);
	for (i = 0; i < 64 && !hit; i++) {
		n = ps_symbolize(z, o2, q.off + (uint64_t)i, PS_FRAMES_LINES, f, PS_MAX_INLINE);
		ck_assert_int_ge(n, 1);
		ck_assert_str_eq(f[n - 1].name, "static_target");
		ck_assert_msg(strstr(f[n - 1].file, "test/check_symbols.c") != NULL, "%s",
			      f[n - 1].file);
		hit = f[n - 1].line == TARGET_BODY_LINE;
	}
	ck_assert_msg(hit, "no offset of static_target on line %d", TARGET_BODY_LINE);
	ps_symbolizer_free(z);
	ps_object_put(self);
	ps_object_put(o2);
	ps_object_put(o);
	ck_assert_int_eq(unlink(copy), 0);
}
END_TEST

START_TEST(symbols_names_shared_library_functions)
{
	struct ps_symbols *s = new_syms();
	uintptr_t deflate = (uintptr_t)lib_sym("libz.so.1", "deflate");
	uintptr_t qsort_ip = (uintptr_t)lib_sym("libc.so.6", "qsort");

	expect_name(s, deflate, PS_SYM_FUNC, "deflate");
	expect_name(s, deflate + 100, PS_SYM_FUNC, "deflate");
	expect_name(s, qsort_ip + 1, PS_SYM_FUNC, "qsort");
	ps_symbols_free(s);
}
END_TEST

START_TEST(symbols_demangles_cxx_methods)
{
	uintptr_t cmp = (uintptr_t)lib_sym("libstdc++.so.6",
					   "_ZNKSt7collateIcE7compareEPKcS2_S2_S2_");
	uintptr_t what = (uintptr_t)lib_sym("libstdc++.so.6", "_ZNKSt13runtime_error4whatEv");
	struct ps_symbols *s = new_syms();

	expect_name(s, cmp + 2, PS_SYM_FUNC, "std::collate<char>::compare(char const*, "
		    "char const*, char const*, char const*) const");
	/* Identical code folding gives logic_error::what the same address;
	 * among equal aliases the first in the table wins. */
	expect_name(s, what + 2, PS_SYM_FUNC, "std::runtime_error::what() const");
	ps_symbols_free(s);
}
END_TEST

/* Aliases at one address: the name without leading underscores wins over
 * the one earlier in libc's table (__libc_free), weak or not (calloc). */
START_TEST(symbols_prefers_plain_alias_name)
{
	struct ps_symbols *s = new_syms();

	expect_name(s, (uintptr_t)lib_sym("libc.so.6", "free") + 1, PS_SYM_FUNC, "free");
	expect_name(s, (uintptr_t)lib_sym("libc.so.6", "calloc") + 1, PS_SYM_FUNC, "calloc");
	expect_name(s, (uintptr_t)lib_sym("libc.so.6", "malloc") + 1, PS_SYM_FUNC, "malloc");
	ps_symbols_free(s);
}
END_TEST

START_TEST(symbols_respects_symbol_extents)
{
	struct ps_symbols *s = new_syms();
	uintptr_t a = (uintptr_t)sym_sized;
	char buf[256], want[256], exe[256];
	ssize_t n;

	ck_assert_uint_eq((uintptr_t)sym_label, a + 16);
	expect_name(s, a, PS_SYM_FUNC, "sym_sized");  /* not sym_local_alias */
	expect_name(s, a + 7, PS_SYM_FUNC, "sym_sized");
	/* Past its size: not sym_sized, though it is the nearest symbol. */
	ck_assert_int_eq(ps_symbols_lookup(s, a + 8, buf, sizeof(buf)), PS_SYM_UNKNOWN);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ck_assert_int_gt(n, 0);
	exe[n] = '\0';
	snprintf(want, sizeof(want), "%s+0x", strrchr(exe, '/') + 1);
	ck_assert_msg(strncmp(buf, want, strlen(want)) == 0, "got %s", buf);
	/* An unsized label covers up to the end of its section. */
	expect_name(s, a + 16, PS_SYM_FUNC, "sym_label");
	expect_name(s, a + 31, PS_SYM_FUNC, "sym_label");
	ps_symbols_free(s);
}
END_TEST

START_TEST(symbols_reports_skip_range_as_shim)
{
	uintptr_t deflate = (uintptr_t)lib_sym("libz.so.1", "deflate");
	struct ps_symbols *s = NULL;
	uintptr_t lo, hi;

	ck_assert_int_eq(ps_symbols_object_range((void *)deflate, &lo, &hi), 0);
	ck_assert_uint_le(lo, deflate);
	ck_assert_uint_gt(hi, deflate);
	ck_assert_int_eq(ps_symbols_new(&s, lo, hi), 0);
	expect_name(s, deflate, PS_SYM_SHIM, "[pyroshim]");
	expect_name(s, lo, PS_SYM_SHIM, "[pyroshim]");
	expect_name(s, (uintptr_t)target_ptr, PS_SYM_FUNC, "static_target");
	ps_symbols_free(s);
}
END_TEST

START_TEST(symbols_object_range_rejects_unmapped_address)
{
	uintptr_t lo = 1, hi = 2;

	ck_assert_int_eq(ps_symbols_object_range((void *)16, &lo, &hi), -ENOENT);
	ck_assert_uint_eq(lo, 1);
}
END_TEST

START_TEST(symbols_formats_ip_in_no_object_as_unknown)
{
	struct ps_symbols *s = new_syms();

	expect_name(s, 0x10, PS_SYM_UNKNOWN, "[unknown]+0x10");
	expect_name(s, 0xdeadbeef0, PS_SYM_UNKNOWN, "[unknown]+0xdeadbeef0");
	ps_symbols_free(s);
}
END_TEST

/* The ELF header of libz is mapped but is no function. */
START_TEST(symbols_formats_uncovered_ip_as_module_offset)
{
	void *deflate = lib_sym("libz.so.1", "deflate");
	struct ps_symbols *s = new_syms();
	const char *slash;
	char want[256];
	Dl_info di;

	ck_assert_int_ne(dladdr(deflate, &di), 0);
	slash = strrchr(di.dli_fname, '/');
	snprintf(want, sizeof(want), "%s+0x10", slash ? slash + 1 : di.dli_fname);
	expect_name(s, (uintptr_t)di.dli_fbase + 0x10, PS_SYM_UNKNOWN, want);
	ps_symbols_free(s);
}
END_TEST

START_TEST(symbols_truncates_to_buffer_length)
{
	struct ps_symbols *s = new_syms();
	uintptr_t a = (uintptr_t)target_ptr;
	char buf[16];
	int i;

	for (i = 0; i < 2; i++) {  /* once resolved, once from the cache */
		memset(buf, 'X', sizeof(buf));
		ck_assert_int_eq(ps_symbols_lookup(s, a, buf, 8), PS_SYM_FUNC);
		ck_assert_str_eq(buf, "static_");
		ck_assert_int_eq(buf[8], 'X');
	}
	memset(buf, 'X', sizeof(buf));
	ck_assert_int_eq(ps_symbols_lookup(s, a, buf, 1), PS_SYM_FUNC);
	ck_assert_int_eq(buf[0], '\0');
	ck_assert_int_eq(buf[1], 'X');
	ck_assert_int_eq(ps_symbols_lookup(s, 0x10, buf, 8), PS_SYM_UNKNOWN);
	ck_assert_str_eq(buf, "[unknow");
	ck_assert_int_eq(ps_symbols_lookup(s, a, buf, 0), -EINVAL);
	ck_assert_int_eq(ps_symbols_lookup(s, a, NULL, 8), -EINVAL);
	ck_assert_int_eq(ps_symbols_lookup(NULL, a, buf, 8), -EINVAL);
	ps_symbols_free(s);
}
END_TEST

START_TEST(symbols_answers_repeated_ip_from_cache)
{
	struct ps_symbols *s = new_syms();
	uintptr_t a = (uintptr_t)target_ptr;
	struct ps_symbols_stats st;
	uint64_t files;
	int i;

	for (i = 0; i < 100; i++)
		expect_name(s, a + (uintptr_t)(i % 4), PS_SYM_FUNC, "static_target");
	ps_symbols_get_stats(s, &st);
	ck_assert_uint_eq(st.lookups, 100);
	ck_assert_uint_eq(st.cache_hits, 96);
	ck_assert_uint_eq(st.cached, 4);
	/* Read now, or shared with an earlier test's reader (elf.h
	 * ps_elf_get: one process runs every test without CK_FORK). */
	ck_assert_uint_ge(st.files + st.shared, 1);
	ck_assert_uint_ge(st.modules, 2);
	files = st.files + st.shared;
	/* The cache is emptied; the executable's symbol table is kept. */
	ps_symbols_invalidate(s);
	expect_name(s, a, PS_SYM_FUNC, "static_target");
	ps_symbols_get_stats(s, &st);
	ck_assert_uint_eq(st.cache_hits, 96);
	ck_assert_uint_eq(st.cached, 1);
	ck_assert_uint_eq(st.scans, 2);
	ck_assert_uint_eq(st.files + st.shared, files);
	ps_symbols_free(s);
}
END_TEST

/* Thousands of distinct IPs: the cache grows, every answer stays right. */
START_TEST(symbols_cache_grows_and_stays_correct)
{
	uintptr_t deflate = (uintptr_t)lib_sym("libz.so.1", "deflate");
	struct ps_symbols *s = new_syms();
	struct ps_symbols_stats st;
	int i, round;

	for (round = 0; round < 2; round++)
		for (i = 0; i < 5000; i++)
			expect_name(s, deflate + (uintptr_t)(i % 6000), PS_SYM_FUNC, "deflate");
	ps_symbols_get_stats(s, &st);
	ck_assert_uint_eq(st.cached, 5000);
	ck_assert_uint_eq(st.cache_hits, 5000);
	ck_assert_uint_eq(st.flushes, 0);
	ps_symbols_free(s);
}
END_TEST

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A garbage IP may trigger a rescan at most once a second. */
START_TEST(symbols_rate_limits_rescans_for_garbage_ips)
{
	struct ps_symbols *s = new_syms();
	struct ps_symbols_stats st;
	double t0 = now_s(), elapsed;
	uintptr_t i;

	for (i = 0; i < 2000; i++)
		expect_name(s, 0x1000, PS_SYM_UNKNOWN, "[unknown]+0x1000");
	elapsed = now_s() - t0;
	ps_symbols_get_stats(s, &st);
	ck_assert_uint_ge(st.scans, 1);
	ck_assert_uint_le(st.scans, 2 + (uint64_t)elapsed);
	ps_symbols_free(s);
}
END_TEST

/* An object loaded after the first scan is found once the cache is told. */
START_TEST(symbols_finds_object_loaded_after_invalidate)
{
	struct ps_symbols *s = new_syms();
	uintptr_t cmp;

	expect_name(s, (uintptr_t)target_ptr, PS_SYM_FUNC, "static_target");
	cmp = (uintptr_t)lib_sym("libstdc++.so.6", "_ZNSt6locale7classicEv");
	ps_symbols_invalidate(s);
	expect_name(s, cmp, PS_SYM_FUNC, "std::locale::classic()");
	expect_name(s, (uintptr_t)target_ptr, PS_SYM_FUNC, "static_target");
	ps_symbols_free(s);
}
END_TEST

static const char *
libz_path(void)
{
	static char path[4096];
	Dl_info di;

	ck_assert_int_ne(dladdr(lib_sym("libz.so.1", "deflate"), &di), 0);
	snprintf(path, sizeof(path), "%s", di.dli_fname);
	return path;
}

static unsigned char *
read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *p;
	long n;

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_gt(n, 0);
	rewind(f);
	p = malloc((size_t)n);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

static void
write_all(const char *path, const unsigned char *p, size_t len)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(symbols_reads_real_file_and_rejects_non_elf)
{
	char tmp[64];
	size_t n = 1;

	ck_assert_int_eq(ps_symbols_load_file_for_test(libz_path(), &n), 0);
	ck_assert_uint_gt(n, 50);  /* zlib exports ~90 functions */
	ck_assert_int_eq(ps_symbols_load_file_for_test("/nonexistent/x.so", &n), -ENOENT);
	ck_assert_uint_eq(n, 0);
	snprintf(tmp, sizeof(tmp), "/tmp/check_symbols_%d.txt", (int)getpid());
	write_all(tmp, (const unsigned char *)"not an ELF file at all, really not\n", 35);
	ck_assert_int_eq(ps_symbols_load_file_for_test(tmp, &n), -ENOEXEC);
	ck_assert_int_eq(ps_symbols_load_file_for_test("/tmp", &n), -ENOEXEC);
	unlink(tmp);
}
END_TEST

/* The table of a large object (libc, with libc6-dbg's .symtab: thousands
 * of functions, aliases among them) is sorted, one symbol per address,
 * and every lookup of a symbol's own address finds it. */
START_TEST(symbols_table_is_sorted_one_per_address)
{
	/* libc's own malloc: under ASan the default scope's is the sanitizer's. */
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), *m;
	struct ps_symtab t = { 0 };
	const struct ps_sym *f;
	uint32_t i;
	Dl_info di;

	ck_assert_ptr_nonnull(h);
	m = dlsym(h, "malloc");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_ne(dladdr(m, &di), 0);
	ck_assert_int_eq(ps_elf_load(di.dli_fname, NULL, 0, &t), 0);
	ck_assert_uint_gt(t.n, 1000);
	for (i = 1; i < t.n; i++)
		ck_assert_uint_lt(t.v[i - 1].lo, t.v[i].lo);
	for (i = 0; i < t.n; i++) {
		f = ps_elf_find_sym(&t, t.v[i].lo);
		ck_assert_ptr_nonnull(f);
		ck_assert_uint_eq(f->lo, t.v[i].lo);
	}
	/* Of malloc's aliases (__libc_malloc, __malloc), the plain name. */
	f = ps_elf_find_sym(&t, (uintptr_t)m - (uintptr_t)di.dli_fbase);
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq((const char *)t.names.data + (f->name & PS_SYM_OFF), "malloc");
	ps_symtab_free(&t);
	dlclose(h);
}
END_TEST

/* Section headers sit at the end of the file: every truncation loses them
 * or cuts the symbol sections, and must yield nothing, not a crash. */
START_TEST(symbols_survives_truncated_elf)
{
	unsigned char *img;
	size_t len, cut, n;
	char tmp[64];
	int rc;

	img = read_all(libz_path(), &len);
	snprintf(tmp, sizeof(tmp), "/tmp/check_symbols_%d.so", (int)getpid());
	for (cut = 0; cut < len; cut += len / 16 + 1) {
		write_all(tmp, img, cut);
		n = 1;
		rc = ps_symbols_load_file_for_test(tmp, &n);
		ck_assert_msg(rc == -ENOEXEC || (rc == 0 && n == 0),
			      "cut %zu: rc %d, %zu symbols", cut, rc, n);
	}
	unlink(tmp);
	free(img);
}
END_TEST

/* Random bytes in the ELF header, the section header table and the symbol
 * sections: any answer but a crash or an impossible count is fine. */
START_TEST(symbols_survives_corrupted_elf)
{
	unsigned char *img, *bad;
	uint64_t shoff, rnd = 42;
	size_t len, n, k, at;
	char tmp[64];
	int it, rc;

	img = read_all(libz_path(), &len);
	bad = malloc(len);
	ck_assert_ptr_nonnull(bad);
	memcpy(&shoff, img + 0x28, sizeof(shoff));  /* e_shoff of ELF64 */
	ck_assert_uint_lt(shoff, len);
	snprintf(tmp, sizeof(tmp), "/tmp/check_symbols_%d.so", (int)getpid());
	for (it = 0; it < 300; it++) {
		memcpy(bad, img, len);
		for (k = 0; k < 8; k++) {
			rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
			at = (size_t)(rnd >> 33);
			if (k % 3 == 0)
				at %= 64;
			else if (k % 3 == 1)
				at = shoff + at % (len - shoff);
			else
				at %= len;
			bad[at] = (unsigned char)(rnd >> 20);
		}
		write_all(tmp, bad, len);
		n = 0;
		rc = ps_symbols_load_file_for_test(tmp, &n);
		ck_assert_msg(rc == 0 || rc == -ENOEXEC, "iteration %d: rc %d", it, rc);
		ck_assert_uint_le(n, len / 16);  /* an Elf64_Sym is 24 bytes */
	}
	unlink(tmp);
	free(bad);
	free(img);
}
END_TEST

/* A stripped library's static functions come from its separate debug file,
 * found by build id (Debian's libc6-dbg installs libc's). */
START_TEST(symbols_reads_separate_debug_file_by_build_id)
{
	const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
	size_t n = 0;
	DIR *d = opendir("/usr/lib/debug/.build-id");

	if (!d) {
		fprintf(stderr, "skipped: no /usr/lib/debug/.build-id (install libc6-dbg)\n");
		return;
	}
	closedir(d);
	ck_assert_int_eq(ps_symbols_load_file_for_test(libc, &n), 0);
	/* Debian 12's libc exports functions at about 2300 distinct
	 * addresses; its debug file's .symtab adds the static helpers
	 * (__vfprintf_internal, start_thread, ...), about 3700 in all. */
	ck_assert_msg(n > 3000, "only %zu symbols: debug file not used", n);
}
END_TEST

static Suite *
symbols_suite(void)
{
	Suite *s = suite_create("symbols");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, symbols_names_static_function_from_symtab);
	tcase_add_test(tc, symbols_names_shared_library_functions);
	tcase_add_test(tc, symbols_names_plt_stubs_func_at_plt);
	tcase_add_test(tc, symbols_source_lines_of_own_code);
	tcase_add_test(tc, symbolizer_names_a_copied_file_by_offset);
	tcase_add_test(tc, symbols_demangles_cxx_methods);
	tcase_add_test(tc, symbols_prefers_plain_alias_name);
	tcase_add_test(tc, symbols_table_is_sorted_one_per_address);
	tcase_add_test(tc, symbols_respects_symbol_extents);
	tcase_add_test(tc, symbols_reports_skip_range_as_shim);
	tcase_add_test(tc, symbols_object_range_rejects_unmapped_address);
	tcase_add_test(tc, symbols_formats_ip_in_no_object_as_unknown);
	tcase_add_test(tc, symbols_formats_uncovered_ip_as_module_offset);
	tcase_add_test(tc, symbols_truncates_to_buffer_length);
	tcase_add_test(tc, symbols_answers_repeated_ip_from_cache);
	tcase_add_test(tc, symbols_cache_grows_and_stays_correct);
	tcase_add_test(tc, symbols_rate_limits_rescans_for_garbage_ips);
	tcase_add_test(tc, symbols_finds_object_loaded_after_invalidate);
	tcase_add_test(tc, symbols_reads_real_file_and_rejects_non_elf);
	tcase_add_test(tc, symbols_survives_truncated_elf);
	tcase_add_test(tc, symbols_survives_corrupted_elf);
	tcase_add_test(tc, symbols_reads_separate_debug_file_by_build_id);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(symbols_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	ps_symbolizer_release_shared();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
