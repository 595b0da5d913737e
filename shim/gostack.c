/* gostack.c -- walking Go code, inside the signal handler.  See
 * gostack.h.
 *
 * Finding a table: an object is Go code when one of its PT_NOTE segments
 * holds the Go build-id note (owner "Go", type 4), read in memory.  Section
 * headers are not loaded, so its file is opened (/proc/self/exe for the
 * program) to find .gopclntab and .text by name; the table is then used
 * in memory, where the dynamic loader put it, after checking that it lies
 * in a readable PT_LOAD segment of the object and passes ps_gopcln_open's
 * validation there.  A file that is not the loaded image fails those
 * checks and the object is left to libunwind.
 */
#include "shim/gostack.h"
#include "shim/gopclntab.h"
#include "common/dl.h"

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
	/* runtime.asyncPreempt and runtime.sigpanic: the runtime's signal
	 * handler makes the interrupted code "call" them, so the frame
	 * under theirs was interrupted anywhere, as a leaf is. */
	uintptr_t inj_lo[2], inj_hi[2];
} objs[MAX_GO_OBJECTS];
static int nobjs;

static int
read_at(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);

	return n >= 0 && (size_t)n == len ? 0 : -EIO;
}

/* From the file at path: the link-time address and size of .gopclntab and
 * of .text.  Returns 0, -errno of open, -EIO, or -ENOEXEC. */
