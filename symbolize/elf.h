/* elf.h -- the function symbols of one ELF file, read from disk.
 *
 * .symtab (static functions too) or, without it, .dynsym; a separate debug
 * file found by build id (/usr/lib/debug/.build-id/xx/yyyy.debug) when the
 * object has neither.  A Go binary without .symtab (`go build -ldflags=-s`)
 * is named from its function table, .gopclntab (shim/gopclntab.h), with
 * .dynsym added for what it exports.  Symbols are sorted by address, one per address (the
 * best of its aliases), names copied out so that the file is unmapped
 * right after parsing.
 *
 * Context: the uploader only; allocates.
 */
#ifndef PS_ELF_H
#define PS_ELF_H

#include <link.h>
#include <stdint.h>
#include "common/buf.h"
#include "common/ps.h"

/* ps_sym.name: two ranking flags above the offset of the name. */
#define PS_SYM_SIZED   0x80000000u      /* st_size > 0 */
#define PS_SYM_GLOBAL  0x40000000u      /* binding is not STB_LOCAL */
#define PS_SYM_OFF     0x3fffffffu

struct ps_sym {
	uint64_t lo;    /* st_value: link-time address */
	uint32_t len;   /* st_size; if unsized, bytes to the end of its section */
	uint32_t name;  /* PS_SYM_* flags | offset in ps_symtab.names */
};

/* Most PT_LOAD segments of a file kept (a linker writes 2 to 5). */
#define PS_MAX_SEGS 16

struct ps_symtab {
	struct ps_sym *v;       /* owned; sorted by lo, one entry per lo */
	uint32_t n, alloc;
	struct ps_buf names;    /* NUL-terminated names, cap 256 MiB */
	uint8_t build_id[64];   /* the object's GNU build ID (NT_GNU_BUILD_ID) */
	uint32_t build_id_len;  /* 0: none */
	/* The file's PT_LOAD segments, so that a file offset is a link-time
	 * address (ps_elf_addr). */
	struct ps_seg {
		uint64_t vaddr, offset, filesz;
	} seg[PS_MAX_SEGS];
	uint32_t nseg;
};

/* Read the symbols of the file at path into *t (empty on entry).  mem/phnum:
 * the loaded image's program headers, which the file's must match (NULL: do
 * not check).  Returns 0, -ENOEXEC (not ELF, or headers that do not match),
 * -ENOMEM, or -errno from open/mmap. */
int ps_elf_load(const char *path, const ElfW(Phdr) *mem, uint32_t phnum,
		struct ps_symtab *t) PS_WUR;

/* ps_elf_load's table of the file at path, shared: a process tree's
 * helper serves one program after another, and they load the same
 * objects, so libc's .symtab is read and sorted once for all of them.
 * Tables are keyed by what stat(2) says of the file (device, inode, size,
 * modification and change times); one is shared only if the file did not
 * change while it was read.  The program headers are checked at the first read only:
 * the same file has the same ones.  Returns 1 (the file was read now) or
 * 0 (another reader had read it) and a reference in *out, which stays
 * valid and unchanged until ps_elf_put; or as ps_elf_load.
 * The PS_ELF_IDLE_TABS tables released last are kept for the next
 * program.  Context: under the worker's lock, as every use of symbols. */
#define PS_ELF_IDLE_TABS 64
int ps_elf_get(const char *path, const ElfW(Phdr) *mem, uint32_t phnum,
	       const struct ps_symtab **out) PS_WUR;

/* Release a reference from ps_elf_get.  NULL is allowed. */
void ps_elf_put(const struct ps_symtab *t);

/* The identity of the file a shared table was read from, never reused
 * within the process: what else is read of the file (its DWARF) is kept
 * under it.  0 for a table that is not shared (its file changed while it
 * was read) or NULL. */
uint64_t ps_elf_file_id(const struct ps_symtab *t);

/* 1 while the table of identity id is kept (in use, or among the idle
 * ones); once 0, never 1 again. */
int ps_elf_file_alive(uint64_t id);

/* The symbol covering off (a link-time address), or NULL.  A sized symbol
 * that contains off wins over an unsized one before it. */
const struct ps_sym *ps_elf_find_sym(const struct ps_symtab *t, uint64_t off);

/* The link-time address of file offset off: off's place in the PT_LOAD
 * segment that holds it.  Returns 0 and sets *addr, or -ENOENT. */
int ps_elf_addr(const struct ps_symtab *t, uint64_t off, uint64_t *addr);

/* Where separate debug files are looked for: by build ID under
 * PS_DEBUG_ROOT/.build-id/, and by name (PS_DEBUG_PATH, libdwfl's
 * debuginfo_path, which dwarf.c gives libdw) beside the object, in its
 * .debug/ and under PS_DEBUG_ROOT. */
#define PS_DEBUG_ROOT "/usr/lib/debug"
#define PS_DEBUG_PATH ":.debug:" PS_DEBUG_ROOT

/* 0 if libdw's search on disk (dwarf.c) cannot find any DWARF for the ELF
 * file at path -- it has no debug sections, and no separate debug file is
 * where libdwfl looks, by build ID or by debuglink name -- so that it need
 * not be loaded and asked; 1 otherwise, or when in doubt.  A debug package installed later counts at the next
 * call.  Context: the uploader; opens and stats files. */
int ps_elf_dwarf_possible(const char *path);

/* Release *t.  Context: its owner. */
void ps_symtab_free(struct ps_symtab *t);

#endif
