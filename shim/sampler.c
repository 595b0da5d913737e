/* sampler.c -- ITIMER_PROF and the SIGPROF handler.  See sampler.h. */
#include "shim/sampler.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "shim/bench.h"
#include "common/guard.h"
#include "shim/unwind.h"

/* Written by ps_sampler_start (constructor) and the fork child handler,
 * before or while no other thread runs; read by the handler. */
static struct ps_stacktab *tab;
static struct itimerval period;
static uint64_t period_ns;        /* the same, in ns (set with period) */
static int thread_mode;           /* PS_TIMER_THREAD */
static pthread_key_t thread_key;  /* its destructor deletes a thread's timer */

/* Thread mode: each thread's own timer and CPU-time baseline.  Owned by
 * the thread; the handler runs on the same thread. */
static PS_TLS timer_t t_timer;
static PS_TLS int t_has_timer;
static PS_TLS int t_slot;         /* its index in `timers` + 1, or 0 */
static PS_TLS uint64_t t_cpu_seen;
static PS_TLS uintptr_t t_start;  /* start routine, for the last sample */

/* Every live per-thread timer, so that stepping aside can stop them all
 * from any thread.  A slot is claimed by its thread (0 -> 1), filled, then
 * published (1 -> 2); stepping aside deletes published ones. */
#define MAX_TIMERS 4096
static struct {
	_Atomic int state;
	timer_t id;
} timers[MAX_TIMERS];
/* Set once when the program takes SIGPROF or ITIMER_PROF for itself. */
static _Atomic int stepped_aside;
/* 1 while our timer should be armed; changed by start/stop/exec hooks. */
static _Atomic int armed;
/* CPU time already attributed to samples; advanced by the handlers. */
static _Atomic uint64_t cpu_seen_ns;

PS_SIGSAFE static uint64_t
process_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The CPU time this sample stands for: what the process consumed since the
 * last sample.  The baseline only moves forward, so two handlers racing on
 * two threads split the time between them instead of counting it twice. */
PS_SIGSAFE static uint64_t
take_weight(void)
{
	uint64_t now = process_cpu_ns();
	uint64_t prev = atomic_load_explicit(&cpu_seen_ns, memory_order_relaxed);

	do {
		if (now <= prev)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&cpu_seen_ns, &prev, now,
							memory_order_relaxed,
							memory_order_relaxed));
	return now - prev;
}

PS_SIGSAFE static uint64_t
thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Thread mode: the CPU time of this thread since its last sample.  The
 * timer's own count says it without a system call: the kernel checks CPU
 * timers at its tick (250 Hz here), so one signal may stand for several
 * periods, and si_overrun counts the periods that expired beyond the
 * first.  t_cpu_seen then stays on the timer's grid (arm time + k
 * periods), so the CPU a thread uses after its last expiry is exactly what
 * last_sample() adds at its end. */
PS_SIGSAFE static uint64_t
take_thread_weight(const siginfo_t *si)
{
	uint64_t now, w;

	if (si && si->si_code == SI_TIMER) {
		w = period_ns * (1 + (uint64_t)(si->si_overrun > 0 ? si->si_overrun : 0));
		t_cpu_seen += w;
		return w;
	}
	/* Not from our timer (sent by hand): read the clock. */
	now = thread_cpu_ns();
	w = now > t_cpu_seen ? now - t_cpu_seen : 0;
	t_cpu_seen = now;
	return w;
}

PS_SIGSAFE static void
handler(int sig, siginfo_t *si, void *uc)
{
	uintptr_t ips[PS_MAX_DEPTH];
	uint64_t vals[PS_NVALUES] = { 0 };
	uint64_t t0 = ps_bench_now();
	int saved = errno, depth;

	(void)sig;
	if (!tab)
		goto out;
	vals[PS_V_CPU_SAMPLES] = 1;
	vals[PS_V_CPU_NS] = thread_mode ? take_thread_weight(si) : take_weight();
	if (ps_guard_held() || ps_unwind_active()) {
		/* Inside shim code: unwinding here could re-enter libunwind. */
		ps_stacktab_add_special(tab, PS_SLOT_BUSY, vals);
		goto out;
	}
	depth = ps_unwind_signal(uc, ips, PS_MAX_DEPTH);
	ps_stacktab_add(tab, ips, depth, depth == PS_MAX_DEPTH, vals);
out:
	ps_bench_record(ps_bench_now() - t0);
	errno = saved;
}

