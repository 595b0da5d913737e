/* sampler.h -- CPU sampling: CPU-time timers, the handler of the shim's
 * signal, and the weight of each sample.
 *
 * The timers deliver a real-time signal of the shim's own (sigvirt.h,
 * PYROSCOPE_CPU_SIGNAL), marked as a sample by its sigev_value; SIGPROF and
 * ITIMER_PROF are left to the program.
 *
 * Two timer modes (PYROSCOPE_CPU_TIMER).  `thread`, the default: each
 * thread has its own timer_create(CLOCK_THREAD_CPUTIME_ID) timer whose
 * signal goes to that thread (SIGEV_THREAD_ID), with a random first
 * expiry and one period per expiry (ps_sampler_first).  Threads are
 * covered from pthread_create (hook_thread.c) and their timer is deleted
 * when they end.  `process`: one timer_create(CLOCK_PROCESS_CPUTIME_ID)
 * timer for the process, whose signal lands on whichever thread runs, each
 * sample worth the process CPU time consumed since the previous one; it
 * under-samples and misattributes when several threads are busy
 * (golang/go#35057), but also covers threads started before the shim.
 */
#ifndef PS_SAMPLER_H
#define PS_SAMPLER_H

#include "common/ps.h"
#include "shim/stacktab.h"

enum { PS_TIMER_THREAD = 0, PS_TIMER_PROCESS = 1 };

/* Install the handler for signal `sig` (virtualized: sigvirt.h) and arm
 * the timer at `hz` in `mode`; samples go to ps_stacktab_current().
 * `grid` (thread mode): the next expiry on the thread's CPU clock that the
 * image before this one left at its exec (ps_sampler_grid), continued so
 * that no CPU is counted twice or lost; 0 to draw a fresh one.  Returns 0
 * or -errno from sigaction or timer_create.  Context: constructor. */
int ps_sampler_start(unsigned hz, int mode, int sig, uint64_t grid) PS_WUR;

/* Thread mode, after ps_sampler_disarm at an exec: the calling thread's
 * next expiry on its CPU clock (every one before it is counted), for the
 * next image; 0 if none.  Context: the exec hook. */
uint64_t ps_sampler_grid(void);

/* Thread mode: give the calling (new) thread its timer.  `start` is the
 * thread's start routine: the expiries the thread passes without a signal
 * (see ps_sampler_first) are recorded under it when the thread ends.
 * Context: a new host thread, before its start routine. */
void ps_sampler_thread_start(void *start);

/* The calling thread ends: its timer deleted, the CPU since its last
 * expiry recorded.  Called by the thread-end destructor that also frees
 * its signal stack, first (hook_thread.c), and by the sampler's own key,
 * where it then finds nothing to do.  Context: the thread itself. */
void ps_sampler_thread_end(void);

/* 1 while the sampler is started and armed: a thread started now may be
 * sampled, and needs a signal stack.  0 before, after a start that
 * failed, and once profiling is off (profiling_off, the destructor).
 * Context: any thread. */
int ps_sampler_armed(void);

/* Stop the timer (thread mode: the calling thread's) and consume any
 * sample already pending, so that an exec
 * cannot carry a profiling signal into an image with no handler; in
 * thread mode, record the expiries the calling thread passed without a
 * signal, under its start routine (the main thread's: the program's entry
 * point), as at a thread's end.  Returns 1 if the timer was armed (pass it
 * to ps_sampler_rearm), else 0.
 * Context: any thread, outside the handler; async-signal-safe. */
int ps_sampler_disarm(void);

/* Re-arm after a failed exec, if `was_armed`.  Context: any thread. */
void ps_sampler_rearm(int was_armed);

/* Fork child: arm a fresh timer (timers are not inherited) and restart the
 * CPU-time baseline.  Context: fork child handler. */
void ps_sampler_child(void);

/* Stop for good (exit).  Context: destructor. */
void ps_sampler_stop(void);

/* ---- the weight arithmetic (check_sampler) ---------------------------- */

/* Thread mode's expiries.  Each weighs one period, and the first comes at
 * a point drawn uniformly in (0, period] of the thread's CPU time: then
 * the expected number of expiries in any length L of CPU is L / period,
 * so threads and processes of any length, a few ms included, are counted
 * without bias and their samples fall where their CPU went.  An exec'd
 * image goes on with the grid the image before it left (ps_sampler_start's
 * `grid`, through the tree's bell).  Without one, the count starts at the
 * thread's CPU clock's 0 (its creation, or for an exec'd image the fork
 * that made the process: the loader's CPU counts) when that is less than
 * PS_SAMPLER_FRESH_NS of CPU ago, else at arming (an image that exec'd
 * after running longer already counted what it ran; an exec chain through
 * short images outside a tree counts the earlier images' CPU twice, at
 * most this bound). */
#define PS_SAMPLER_FRESH_NS (20ull * 1000000)

/* The grid an image left at its exec is taken by the next only if it fits:
 * the thread's CPU now at most this far past it (exec and the loader). */
#define PS_SAMPLER_GRID_SLACK_NS (1000ull * 1000000)

/* The CPU time of the first expiry for a thread whose CPU clock reads now,
 * from `random` (any 64 bits).  Context: any. */
uint64_t ps_sampler_first(uint64_t now, uint64_t period, uint64_t random);

/* How many expiries from *next (the next one's CPU time) on are at or
 * before now; *next moved past them.  Context: async-signal-safe. */
uint64_t ps_sampler_crossed(uint64_t *next, uint64_t period, uint64_t now) PS_SIGSAFE;

/* The time from *seen to now, and *seen moved to now; 0 if now is not
 * past it.  The baseline only moves forward, so two handlers racing on two
 * threads split the time between them instead of counting it twice.
 * Context: any thread, signal handler included; async-signal-safe. */
uint64_t ps_sampler_take_since(_Atomic uint64_t *seen, uint64_t now) PS_SIGSAFE;

/* What one expiry of a timer of `period` ns stands for: the period, and
 * one more for each expiry the kernel merged into it (si_overrun; a
 * negative count is none).  Context: async-signal-safe. */
uint64_t ps_sampler_timer_weight(uint64_t period, int overrun) PS_SIGSAFE;

#endif
