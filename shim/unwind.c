/* unwind.c -- libunwind, loaded privately, driven from signal context.
 * See unwind.h for why it is built this way. */
#define UNW_LOCAL_ONLY
#include "shim/unwind.h"
#include "shim/ehframe.h"
#include "shim/gostack.h"
#include "common/log.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Function pointers into the privately loaded libunwind.  Written once by
 * ps_unwind_init() in the constructor, read-only afterwards. */
static struct {
	int (*getcontext)(unw_context_t *);
	int (*init_local)(unw_cursor_t *, unw_context_t *);
	int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
	unw_addr_space_t *local_as;
	_Atomic int loaded;      /* set once the rest is, by the loading thread */
} unw;

/* libunwind is loaded at the first thread start, not in the constructor:
 * its dlopen (with liblzma) is 40 % of a short process's start-up, and the
 * fast walk needs it only for the frames it leaves alone (see unwind.h).
 * A thread start (or the pthread_create that makes it) is the first point
 * after the constructor where a dlopen is safe: in an allocation hook the
 * loader lock could be taken against the program's own locks, and inside
 * the loader itself. */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc = -ENOSYS;   /* written once, under load_once */

/* The main executable's program headers, from the aux vector (its ELF
 * header need not be mapped where _dl_find_object says it starts). */
static const ElfW(Phdr) *main_phdr;
static size_t main_phnum;

/* Per-thread capture state.  Initial-exec TLS: reading it never allocates. */
static PS_TLS int t_active;       /* inside a capture on this thread */
static PS_TLS uintptr_t t_cur_ip; /* frame libunwind is looking up */
static PS_TLS int t_stack;        /* t_stack_lo/hi are known */
static PS_TLS int t_warm;         /* libunwind's TLS exists on this thread */
static PS_TLS uintptr_t t_stack_lo, t_stack_hi; /* this thread's stack */

/* Fork quiescence.  Debian's libunwind 1.6 is built without __thread, so
 * UNW_CACHE_PER_THREAD silently becomes UNW_CACHE_GLOBAL, whose cache is
 * guarded by a pthread mutex.  A fork while another thread holds it leaves
 * the child's copy locked for ever, and the child's first capture hangs.
 * So a fork waits until no thread is inside libunwind, and captures that
 * start meanwhile give up (leaf only).  `inside` counts threads between
 * enter() and leave(); both are seq_cst, so either the capture sees
 * `fork_pending` or the forking thread sees it counted (Dekker). */
static _Atomic int fork_pending;
static _Atomic int inside;

PS_SIGSAFE static int
enter(void)
{
	atomic_fetch_add(&inside, 1);
	if (PS_UNLIKELY(atomic_load(&fork_pending))) {
		atomic_fetch_sub(&inside, 1);
		return -1;
	}
	return 0;
}

PS_SIGSAFE static void
leave(void)
{
	atomic_fetch_sub(&inside, 1);
}

void
ps_unwind_fork_prepare(void)
{
	/* A host signal handler may fork while this very thread is inside a
	 * capture; do not wait for ourselves. */
	int self = t_active ? 1 : 0;

	atomic_store(&fork_pending, 1);
	while (atomic_load(&inside) > self)
		sched_yield();
}

void
ps_unwind_fork_parent(void)
{
	atomic_store(&fork_pending, 0);
}

void
ps_unwind_fork_child(void)
{
	atomic_store(&inside, t_active ? 1 : 0);
	atomic_store(&fork_pending, 0);
}

PS_SIGSAFE int
ps_unwind_active(void)
{
	return t_active;
}

PS_SIGSAFE int
ps_unwind_ready(void)
{
	return t_stack && !t_active;
}

/* 1 if libunwind may run on this thread. */
PS_SIGSAFE static int
unw_usable(void)
{
	return atomic_load_explicit(&unw.loaded, memory_order_acquire) && t_warm;
}

