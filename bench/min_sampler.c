/* min_sampler: the floor any in-process CPU sampler of process trees
 * stands on.
 *
 * bare_interposer.c's allocation forwarding, plus what every process of a
 * tree must do to be sampled by CPU time at all, and nothing more:
 *
 * - a signal stack for the main thread (a handler may run on a small one);
 * - a handler for a real-time signal that only counts;
 * - a CPU-time timer for the main thread, first expiry drawn in (0,
 *   period], then every period (100 Hz);
 * - the same in a fork child (timers are not inherited);
 * - before an exec, the timer stopped and any signal of its still pending
 *   accepted (a new image without the handler would die of it).
 *
 * No table, no unwinding, no helper, no configuration but its on switch
 * (PYROSCOPE_OUTPUT_DIR set, as the shim's bench runs set it).  Section
 * 14o of BENCHMARKS.md runs the process trees with it next to the shim:
 * what the shim costs beyond it is the shim's own doing, and what it
 * costs beyond the bare interposer any such sampler pays.
 *
 * Built by bench/build.sh with the shim's code-generation flags into
 * build/bench/libmin_sampler.so.  execve is the only exec interposed: the
 * workloads' shells and make call it (glibc's execvp and posix_spawn call
 * it internally, where no interposer sees it, as for the shim).
 */
#include "bare_interposer.c"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_NS 10000000L
#define STACK (128 * 1024)

/* Written by the constructor and the fork child handler (one thread). */
static int sig;
static sigset_t one;      /* sig alone */
static timer_t timer;
static int armed;
static int (*real_execve)(const char *, char *const[], char *const[]);
static volatile unsigned long samples;

static void
handler(int s, siginfo_t *si, void *uc)
{
	(void)s;
	(void)si;
	(void)uc;
	samples++;
}

static void
arm(void)
{
	struct sigevent sev;
	struct itimerspec it = { { 0, PERIOD_NS }, { 0, 0 } };
	struct timespec now;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = sig;
	sev._sigev_un._tid = gettid();
	armed = timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) == 0;
	if (!armed)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	it.it_value.tv_nsec = 1 + (long)(((unsigned long)now.tv_nsec * 2654435761u) % PERIOD_NS);
	timer_settime(timer, 0, &it, NULL);
}

static void
child(void)
{
	arm();
}

EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
	static const struct itimerspec zero;
	struct timespec none = { 0, 0 };
	sigset_t old;
	int rc;

	if (!real_execve) {
		errno = ENOSYS;
		return -1;
	}
	if (armed) {
		timer_settime(timer, 0, &zero, NULL);
		pthread_sigmask(SIG_BLOCK, &one, &old);
		while (sigtimedwait(&one, NULL, &none) == sig)
			;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	rc = real_execve(path, argv, envp);
	if (armed)
		timer_settime(timer, 0, &(struct itimerspec){ { 0, PERIOD_NS }, { 0, PERIOD_NS } },
			      NULL);
	return rc;
}

__attribute__((constructor)) static void
init(void)
{
	struct timespec none = { 0, 0 };
	struct sigaction sa;
	sigset_t empty, mask;
	stack_t ss;

	/* Looked up here: in a fork child, where execve is first called, a
	 * lookup would page in the loader every time. */
	real_execve = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT,
										  "execve");
	if (!getenv("PYROSCOPE_OUTPUT_DIR"))
		return;
	ss.ss_sp = mmap(NULL, STACK + 4096, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ss.ss_sp == MAP_FAILED || mprotect(ss.ss_sp, 4096, PROT_NONE))
		return;
	ss.ss_sp = (char *)ss.ss_sp + 4096;
	ss.ss_size = STACK;
	ss.ss_flags = 0;
	sigaltstack(&ss, NULL);
	sig = SIGRTMIN + 10;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL))
		return;
	sigemptyset(&one);
	sigaddset(&one, sig);
	/* What the exec hook calls, called once here: a fork child that calls
	 * a function first looks it up (BENCHMARKS 14o), as the shim avoids. */
	pthread_sigmask(SIG_BLOCK, NULL, &mask);
	sigemptyset(&empty);   /* nothing to accept: returns at once */
	sigtimedwait(&empty, NULL, &none);
	pthread_atfork(NULL, NULL, child);
	arm();
}
