/* Unit tests of the fast unwinder (shim/ehframe.c): the stacks it walks
 * equal those of libgcc's unwinder (glibc's backtrace(), an independent
 * implementation of the same CFI), from plain code, through a shared
 * library (libc's qsort calling back), from a signal handler's interrupted
 * context on several threads, and it fails or stops -- never faults -- on
 * stacks of garbage. */
#include <check.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include "shim/ehframe.h"

static uintptr_t
stack_top(void)
{
	pthread_attr_t a;
	void *addr;
	size_t size;

	ck_assert_int_eq(pthread_getattr_np(pthread_self(), &a), 0);
	ck_assert_int_eq(pthread_attr_getstack(&a, &addr, &size), 0);
	pthread_attr_destroy(&a);
	return (uintptr_t)addr + size;
}

/* Walk from this very point, as shim/unwind.c's ps_unwind_here does. */
static __attribute__((noinline)) int
walk_here(uintptr_t *ips, int max)
{
	struct ps_frame_regs r;

	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(r.ip), "=r"(r.sp), "=r"(r.bp));
	return ps_ehframe_walk(&r, stack_top(), ips, max, 0);
}

/* Both walks started in walk_here/compare's frames, which differ; compare
 * from the first frame they share (this file's recursion) to the end. */
static void
compare_with_libgcc(int min)
{
	uintptr_t ips[128];
	void *bt[128];
	int n = walk_here(ips, 128), m = backtrace(bt, 128), i = 0, j;

	ck_assert_int_gt(n, min);
	ck_assert_int_lt(n, 128);
	/* backtrace() gives return addresses; ours are return address - 1,
	 * so that they fall inside the call.  Align on the first of
	 * libgcc's frames that we also have: its first frames are our
	 * caller's (or, under ASan, its interceptor's). */
	for (j = 0; j < 4 && j < m; j++) {
		for (i = 0; i < n && ips[i] + 1 != (uintptr_t)bt[j]; i++)
			;
		if (i < n)
			break;
	}
	ck_assert_msg(j < 4 && i < 4, "no common frame among the first four (%d walked)", n);
	for (; j < m && i < n; j++, i++)
		ck_assert_msg(ips[i] + 1 == (uintptr_t)bt[j],
			      "frame %d: walked %#lx, libgcc %p", j, (unsigned long)ips[i] + 1, bt[j]);
	/* Same length: both end at the outermost frame (_start or clone3). */
	ck_assert_int_eq(n - i, 0);
	ck_assert_int_eq(m - j, 0);
}

static __attribute__((noinline)) int
recurse(int depth)
{
	int r;

	if (depth == 0) {
		compare_with_libgcc(40);
		return 1;
	}
	r = recurse(depth - 1);
	return r + (depth & 1); /* not a tail call */
}

START_TEST(test_deep_stack_equals_libgcc)
{
	ck_assert_int_gt(recurse(40), 0);
}
END_TEST

static int
by_value(const void *a, const void *b)
{
	static int once;

	if (!once) {
		once = 1;
		compare_with_libgcc(5); /* inside libc's qsort */
	}
	return *(const int *)a - *(const int *)b;
}

START_TEST(test_through_libc_callback_equals_libgcc)
{
	int v[64];

	for (int i = 0; i < 64; i++)
		v[i] = 64 - i;
	qsort(v, 64, sizeof(v[0]), by_value);
	ck_assert_int_eq(v[0], 1);
}
END_TEST

static void *
thread_compare(void *arg)
{
	(void)arg;
	recurse(40);
	return NULL;
}

START_TEST(test_thread_stack_ends_at_clone)
{
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, thread_compare, NULL), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
}
END_TEST

/* From a signal handler: walk the interrupted context and check that the
 * frames below the leaf are this file's spinning recursion. */
static __thread uintptr_t t_top;
/* Set while the thread spins at full depth: a sample taken while it was
 * still descending into (or returning from) the recursion has fewer frames
 * by right (one such sample under ASan made this test fail once). */
static __thread volatile sig_atomic_t t_spinning;
static _Atomic int walked, deep;

