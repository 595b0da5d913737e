/* elf.c -- function symbols of an ELF file.  See elf.h.
 *
 * The ELF file may be truncated, hostile or not the one that is loaded:
 * every offset, size, index and string read from it is bounds-checked, and
 * its program headers must match the loaded image's (phdrs_match), or the
 * caller is told so.  Still not covered: a file truncated in place while it
 * is mapped here raises SIGBUS (as it would in the program itself).
 */
#include "symbolize/elf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/shared.h"
#include "shim/gopclntab.h"
#include "symbolize/symbols.h"

#define MAX_SECTIONS  (1u << 20)     /* section headers accepted per file */
#define MAX_SYMS      (4u << 20)     /* function symbols kept per object */
#define MAX_SYMNAMES  (256u << 20)   /* bytes of symbol names per object */
#define BACKSCAN      8              /* earlier symbols tried for a cover */

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

/* The file's PT_LOAD segments into t (ps_elf_addr). */
static void
keep_segments(const struct elf *e, struct ps_symtab *t)
{
	const ElfW(Ehdr) *eh = (const void *)e->p;
	const ElfW(Phdr) *f;
	uint32_t i;

	t->nseg = 0;
	if (eh->e_phentsize != sizeof(*f) ||
	    !in_file(e, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(*f), _Alignof(ElfW(Phdr))))
		return;
	f = (const void *)(e->p + eh->e_phoff);
	for (i = 0; i < eh->e_phnum && t->nseg < PS_MAX_SEGS; i++)
		if (f[i].p_type == PT_LOAD)
			t->seg[t->nseg++] = (struct ps_seg){ f[i].p_vaddr, f[i].p_offset, f[i].p_filesz };
}

