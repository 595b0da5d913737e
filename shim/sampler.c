/* sampler.c -- CPU-time timers and the handler of the shim's signal.
 * See sampler.h. */
#include "shim/sampler.h"
#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim/bench.h"
#include "common/guard.h"
#include "shim/sigvirt.h"
#include "shim/unwind.h"

/* Written by ps_sampler_start (constructor) and the fork child handler,
 * before or while no other thread runs; read by the handler. */
static int started;               /* ps_sampler_start succeeded this far */
static struct itimerspec period;
static uint64_t period_ns;        /* the same, in ns (set with period) */
static int thread_mode;           /* PS_TIMER_THREAD */
static int signo;                 /* the shim's signal (sigvirt.h) */
static pthread_key_t thread_key;  /* its destructor deletes a thread's timer */
static timer_t proc_timer;        /* process mode: the one timer */

/* Thread mode: each thread's own timer and CPU-time baseline.  Owned by
 * the thread; the handler runs on the same thread. */
static PS_TLS timer_t t_timer;
static PS_TLS int t_has_timer;
static PS_TLS uint64_t t_cpu_seen;
static PS_TLS uintptr_t t_start;  /* start routine, for the last sample */

/* 1 while our timer should be armed; changed by start/stop/exec hooks. */
static _Atomic int armed;
/* CPU time already attributed to samples; advanced by the handlers. */
static _Atomic uint64_t cpu_seen_ns;

PS_SIGSAFE uint64_t
ps_sampler_take_since(_Atomic uint64_t *seen, uint64_t now)
{
	uint64_t prev = atomic_load_explicit(seen, memory_order_relaxed);

	do {
		if (now <= prev)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(seen, &prev, now, memory_order_relaxed,
							memory_order_relaxed));
	return now - prev;
}

PS_SIGSAFE uint64_t
ps_sampler_timer_weight(uint64_t period, int overrun)
{
	return period * (1 + (uint64_t)(overrun > 0 ? overrun : 0));
}

/* The CPU time this sample stands for: what the process consumed since the
 * last sample. */
PS_SIGSAFE static uint64_t
take_weight(void)
{
	return ps_sampler_take_since(&cpu_seen_ns, ps_clock_ns(CLOCK_PROCESS_CPUTIME_ID));
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
		w = ps_sampler_timer_weight(period_ns, si->si_overrun);
		t_cpu_seen += w;
		return w;
	}
	/* Not from our timer (sent by hand): read the clock. */
	now = ps_clock_ns(CLOCK_THREAD_CPUTIME_ID);
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
	struct ps_stacktab *tab;
	int saved = errno, depth;

	if (!ps_sigvirt_is_sample(si)) {
		/* The program's own use of the signal number. */
		ps_sigvirt_forward(sig, si, uc);
		errno = saved;
		return;
	}
	tab = ps_stacktab_current();
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

/* A CPU-time timer delivering the shim's signal, marked as a sample by
 * its value: to thread `tid` (thread mode) or to the process (tid 0). */
static int
new_timer(clockid_t clock, pid_t tid, timer_t *out)
{
	struct sigevent sev;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = tid ? SIGEV_THREAD_ID : SIGEV_SIGNAL;
	sev.sigev_signo = signo;
	sev.sigev_value.sival_ptr = PS_SIG_MAGIC;
	sev._sigev_un._tid = tid;
	return timer_create(clock, &sev, out) ? -errno : 0;
}

/* Thread mode: arm a CPU-time timer for the calling thread, delivering
 * the shim's signal to this very thread. */
static int
thread_arm(void)
{
	int rc;

	if (!t_has_timer) {
		rc = new_timer(CLOCK_THREAD_CPUTIME_ID, gettid(), &t_timer);
		if (rc)
			return rc;
		t_has_timer = 1;
		/* The key's destructor deletes the timer when the thread ends,
		 * by return or by pthread_exit. */
		(void)pthread_setspecific(thread_key, (void *)1);
	}
	t_cpu_seen = ps_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	return timer_settime(t_timer, 0, &period, NULL) ? -errno : 0;
}

