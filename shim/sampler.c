/* sampler.c -- CPU-time timers and the handler of the shim's signal.
 * See sampler.h. */
#include "shim/sampler.h"
#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim/bench.h"
#include "common/guard.h"
#include "common/hash.h"
#include "shim/sigvirt.h"
#include "shim/unwind.h"

/* Written by ps_sampler_start (constructor) and the fork child handler,
 * before or while no other thread runs; read by the handler. */
static int started;               /* ps_sampler_start succeeded this far */
static struct itimerspec period;
static uint64_t period_ns;        /* the same, in ns (set with period) */
static int thread_mode;           /* PS_TIMER_THREAD */
static int signo;                 /* the shim's signal (sigvirt.h) */
static sigset_t signo_set;        /* it alone (drain_pending: a fork child
				   * that execs makes no call of its own) */
static pthread_key_t thread_key;  /* its destructor deletes a thread's timer */
static timer_t proc_timer;        /* process mode: the one timer */
static uint64_t start_grid;       /* the main thread's grid from the image
				   * before (ps_sampler_start), until armed */

/* Thread mode: each thread's own timer and CPU-time baseline.  Owned by
 * the thread; the handler runs on the same thread. */
static PS_TLS timer_t t_timer;
static PS_TLS int t_has_timer;
static PS_TLS uint64_t t_cpu_seen;
static PS_TLS uint64_t t_next;    /* thread CPU time of the next expiry */
static PS_TLS uintptr_t t_start;  /* start routine (the main thread's: the
				   * entry point), for the last sample */

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

PS_SIGSAFE uint64_t
ps_sampler_crossed(uint64_t *next, uint64_t period, uint64_t now)
{
	uint64_t n;

	if (now < *next)
		return 0;
	n = (now - *next) / period + 1;
	*next += n * period;
	return n;
}

uint64_t
ps_sampler_first(uint64_t now, uint64_t period, uint64_t random)
{
	return (now < PS_SAMPLER_FRESH_NS ? 0 : now) + 1 + random % period;
}

/* The CPU time this sample stands for: what the process consumed since the
 * last sample. */
PS_SIGSAFE static uint64_t
take_weight(void)
{
	return ps_sampler_take_since(&cpu_seen_ns, ps_clock_ns(CLOCK_PROCESS_CPUTIME_ID));
}

/* Thread mode: what this sample of the thread stands for.  The timer's own
 * count says it without a system call: the kernel checks CPU timers at its
 * tick (250 Hz here), so one signal may stand for several periods, and
 * si_overrun counts the periods that expired beyond the first.  Each
 * expiry weighs one period, t_next follows the timer's grid, and the
 * expiries the thread passed without a signal (it ended, exec'd or exited
 * before the next tick) are end_sample()'s. */