int
ps_elf_addr(const struct ps_symtab *t, uint64_t off, uint64_t *addr)
{
	uint32_t i;

	for (i = 0; i < t->nseg; i++)
		if (off >= t->seg[i].offset && off - t->seg[i].offset < t->seg[i].filesz) {
			*addr = t->seg[i].vaddr + (off - t->seg[i].offset);
			return 0;
		}
	return -ENOENT;
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

static const char *str_at(const struct elf *e, const ElfW(Shdr) *strs, uint64_t off);

/* The first section whose name's first len bytes are name's: the section
 * called name with len = strlen(name) + 1 (find_section_named), the first
 * of a family (".debug_") with len = strlen(name).  NULL if none. */
static const ElfW(Shdr) *
find_section_prefix(const struct elf *e, const char *name, size_t len)
{
	const ElfW(Ehdr) *eh = (const void *)e->p;
	const ElfW(Shdr) *strs;
	const char *s;
	size_t i, ndx = eh->e_shstrndx;

	/* With 0xffff or more sections, the index is in section 0. */
	if (ndx == SHN_XINDEX)
		ndx = e->sh[0].sh_link;
	if (ndx == SHN_UNDEF || ndx >= e->shnum)
		return NULL;
	strs = &e->sh[ndx];
	if (strs->sh_type != SHT_STRTAB || !in_file(e, strs->sh_offset, strs->sh_size, 1))
		return NULL;
	for (i = 0; i < e->shnum; i++) {
		s = str_at(e, strs, e->sh[i].sh_name);
		if (s && !strncmp(s, name, len))
			return &e->sh[i];
	}
	return NULL;
}

/* The section called name (".gopclntab"), or NULL. */
static const ElfW(Shdr) *
find_section_named(const struct elf *e, const char *name)
{
	return find_section_prefix(e, name, strlen(name) + 1);
}

/* The NUL-terminated name at off in string section strs, or NULL. */
static const char *
str_at(const struct elf *e, const ElfW(Shdr) *strs, uint64_t off)
{
	const char *p;

	if (off >= strs->sh_size)
		return NULL;
	p = (const char *)e->p + strs->sh_offset + off;
	/* A table that ends in NUL ends every name in it, as linkers write
	 * them: checked once, not per name (cc1 has 29000). */
	if (e->p[strs->sh_offset + strs->sh_size - 1] == '\0')
		return p;
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
push_sym(struct ps_symtab *t, uint64_t lo, uint64_t len, uint32_t flags, const char *name)
{
	size_t off = t->names.len;
	struct ps_sym *v;
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
collect(const struct elf *e, const ElfW(Shdr) *ss, struct ps_symtab *t)
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
			      (sym[i].st_size ? PS_SYM_SIZED : 0) |
			      (ELF64_ST_BIND(sym[i].st_info) != STB_LOCAL ? PS_SYM_GLOBAL : 0), name);
		if (rc == -E2BIG)
			return 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

#if defined(__x86_64__)
/* The GOT slot that the 16-byte x86-64 PLT stub at p (link-time address
 * at) jumps through: "[endbr64] [bnd] jmp *disp(%rip)"; 0 if it is not
 * one. */
static uint64_t
plt_slot(const uint8_t *p, uint64_t at)
{
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	int32_t disp;
	size_t i = 0;

	if (!memcmp(p, endbr64, 4))
		i = 4;
	if (p[i] == 0xf2)
		i++;
	if (p[i] != 0xff || p[i + 1] != 0x25)
		return 0;
	memcpy(&disp, p + i + 2, 4);
	return at + i + 6 + (uint64_t)(int64_t)disp;
}

/* The name of the function that GOT slot `got` calls, from .rela.plt:
 * a JUMP_SLOT's symbol, or for an IRELATIVE slot (an IFUNC called from
 * inside its own library) the function at its resolver address. */
static const char *
plt_target(const struct elf *e, const ElfW(Shdr) *rela, const struct ps_symtab *t, uint64_t got)
{
	const ElfW(Shdr) *dynsym, *dynstr;
	const ElfW(Rela) *r = (const void *)(e->p + rela->sh_offset);
	const ElfW(Sym) *sym;
	const struct ps_sym *f;
	size_t i, n = rela->sh_size / sizeof(*r);

	for (i = 0; i < n; i++) {
		if (r[i].r_offset != got)
			continue;
		if (ELF64_R_TYPE(r[i].r_info) == R_X86_64_IRELATIVE) {
			f = ps_elf_find_sym(t, (uint64_t)r[i].r_addend);
			return f ? (const char *)t->names.data + (f->name & PS_SYM_OFF) : NULL;
		}
		if (rela->sh_link >= e->shnum)
			return NULL;
		dynsym = &e->sh[rela->sh_link];
		if (dynsym->sh_link >= e->shnum ||
		    !in_file(e, dynsym->sh_offset, dynsym->sh_size, _Alignof(ElfW(Sym))) ||
		    ELF64_R_SYM(r[i].r_info) >= dynsym->sh_size / sizeof(*sym))
			return NULL;
		dynstr = &e->sh[dynsym->sh_link];
		sym = (const ElfW(Sym) *)(e->p + dynsym->sh_offset) + ELF64_R_SYM(r[i].r_info);
		return in_file(e, dynstr->sh_offset, dynstr->sh_size, 1) ?
			str_at(e, dynstr, sym->st_name) : NULL;
	}
	return NULL;
}
#endif

/* PLT stubs as "name@plt", the way objdump and perf name them: without
 * them a program's calls into libc through its PLT show as "exe+0x10c0".
 * t must be sorted (IRELATIVE targets are looked up in it).  x86-64 only.
 * Returns 0 or -ENOMEM. */
static int
add_plt(const struct elf *e, struct ps_symtab *t)
{
#if defined(__x86_64__)
	static const char *const secs[] = { ".plt", ".plt.sec" };
	const ElfW(Shdr) *rela = find_section_named(e, ".rela.plt"), *s;
	char name[512];
	const char *target;
	uint64_t off, got;
	size_t k;
	int rc;

	if (!rela || rela->sh_type != SHT_RELA || rela->sh_entsize != sizeof(ElfW(Rela)) ||
	    !in_file(e, rela->sh_offset, rela->sh_size, _Alignof(ElfW(Rela))))
		return 0;
	for (k = 0; k < PS_ARRAY_LEN(secs); k++) {
		s = find_section_named(e, secs[k]);
		if (!s || s->sh_type != SHT_PROGBITS || !in_file(e, s->sh_offset, s->sh_size, 1))
			continue;
		/* .plt starts with the lazy resolver's own 16 bytes. */
		for (off = k == 0 ? 16 : 0; off + 16 <= s->sh_size && t->n < MAX_SYMS; off += 16) {
			got = plt_slot(e->p + s->sh_offset + off, s->sh_addr + off);
			target = got ? plt_target(e, rela, t, got) : NULL;
			if (!target || snprintf(name, sizeof(name), "%s@plt", target) >= (int)sizeof(name))
				continue;
			rc = push_sym(t, s->sh_addr + off, 16, PS_SYM_SIZED, name);
			if (rc < 0 && rc != -E2BIG)
				return rc;
		}
	}
#else
	(void)e;
	(void)t;
#endif
	return 0;
}

/* Add the Go functions of .gopclntab (a Go binary built with -ldflags=-s
 * keeps it when .symtab goes).  Entry addresses count from the table's
 * textStart when it lies in .text (an external link puts C start-up code
 * at the start of .text), else from .text itself (the word may be
 * unrelocated in a position-independent file).  A missing or malformed
 * table adds nothing.  Returns 0 or -ENOMEM. */
static int
collect_go(const struct elf *e, struct ps_symtab *t)
{
	const ElfW(Shdr) *pcln = find_section_named(e, ".gopclntab");
	const ElfW(Shdr) *text = find_section_named(e, ".text");
	struct ps_gopcln g;
	uint64_t lo, len, start;
	const char *name;
	uint32_t i;
	int rc;

	/* Its name in a position-independent build (-buildmode=pie). */
	if (!pcln)
		pcln = find_section_named(e, ".data.rel.ro.gopclntab");
	if (!pcln || !text || pcln->sh_type != SHT_PROGBITS ||
	    !in_file(e, pcln->sh_offset, pcln->sh_size, 1))
		return 0;
	start = ps_gopcln_header_text(e->p + pcln->sh_offset, pcln->sh_size);
	if (start < text->sh_addr || start - text->sh_addr >= text->sh_size)
		start = text->sh_addr;
	if (ps_gopcln_open(&g, e->p + pcln->sh_offset, pcln->sh_size, start) != 0)
		return 0;
	for (i = 0; i < g.nfunc && t->n < MAX_SYMS; i++) {
		name = ps_gopcln_name(&g, i);
		ps_gopcln_range(&g, i, &lo, &len);
		if (!name || !name[0] || len == 0)
			continue;
		rc = push_sym(t, lo, len, PS_SYM_SIZED | PS_SYM_GLOBAL, name);
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

/* Among aliases (symbols at one address) the best first: sized, then
 * global, then fewer leading underscores ("malloc" over "__libc_malloc"),
 * then table order.  Negative if a goes first. */
static int
cmp_alias(const void *pa, const void *pb, void *names)
{
	const struct ps_sym *a = pa, *b = pb;
	uint32_t fa = a->name & ~PS_SYM_OFF, fb = b->name & ~PS_SYM_OFF;
	size_t ua, ub;

	if (fa != fb)
		return fa > fb ? -1 : 1;
	ua = underscores((const char *)names + (a->name & PS_SYM_OFF));
	ub = underscores((const char *)names + (b->name & PS_SYM_OFF));
	if (ua != ub)
		return ua < ub ? -1 : 1;
	if ((a->name & PS_SYM_OFF) != (b->name & PS_SYM_OFF))
		return (a->name & PS_SYM_OFF) < (b->name & PS_SYM_OFF) ? -1 : 1;
	return 0;
}

/* Sort t by address, keeping the best of each address (cmp_alias).  A
 * radix sort on the address, 8 bits a pass, skipping the bytes every
 * address shares, then each run of aliases put in order: cc1's 27000
 * symbols load in 3.1 ms instead of the 6.8 of a qsort whose comparator
 * read names at every comparison.
 * Returns 0 or -ENOMEM (t unchanged). */
static int
sort_syms(struct ps_symtab *t)
{
	const char *names = (const char *)t->names.data;
	struct ps_sym *v = t->v, *tmp, *src, *dst;
	uint64_t all_or = 0, all_and = ~(uint64_t)0;
	uint32_t count[256], i, j, k, n = 0, sum;
	unsigned shift;

	if (t->n < 2)
		return 0;
	tmp = malloc((size_t)t->n * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		all_or |= v[i].lo;
		all_and &= v[i].lo;
	}
	src = v;
	dst = tmp;
	for (shift = 0; shift < 64; shift += 8) {
		if ((((all_or ^ all_and) >> shift) & 0xff) == 0)
			continue;  /* the same byte in every address */
		memset(count, 0, sizeof(count));
		for (i = 0; i < t->n; i++)
			count[(src[i].lo >> shift) & 0xff]++;
		for (k = 0, sum = 0; k < 256; k++) {
			i = count[k];
			count[k] = sum;
			sum += i;
		}
		for (i = 0; i < t->n; i++)
			dst[count[(src[i].lo >> shift) & 0xff]++] = src[i];
		tmp = src;
		src = dst;
		dst = tmp;
	}
	if (src != v)
		memcpy(v, src, (size_t)t->n * sizeof(*v));
	free(src == v ? dst : src);
	/* Each run of aliases in order, then its first kept. */
	for (i = 0; i < t->n; i = j) {
		for (j = i + 1; j < t->n && v[j].lo == v[i].lo; j++)
			;
		if (j - i > 1)
			qsort_r(v + i, j - i, sizeof(*v), cmp_alias, (void *)names);
		v[n++] = v[i];
	}
	t->n = n;
	v = realloc(t->v, (size_t)n * sizeof(*v));
	if (v) {
		t->v = v;
		t->alloc = n;
	}
	return 0;
}

void
ps_symtab_free(struct ps_symtab *t)
{
	free(t->v);
	ps_buf_free(&t->names);
	memset(t, 0, sizeof(*t));
}

/* The GNU build ID of e (NT_GNU_BUILD_ID note): a pointer into the file
 * and its length, or NULL. */
static const uint8_t *
build_id(const struct elf *e, size_t *len)
{
	const ElfW(Nhdr) *nh;
	const uint8_t *desc;
	uint64_t off, end;
	size_t i;

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
				*len = nh->n_descsz;
				return desc;
			}
			off = (uint64_t)(desc - e->p) + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return NULL;
}

/* The separate debug file of a build ID, where gdb finds it:
 * /usr/lib/debug/.build-id/xx/yyyy.debug (Debian's -dbg and -dbgsym
 * packages install there).  Stripped system libraries -- libc first of
 * all -- keep only their exported symbols in .dynsym; the debug file has
 * the .symtab with every static function.  Returns 0 or -ENOENT. */
static int
debug_file_path(const uint8_t *id, size_t idlen, char *out, size_t len)
{
	size_t k, n;

	if (!id)
		return -ENOENT;
	n = (size_t)snprintf(out, len, PS_DEBUG_ROOT "/.build-id/%02x/", id[0]);
	for (k = 1; k < idlen && n + 3 < len; k++)
		n += (size_t)snprintf(out + n, len - n, "%02x", id[k]);
	return n + 7 < len && snprintf(out + n, len - n, ".debug") > 0 ? 0 : -ENOENT;
}

/* Map the regular file at path read-only into e (its headers not yet
 * checked: elf_open).  Returns 0, -errno of open/mmap, or -ENOEXEC (not a
 * regular file, or too short for an ELF header). */
static int
map_file(const char *path, struct elf *e)
{
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
	e->p = p;
	e->size = (size_t)sb.st_size;
	return 0;
}

/* Read the function symbols of the ELF file at path into t (empty on
 * entry).  mem/phnum: the loaded image's program headers, or NULL.
 * `debug`: path is a separate debug file (do not look for another).
 * Returns 0, -errno of open/fstat/mmap, -ENOEXEC, -ESTALE, -ENOMEM. */
static int
load_file_at(const char *path, const ElfW(Phdr) *mem, uint32_t phnum, struct ps_symtab *t,
	     int debug)
{
	char dbg[PATH_MAX];
	struct elf e = { 0 };
	const uint8_t *id = NULL;
	size_t idlen = 0;
	int rc, go;

	rc = map_file(path, &e);
	if (rc)
		return rc;
	t->names = (struct ps_buf)PS_BUF_INIT(MAX_SYMNAMES);
	rc = elf_open(&e);
	if (rc == 0)
		rc = phdrs_match(&e, mem, phnum);
	if (rc == 0)
		rc = collect(&e, find_section(&e, SHT_SYMTAB), t);
	if (rc == 0)
		id = build_id(&e, &idlen);
	if (rc == 0 && t->n == 0 && !debug && debug_file_path(id, idlen, dbg, sizeof(dbg)) == 0) {
		/* The debug file's symbols have the same link-time addresses. */
		ps_symtab_free(t);
		if (load_file_at(dbg, NULL, 0, t, 1) != 0 || t->n == 0) {
			ps_symtab_free(t);
			t->names = (struct ps_buf)PS_BUF_INIT(MAX_SYMNAMES);
		}
	}
	if (rc == 0 && id && !debug) {
		memcpy(t->build_id, id, idlen);
		t->build_id_len = (uint32_t)idlen;
	}
	if (rc == 0 && !debug)
		keep_segments(&e, t);
	/* A stripped Go binary: its function table names the Go code, and
	 * .dynsym (added below) what it exports. */
	go = rc == 0 && t->n == 0;
	if (go)
		rc = collect_go(&e, t);
	if (rc == 0 && (t->n == 0 || go))
		rc = collect(&e, find_section(&e, SHT_DYNSYM), t);
	if (rc == 0 && !debug) {
		rc = sort_syms(t);
		if (rc == 0)
			rc = add_plt(&e, t);
	}
	munmap((void *)e.p, e.size);
	if (rc == 0)
		rc = sort_syms(t);
	if (rc < 0) {
		ps_symtab_free(t);
		return rc;
	}
	return 0;
}

int
ps_elf_load(const char *path, const ElfW(Phdr) *mem, uint32_t phnum, struct ps_symtab *t)
{
	return load_file_at(path, mem, phnum, t, 0);
}

/* ---- tables shared by every object list of this process -------------- */

/* One file's table, as stat(2) saw the file before and after it was read. */
struct shared_tab {
	struct ps_shared sh;    /* first: the set's list points at the block */
	struct ps_symtab tab;   /* what ps_elf_get hands out */
	struct stat st;
	uint64_t serial;        /* ps_elf_file_id; 0: never shared (the file
				 * changed while it was read) */
};

/* The entry of a table ps_elf_get handed out. */
#define TAB_ENTRY(t) ((struct shared_tab *)(void *)((char *)(t) - offsetof(struct shared_tab, tab)))

static void
tab_free(struct ps_shared *e)
{
	struct shared_tab *t = PS_SHARED_ENTRY(e, struct shared_tab, sh);

	ps_symtab_free(&t->tab);
	free(t);
}

/* The tables read, in use or idle.  Owned by whoever holds the worker's
 * lock (uploader/worker.c): every pass, scrape and session end that
 * reads symbols runs under it, in the helper's loop, the listener's
 * connections or thread mode's uploader. */
static struct ps_shared_set tabs = { .max_idle = PS_ELF_IDLE_TABS, .free = tab_free };
static uint64_t tabs_serial;

/* 1 if stat(2) says a and b are the same file, unchanged.  The change
 * time too: a build installed by tar or `cp -p` (or reproducible, its
 * mtime fixed) over one of the same size may get the inode the old one
 * freed, and the same mtime; its ctime, which no one can set, is new. */
static int
same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int
ps_elf_get(const char *path, const ElfW(Phdr) *mem, uint32_t phnum, const struct ps_symtab **out)
{
	struct shared_tab *e;
	struct ps_shared *h;
	struct stat before, after;
	int known = stat(path, &before) == 0, rc;

	for (h = known ? tabs.head : NULL; h; h = h->next) {
		e = PS_SHARED_ENTRY(h, struct shared_tab, sh);
		if (e->serial && same_stat(&e->st, &before)) {
			ps_shared_hold(&tabs, h);
			*out = &e->tab;
			return 0;
		}
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	rc = load_file_at(path, mem, phnum, &e->tab, 0);
	if (rc) {
		free(e);
		return rc;
	}
	/* Shared only when the file read is the one stat(2) saw. */
	if (known && stat(path, &after) == 0 && same_stat(&before, &after)) {
		e->st = after;
		e->serial = ++tabs_serial;
	}
	ps_shared_add(&tabs, &e->sh);
	*out = &e->tab;
	return 1;
}

void
ps_elf_put(const struct ps_symtab *t)
{
	struct shared_tab *e;

	if (!t)
		return;
	/* One that no ps_elf_get can find is of no use idle. */
	e = TAB_ENTRY(t);
	ps_shared_release(&tabs, &e->sh, e->serial != 0);
}

uint64_t
ps_elf_file_id(const struct ps_symtab *t)
{
	return t ? TAB_ENTRY(t)->serial : 0;
}

int
ps_elf_file_alive(uint64_t id)
{
	const struct ps_shared *h;

	for (h = tabs.head; h; h = h->next)
		if (PS_SHARED_ENTRY(h, struct shared_tab, sh)->serial == id)
			return 1;
	return 0;
}

/* The symbol covering off (a link-time address), or NULL.  A sized symbol
 * that contains off wins over an unsized one before it. */
const struct ps_sym *
ps_elf_find_sym(const struct ps_symtab *t, uint64_t off)
{
	const struct ps_sym *c;
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
		if ((c->name & PS_SYM_SIZED) && off - c->lo < c->len)
			return c;
	}
	c = &t->v[i];
	return !(c->name & PS_SYM_SIZED) && off - c->lo < c->len ? c : NULL;
}

/* 1 if path is there, or may be: a look-up that fails other than by
 * ENOENT or ENOTDIR counts as there (libdwfl gives up on those too, and
 * then asks debuginfod). */
static int
there(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR);
}

/* there() of dir/sub/name; sub may be NULL. */
static int
there_in(const char *dir, const char *sub, const char *name)
{
	char p[PATH_MAX];
	int n = sub ? snprintf(p, sizeof(p), "%s/%s/%s", dir, sub, name) :
		      snprintf(p, sizeof(p), "%s/%s", dir, name);

	return n < 0 || (size_t)n >= sizeof(p) || there(p);
}

/* Is any file that libdwfl's path search would open for the object at
 * `path` there?  The search (dwfl_standard_find_debuginfo, elfutils
 * libdwfl/find-debuginfo.c, with PS_DEBUG_PATH)
 * looks for `link` -- the .gnu_debuglink name, or when there is none the
 * basename + ".debug", and then outside the object's directory the
 * basename too -- in the object's directory, in its .debug/, and under
 * PS_DEBUG_ROOT in each tail of the object's directory ("usr/lib/x",
 * "lib/x", "x", none); then the same for the object's real path if it
 * differs. */
static int
link_there(const char *path, const char *link)
{
	char dir[PATH_MAX], real[PATH_MAX], made[NAME_MAX + 8];
	const char *base, *tail, *f;
	size_t n;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			if (!realpath(path, real))
				return errno != ENOENT && errno != ENOTDIR;
			if (!strcmp(real, path))
				return 0;
			path = real;
		}
		base = strrchr(path, '/');
		n = base ? (size_t)(base - path) : 0;
		if (path[0] != '/' || n >= sizeof(dir))
			return 1;  /* a relative name: not worth guessing */
		base++;
		memcpy(dir, n ? path : "/", n ? n : 1);
		dir[n ? n : 1] = '\0';
		f = link;
		if (!f) {
			if ((size_t)snprintf(made, sizeof(made), "%s.debug", base) >= sizeof(made))
				return 1;
			f = made;
		}
		if (there_in(dir, NULL, f) || there_in(dir, ".debug", f) ||
		    (!link && there_in(dir, ".debug", base)))
			return 1;
		for (tail = dir; tail; tail = strchr(tail + 1, '/'))
			if (tail[1] && (there_in(PS_DEBUG_ROOT, tail + 1, f) ||
					(!link && there_in(PS_DEBUG_ROOT, tail + 1, base))))
				return 1;
		if (there_in(PS_DEBUG_ROOT, NULL, f) || (!link && there_in(PS_DEBUG_ROOT, NULL, base)))
			return 1;
	}
	return 0;
}