static int
arm(void)
{
	return thread_mode ? thread_arm() : timer_settime(proc_timer, 0, &period, NULL) ? -errno : 0;
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

	if (!ps_stacktab_current() || !ip || !atomic_load(&armed))
		return;
	now = ps_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (now <= t_cpu_seen)
		return;
	vals[PS_V_CPU_SAMPLES] = 1;
	vals[PS_V_CPU_NS] = now - t_cpu_seen;
	t_cpu_seen = now;
	(void)ps_stacktab_add(ps_stacktab_current(), &ip, 1, 0, vals);
}

static void
thread_gone(void *unused)
{
	(void)unused;
	if (t_has_timer) {
		timer_delete(t_timer);
		t_has_timer = 0;
		last_sample();
	}
}

void
ps_sampler_thread_start(void *start)
{
	t_start = (uintptr_t)start;
	if (started && thread_mode && atomic_load(&armed))
		(void)thread_arm();
}

int
ps_sampler_start(unsigned hz, int mode, int sig)
{
	long ns;
	int rc;

	ns = 1000000000L / (long)(hz ? hz : 100);
	period.it_interval.tv_sec = ns / 1000000000L;
	period.it_interval.tv_nsec = ns % 1000000000L;
	period.it_value = period.it_interval;
	period_ns = (uint64_t)ns;
	thread_mode = mode == PS_TIMER_THREAD;
	signo = sig;
	if (thread_mode && pthread_key_create(&thread_key, thread_gone))
		return -EAGAIN;
	if (!thread_mode) {
		rc = new_timer(CLOCK_PROCESS_CPUTIME_ID, 0, &proc_timer);
		if (rc)
			return rc;
	}
	started = 1;
	rc = ps_sigvirt_start(sig, handler);
	if (rc)
		return rc;
	atomic_store(&cpu_seen_ns, ps_clock_ns(CLOCK_PROCESS_CPUTIME_ID));
	rc = arm();
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
	static const struct itimerspec zero;

	if (!thread_mode)
		timer_settime(proc_timer, 0, &zero, NULL);
	else if (t_has_timer)
		timer_settime(t_timer, 0, &zero, NULL);
}

/* Accept every one of the shim's signals pending for the calling thread
 * or the process: one our timer generated just before it stopped.  Left
 * pending across exec, it would reach an image with no handler, whose
 * default action for a real-time signal is to terminate.  (The system call
 * itself: the C library's sigtimedwait is interposed and never hands the
 * shim's signal to anyone.) */
PS_SIGSAFE static void
drain_pending(void)
{
	struct timespec now = { 0, 0 };
	sigset_t one, old;

	sigemptyset(&one);
	sigaddset(&one, signo);
	if (ps_sigvirt_real_mask(SIG_BLOCK, &one, &old) == 0) {
		while (syscall(SYS_rt_sigtimedwait, &one, NULL, &now, _NSIG / 8) == signo)
			;
		(void)ps_sigvirt_real_mask(SIG_SETMASK, &old, NULL);
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

	if (!was_armed || !started)
		return;
	rc = arm();
	if (rc == 0)
		atomic_store(&armed, 1);
}

void
ps_sampler_child(void)
{
	if (!started)
		return;
	/* Timers are not inherited: the child's only thread gets new ones. */
	t_has_timer = 0;
	if (!thread_mode && new_timer(CLOCK_PROCESS_CPUTIME_ID, 0, &proc_timer))
		return;
	atomic_store(&cpu_seen_ns, ps_clock_ns(CLOCK_PROCESS_CPUTIME_ID));
	atomic_store(&armed, 0);
	ps_sampler_rearm(1);
}

void
ps_sampler_stop(void)
{
	(void)ps_sampler_disarm();
}