static int
load(void)
{
	void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return -ENOSYS;
	unw.getcontext = (int (*)(unw_context_t *))dlsym(h, "_Ux86_64_getcontext");
	unw.init_local = (int (*)(unw_cursor_t *, unw_context_t *))dlsym(h, "_ULx86_64_init_local");
	unw.init_local2 = (int (*)(unw_cursor_t *, unw_context_t *, int))
		dlsym(h, "_ULx86_64_init_local2");
	unw.step = (int (*)(unw_cursor_t *))dlsym(h, "_ULx86_64_step");
	unw.get_reg = (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))
		dlsym(h, "_ULx86_64_get_reg");
	unw.set_caching_policy = (int (*)(unw_addr_space_t, unw_caching_policy_t))
		dlsym(h, "_ULx86_64_set_caching_policy");
	unw.local_as = (unw_addr_space_t *)dlsym(h, "_ULx86_64_local_addr_space");
	if (!unw.getcontext || !unw.init_local || !unw.init_local2 || !unw.step ||
	    !unw.get_reg || !unw.set_caching_policy || !unw.local_as)
		return -ENOSYS;
	return 0;
}

/* The main thread's stack, from where exec put it, for the constructor:
 * pthread_getattr_np reads the whole of /proc/self/maps for the main
 * thread, 70 us of every process's start-up (BENCHMARKS.md section 14g).
 * exec copies the program's name (AT_EXECFN) first, just under the end of
 * the stack mapping, so the page boundary after the name is that end (or
 * a page under it for a name longer than a page: still within the stack).
 * Downwards the bound only tells the main stack from another one (an
 * alternate signal stack): the walk never reads under the interrupted
 * stack pointer.  The stack may grow to RLIMIT_STACK under its end, and
 * the kernel puts the mmap area below that (at least 128 MiB below, a
 * third of the address space down without a limit), so no other stack
 * lies within min(RLIMIT_STACK, 1 GiB) under the end, unless the program
 * mapped one there by hand.  Returns 0, or -1 when this is not the main
 * thread or the bounds do not hold the stack pointer: then ask
 * pthread_getattr_np. */
static int
main_stack(void)
{
	uintptr_t fn = (uintptr_t)getauxval(AT_EXECFN), sp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t hi, lo, most = (uintptr_t)1 << 30;
	struct rlimit rl;

	if (!fn || getpid() != (pid_t)syscall(SYS_gettid) || getrlimit(RLIMIT_STACK, &rl))
		return -1;
	hi = (fn + strlen((const char *)fn) + 1 + 4095) & ~(uintptr_t)4095;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < most)
		most = (uintptr_t)rl.rlim_cur & ~(uintptr_t)4095;
	lo = hi > most ? hi - most : 0;
	if (sp < lo || sp >= hi || fn < sp)
		return -1;
	t_stack_lo = lo;
	t_stack_hi = hi;
	return 0;
}

/* The calling thread's stack bounds, for the fast unwinder's reads.
 * pthread_getattr_np allocates (and reads /proc/self/maps for the main
 * thread): never in signal context. */
static void
learn_stack(void)
{
	pthread_attr_t a;
	void *addr;
	size_t size;

	if (pthread_getattr_np(pthread_self(), &a))
		return;
	if (pthread_attr_getstack(&a, &addr, &size) == 0) {
		t_stack_lo = (uintptr_t)addr;
		t_stack_hi = (uintptr_t)addr + size;
	}
	(void)pthread_attr_destroy(&a);
}

PS_SIGSAFE static int walk(unw_cursor_t *cur, uintptr_t *ips, int max, int exact_leaf);

/* A capture with libunwind from here: its dynamic TLS on this thread and
 * (the first time) its one-time initialisation, which takes a lock: never
 * in the handler. */
static void
warm(void)
{
	unw_context_t ctx;
	unw_cursor_t cur;
	uintptr_t ips[4];

	if (enter())
		return;   /* a fork is under way: the next sample warms it */
	t_active = 1;
	if (unw.getcontext(&ctx) == 0 && unw.init_local(&cur, &ctx) == 0)
		(void)walk(&cur, ips, 4, 0);
	t_active = 0;
	leave();
	t_warm = 1;
}

static void
load_unwinder(void)
{
	int rc = load();

	if (rc == 0) {
		/* A per-thread cache needs no lock shared with other threads
		 * (Debian's build falls back to its global cache: see the fork
		 * handlers).  This first call runs libunwind's one-time
		 * initialisation, which opens a pipe unless the hooks see a
		 * capture in progress (hook_fd.c). */
		t_active = 1;
		rc = unw.set_caching_policy(*unw.local_as, UNW_CACHE_PER_THREAD) ? -ENOSYS : 0;
		t_active = 0;
	}
	if (rc == 0)
		warm();
	load_rc = rc;
	if (rc == 0)
		atomic_store_explicit(&unw.loaded, 1, memory_order_release);
	else
		ps_warn("libunwind.so.8 could not be loaded: the frames .eh_frame does not "
			"describe (signal trampolines, alternate signal stacks, code without "
			"unwind tables, C code under Go) are cut to their leaf");
}