static void
on_prof(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	struct ps_frame_regs r = {
		(uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
		(uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
		(uintptr_t)uc->uc_mcontext.gregs[REG_RBP],
	};
	uintptr_t ips[128];
	int n;

	(void)sig;
	(void)si;
	if (!t_top || !t_spinning)
		return;
	n = ps_ehframe_walk(&r, t_top, ips, 128, 1);
	atomic_fetch_add(&walked, 1);
	if (n >= 25 && n < 128)
		atomic_fetch_add(&deep, 1);
}

static __attribute__((noinline)) double
spin_rec(int depth, volatile int *stop)
{
	volatile double x = 1;

	if (depth > 0)
		return spin_rec(depth - 1, stop) + 1;
	t_spinning = 1;
	while (!*stop)
		x = x * 1.0000001 + 0.5;
	t_spinning = 0;
	return x;
}

static volatile int stop_spin;

static void *
spinner(void *arg)
{
	(void)arg;
	t_top = stack_top();
	spin_rec(25, &stop_spin);
	return NULL;
}

START_TEST(test_signal_context_on_threads)
{
	struct sigaction sa, old;
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } }, off = { { 0, 0 }, { 0, 0 } };
	pthread_t t[2];

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_prof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	ck_assert_int_eq(sigaction(SIGPROF, &sa, &old), 0);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, spinner, NULL), 0);
	ck_assert_int_eq(setitimer(ITIMER_PROF, &it, NULL), 0);
	/* At least 100 samples: two threads spinning get ~500 per CPU-second
	 * at this period, so the wait is about 0.1-0.2 s (bounded by the
	 * check timeout if SIGPROF never comes). */
	while (atomic_load(&walked) < 100)
		usleep(1000);
	ck_assert_int_eq(setitimer(ITIMER_PROF, &off, NULL), 0);
	stop_spin = 1;
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	ck_assert_int_eq(sigaction(SIGPROF, &old, NULL), 0);
	/* Every sample lands in the spinning threads (the main thread sleeps),
	 * where the stack is 26 frames of spin_rec plus the thread's start:
	 * all of them must be walked whole. */
	ck_assert_int_eq(atomic_load(&deep), atomic_load(&walked));
}
END_TEST

/* Through a signal trampoline: walked from inside a handler of SIGUSR1
 * (no alternate stack), raised by raiser(), the walk goes through glibc's
 * __restore_rt into the interrupted frame (exact: not a return address)
 * and on to the outermost frame.  From raiser's caller down, the frames
 * are libgcc's, which reads the signal frame through the same CIE. */
static uintptr_t raiser_ra;
static _Atomic int trampoline_ok;

static void
on_usr1(int sig)
{
	uintptr_t ips[128];
	void *bt[128];
	int n = walk_here(ips, 128), m = backtrace(bt, 128), i, j;

	(void)sig;
	for (i = 0; i < n && ips[i] + 1 != raiser_ra; i++)
		;
	for (j = 0; j < m && (uintptr_t)bt[j] != raiser_ra; j++)
		;
	if (n <= 0 || i == n || j == m || n - i != m - j)
		return;
	for (; i < n; i++, j++)
		if (ips[i] + 1 != (uintptr_t)bt[j])
			return;
	atomic_store(&trampoline_ok, 1);
}

static __attribute__((noinline)) void
raiser(void)
{
	raiser_ra = (uintptr_t)__builtin_return_address(0);
	raise(SIGUSR1);
	__asm__ volatile("" ::: "memory");   /* not a tail call */
}

START_TEST(test_a_signal_trampoline_is_walked)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, &old), 0);
	raiser();
	ck_assert_int_eq(sigaction(SIGUSR1, &old, NULL), 0);
	ck_assert_int_eq(atomic_load(&trampoline_ok), 1);
}
END_TEST

/* Garbage: a fake stack of random words, with %rip pointing into real
 * code.  The walk may fail or stop, but must not read outside the bounds
 * or loop: under valgrind and ASan this also proves every read checked. */
START_TEST(test_garbage_stack_fails_safely)
{
	static uintptr_t fake[512];
	uintptr_t ips[64];
	unsigned seed = 12345;

	for (int round = 0; round < 2000; round++) {
		struct ps_frame_regs r;
		int n;

		for (size_t i = 0; i < PS_ARRAY_LEN(fake); i++) {
			seed = seed * 1103515245u + 12345u;
			/* Mix code addresses, stack addresses and noise. */
			switch (seed >> 30) {
			case 0: fake[i] = (uintptr_t)recurse + (seed & 0xff); break;
			case 1: fake[i] = (uintptr_t)&fake[(seed >> 8) % 512]; break;
			case 2: fake[i] = (uintptr_t)memcpy + (seed & 0xfff); break;
			default: fake[i] = seed; break;
			}
		}
		r.ip = fake[round % 64];
		r.sp = (uintptr_t)&fake[round % 256];
		r.bp = fake[(round + 1) % 512];
		n = ps_ehframe_walk(&r, (uintptr_t)&fake[512], ips, 64, 1);
		ck_assert_int_ge(n, 0);
		ck_assert_int_le(n, 64);
	}
}
END_TEST

