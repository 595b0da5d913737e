/* hook_signal.c -- sigaction, signal and setitimer.
 *
 * A profiler that is preloaded must never steal SIGPROF.  When the program
 * installs its own SIGPROF handler, or arms ITIMER_PROF itself (a program
 * with gperftools built in, a language runtime with its own profiler), the
 * shim steps aside for good: every timer of its own is stopped first, so the
 * program's handler never receives a signal it did not ask for.  A program
 * that only asks what the SIGPROF disposition is sees SIG_DFL, as it would
 * without the shim.  Allocation profiling goes on.
 *
 * The shim's own calls are made with the guard held and pass straight
 * through.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>

#include "common/guard.h"
#include "common/log.h"
#include "common/ps.h"
#include "shim/sampler.h"
#include "shim/unwind.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef int (*sigprocmask_fn)(int, const sigset_t *, sigset_t *);
typedef int (*setitimer_fn)(int, const struct itimerval *, struct itimerval *);

static void
step_aside(const char *why)
{
	if (ps_sampler_step_aside())
		ps_warn("the program %s: CPU profiling steps aside", why);
}

PS_EXPORT int
sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	static sigaction_fn real;
	int rc, ours;

	if (!real)
		real = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	/* The shim's own calls (guard held) and other signals pass through. */
	if (sig != SIGPROF || ps_guard_held())
		return real(sig, act, old);
	if (act)
		step_aside("installs its own SIGPROF handler");
	rc = real(sig, act, old);
	if (rc == 0 && old) {
		ours = ps_sampler_owns_handler(old);
		if (ours) {
			/* What the program would have seen without the shim. */
			memset(old, 0, sizeof(*old));
			old->sa_handler = SIG_DFL;
		}
	}
	return rc;
}

PS_EXPORT sighandler_t
signal(int sig, sighandler_t handler)
{
	struct sigaction sa, old;

	/* glibc's signal() is sigaction with BSD semantics. */
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

PS_EXPORT int
setitimer(__itimer_which_t which, const struct itimerval *val, struct itimerval *old)
{
	static setitimer_fn real;

	if (!real)
		real = (setitimer_fn)dlsym(RTLD_NEXT, "setitimer");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (which == ITIMER_PROF && val && (val->it_value.tv_sec || val->it_value.tv_usec) &&
	    !ps_guard_held()) {
		step_aside("arms ITIMER_PROF itself");
		/* Without the shim SIGPROF would be at SIG_DFL here, unless
		 * the program chose otherwise (it then stepped us aside and
		 * the handler is no longer ours). */
		if (ps_sampler_restore_default())
			ps_debug("SIGPROF not reset to SIG_DFL");
	}
	return real(which, val, old);
}

/* libunwind (loaded privately, used by the shim alone) blocks every signal
 * around each use of its cache lock: two system calls per frame, most of
 * the cost of a sample.  The shim never re-enters libunwind on a thread
 * that is inside it (ps_unwind_active() stops every nested capture, in the
 * SIGPROF handler and in the allocation hooks alike), which is what that
 * masking protects against, so during a capture those calls are answered
 * without a system call.  Every other call -- all of the program's -- goes
 * to the C library unchanged. */
PS_EXPORT int
sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	static sigprocmask_fn real;

	if (ps_unwind_active()) {
		if (old)
			sigemptyset(old);
		return 0;
	}
	if (!real)
		real = (sigprocmask_fn)dlsym(RTLD_NEXT, "sigprocmask");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(how, set, old);
}