/* This thread's stack bounds, once: the main thread's from where exec put
 * it (main_stack returns -1 for any other), else pthread's. */
static void
know_stack(void)
{
	if (t_stack)
		return;
	if (main_stack())
		learn_stack();
	t_stack = 1;
}

void
ps_unwind_init(void)
{
	/* Go leaves' frames, before any timer is armed; found without
	 * libunwind, which the uploader asks too (ps_gostack_objects). */
	(void)ps_gostack_init();
	main_phdr = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	main_phnum = getauxval(AT_PHNUM);
	know_stack();
	/* The C code under Go frames (cgo, libc) is libunwind's alone, and
	 * Go makes its threads without pthread_create. */
	if (ps_gostack_objects() > 0)
		(void)ps_unwind_load();
}

int
ps_unwind_load(void)
{
	if (pthread_once(&load_once, load_unwinder))
		return -ENOSYS;
	if (load_rc == 0 && !t_warm)
		warm();
	return load_rc;
}

void
ps_unwind_warm_thread(void)
{
	know_stack();
	if (!t_warm && atomic_load_explicit(&unw.loaded, memory_order_acquire))
		warm();
}

PS_SIGSAFE static int
walk(unw_cursor_t *cur, uintptr_t *ips, int max, int exact_leaf)
{
	unw_word_t ip;
	int n = 0;

	while (n < max) {
		if (unw.get_reg(cur, UNW_REG_IP, &ip) || ip == 0)
			break;
		ips[n] = (n == 0 && exact_leaf) ? (uintptr_t)ip : (uintptr_t)ip - 1;
		t_cur_ip = ips[n];
		n++;
		if (unw.step(cur) <= 0)
			break;
	}
	return n;
}

/* Walk with libunwind from r, a call frame (not a signal frame): the C
 * code under Go frames that ps_gostack_walk walked.  ips[0] is
 * r->ip - 1, as every return address.  The other registers come from uc
 * (the interrupted context, or the capture's own).  Returns the depth
 * (>= 0). */
PS_SIGSAFE static int
walk_from(const ucontext_t *uc, const struct ps_frame_regs *r, uintptr_t *ips, int max)
{
	ucontext_t c = *uc;
	unw_cursor_t cur;
	int n = 0;

	c.uc_mcontext.gregs[REG_RIP] = (greg_t)r->ip;
	c.uc_mcontext.gregs[REG_RSP] = (greg_t)r->sp;
	c.uc_mcontext.gregs[REG_RBP] = (greg_t)r->bp;
	if (!unw_usable() || enter())
		return 0;
	t_active = 1;
	if (unw.init_local2(&cur, (unw_context_t *)&c, 0) == 0)
		n = walk(&cur, ips, max, 0);
	t_active = 0;
	leave();
	return n;
}

/* C frames walked by .eh_frame up to Go code (cgo: C called from Go, on
 * the thread's system stack): ips[0..stop->depth) are done; the Go frames
 * go on from stop->regs, then libunwind for C code under them.  Returns
 * the whole depth, or 0 when the stopping frame is not Go code. */
PS_SIGSAFE static int
go_on(const ucontext_t *uc, const struct ps_frame_stop *stop, uintptr_t *ips, int max)
{
	struct ps_frame_regs rest;
	int n = stop->depth, m;

	if (n <= 0 || n >= max)
		return 0;
	m = ps_gostack_walk(&stop->regs, 0, 0, ips + n, max - n, &rest);
	if (m <= 0)
		return 0;
	n += m;
	if (rest.ip && n < max)
		n += walk_from(uc, &rest, ips + n, max - n);
	return n;
}