START_TEST(test_no_cfi_fails)
{
	uintptr_t ips[8], stack[16] = { 0 };
	/* Not code at all: no object holds it. */
	struct ps_frame_regs r = { 0x10, (uintptr_t)stack, 0 };

	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)&stack[16], ips, 8, 1), 0);
	/* Bounds that hold nothing: fails before reading. */
	r.ip = (uintptr_t)recurse;
	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)stack, ips, 8, 1), 0);
	/* max 1: the leaf only, nothing read. */
	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)&stack[16], ips, 1, 1), 1);
	ck_assert_uint_eq(ips[0], (uintptr_t)recurse);
}
END_TEST

/* ---- synthetic stacks -------------------------------------------------
 * At a function's first instruction the ABI fixes the frame: CFA = %rsp + 8
 * and the return address at CFA - 8 (every CIE the GNU toolchain emits
 * starts so).  A stack of words that are each "entry of a function + 1"
 * is therefore a chain of calls caught at their first instruction, whose
 * walk is known exactly: the entries themselves (return address - 1). */

static volatile int syn_sink;
__attribute__((noinline)) static void syn_a(void) { syn_sink++; syn_sink++; }
__attribute__((noinline)) static void syn_b(void) { syn_sink++; syn_sink++; }
__attribute__((noinline)) static void syn_c(void) { syn_sink++; syn_sink++; }

static void (*const syn_fn[])(void) = { syn_a, syn_b, syn_c };

/* fake[0..n): return addresses into syn_fn[(i + 1) % 3], then `end`. */
static void
synthetic(uintptr_t *fake, int n, uintptr_t end)
{
	for (int i = 0; i < n; i++)
		fake[i] = (uintptr_t)syn_fn[(i + 1) % 3] + 1;
	fake[n] = end;
}

START_TEST(test_synthetic_chain_is_walked_exactly)
{
	uintptr_t fake[16], ips[16];
	struct ps_frame_regs r = { (uintptr_t)syn_a, (uintptr_t)fake, 0 };
	int n;

	synthetic(fake, 6, 0);     /* a zero return address: the outermost frame */
	n = ps_ehframe_walk(&r, (uintptr_t)&fake[16], ips, 16, 1);
	ck_assert_int_eq(n, 7);
	for (int i = 0; i < n; i++)
		ck_assert_msg(ips[i] == (uintptr_t)syn_fn[i % 3], "frame %d: %#lx", i,
			      (unsigned long)ips[i]);
}
END_TEST

START_TEST(test_synthetic_chain_stops_at_max)
{
	uintptr_t fake[16], ips[4];
	struct ps_frame_regs r = { (uintptr_t)syn_a, (uintptr_t)fake, 0 };

	synthetic(fake, 10, 0);
	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)&fake[16], ips, 4, 1), 4);
	ck_assert_uint_eq(ips[3], (uintptr_t)syn_fn[0]);
}
END_TEST

START_TEST(test_synthetic_chain_without_an_end_fails_at_the_stack_top)
{
	uintptr_t fake[17], ips[64];
	struct ps_frame_regs r = { (uintptr_t)syn_a, (uintptr_t)fake, 0 };

	/* Every word is a return address: the chain runs into stack_hi,
	 * where the next read would fall outside, and the walk fails rather
	 * than read past it. */
	synthetic(fake, 16, (uintptr_t)syn_b + 1);
	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)&fake[17], ips, 64, 1), 0);
}
END_TEST

START_TEST(test_synthetic_leaf_is_exact_or_minus_one)
{
	uintptr_t fake[4], ips[4];
	struct ps_frame_regs r = { (uintptr_t)syn_a + 1, (uintptr_t)fake, 0 };

	/* From a signal (exact_leaf), the interrupted instruction itself;
	 * otherwise the leaf is a return address too. */
	synthetic(fake, 1, 0);
	r.ip = (uintptr_t)syn_a;
	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)&fake[4], ips, 4, 1), 2);
	ck_assert_uint_eq(ips[0], (uintptr_t)syn_a);
	r.ip = (uintptr_t)syn_a + 1;
	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)&fake[4], ips, 4, 0), 2);
	ck_assert_uint_eq(ips[0], (uintptr_t)syn_a);
	ck_assert_uint_eq(ips[1], (uintptr_t)syn_b);
}
END_TEST

