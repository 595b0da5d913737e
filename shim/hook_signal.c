/* hook_signal.c -- the C library's signal functions, as the program sees
 * them with the shim's own signal virtualized (sigvirt.h).
 *
 * Every call about another signal goes to the C library unchanged: SIGPROF
 * and ITIMER_PROF are the program's alone.  Calls about the shim's signal
 * -- dispositions, masks, waits -- are answered with the program's own view
 * of it, while the kernel keeps the shim's handler and the signal unblocked.
 * The waits among them (ppoll, pselect, epoll_pwait, epoll_pwait2) are also
 * timed for the block profile, as hook_wait.c's interposers are.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>

#include "common/ps.h"
#include "shim/next.h"
#include "shim/sigvirt.h"
#include "shim/unwind.h"
#include "shim/wait.h"

PS_SIGSAFE static int
is_ours(int sig)
{
	int v = ps_sigvirt_signo();

	return v && sig == v;
}

PS_SIGSAFE PS_EXPORT int
sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	PS_NEXT(sigaction);
	if (!is_ours(sig)) {
		PS_NEXT_MISSING(sigaction, -1);
		return real_sigaction(sig, act, old);
	}
	ps_sigvirt_action(act, old);
	return 0;
}

/* glibc's signal() and bsd_signal(): sigaction with BSD semantics.  They
 * are redefined here because the C library's own call sigaction
 * internally, past the interposed one. */
PS_SIGSAFE static sighandler_t
bsd(int sig, sighandler_t handler)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaddset(&sa.sa_mask, sig) && sig != SIGKILL && sig != SIGSTOP)
		return SIG_ERR;
	if (sigaction(sig, &sa, &old))
		return SIG_ERR;
	return old.sa_handler;
}

PS_SIGSAFE PS_EXPORT sighandler_t
signal(int sig, sighandler_t handler)
{
	return bsd(sig, handler);
}

PS_EXPORT sighandler_t
bsd_signal(int sig, sighandler_t handler)
{
	return bsd(sig, handler);
}

/* System V semantics: reset to SIG_DFL on delivery, not blocked during the
 * handler. */
static sighandler_t
sysv(int sig, sighandler_t handler)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, &old))
		return SIG_ERR;
	return old.sa_handler;
}

PS_EXPORT sighandler_t
sysv_signal(int sig, sighandler_t handler)
{
	PS_NEXT(sysv_signal);
	if (!is_ours(sig)) {
		PS_NEXT_MISSING(sysv_signal, SIG_ERR);
		return real_sysv_signal(sig, handler);
	}
	return sysv(sig, handler);
}

PS_EXPORT sighandler_t
__sysv_signal(int sig, sighandler_t handler)
{
	return sysv_signal(sig, handler);
}

/* sigset is obsolescent, and the program still calls it. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PS_SIGSAFE PS_EXPORT sighandler_t
sigset(int sig, sighandler_t disp)
{
	struct sigaction sa, old;
	sigset_t one, prev;

	PS_NEXT(sigset);
	if (!is_ours(sig)) {
		PS_NEXT_MISSING(sigset, SIG_ERR);
		return real_sigset(sig, disp);
	}
	sigemptyset(&one);
	sigaddset(&one, sig);
	if (disp == SIG_HOLD) {
		if (pthread_sigmask(SIG_BLOCK, &one, &prev))
			return SIG_ERR;
		ps_sigvirt_action(NULL, &old);
		return sigismember(&prev, sig) ? SIG_HOLD : old.sa_handler;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = disp;
	sigemptyset(&sa.sa_mask);
	ps_sigvirt_action(&sa, &old);
	if (pthread_sigmask(SIG_UNBLOCK, &one, &prev))
		return SIG_ERR;
	return sigismember(&prev, sig) ? SIG_HOLD : old.sa_handler;
}
#pragma GCC diagnostic pop

/* ---- masks ----------------------------------------------------------- */

PS_SIGSAFE PS_EXPORT int
pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy, prev;
	int was = ps_sigvirt_thread_blocked(), rc;

	PS_NEXT(pthread_sigmask);
	if (!real_pthread_sigmask)
		return ENOSYS;
	/* Into prev, which the same system call returns: `set` is read
	 * after the call, and a program may pass one set as both.  (The
	 * kernel fills the first 8 of its 128 bytes.) */
	sigemptyset(&prev);
	rc = real_pthread_sigmask(how, ps_sigvirt_mask_in(set, &copy), &prev);
	if (rc == 0) {
		ps_sigvirt_mask_out(how, set, &prev, was);
		if (old)
			*old = prev;
	}
	return rc;
}

