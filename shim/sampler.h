/* sampler.h -- CPU sampling: CPU-time timers, the handler of the shim's
 * signal, and the weight of each sample.
 *
 * The timers deliver a real-time signal of the shim's own (sigvirt.h,
 * PYROSCOPE_CPU_SIGNAL), marked as a sample by its sigev_value; SIGPROF and
 * ITIMER_PROF are left to the program.
 *
 * Two timer modes (PYROSCOPE_CPU_TIMER).  `thread`, the default: each
 * thread has its own timer_create(CLOCK_THREAD_CPUTIME_ID) timer whose
 * signal goes to that thread (SIGEV_THREAD_ID), and each sample weighs
 * exactly that thread's CPU time since its previous sample.  Threads are
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
 * Returns 0 or -errno from sigaction or timer_create.  Context:
 * constructor. */
int ps_sampler_start(unsigned hz, int mode, int sig) PS_WUR;

/* Thread mode: give the calling (new) thread its timer.  `start` is the
 * thread's start routine: the CPU the thread uses after its last sample is
 * recorded under it when the thread ends.
 * Context: a new host thread, before its start routine. */
void ps_sampler_thread_start(void *start);

/* Stop the timer (thread mode: the calling thread's) and consume any
 * sample already pending, so that an exec
 * cannot carry a profiling signal into an image with no handler.  Returns 1
 * if the timer was armed (pass it to ps_sampler_rearm), else 0.
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