int
ps_elf_dwarf_possible(const char *path)
{
	const char *link = NULL;
	const ElfW(Shdr) *sl;
	struct elf e = { 0 };
	char dbg[PATH_MAX];
	const uint8_t *id;
	size_t idlen = 0;
	int rc = 1;

	if (map_file(path, &e))
		return 1;
	/* DWARF of its own (compressed or not), or a file by build ID. */
	if (elf_open(&e) || find_section_prefix(&e, ".debug_", 7) ||
	    find_section_prefix(&e, ".zdebug_", 8))
		goto out;
	id = build_id(&e, &idlen);
	if (id && (debug_file_path(id, idlen, dbg, sizeof(dbg)) || there(dbg)))
		goto out;
	sl = find_section_named(&e, ".gnu_debuglink");
	if (sl) {
		if (sl->sh_type != SHT_PROGBITS || !in_file(&e, sl->sh_offset, sl->sh_size, 1) ||
		    !sl->sh_size || !memchr(e.p + sl->sh_offset, 0, sl->sh_size))
			goto out;
		link = (const char *)e.p + sl->sh_offset;
		if (!link[0] || strlen(link) > NAME_MAX)
			goto out;
	}
	rc = link_there(path, link);
out:
	munmap((void *)e.p, e.size);
	return rc;
}

int
ps_symbols_load_file_for_test(const char *path, size_t *nsyms)
{
	struct ps_symtab t = { 0 };
	int rc;

	rc = ps_elf_load(path, NULL, 0, &t);
	*nsyms = t.n;
	ps_symtab_free(&t);
	return rc;
}
