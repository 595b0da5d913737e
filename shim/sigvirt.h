/* sigvirt.h -- the shim's CPU signal, shown to the program as if it were
 * not there.
 *
 * The shim's timers deliver a real-time signal of its own (PS_SIG below,
 * PYROSCOPE_CPU_SIGNAL), never SIGPROF: SIGPROF and ITIMER_PROF belong to
 * the program (the Go runtime, gperftools, a JVM, or the program itself).
 * Nothing stops a program from using that signal number too -- the Go
 * runtime installs a handler for every real-time signal at start-up -- so
 * the signal is virtualized the way TSan's and libjsig's interceptors do it:
 *
 *   - Dispositions.  sigaction, signal, bsd_signal, sysv_signal and sigset
 *     record the program's action for PS_SIG and answer queries with it;
 *     the kernel keeps the shim's handler.  A delivery that is not one of
 *     the shim's samples (ps_sigvirt_is_sample) is forwarded to the
 *     recorded action, emulating what the kernel would have done:
 *     SA_SIGINFO, SA_RESETHAND, SA_NODEFER, sa_mask, SIG_IGN, and SIG_DFL
 *     (terminate: the process dies by the signal, with the same status).
 *   - Masks.  PS_SIG is never really blocked by the program: it is removed
 *     from every set passed to pthread_sigmask and sigprocmask, and the
 *     program's wish is kept per thread and shown in the old set it gets
 *     back.  A thread therefore takes samples even when the program blocks
 *     every signal in it (liblzma's worker threads do).  A signal the
 *     program sent itself while it "blocks" PS_SIG is kept and sent again
 *     when the program unblocks it.
 *   - Waits.  The calls that take a temporary mask for a wait (sigsuspend,
 *     ppoll, pselect, epoll_pwait) get PS_SIG added: a waiting thread uses
 *     no CPU, so no sample is lost, and the shim's signal can never end the
 *     program's wait early with EINTR.  The calls that receive signals
 *     synchronously (sigwait, sigwaitinfo, sigtimedwait, signalfd) get it
 *     removed: the program is never handed one of the shim's samples.
 *   - exec.  The program's wish survives exec the way the kernel's state
 *     would: a virtually blocked PS_SIG is really blocked, and SIG_IGN
 *     really ignored, just before the new image starts.
 *
 * What cannot be virtualized: raw rt_sigaction/rt_sigprocmask system calls
 * (the Go runtime masks signals that way on its own threads: it unblocks
 * every signal it has a handler for, PS_SIG included).  A raw rt_sigaction
 * that replaces the shim's handler stops CPU samples from then on; a raw
 * mask that blocks PS_SIG delays them (the timer's overrun count keeps
 * their weight).  man pyroshim(7) says so.
 */
#ifndef PS_SIGVIRT_H
#define PS_SIGVIRT_H

#include <signal.h>
#include "common/ps.h"

/* sigev_value of every timer of the shim: a sample is a SI_TIMER delivery
 * carrying it. */
#define PS_SIG_MAGIC ((void *)(uintptr_t)0x7079726f7368696dull) /* "pyroshim" */

/* Record the kernel's current action for `sig` as the program's, install
 * `handler` (SA_SIGINFO | SA_RESTART | SA_ONSTACK) in the kernel, and start
 * virtualizing `sig`.  The calling thread (the main thread) is adopted
 * (ps_sigvirt_adopt_thread).  Returns 0 or -errno.  Context: constructor. */
int ps_sigvirt_start(int sig, void (*handler)(int, siginfo_t *, void *)) PS_WUR;

/* The shim's signal, or 0 before ps_sigvirt_start.
 * Context: any; async-signal-safe. */
int ps_sigvirt_signo(void) PS_SIGSAFE;

/* 1 if this delivery is one of the shim's samples.  Context: handler. */
int ps_sigvirt_is_sample(const siginfo_t *si) PS_SIGSAFE;

/* Hand a delivery that is not a sample to the program's recorded action.
 * Context: the shim's handler; async-signal-safe; errno preserved by the
 * caller. */
void ps_sigvirt_forward(int sig, siginfo_t *si, void *uc) PS_SIGSAFE;

/* The calling thread's virtual mask bit (1: the program blocks PS_SIG
 * here), for pthread_create to hand to the new thread. */
int ps_sigvirt_thread_blocked(void);

/* A new thread (or the main thread at start-up): it starts with the
 * program's wish `blocked` (the creator's), or with PS_SIG really blocked
 * if the program arranged that (pthread_attr_setsigmask_np, a raw mask
 * inherited across exec): either way PS_SIG is then unblocked for real and
 * the wish kept.  Context: the thread itself, outside signal context. */
void ps_sigvirt_adopt_thread(int blocked);

/* The real pthread_sigmask, for the shim's own masking (draining pending
 * samples).  Returns 0 or an errno value.  Context: any; async-signal-safe. */
int ps_sigvirt_real_mask(int how, const sigset_t *set, sigset_t *old) PS_SIGSAFE;

/* exec: make the kernel's state the program's wish (PS_SIG blocked if it
 * blocked it, ignored if it ignored it), since the new image inherits the
 * mask and an ignored disposition.  Call after the timer is disarmed and
 * pending samples are drained.  ps_sigvirt_exec_failed() undoes it.
 * Context: the exec hooks; async-signal-safe. */
void ps_sigvirt_before_exec(void);
void ps_sigvirt_exec_failed(void);

/* ---- for the interposed functions (hook_signal.c) -------------------- */

/* sigaction on the shim's signal: answer *old with the program's recorded
 * action and record *act (either may be NULL).  Context: any host thread;
 * also from the program's signal handlers (async-signal-safe). */
void ps_sigvirt_action(const struct sigaction *act, struct sigaction *old) PS_SIGSAFE;

/* A mask the program asks for: the set to pass to the kernel (the shim's
 * signal removed, in *copy; `set` itself if nothing changes).  Then, once
 * the call succeeded, ps_sigvirt_mask_out() records the program's wish,
 * shows it in *old (`was` is ps_sigvirt_thread_blocked() from before the
 * call), and sends again a delivery kept while it was blocked.  `old` is
 * required: the mask before the call, as the kernel returned it. */
const sigset_t *ps_sigvirt_mask_in(const sigset_t *set, sigset_t *copy) PS_SIGSAFE;
void ps_sigvirt_mask_out(int how, const sigset_t *set, sigset_t *old, int was) PS_SIGSAFE;

/* Block every signal but a fault's, really (the old mask in *old), and
 * restore it: around shim code that a handler of the program's must not
 * interrupt, as one that siglongjmps out would leave it half done.
 * Context: any thread, async-signal-safe. */
void ps_sigvirt_hold(sigset_t *old) PS_SIGSAFE;
void ps_sigvirt_release(const sigset_t *old) PS_SIGSAFE;

/* A temporary mask for a wait (sigsuspend, ppoll, pselect, epoll_pwait):
 * the same set with the shim's signal added. */
const sigset_t *ps_sigvirt_wait_mask(const sigset_t *set, sigset_t *copy) PS_SIGSAFE;

/* A synchronous wait for the signals in `set`: the same set without the
 * shim's signal (ps_sigvirt_mask_in).  If the program waits for that
 * signal and sent one to itself while blocking it, it is taken here:
 * returns the signal number (filling *info if not NULL), else 0. */
int ps_sigvirt_take_pending(const sigset_t *set, siginfo_t *info);

#endif