/* libunwind (loaded privately, used by the shim alone) blocks every signal
 * around each use of its cache lock: two system calls per frame, most of
 * the cost of a sample.  The shim never re-enters libunwind on a thread
 * that is inside it (ps_unwind_active() stops every nested capture, in the
 * signal handler and in the allocation hooks alike), which is what that
 * masking protects against, so during a capture those calls are answered
 * without a system call.  Every other call -- all of the program's -- is
 * the program's, virtualized like pthread_sigmask. */
PS_SIGSAFE PS_EXPORT int
sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy, prev;
	int was = ps_sigvirt_thread_blocked(), rc;

	if (ps_unwind_active()) {
		if (old)
			sigemptyset(old);
		return 0;
	}
	PS_NEXT(sigprocmask);
	PS_NEXT_MISSING(sigprocmask, -1);
	sigemptyset(&prev);   /* as above */
	rc = real_sigprocmask(how, ps_sigvirt_mask_in(set, &copy), &prev);
	if (rc == 0) {
		ps_sigvirt_mask_out(how, set, &prev, was);
		if (old)
			*old = prev;
	}
	return rc;
}

/* ---- waits with a temporary mask: the shim's signal blocked meanwhile - */

PS_SIGSAFE PS_EXPORT int
sigsuspend(const sigset_t *mask)
{
	sigset_t copy;

	PS_NEXT(sigsuspend);
	PS_NEXT_MISSING(sigsuspend, -1);
	return real_sigsuspend(ps_sigvirt_wait_mask(mask, &copy));
}

PS_SIGSAFE PS_EXPORT int
ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask)
{
	sigset_t copy;

	PS_NEXT(ppoll);
	PS_NEXT_MISSING(ppoll, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, ppoll, int,
		      real_ppoll(fds, n, t, ps_sigvirt_wait_mask(mask, &copy)));
}

PS_SIGSAFE PS_EXPORT int
pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *mask)
{
	sigset_t copy;

	PS_NEXT(pselect);
	PS_NEXT_MISSING(pselect, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, pselect, int,
		      real_pselect(n, r, w, e, t, ps_sigvirt_wait_mask(mask, &copy)));
}

PS_EXPORT int
epoll_pwait(int fd, struct epoll_event *ev, int max, int ms, const sigset_t *mask)
{
	sigset_t copy;

	PS_NEXT(epoll_pwait);
	PS_NEXT_MISSING(epoll_pwait, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, epoll_pwait, int,
		      real_epoll_pwait(fd, ev, max, ms, ps_sigvirt_wait_mask(mask, &copy)));
}

PS_EXPORT int
epoll_pwait2(int fd, struct epoll_event *ev, int max, const struct timespec *t,
	     const sigset_t *mask)
{
	sigset_t copy;

	PS_NEXT(epoll_pwait2);
	PS_NEXT_MISSING(epoll_pwait2, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, epoll_pwait2, int,
		      real_epoll_pwait2(fd, ev, max, t, ps_sigvirt_wait_mask(mask, &copy)));
}

/* ---- synchronous receipt: never one of the shim's samples ------------ */

PS_EXPORT int
sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *t)
{
	sigset_t copy;
	int sig;

	PS_NEXT(sigtimedwait);
	PS_NEXT_MISSING(sigtimedwait, -1);
	sig = ps_sigvirt_take_pending(set, info);
	if (sig)
		return sig;
	return real_sigtimedwait(ps_sigvirt_mask_in(set, &copy), info, t);
}

/* sigtimedwait with no timeout, as the C library defines it. */
PS_EXPORT int
sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	return sigtimedwait(set, info, NULL);
}

PS_EXPORT int
sigwait(const sigset_t *set, int *sig)
{
	sigset_t copy;
	int s;

	PS_NEXT(sigwait);
	if (!real_sigwait)
		return ENOSYS;
	s = ps_sigvirt_take_pending(set, NULL);
	if (s) {
		*sig = s;
		return 0;
	}
	return real_sigwait(ps_sigvirt_mask_in(set, &copy), sig);
}

PS_EXPORT int
signalfd(int fd, const sigset_t *mask, int flags)
{
	sigset_t copy;

	PS_NEXT(signalfd);
	PS_NEXT_MISSING(signalfd, -1);
	return real_signalfd(fd, ps_sigvirt_mask_in(mask, &copy), flags);
}