PS_SIGSAFE static uint64_t
take_thread_weight(const siginfo_t *si)
{
	uint64_t now, w;

	if (si && si->si_code == SI_TIMER) {
		w = ps_sampler_timer_weight(period_ns, si->si_overrun);
		t_cpu_seen += w;
		t_next += w;
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

PS_SIGSAFE static void end_sample(uint64_t now);

/* Thread mode: set the calling thread's timer.  `fresh` (a new thread, the
 * constructor, a fork child): to a first expiry drawn uniformly in (0,
 * period] (ps_sampler_first), then every period.  With a fixed first
 * expiry a full period after start, a thread or process shorter than a
 * period was never sampled, and every one lost what it ran after its last
 * expiry (200 processes of 4 ms: nothing; 20 of 26.5 ms: -25 %).  Drawn
 * per thread from its clocks and id: only the phase needs to be random,
 * not secret.  Not fresh (after a failed exec): on the same grid, so that
 * nothing is counted twice. */
static int
thread_settime(int fresh)
{
	struct itimerspec first = period;
	uint64_t now = ps_clock_ns(CLOCK_THREAD_CPUTIME_ID), r;

	/* The main thread of an image whose predecessor left its grid: on
	 * it, so that the CPU the predecessor counted is not counted again
	 * (an exec chain of short images) and exec and the loader are. */
	if (fresh && start_grid) {
		if (now + period_ns >= start_grid && now < start_grid + PS_SAMPLER_GRID_SLACK_NS) {
			t_next = start_grid;
			t_cpu_seen = start_grid > period_ns ? start_grid - period_ns : 0;
			fresh = 0;
		}
		start_grid = 0;
	}
	if (fresh) {
		r = ps_hash_mix(ps_clock_ns(CLOCK_MONOTONIC) ^ ((uint64_t)gettid() << 32) ^
				(uintptr_t)&t_next);
		t_next = ps_sampler_first(now, period_ns, r);
		t_cpu_seen = now;
	}
	/* Expiries already behind (the loader's CPU; or the time since the
	 * timer stopped): counted now, so t_next is ahead of now. */
	end_sample(now);
	first.it_value.tv_sec = (time_t)((t_next - now) / 1000000000ull);
	first.it_value.tv_nsec = (long)((t_next - now) % 1000000000ull);
	return timer_settime(t_timer, 0, &first, NULL) ? -errno : 0;
}

/* Thread mode: arm a CPU-time timer for the calling thread, delivering
 * the shim's signal to this very thread. */
static int
thread_arm(int fresh)
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
	return thread_settime(fresh);
}

static int
arm(int fresh)
{
	return thread_mode ? thread_arm(fresh) : timer_settime(proc_timer, 0, &period, NULL) ? -errno : 0;
}

/* Thread mode: the expiries this thread passed whose signal never came
 * (the kernel sees a CPU timer expire at its next tick, and the thread
 * ended, exec'd or exited before it; or it was pending when the timer was
 * stopped, which discards it), one period each, under the thread's start
 * routine.  Also, at arming, the expiries of the CPU the thread used
 * before (ps_sampler_first).  Without them a thread or process that ends
 * within a tick of an expiry would lose it. */
PS_SIGSAFE static void
end_sample(uint64_t now)
{
	uint64_t vals[PS_NVALUES] = { 0 };
	uintptr_t ip = t_start;
	uint64_t n = ps_sampler_crossed(&t_next, period_ns, now);

	/* t_next is past now whatever is recorded: the timer is set from it. */
	if (!n || !ps_stacktab_current() || !ip)
		return;
	vals[PS_V_CPU_SAMPLES] = n;
	vals[PS_V_CPU_NS] = n * period_ns;
	t_cpu_seen = t_next - period_ns;
	(void)ps_stacktab_add(ps_stacktab_current(), &ip, 1, 0, vals);
}

static void
thread_gone(void *unused)
{
	(void)unused;
	ps_sampler_thread_end();
}

void
ps_sampler_thread_end(void)
{
	if (t_has_timer) {
		timer_delete(t_timer);
		t_has_timer = 0;
		if (atomic_load(&armed))
			end_sample(ps_clock_ns(CLOCK_THREAD_CPUTIME_ID));
	}
}

int
ps_sampler_armed(void)
{
	return started && atomic_load(&armed);
}

void
ps_sampler_thread_start(void *start)
{
	t_start = (uintptr_t)start;
	if (started && thread_mode && atomic_load(&armed))
		(void)thread_arm(1);
}

int
ps_sampler_start(unsigned hz, int mode, int sig, uint64_t grid)
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
	sigemptyset(&signo_set);
	sigaddset(&signo_set, sig);
	start_grid = thread_mode ? grid : 0;
	if (!t_start)  /* the main thread's "start routine" */
		t_start = (uintptr_t)getauxval(AT_ENTRY);
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
	rc = arm(1);
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
	sigset_t old;

	if (ps_sigvirt_real_mask(SIG_BLOCK, &signo_set, &old) == 0) {
		while (syscall(SYS_rt_sigtimedwait, &signo_set, NULL, &now, _NSIG / 8) == signo)
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
	if (thread_mode && t_has_timer)
		end_sample(ps_clock_ns(CLOCK_THREAD_CPUTIME_ID));
	return 1;
}

uint64_t
ps_sampler_grid(void)
{
	return thread_mode && t_has_timer ? t_next : 0;
}

/* Arm again: on the same grid after a failed exec, a fresh one in a fork
 * child. */
static void
rearm(int fresh)
{
	if (arm(fresh) == 0)
		atomic_store(&armed, 1);
}

void
ps_sampler_rearm(int was_armed)
{
	if (was_armed && started)
		rearm(0);
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
	rearm(1);
}

void
ps_sampler_stop(void)
{
	(void)ps_sampler_disarm();
}
