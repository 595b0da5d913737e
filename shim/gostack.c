/* gostack.c -- the Go leaf frame, from the Go function table.  See
 * gostack.h.
 *
 * Finding a table: an object is Go code when one of its PT_NOTE segments
 * holds the Go build-id note (owner "Go", type 4), read in memory.  Section
 * headers are not loaded, so its file is opened (/proc/self/exe for the
 * program) to find .gopclntab and .text by name; the table is then used
 * in memory, where the dynamic loader put it, after checking that it lies
 * in a readable PT_LOAD segment of the object and passes ps_gopcln_open's
 * validation there.  A file that is not the loaded image fails those
 * checks and the object is left to the frame-pointer walk.
 */
#include "shim/gostack.h"
#include "shim/gopclntab.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_GO_OBJECTS 4
#define MAX_SHDRS      256              /* section headers read */
#define MAX_SHSTR      4096             /* bytes of section names read */
#define NT_GO_BUILDID  4                /* cmd/link: ELF_NOTE_GOBUILDID_TAG */

/* The Go objects' tables.  Written by ps_gostack_init in the constructor,
 * before any timer is armed; read-only afterwards (the handler reads them
 * without synchronization). */
static struct goobj {
	uintptr_t lo, hi;               /* the text the table covers */
	struct ps_gopcln tab;           /* in the object's loaded image */
} objs[MAX_GO_OBJECTS];
static int nobjs;

/* Does the object carry the Go build-id note? */
static int
has_go_note(const struct dl_phdr_info *info)
{
	const ElfW(Nhdr) *nh;
	uintptr_t p, end;
	size_t i, step;

	for (i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_NOTE)
			continue;
		p = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
		end = p + info->dlpi_phdr[i].p_memsz;
		while (end - p >= sizeof(*nh)) {
			nh = (const void *)p;
			step = sizeof(*nh) + ((nh->n_namesz + 3) & ~3u) + ((nh->n_descsz + 3) & ~3u);
			if (step > end - p)
				break;
			/* The owner is "Go\0\0" (cmd/link: ELF_NOTE_GO_NAME). */
			if (nh->n_type == NT_GO_BUILDID && nh->n_namesz == 4 &&
			    !memcmp((const char *)(nh + 1), "Go\0\0", 4))
				return 1;
			p += step;
		}
	}
	return 0;
}

static int
read_at(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);

	return n >= 0 && (size_t)n == len ? 0 : -EIO;
}

/* From the file at path: the link-time address and size of .gopclntab and
 * the address of .text.  Returns 0, -errno of open, -EIO, or -ENOEXEC. */
static int
find_sections(const char *path, uint64_t *pcln, uint64_t *pcln_size, uint64_t *text)
{
	static ElfW(Shdr) sh[MAX_SHDRS];        /* constructor only */
	static char names[MAX_SHSTR + 1];
	ElfW(Ehdr) eh;
	size_t i, n, len;
	int fd, rc = -ENOEXEC, found = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (read_at(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_shentsize != sizeof(sh[0]) || eh.e_shnum == 0 || eh.e_shnum > MAX_SHDRS ||
	    eh.e_shstrndx >= eh.e_shnum)
		goto out;
	n = eh.e_shnum;
	if (read_at(fd, sh, n * sizeof(sh[0]), eh.e_shoff))
		goto out;
	len = sh[eh.e_shstrndx].sh_size < MAX_SHSTR ? sh[eh.e_shstrndx].sh_size : MAX_SHSTR;
	if (read_at(fd, names, len, sh[eh.e_shstrndx].sh_offset))
		goto out;
	names[len] = '\0';
	for (i = 0; i < n; i++) {
		if (sh[i].sh_name >= len)
			continue;
		if (!strcmp(names + sh[i].sh_name, ".gopclntab")) {
			*pcln = sh[i].sh_addr;
			*pcln_size = sh[i].sh_size;
			found |= 1;
		} else if (!strcmp(names + sh[i].sh_name, ".text")) {
			*text = sh[i].sh_addr;
			found |= 2;
		}
	}
	rc = found == 3 ? 0 : -ENOEXEC;
out:
	close(fd);
	return rc;
}

/* Is [addr, addr + len) (link-time) inside one of the object's loaded,
 * readable segments? */
static int
in_segment(const struct dl_phdr_info *info, uint64_t addr, uint64_t len)
{
	const ElfW(Phdr) *ph;
	size_t i;

	for (i = 0; i < info->dlpi_phnum; i++) {
		ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && addr >= ph->p_vaddr &&
		    addr - ph->p_vaddr <= ph->p_filesz && len <= ph->p_filesz - (addr - ph->p_vaddr))
			return 1;
	}
	return 0;
}

static int
add_object(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *path = info->dlpi_name;
	struct goobj *o = &objs[nobjs];
	uint64_t pcln = 0, pcln_size = 0, text = 0, lo, len;

	(void)size;
	(void)data;
	if (nobjs == MAX_GO_OBJECTS)
		return 1;
	if (!has_go_note(info))
		return 0;
	if (!path || !path[0]) {
		/* The program itself: by /proc, or by the name it was run as
		 * (the working directory has not changed yet). */
		path = "/proc/self/exe";
		if (find_sections(path, &pcln, &pcln_size, &text) != 0) {
			path = (const char *)getauxval(AT_EXECFN);
			if (!path || find_sections(path, &pcln, &pcln_size, &text) != 0)
				return 0;
		}
	} else if (find_sections(path, &pcln, &pcln_size, &text) != 0) {
		return 0;
	}
	if (!in_segment(info, pcln, pcln_size))
		return 0;
	if (ps_gopcln_open(&o->tab, (const void *)(info->dlpi_addr + pcln), pcln_size,
			   info->dlpi_addr + text) != 0)
		return 0;
	ps_gopcln_range(&o->tab, o->tab.nfunc - 1, &lo, &len);
	o->lo = info->dlpi_addr + text;
	o->hi = lo + len;
	nobjs++;
	return 0;
}

int
ps_gostack_init(void)
{
	if (nobjs == 0)
		(void)dl_iterate_phdr(add_object, NULL);
	return nobjs;
}

/* One word of the interrupted stack, read by the kernel: an unreadable
 * address fails with EFAULT instead of faulting here. */
PS_SIGSAFE static int
read_word(uintptr_t addr, uintptr_t *out)
{
	struct iovec local = { out, sizeof(*out) }, remote = { (void *)addr, sizeof(*out) };

	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof(*out) ? 0 : -1;
}

PS_SIGSAFE int
ps_gostack_leaf(struct ps_frame_regs *r)
{
	const struct goobj *o = NULL;
	uintptr_t ra;
	int32_t delta;
	int i, f;

	for (i = 0; i < nobjs; i++)
		if (r->ip >= objs[i].lo && r->ip < objs[i].hi)
			o = &objs[i];
	if (!o)
		return 0;
	f = ps_gopcln_find(&o->tab, r->ip);
	if (f < 0 || ps_gopcln_spdelta(&o->tab, (uint32_t)f, r->ip, &delta) != 0)
		return 0;
	/* Set up: the leaf saved the caller's BP just below its return
	 * address and points BP there. */
	if (delta >= 8 && r->bp == r->sp + (uintptr_t)delta - 8)
		return 0;
	if (r->sp > UINTPTR_MAX - (uintptr_t)delta - 8 || read_word(r->sp + (uintptr_t)delta, &ra) ||
	    ra == 0)
		return 0;
	r->ip = ra;
	r->sp += (uintptr_t)delta + 8;
	return 1;
}
