/* sampler.c -- ITIMER_PROF and the SIGPROF handler.  See sampler.h. */
#include "sampler.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "bench.h"
#include "guard.h"
#include "unwind.h"

/* Written by ps_sampler_start (constructor) and the fork child handler,
 * before or while no other thread runs; read by the handler. */
static struct ps_stacktab *tab;
static struct itimerval period;
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

PS_SIGSAFE static void
handler(int sig, siginfo_t *si, void *uc)
{
	uintptr_t ips[PS_MAX_DEPTH];
	uint64_t vals[PS_NVALUES] = { 0 };
	uint64_t t0 = ps_bench_now();
	int saved = errno, depth;

	(void)sig;
	(void)si;
	if (!tab)
		goto out;
	vals[PS_V_CPU_SAMPLES] = 1;
	vals[PS_V_CPU_NS] = take_weight();
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

int
ps_sampler_start(struct ps_stacktab *t, unsigned hz)
{
	struct sigaction sa;
	long us;
	int rc;

	rc = in_use();
	if (rc)
		return rc;
	tab = t;
	us = 1000000L / (long)(hz ? hz : 100);
	period.it_interval.tv_sec = us / 1000000L;
	period.it_interval.tv_usec = us % 1000000L;
	period.it_value = period.it_interval;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGPROF, &sa, NULL))
		return -errno;
	atomic_store(&cpu_seen_ns, process_cpu_ns());
	if (setitimer(ITIMER_PROF, &period, NULL))
		return -errno;
	atomic_store(&armed, 1);
	return 0;
}

PS_SIGSAFE int
ps_sampler_disarm(void)
{
	static const struct itimerval zero;
	struct timespec now = { 0, 0 };
	sigset_t prof, old;
	int was = atomic_exchange(&armed, 0);

	if (!was)
		return 0;
	setitimer(ITIMER_PROF, &zero, NULL);
	/* A SIGPROF generated just before the timer stopped may still be
	 * pending; pending signals survive execve, and the new image has no
	 * handler.  Accept it here instead. */
	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	if (pthread_sigmask(SIG_BLOCK, &prof, &old) == 0) {
		while (sigtimedwait(&prof, NULL, &now) == SIGPROF)
			;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return 1;
}

void
ps_sampler_rearm(int was_armed)
{
	if (!was_armed || !tab)
		return;
	if (setitimer(ITIMER_PROF, &period, NULL) == 0)
		atomic_store(&armed, 1);
}

void
ps_sampler_child(void)
{
	if (!tab)
		return;
	atomic_store(&cpu_seen_ns, process_cpu_ns());
	atomic_store(&armed, 0);
	ps_sampler_rearm(1);
}

void
ps_sampler_stop(void)
{
	(void)ps_sampler_disarm();
}