static int
in_use(void)
{
	struct sigaction old;
	struct itimerval it;

	if (sigaction(SIGPROF, NULL, &old))
		return -errno;
	if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
		return -EBUSY;
	if (getitimer(ITIMER_PROF, &it))
		return -errno;
	if (it.it_value.tv_sec || it.it_value.tv_usec)
		return -EBUSY;
	return 0;
}

static void
register_timer(void)
{
	int i, expected;

	for (i = 0; i < MAX_TIMERS; i++) {
		expected = 0;
		if (atomic_compare_exchange_strong(&timers[i].state, &expected, 1)) {
			timers[i].id = t_timer;
			atomic_store(&timers[i].state, 2);
			t_slot = i + 1;
			return;
		}
	}
}

static void
unregister_timer(void)
{
	int expected = 2;

	if (t_slot && atomic_compare_exchange_strong(&timers[t_slot - 1].state, &expected, 1)) {
		timer_delete(t_timer);
		atomic_store(&timers[t_slot - 1].state, 0);
	}
	t_slot = 0;
}

/* Thread mode: arm a CPU-time timer for the calling thread, delivering
 * SIGPROF to this very thread. */
static int
thread_arm(void)
{
	struct itimerspec its;
	struct sigevent sev;

	if (!t_has_timer) {
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGPROF;
		sev._sigev_un._tid = gettid();
		if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &t_timer))
			return -errno;
		t_has_timer = 1;
		register_timer();
		/* The key's destructor deletes the timer when the thread ends,
		 * by return or by pthread_exit. */
		(void)pthread_setspecific(thread_key, (void *)1);
	}
	if (atomic_load(&stepped_aside))
		return -EBUSY;
	t_cpu_seen = thread_cpu_ns();
	its.it_interval.tv_sec = period.it_interval.tv_sec;
	its.it_interval.tv_nsec = period.it_interval.tv_usec * 1000L;
	its.it_value = its.it_interval;
	if (timer_settime(t_timer, 0, &its, NULL))
		return -errno;
	return 0;
}

/* Thread mode: the CPU a thread used since its last sample would be lost
 * when it ends -- all of it for a thread shorter than one period (or one
 * tick).  It is recorded under the thread's start routine, once its timer
 * is gone (timer_delete also discards a signal still pending, so nothing
 * is counted twice). */
static void
last_sample(void)
{
	uint64_t vals[PS_NVALUES] = { 0 };
	uintptr_t ip = t_start;
	uint64_t now;

	if (!tab || !ip || !atomic_load(&armed) || atomic_load(&stepped_aside))
		return;
	now = thread_cpu_ns();
	if (now <= t_cpu_seen)
		return;
	vals[PS_V_CPU_SAMPLES] = 1;
	vals[PS_V_CPU_NS] = now - t_cpu_seen;
	t_cpu_seen = now;
	(void)ps_stacktab_add(tab, &ip, 1, 0, vals);
}

static void
thread_gone(void *unused)
{
	(void)unused;
	if (t_has_timer) {
		if (t_slot)
			unregister_timer();
		else
			timer_delete(t_timer);
		t_has_timer = 0;
		last_sample();
	}
}

void
ps_sampler_thread_start(void *start)
{
	t_start = (uintptr_t)start;
	if (tab && thread_mode && atomic_load(&armed))
		(void)thread_arm();
}

int
ps_sampler_start(struct ps_stacktab *t, unsigned hz, int mode)
{
	struct sigaction sa;
	long us;
	int rc;

	rc = in_use();
	if (rc)
		return rc;
	us = 1000000L / (long)(hz ? hz : 100);
	period.it_interval.tv_sec = us / 1000000L;
	period.it_interval.tv_usec = us % 1000000L;
	period.it_value = period.it_interval;
	period_ns = (uint64_t)us * 1000u;
	thread_mode = mode == PS_TIMER_THREAD;
	if (thread_mode && pthread_key_create(&thread_key, thread_gone))
		return -EAGAIN;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	tab = t;
	if (sigaction(SIGPROF, &sa, NULL))
		return -errno;
	atomic_store(&cpu_seen_ns, process_cpu_ns());
	rc = thread_mode ? thread_arm() : (setitimer(ITIMER_PROF, &period, NULL) ? -errno : 0);
	if (rc)
		return rc;
	atomic_store(&armed, 1);
	return 0;
}

