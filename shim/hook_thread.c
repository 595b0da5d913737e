/* hook_thread.c -- pthread_create.
 *
 * libunwind keeps its per-thread cache in dynamic TLS, and the first use of
 * dynamic TLS in a thread allocates: that must not happen inside the
 * signal handler.  Every new thread therefore runs one small capture
 * before its start routine (unwind.h), outside signal context.  Until a
 * thread is warmed, its samples hold only the interrupted instruction.
 *
 * In the per-thread timer mode the new thread's CPU timer is armed here
 * too (sampler.h).
 *
 * The trampoline is the only frame the shim adds to a host thread; it
 * belongs to the shim's own code and is dropped from every stack.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/guard.h"
#include "common/ps.h"
#include "shim/process.h"
#include "shim/stacktab.h"
#include "shim/altstack.h"
#include "shim/sampler.h"
#include "shim/gostack.h"
#include "shim/sigvirt.h"
#include "shim/unwind.h"
#include "shim/next.h"

struct start {
	void *(*fn)(void *);
	void *arg;
	int shim;   /* created by the shim itself (guard held): never sampled */
	int blocked; /* the creator's wish to block the shim's signal */
};

/* Counts the program's threads for the uploader (worker.h), stops their
 * timers and frees their signal stacks (altstack.h): its destructor runs
 * when a thread ends, by return or by pthread_exit.  Made once, by the
 * constructor's ps_hook_thread_adopt (before the program's first thread,
 * whose pthread_create orders the write before the new thread's reads),
 * so that a program that takes every key later still has its threads'
 * stacks freed; a thread never makes it. */
static pthread_key_t host_key;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static int host_key_ok;

static void
host_thread_gone(void *unused)
{
	(void)unused;
	/* Its own timer first (per-thread timers): it does not fire on the
	 * thread once its signal stack is gone.  A process timer's sample
	 * may still land there, and runs on the thread's own stack (the
	 * stack is switched off before it is unmapped). */
	ps_sampler_thread_end();
	ps_altstack_thread_end();
	ps_process_host_thread(-1);
}

static void
host_key_init(void)
{
	host_key_ok = pthread_key_create(&host_key, host_thread_gone) == 0;
}

void
ps_hook_thread_adopt(void)
{
	pthread_once(&host_once, host_key_init);
	if (host_key_ok)
		(void)pthread_setspecific(host_key, (void *)1);
}

static void *
trampoline(void *p)
{
	struct start s = *(struct start *)p;
	int saved = errno;

	ps_guard_enter();
	free(p);
	if (!s.shim) {
		ps_sigvirt_adopt_thread(s.blocked);
		/* A signal stack only for a thread that may be sampled, and
		 * that its end can free: host_key is the constructor's. */
		if (host_key_ok && ps_sampler_armed())
			ps_altstack_thread_start();
		ps_unwind_warm_thread();
		ps_sampler_thread_start((void *)(uintptr_t)s.fn);
		ps_process_host_thread(1);
		if (host_key_ok)
			(void)pthread_setspecific(host_key, (void *)1);
	}
	ps_guard_leave();
	/* The start routine finds errno as without the shim: warming the
	 * unwinder and arming the timer make calls that fail. */
	errno = saved;
	return s.fn(s.arg);
}

PS_EXPORT int
pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	PS_NEXT(pthread_create);
	struct start *s;
	int rc, shim, saved = errno;

	if (!real_pthread_create)
		return EAGAIN;
	/* A process the shim does not profile (PYROSCOPE_ENABLED=false, every
	 * profile type off, a helper, a vfork child): the C library's thread,
	 * untouched -- no unwinder loaded into the program, no signal stack,
	 * no key taken from it.  (A thread started before the constructor,
	 * by another library's, still gets its stack bounds: the process
	 * timer may sample it.) */
	if (ps_process_unprofiled())
		return real_pthread_create(t, attr, fn, arg);
	shim = ps_guard_held();
	ps_guard_enter();
	if (!shim) {
		/* A program whose tables wait for its first record makes them
		 * now, while it has one thread (stacktab.h, ps_stacktab_defer). */
		(void)ps_stacktab_current();
		ps_process_spawn(); /* a leader's put-off helper starts here */
		ps_process_wake();  /* a fork child's uploader starts here */
		/* The program's first thread: the frames the fast walk leaves
		 * alone are libunwind's from now on (unwind.h). */
		(void)ps_unwind_load();
	}
	s = malloc(sizeof(*s));
	ps_guard_leave();
	if (s) {
		s->fn = fn;
		s->arg = arg;
		s->shim = shim;
		/* A Go program's threads unblock every signal with the
		 * system call itself (minit), which the shim does not see:
		 * the every-signal mask its cgo puts around pthread_create
		 * is not theirs to keep.  (Taken as theirs, every signal
		 * the program sent them of the shim's number was held.) */
		s->blocked = ps_gostack_objects() ? 0 : ps_sigvirt_thread_blocked();
	}
	/* The caller finds errno as the C library leaves it: libunwind's
	 * load (the first thread) makes calls that fail. */
	errno = saved;
	if (!s)
		return real_pthread_create(t, attr, fn, arg);  /* no warm-up, but no failure either */
	rc = real_pthread_create(t, attr, trampoline, s);
	if (rc)
		free(s);
	return rc;
}
