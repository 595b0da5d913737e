/* sampler.h -- CPU sampling: ITIMER_PROF, the SIGPROF handler, and the
 * weight of each sample.
 *
 * Each sample is worth the process CPU time consumed since the previous one
 * (CLOCK_PROCESS_CPUTIME_ID), not a fixed period: the kernel delivers at
 * most one SIGPROF per tick (250 Hz here), so at 1000 Hz a fixed weight
 * would make the profile 4x too small.  Summed, the weights equal the CPU
 * time of the profiled interval, whatever the delivery rate.
 *
 * Two timer modes (PYROSCOPE_CPU_TIMER).  `thread`, the default: each
 * thread has its own timer_create(CLOCK_THREAD_CPUTIME_ID) timer whose
 * SIGPROF goes to that thread (SIGEV_THREAD_ID), and each sample weighs
 * exactly that thread's CPU time since its previous sample.  Threads are
 * covered from pthread_create (hook_thread.c) and their timer is deleted
 * when they end.  `process`: one setitimer(ITIMER_PROF) for the process,
 * whose signal lands on whichever thread runs; it under-samples and
 * misattributes when several threads are busy (golang/go#35057), but also
 * covers threads started before the shim.
 *
 * The sampler never steals SIGPROF: if the program (or another preloaded
 * library) already has a handler or an armed ITIMER_PROF, CPU profiling
 * steps aside with one warning.
 */
#ifndef PS_SAMPLER_H
#define PS_SAMPLER_H

#include "common/ps.h"
#include "shim/stacktab.h"

enum { PS_TIMER_THREAD = 0, PS_TIMER_PROCESS = 1 };

/* Install the handler and arm the timer at `hz` in `mode`.  Returns 0, -EBUSY
 * (SIGPROF or ITIMER_PROF already in use: stepped aside), or -errno from
 * sigaction/setitimer.  Context: constructor. */
int ps_sampler_start(struct ps_stacktab *tab, unsigned hz, int mode) PS_WUR;

/* Thread mode: give the calling (new) thread its timer.  `start` is the
 * thread's start routine: the CPU the thread uses after its last sample is
 * recorded under it when the thread ends.
 * Context: a new host thread, before its start routine. */
void ps_sampler_thread_start(void *start);

/* Stop the timer (thread mode: the calling thread's) and consume any
 * SIGPROF already pending, so that an exec
 * cannot carry a profiling signal into an image with no handler.  Returns 1
 * if the timer was armed (pass it to ps_sampler_rearm), else 0.
 * Context: any thread, outside the handler; async-signal-safe. */
int ps_sampler_disarm(void);

/* Re-arm after a failed exec, if `was_armed`.  Context: any thread. */
void ps_sampler_rearm(int was_armed);

/* Fork child: arm a fresh timer (timers are not inherited) and restart the
 * CPU-time baseline.  Context: fork child handler. */
void ps_sampler_child(void);

/* The program takes SIGPROF or ITIMER_PROF for itself: stop every timer of
 * the shim for good.  Returns 1 the first time, else 0.
 * Context: the signal hooks, any host thread. */
int ps_sampler_step_aside(void);

struct sigaction;
/* After stepping aside because the program armed ITIMER_PROF itself: put
 * SIGPROF back to SIG_DFL if the handler installed is still the shim's, so
 * that the program's timer does what it does without the shim (its
 * default action ends the process: a CPU-time watchdog).
 * Context: any thread outside signal context. */
int ps_sampler_restore_default(void);

/* 1 if sa is the shim's handler. */
int ps_sampler_owns_handler(const struct sigaction *sa);

/* Stop for good (exit).  Context: destructor. */
void ps_sampler_stop(void);

#endif
