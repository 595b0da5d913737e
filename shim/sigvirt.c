/* sigvirt.c -- the program's view of the shim's signal.  See sigvirt.h.
 *
 * The interposed functions themselves are in hook_signal.c; this file
 * keeps the state they share with the handler.
 */
#include "shim/sigvirt.h"
#include "shim/next.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>


typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

/* Written once by ps_sigvirt_start (constructor, one thread); read-only
 * after. */
static int vsig;                   /* the shim's signal; 0 = not virtualized */
static sigaction_fn real_sigaction;
static struct sigaction ours;      /* the shim's handler, as installed */

/* The program's action for vsig.  Written by any thread through
 * ps_sigvirt_action (serialized by `writer`, with vsig blocked in the
 * writing thread so that its own handler never sees half a write); read by
 * the handler on any thread, which retries while `seq` is odd or moved. */
static struct sigaction prog_act;
static _Atomic unsigned seq;
static atomic_flag writer = ATOMIC_FLAG_INIT;

/* Per thread: the program's wish to block vsig here, and one delivery it
 * sent itself while it "blocked" it (kept until it unblocks). */
static PS_TLS int t_blocked;
static PS_TLS int t_has_pending;
static PS_TLS siginfo_t t_pending;

/* The exec hooks remember what they changed, for a failed exec. */
static PS_TLS int t_exec_blocked, t_exec_ignored;

/* The signals a sigset_t holds for the kernel: _NSIG - 1 bits. */
PS_SIGSAFE static uint64_t
kbits(const sigset_t *s)
{
	uint64_t b;

	memcpy(&b, s, sizeof(b));
	return b;
}

PS_SIGSAFE static int
raw_mask(int how, const sigset_t *set, sigset_t *old)
{
	/* The system call itself: safe in a handler, and never one of the
	 * interposed functions. */
	return syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8) ? errno : 0;
}

PS_SIGSAFE int
ps_sigvirt_real_mask(int how, const sigset_t *set, sigset_t *old)
{
	return raw_mask(how, set, old);
}

/* Every signal but those a fault raises (blocked, the kernel would end
 * the process with it rather than run its handler). */
PS_SIGSAFE static void
async_set(sigset_t *s)
{
	sigfillset(s);
	sigdelset(s, SIGSEGV);
	sigdelset(s, SIGBUS);
	sigdelset(s, SIGFPE);
	sigdelset(s, SIGILL);
	sigdelset(s, SIGTRAP);
	sigdelset(s, SIGSYS);
}

PS_SIGSAFE void
ps_sigvirt_hold(sigset_t *old)
{
	sigset_t all;

	async_set(&all);
	(void)raw_mask(SIG_BLOCK, &all, old);
}

PS_SIGSAFE void
ps_sigvirt_release(const sigset_t *old)
{
	(void)raw_mask(SIG_SETMASK, old, NULL);
}

PS_SIGSAFE int
ps_sigvirt_signo(void)
{
	return vsig;
}

PS_SIGSAFE int
ps_sigvirt_is_sample(const siginfo_t *si)
{
	return si && si->si_code == SI_TIMER && si->si_value.sival_ptr == PS_SIG_MAGIC;
}

PS_SIGSAFE static void
read_action(struct sigaction *out)
{
	unsigned s0, s1;

	do {
		s0 = atomic_load_explicit(&seq, memory_order_acquire);
		memcpy(out, &prog_act, sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		s1 = atomic_load_explicit(&seq, memory_order_relaxed);
	} while ((s0 & 1) || s0 != s1);
}

PS_SIGSAFE static void
write_action(const struct sigaction *in)
{
	sigset_t one, old;

	sigemptyset(&one);
	sigaddset(&one, vsig);
	(void)raw_mask(SIG_BLOCK, &one, &old);
	while (atomic_flag_test_and_set_explicit(&writer, memory_order_acquire))
		;
	atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(&prog_act, in, sizeof(prog_act));
	atomic_fetch_add_explicit(&seq, 1, memory_order_release);
	atomic_flag_clear_explicit(&writer, memory_order_release);
	(void)raw_mask(SIG_SETMASK, &old, NULL);
}

int
ps_sigvirt_start(int sig, void (*handler)(int, siginfo_t *, void *))
{
	struct sigaction sa, old;

	real_sigaction = (sigaction_fn)ps_next("sigaction");
	if (!real_sigaction)
		return -ENOSYS;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	/* No handler of the program's runs inside a sample: one that left
	 * by siglongjmp would leave the capture's state set for good.  The
	 * program's own deliveries set their mask themselves (forward). */
	async_set(&sa.sa_mask);
	if (real_sigaction(sig, &sa, &old))
		return -errno;
	ours = sa;
	/* What the program finds there is what was there before the shim:
	 * normally SIG_DFL, SIG_IGN if it was inherited across exec. */
	memcpy(&prog_act, &old, sizeof(prog_act));
	vsig = sig;
	ps_sigvirt_adopt_thread(0);
	return 0;
}

PS_SIGSAFE void
ps_sigvirt_action(const struct sigaction *act, struct sigaction *old)
{
	if (old)
		read_action(old);
	if (act)
		write_action(act);
}

/* The default action of a real-time signal: the process ends by it.  The
 * kernel does exactly that once the disposition is SIG_DFL and the signal
 * is sent again, unblocked, with the same information. */
PS_SIGSAFE static void
die(int sig, siginfo_t *si)
{
	struct sigaction dfl;
	sigset_t one;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	(void)real_sigaction(sig, &dfl, NULL);
	(void)syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), sig, si);
	sigemptyset(&one);
	sigaddset(&one, sig);
	(void)raw_mask(SIG_UNBLOCK, &one, NULL);
	/* Not reached: the signal is delivered on the way out of the mask
	 * change. */
}