/* Stop the timer that can hit this thread: the process timer, or in thread
 * mode this thread's own (the other threads' timers die with them at
 * execve, with their pending signals). */
PS_SIGSAFE static void
stop_timer(void)
{
	static const struct itimerval zero;
	static const struct itimerspec zero_ts;

	if (!thread_mode)
		setitimer(ITIMER_PROF, &zero, NULL);
	else if (t_has_timer)
		timer_settime(t_timer, 0, &zero_ts, NULL);
}

/* Accept every SIGPROF pending for the calling thread or the process: one
 * our timer generated just before it stopped, or while the program blocked
 * SIGPROF.  Left pending, it would reach whatever handles SIGPROF next --
 * the default action (termination) after an exec or a reset to SIG_DFL,
 * or the program's own handler. */
PS_SIGSAFE static void
drain_pending(void)
{
	struct timespec now = { 0, 0 };
	sigset_t prof, old;

	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	if (pthread_sigmask(SIG_BLOCK, &prof, &old) == 0) {
		while (sigtimedwait(&prof, NULL, &now) == SIGPROF)
			;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
}

PS_SIGSAFE int
ps_sampler_disarm(void)
{
	int was = atomic_exchange(&armed, 0);

	if (!was)
		return 0;
	stop_timer();
	/* Pending signals survive execve, and the new image has no handler. */
	drain_pending();
	return 1;
}

void
ps_sampler_rearm(int was_armed)
{
	int rc;

	if (!was_armed || !tab || atomic_load(&stepped_aside))
		return;
	ps_guard_enter();  /* our own setitimer is not the program's */
	rc = thread_mode ? thread_arm() : (setitimer(ITIMER_PROF, &period, NULL) ? -errno : 0);
	ps_guard_leave();
	if (rc == 0)
		atomic_store(&armed, 1);
}

void
ps_sampler_child(void)
{
	int i;

	if (!tab || atomic_load(&stepped_aside))
		return;
	/* Timers are not inherited: the child's only thread gets a new one. */
	for (i = 0; i < MAX_TIMERS; i++)
		atomic_store(&timers[i].state, 0);
	t_has_timer = 0;
	t_slot = 0;
	atomic_store(&cpu_seen_ns, process_cpu_ns());
	atomic_store(&armed, 0);
	ps_sampler_rearm(1);
}

void
ps_sampler_stop(void)
{
	(void)ps_sampler_disarm();
}

int
ps_sampler_step_aside(void)
{
	static const struct itimerval zero;
	int i, expected;

	if (!tab || atomic_exchange(&stepped_aside, 1))
		return 0;
	atomic_store(&armed, 0);
	if (!thread_mode) {
		setitimer(ITIMER_PROF, &zero, NULL);
		drain_pending();
		return 1;
	}
	for (i = 0; i < MAX_TIMERS; i++) {
		expected = 2;
		if (atomic_compare_exchange_strong(&timers[i].state, &expected, 1)) {
			timer_delete(timers[i].id);
			atomic_store(&timers[i].state, 3);  /* deleted: never again */
		}
	}
	/* Recent kernels discard a deleted timer's pending signal; older ones
	 * (6.1) deliver it.  This thread's, at least, is taken back here. */
	drain_pending();
	return 1;
}

int
ps_sampler_restore_default(void)
{
	struct sigaction cur, dfl;
	int rc = 0;

	ps_guard_enter();  /* our own sigaction calls pass straight through */
	if (sigaction(SIGPROF, NULL, &cur) == 0 && ps_sampler_owns_handler(&cur)) {
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		rc = sigaction(SIGPROF, &dfl, NULL) ? -errno : 0;
	}
	ps_guard_leave();
	return rc;
}

int
ps_sampler_owns_handler(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == handler;
}