/* ---- what the GNU toolchain emits around calls -----------------------
 * epi_fn: an epilogue as GCC writes it, caught at its `ret`, after `pop
 * %rbp`: the CFI still says %rbp is saved at CFA - 16, under the stack
 * pointer now.  plt_fn: a 16-byte entry with the linker's PLT expression
 * (CFA = %rsp + 8, plus 8 from byte 11 on, after the entry's push). */
__asm__(".text\n"
	".p2align 4\n"
	"epi_fn:\n"
	".cfi_startproc\n"
	"push %rbp\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbp, -16\n"
	"push %rbx\n"
	".cfi_def_cfa_offset 24\n"
	".cfi_offset %rbx, -24\n"
	"nop\n"
	"pop %rbx\n"
	".cfi_def_cfa_offset 16\n"
	"pop %rbp\n"
	".cfi_def_cfa_offset 8\n"
	"epi_ret:\n"
	"ret\n"
	".cfi_endproc\n"
	".p2align 4\n"
	"plt_fn:\n"
	".cfi_startproc\n"
	".cfi_escape 0x0f,0x0b,0x77,0x08,0x80,0x00,0x3f,0x1a,0x3b,0x2a,0x33,0x24,0x22\n"
	".fill 16, 1, 0x90\n"
	".cfi_endproc\n");
extern const char epi_ret[], plt_fn[];

START_TEST(test_an_epilogue_after_pop_rbp_is_walked)
{
	uintptr_t fake[8], ips[8];
	/* The popped slots (%rbx's, %rbp's) are under fake[2]: garbage. */
	struct ps_frame_regs r = { (uintptr_t)epi_ret, (uintptr_t)&fake[2], 0x1234 };
	int n;

	fake[0] = fake[1] = 0xdead;
	synthetic(fake + 2, 3, 0);
	n = ps_ehframe_walk(&r, (uintptr_t)&fake[8], ips, 8, 1);
	ck_assert_int_eq(n, 4);
	ck_assert_uint_eq(ips[0], (uintptr_t)epi_ret);
	for (int i = 1; i < n; i++)
		ck_assert_uint_eq(ips[i], (uintptr_t)syn_fn[i % 3]);
}
END_TEST

START_TEST(test_a_plt_entry_is_walked)
{
	uintptr_t fake[8], ips[8];
	struct ps_frame_regs r = { (uintptr_t)plt_fn, (uintptr_t)fake, 0 };

	/* Its jump, before any push: the return address at %rsp. */
	synthetic(fake, 3, 0);
	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)&fake[8], ips, 8, 1), 4);
	ck_assert_uint_eq(ips[0], (uintptr_t)plt_fn);
	ck_assert_uint_eq(ips[1], (uintptr_t)syn_b);
	/* Byte 11 on: the relocation index pushed over it. */
	r.ip = (uintptr_t)plt_fn + 12;
	fake[0] = 7;
	synthetic(fake + 1, 3, 0);
	ck_assert_int_eq(ps_ehframe_walk(&r, (uintptr_t)&fake[8], ips, 8, 1), 4);
	ck_assert_uint_eq(ips[1], (uintptr_t)syn_b);
	ck_assert_uint_eq(ips[2], (uintptr_t)syn_c);
}
END_TEST

static Suite *
ehframe_suite(void)
{
	Suite *s = suite_create("ehframe");
	TCase *tc = tcase_create("walk");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_deep_stack_equals_libgcc);
	tcase_add_test(tc, test_through_libc_callback_equals_libgcc);
	tcase_add_test(tc, test_thread_stack_ends_at_clone);
	tcase_add_test(tc, test_signal_context_on_threads);
	tcase_add_test(tc, test_a_signal_trampoline_is_walked);
	tcase_add_test(tc, test_garbage_stack_fails_safely);
	tcase_add_test(tc, test_no_cfi_fails);
	tcase_add_test(tc, test_synthetic_chain_is_walked_exactly);
	tcase_add_test(tc, test_synthetic_chain_stops_at_max);
	tcase_add_test(tc, test_synthetic_chain_without_an_end_fails_at_the_stack_top);
	tcase_add_test(tc, test_synthetic_leaf_is_exact_or_minus_one);
	tcase_add_test(tc, test_an_epilogue_after_pop_rbp_is_walked);
	tcase_add_test(tc, test_a_plt_entry_is_walked);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(ehframe_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