/* What the program sent itself while it blocked the signal, sent again
 * now that it no longer does: the kernel delivers it on unblocking. */
PS_SIGSAFE static void
release_pending(void)
{
	if (!t_has_pending)
		return;
	t_has_pending = 0;
	(void)syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), vsig, &t_pending);
}

PS_SIGSAFE void
ps_sigvirt_forward(int sig, siginfo_t *si, void *uc)
{
	struct sigaction a, dfl;
	sigset_t m;
	uint64_t bits;

	if (t_blocked) {
		/* The kernel would have kept it pending: keep the first one
		 * (an RT signal queues; one slot covers a program that
		 * signals itself while masking). */
		if (!t_has_pending && si) {
			t_pending = *si;
			t_has_pending = 1;
		}
		return;
	}
	read_action(&a);
	if (a.sa_handler == SIG_IGN)
		return;
	if (a.sa_handler == SIG_DFL) {
		die(sig, si);
		return;
	}
	if (a.sa_flags & SA_RESETHAND) {
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		write_action(&dfl);
	}
	/* The mask the kernel would give the program's handler: the
	 * interrupted code's, its sa_mask, and the signal but with
	 * SA_NODEFER (the shim's handler runs with more blocked).  The
	 * kernel restores the interrupted code's when the shim's returns. */
	sigemptyset(&m);
	bits = (uc ? kbits(&((const ucontext_t *)uc)->uc_sigmask) : 0) | kbits(&a.sa_mask);
	bits = a.sa_flags & SA_NODEFER ? bits & ~(1ull << (sig - 1)) : bits | 1ull << (sig - 1);
	memcpy(&m, &bits, sizeof(bits));
	(void)raw_mask(SIG_SETMASK, &m, NULL);
	if (a.sa_flags & SA_SIGINFO)
		a.sa_sigaction(sig, si, uc);
	else
		a.sa_handler(sig);
}

PS_SIGSAFE int
ps_sigvirt_thread_blocked(void)
{
	return t_blocked;
}

void
ps_sigvirt_adopt_thread(int blocked)
{
	sigset_t cur, one;

	if (!vsig)
		return;
	t_blocked = blocked;
	if (raw_mask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, vsig)) {
		t_blocked = 1;
		sigemptyset(&one);
		sigaddset(&one, vsig);
		(void)raw_mask(SIG_UNBLOCK, &one, NULL);
	}
}

/* ---- masks, for hook_signal.c (sigvirt_hooks.h) ---------------------- */

/* set with the shim's signal added (add) or taken out, in *copy. */
PS_SIGSAFE static const sigset_t *
with_vsig(const sigset_t *set, sigset_t *copy, int add)
{
	if (!vsig || !set)
		return set;
	*copy = *set;
	if (add)
		sigaddset(copy, vsig);
	else
		sigdelset(copy, vsig);
	return copy;
}

PS_SIGSAFE const sigset_t *
ps_sigvirt_mask_in(const sigset_t *set, sigset_t *copy)
{
	return with_vsig(set, copy, 0);
}

PS_SIGSAFE void
ps_sigvirt_mask_out(int how, const sigset_t *set, sigset_t *old, int was)
{
	if (!vsig)
		return;
	if (set && sigismember(set, vsig) == 1) {
		if (how == SIG_BLOCK || how == SIG_SETMASK)
			t_blocked = 1;
		else if (how == SIG_UNBLOCK)
			t_blocked = 0;
	} else if (set && how == SIG_SETMASK) {
		t_blocked = 0;
	}
	if (was)
		sigaddset(old, vsig);
	else
		sigdelset(old, vsig);
	if (was && !t_blocked)
		release_pending();
}

PS_SIGSAFE const sigset_t *
ps_sigvirt_wait_mask(const sigset_t *set, sigset_t *copy)
{
	return with_vsig(set, copy, 1);
}

int
ps_sigvirt_take_pending(const sigset_t *set, siginfo_t *info)
{
	if (!vsig || !set || !t_has_pending || sigismember(set, vsig) != 1)
		return 0;
	t_has_pending = 0;
	if (info)
		*info = t_pending;
	return vsig;
}

void
ps_sigvirt_before_exec(void)
{
	struct sigaction a, ign;
	sigset_t one;

	t_exec_blocked = t_exec_ignored = 0;
	if (!vsig)
		return;
	if (t_blocked) {
		sigemptyset(&one);
		sigaddset(&one, vsig);
		t_exec_blocked = raw_mask(SIG_BLOCK, &one, NULL) == 0;
	}
	read_action(&a);
	if (!(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_IGN) {
		memset(&ign, 0, sizeof(ign));
		ign.sa_handler = SIG_IGN;
		sigemptyset(&ign.sa_mask);
		t_exec_ignored = real_sigaction(vsig, &ign, NULL) == 0;
	}
}

void
ps_sigvirt_exec_failed(void)
{
	sigset_t one;

	if (t_exec_ignored)
		(void)real_sigaction(vsig, &ours, NULL);
	if (t_exec_blocked) {
		sigemptyset(&one);
		sigaddset(&one, vsig);
		(void)raw_mask(SIG_UNBLOCK, &one, NULL);
	}
	t_exec_blocked = t_exec_ignored = 0;
}