PS_SIGSAFE int
ps_unwind_signal(void *ucontext, uintptr_t *ips, int max)
{
	const ucontext_t *uc = ucontext;
	struct ps_frame_regs r, rest;
	struct ps_frame_stop stop;
	unw_cursor_t cur;
	int n;

	ips[0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	if (!t_stack || t_active || max < 2)
		return 1;
	r.ip = ips[0];
	r.sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	r.bp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
	/* Go code: by frame pointer (shim/gostack.c), and C code below it
	 * (cgo, libc) by libunwind. */
	n = ps_gostack_walk(&r, 1, (uintptr_t)uc->uc_mcontext.gregs[REG_R14], ips, max, &rest);
	if (n > 0) {
		if (rest.ip && n < max)
			n += walk_from(uc, &rest, ips + n, max - n);
		return n;
	}
	/* The fast path, when the thread is on its own stack (not on an
	 * alternate signal stack, whose bounds we do not know). */
	if (r.sp >= t_stack_lo && r.sp < t_stack_hi) {
		t_active = 1;
		n = ps_ehframe_walk_until(&r, t_stack_hi, ips, max, 1, &stop);
		t_active = 0;
		if (n > 0)
			return n;
		n = go_on(uc, &stop, ips, max);
		if (n > 0)
			return n;
		ips[0] = r.ip;
	}
	/* The frames the fast walk leaves alone: libunwind's, once loaded,
	 * else the leaf alone. */
	if (!unw_usable() || enter())
		return 1;
	t_active = 1;
	if (unw.init_local2(&cur, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME)) {
		n = 1;
	} else {
		n = walk(&cur, ips, max, 1);
		if (n < 1)
			n = 1;
	}
	t_active = 0;
	leave();
	return n;
}

PS_SIGSAFE __attribute__((noinline)) int
ps_unwind_here(uintptr_t *ips, int max)
{
	struct ps_frame_regs r;
	struct ps_frame_stop stop;
	unw_context_t ctx;
	unw_cursor_t cur;
	int n = 0;

	if (!t_stack || t_active || max < 1)
		return 0;
	/* This very instruction and stack pointer: the walk starts in this
	 * frame, whose CFI describes the stack as it is here. */
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(r.ip), "=r"(r.sp), "=r"(r.bp));
	if (r.sp >= t_stack_lo && r.sp < t_stack_hi) {
		t_active = 1;
		n = ps_ehframe_walk_until(&r, t_stack_hi, ips, max, 0, &stop);
		t_active = 0;
		if (n > 0)
			return n;
		/* An allocation in C code called from Go. */
		if (stop.depth > 0 && unw_usable() && unw.getcontext(&ctx) == 0) {
			n = go_on((const ucontext_t *)&ctx, &stop, ips, max);
			if (n > 0)
				return n;
		}
	}
	if (!unw_usable() || enter())
		return 0;
	t_active = 1;
	if (unw.getcontext(&ctx) == 0 && unw.init_local(&cur, &ctx) == 0)
		n = walk(&cur, ips, max, 0);
	t_active = 0;
	leave();
	return n;
}

/* Program headers of the object mapped at dlfo: its ELF header sits at the
 * start of its first mapping for every object the GNU toolchain links. */
PS_SIGSAFE static int
object_phdrs(const struct dl_find_object *f, const ElfW(Phdr) **ph, size_t *n)
{
	uintptr_t start = (uintptr_t)f->dlfo_map_start & ~(uintptr_t)4095;
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)start;

	if (main_phdr && (uintptr_t)main_phdr >= start &&
	    (uintptr_t)main_phdr < (uintptr_t)f->dlfo_map_end) {
		*ph = main_phdr;
		*n = main_phnum;
		return 0;
	}
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
	    eh->e_phnum == 0 || eh->e_phoff + (uintptr_t)eh->e_phnum * sizeof(ElfW(Phdr)) >
	    (uintptr_t)f->dlfo_map_end - start)
		return -1;
	*ph = (const ElfW(Phdr) *)(start + eh->e_phoff);
	*n = eh->e_phnum;
	return 0;
}

PS_SIGSAFE int
ps_unwind_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
	struct dl_find_object f;
	struct dl_phdr_info info;
	const ElfW(Phdr) *ph;
	size_t n;

	if (_dl_find_object((void *)t_cur_ip, &f) != 0 || !f.dlfo_link_map)
		return 0;
	if (object_phdrs(&f, &ph, &n))
		return 0;
	memset(&info, 0, sizeof(info));
	info.dlpi_addr = f.dlfo_link_map->l_addr;
	info.dlpi_name = f.dlfo_link_map->l_name ? f.dlfo_link_map->l_name : "";
	info.dlpi_phdr = ph;
	info.dlpi_phnum = (ElfW(Half))n;
	return cb(&info, sizeof(info), data);
}