static int
find_sections(const char *path, uint64_t *pcln, uint64_t *pcln_size, uint64_t *text,
	      uint64_t *text_size)
{
	static PS_LARGE ElfW(Shdr) sh[MAX_SHDRS];        /* constructor only */
	static PS_LARGE char names[MAX_SHSTR + 1];
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
		/* .data.rel.ro.gopclntab: its name in a PIE build. */
		if (!strcmp(names + sh[i].sh_name, ".gopclntab") ||
		    !strcmp(names + sh[i].sh_name, ".data.rel.ro.gopclntab")) {
			*pcln = sh[i].sh_addr;
			*pcln_size = sh[i].sh_size;
			found |= 1;
		} else if (!strcmp(names + sh[i].sh_name, ".text")) {
			*text = sh[i].sh_addr;
			*text_size = sh[i].sh_size;
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

/* The ranges of the functions the runtime injects calls to. */
static void
find_injected(struct goobj *o)
{
	static const char *const names[2] = { "runtime.asyncPreempt", "runtime.sigpanic" };
	const char *name;
	uint64_t lo, len;
	uint32_t i;
	int k;

	for (i = 0; i < o->tab.nfunc; i++) {
		name = ps_gopcln_name(&o->tab, i);
		for (k = 0; name && k < 2; k++) {
			if (strcmp(name, names[k]) == 0) {
				ps_gopcln_range(&o->tab, i, &lo, &len);
				o->inj_lo[k] = lo;
				o->inj_hi[k] = lo + len;
			}
		}
	}
}

static int
add_object(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *path = info->dlpi_name;
	struct goobj *o = &objs[nobjs];
	uint64_t pcln = 0, pcln_size = 0, text = 0, text_size = 0, lo, len, start;
	size_t idlen;
	const void *tab;

	(void)size;
	(void)data;
	if (nobjs == MAX_GO_OBJECTS)
		return 1;
	/* An object is Go code when it carries the Go build-id note (its
	 * owner "Go\0\0": cmd/link's ELF_NOTE_GO_NAME). */
	if (!ps_dl_note(info, NT_GO_BUILDID, "Go\0\0", &idlen))
		return 0;
	if (!path || !path[0]) {
		/* The program itself: by /proc, or by the name it was run as
		 * (the working directory has not changed yet). */
		path = "/proc/self/exe";
		if (find_sections(path, &pcln, &pcln_size, &text, &text_size) != 0) {
			path = (const char *)getauxval(AT_EXECFN);
			if (!path || find_sections(path, &pcln, &pcln_size, &text, &text_size) != 0)
				return 0;
		}
	} else if (find_sections(path, &pcln, &pcln_size, &text, &text_size) != 0) {
		return 0;
	}
	if (!in_segment(info, pcln, pcln_size))
		return 0;
	/* The text start: the table's own word, relocated in memory, when
	 * it lies in .text (an external link puts C code first); else
	 * .text's start (the same, in an internal link). */
	tab = (const void *)(info->dlpi_addr + pcln);
	start = ps_gopcln_header_text(tab, pcln_size);
	text += info->dlpi_addr;
	if (start < text || start - text >= text_size)
		start = text;
	if (ps_gopcln_open(&o->tab, tab, pcln_size, start) != 0)
		return 0;
	ps_gopcln_range(&o->tab, o->tab.nfunc - 1, &lo, &len);
	o->lo = start;
	o->hi = lo + len;
	find_injected(o);
	nobjs++;
	return 0;
}

int
ps_gostack_objects(void)
{
	return nobjs;
}

int
ps_gostack_init(void)
{
	int saved = errno;

	if (nobjs == 0)
		(void)dl_iterate_phdr(add_object, NULL);
	errno = saved;          /* a file that could not be read is not news */
	return nobjs;
}

/* The stack, as the walk reads it.
 *
 * The interrupted goroutine's own stack, from SP to its top, is read
 * directly: it is memory of the Go heap in use by the interrupted
 * goroutine, which neither moves nor is freed while it runs.  Its top
 * comes from the goroutine's g (whose first field is its stack bounds),
 * which Go code keeps in R14 -- a hint only, since assembly may use R14:
 * it is read through the kernel and believed only if SP lies inside the
 * bounds it gives and they are a Go stack's (a power of two, 2 KiB to 1
 * GiB).  Each thread keeps the last gs it checked: the Go runtime never
 * unmaps its heap (it returns memory with madvise), so a range that once
 * was a goroutine's stack stays readable, and while SP is inside it, it is
 * the stack in use; then no system call is made at all.
 *
 * Any other word is read from a copy made by the kernel: a word outside
 * the copy refills it with one process_vm_readv of up to WINDOW bytes from
 * that word up (frames only go up), which stops at the first unreadable
 * page (EFAULT where a load would fault).  Memory that another thread
 * unmaps meanwhile cannot fault the walk either. */
#define WINDOW 2048
#define MIN_STACK 2048u
#define MAX_STACK (1ul << 30)
struct window {
	uintptr_t stack_lo, stack_hi;   /* read directly; empty: 0, 0 */
	uintptr_t lo;                   /* address of buf[0] */
	size_t len;                     /* bytes of buf copied */
	pid_t pid;                      /* 0 until needed */
	uintptr_t buf[WINDOW / sizeof(uintptr_t)];
};

/* n words at addr into out, by the kernel.  0 or -1. */
PS_SIGSAFE static int
copy_in(struct window *w, uintptr_t addr, uintptr_t *out, size_t n)
{
	struct iovec local = { out, n * sizeof(*out) }, remote = { (void *)addr, n * sizeof(*out) };

	if (!w->pid)
		w->pid = getpid();
	return process_vm_readv(w->pid, &local, 1, &remote, 1, 0) == (ssize_t)(n * sizeof(*out)) ? 0 : -1;
}

/* The last goroutines checked on this thread (the scheduler runs several
 * on each), with their stack bounds; replaced round robin. */
#define KNOWN_GS 8
static PS_TLS struct { uintptr_t g, lo, hi; } t_gs[KNOWN_GS];
static PS_TLS unsigned t_gs_next;

/* The goroutine stack that g (R14 at the interrupt) says SP is on. */
PS_SIGSAFE static void
learn_stack(struct window *w, uintptr_t g, uintptr_t sp)
{
	uintptr_t st[2], size;
	unsigned i;

	if (!g || (g & 7))
		return;
	for (i = 0; i < KNOWN_GS; i++) {
		if (t_gs[i].g == g && sp >= t_gs[i].lo && sp < t_gs[i].hi) {
			w->stack_lo = sp;
			w->stack_hi = t_gs[i].hi;
			return;
		}
	}
	if (copy_in(w, g, st, 2))
		return;
	size = st[1] - st[0];
	if (st[0] >= st[1] || sp < st[0] || sp >= st[1] || size < MIN_STACK || size > MAX_STACK ||
	    (size & (size - 1)))
		return;
	i = t_gs_next++ % KNOWN_GS;
	t_gs[i].g = g;
	t_gs[i].lo = st[0];
	t_gs[i].hi = st[1];
	w->stack_lo = sp;
	w->stack_hi = st[1];
}

PS_SIGSAFE static int
load(struct window *w, uintptr_t addr, uintptr_t *out)
{
	struct iovec local = { w->buf, WINDOW }, remote = { (void *)addr, WINDOW };
	ssize_t got;

	if (addr & (sizeof(*out) - 1))
		return -1;
	if (addr >= w->stack_lo && addr < w->stack_hi) {
		*out = *(const uintptr_t *)addr;
		return 0;
	}
	if (addr < w->lo || addr - w->lo >= w->len) {
		if (addr > UINTPTR_MAX - WINDOW)
			remote.iov_len = local.iov_len = UINTPTR_MAX - addr + 1;
		if (!w->pid)
			w->pid = getpid();
		got = process_vm_readv(w->pid, &local, 1, &remote, 1, 0);
		w->len = got > 0 ? (size_t)got & ~(sizeof(*out) - 1) : 0;
		w->lo = addr;
		if (w->len == 0)
			return -1;
	}
	*out = w->buf[(addr - w->lo) / sizeof(*out)];
	return 0;
}

/* The Go object whose text holds ip, or NULL. */
PS_SIGSAFE static const struct goobj *
go_object(uintptr_t ip)
{
	int i;

	for (i = 0; i < nobjs; i++)
		if (ip >= objs[i].lo && ip < objs[i].hi)
			return &objs[i];
	return NULL;
}

/* Is ra a return address into code: Go text, or an object the dynamic
 * loader knows (found lock-free)?  A "return address" read from a bad
 * frame is usually neither, and ends the walk instead of becoming a
 * frame. */
PS_SIGSAFE static int
is_code(uintptr_t ra)
{
	struct dl_find_object f;

	return ra != 0 && (go_object(ra) || _dl_find_object((void *)(ra - 1), &f) == 0);
}

/* If the leaf at r->ip has no frame of its own, step r to its caller (see
 * gostack.h).  Returns 1 when stepped, else 0. */
PS_SIGSAFE static int
leaf_step(const struct goobj *o, struct ps_frame_regs *r, struct window *w)
{
	uintptr_t ra;
	int32_t delta;
	int f;

	f = ps_gopcln_find(&o->tab, r->ip);
	if (f < 0 || ps_gopcln_spdelta(&o->tab, (uint32_t)f, r->ip, &delta) != 0)
		return 0;
	/* Set up: the leaf saved the caller's BP just below its return
	 * address and points BP there. */
	if (delta >= 8 && r->bp == r->sp + (uintptr_t)delta - 8)
		return 0;
	if (r->sp > UINTPTR_MAX - (uintptr_t)delta - 8 || load(w, r->sp + (uintptr_t)delta, &ra) ||
	    !is_code(ra))
		return 0;
	r->ip = ra;
	r->sp += (uintptr_t)delta + 8;
	return 1;
}

/* Is ip in a function the runtime injects calls to? */
PS_SIGSAFE static int
injected(const struct goobj *o, uintptr_t ip)
{
	return (ip >= o->inj_lo[0] && ip < o->inj_hi[0]) || (ip >= o->inj_lo[1] && ip < o->inj_hi[1]);
}

PS_SIGSAFE int
ps_gostack_walk(const struct ps_frame_regs *start, int exact, uintptr_t g, uintptr_t *ips,
		int max, struct ps_frame_regs *rest)
{
	const struct goobj *o = go_object(start->ip);
	struct ps_frame_regs r = *start;
	struct window w;
	uintptr_t next_bp, ra, from;
	/* Coming from C code, the first Go frame may be on another stack
	 * (asmcgocall ran the C code on the thread's system stack). */
	int n = 0, any_stack = !exact;

	rest->ip = 0;
	if (!o || max < 1)
		return 0;
	w.stack_lo = w.stack_hi = w.lo = w.len = 0;
	w.pid = 0;
	learn_stack(&w, g, start->sp);
	ips[n++] = exact ? r.ip : r.ip - 1;
	/* exact: r.ip is where the code was interrupted (the leaf, or the
	 * frame under an injected call), so its frame may not be set up. */
	for (; n < max; exact = injected(o, from), any_stack = 0) {
		o = go_object(r.ip);
		if (!o) {
			*rest = r;              /* C code: the caller walks on */
			break;
		}
		from = r.ip;
		if (!exact || !leaf_step(o, &r, &w)) {
			/* By frame pointer.  Frames only go up the stack: a BP
			 * below SP, misaligned or unreadable, ends the walk (0
			 * ends a goroutine's chain), as does a return address
			 * into no code. */
			if ((r.bp < r.sp && !any_stack) || load(&w, r.bp, &next_bp) ||
			    load(&w, r.bp + 8, &ra) || !is_code(ra))
				break;
			r.sp = r.bp + 16;
			r.bp = next_bp;
			r.ip = ra;
		}
		ips[n++] = injected(o, from) ? r.ip : r.ip - 1;
	}
	return n;
}
