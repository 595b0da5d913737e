/* worker.c -- the uploader thread.  See worker.h. */
#include "uploader/worker.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "common/guard.h"
#include "common/log.h"

/* Protects the export state and the fields below. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int stopping;              /* protected by lock */
/* The worker sleeps on `wake`; everyone who needs it posts.  Semaphores,
 * because sem_post is async-signal-safe: _exit may be called from a signal
 * handler. */
static sem_t wake;
static sem_t exit_done;
static _Atomic int exit_req;      /* _exit asks for the last pass */
/* The program's own threads still alive (those the shim saw start).  When
 * the last one ends with pthread_exit, the worker must end too: a process
 * lives until its last thread is gone, and ours must never keep it. */
static _Atomic int host_threads = 1;
static _Atomic int quit;
static _Atomic uint64_t exit_deadline;
static struct ps_export *exp_state;
static uint64_t interval;
/* 1 while a worker thread exists in this process; 0 in a fresh fork child. */
static _Atomic int running;
/* Set while the thread is due to be started (ps_worker_poke). */
static _Atomic int wanted;
static _Atomic uint64_t wanted_at;  /* CLOCK_MONOTONIC ns */

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec
to_ts(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	return ts;
}

static uint64_t
min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The last pass, asked for by _exit: the exiting thread may be inside a
 * signal handler, or hold a lock the pass needs, so it only waits for us,
 * at most until the deadline. */
static void
exit_pass(void)
{
	uint64_t deadline = atomic_load(&exit_deadline);

	stopping = 1;
	(void)ps_export_run(exp_state, 1);
	ps_export_end_span(exp_state);
	ps_export_send(exp_state, 1, deadline, NULL);
	sem_post(&exit_done);
}

static void *
main_loop(void *arg)
{
	/* A lazily started thread is already due for its first pass. */
	uint64_t next = atomic_load(&wanted_at), wake_at, now;
	struct timespec ts;

	(void)arg;
	ps_guard_enter();  /* for the thread's whole life */
	/* Named from inside: naming from outside opens /proc/self/task/N/comm. */
	(void)prctl(PR_SET_NAME, "pyroshim", 0, 0, 0);
	pthread_mutex_lock(&lock);
	while (!stopping) {
		/* Wake for the next pass, or earlier for a retry that is due. */
		wake_at = min_u64(next, ps_export_next_due(exp_state));
		ts = to_ts(wake_at);
		pthread_mutex_unlock(&lock);
		(void)sem_clockwait(&wake, CLOCK_MONOTONIC, &ts);
		pthread_mutex_lock(&lock);
		if (stopping || atomic_load(&quit))
			break;
		if (atomic_exchange(&exit_req, 0)) {
			exit_pass();
			break;
		}
		now = mono_ns();
		if (now >= next) {
			(void)ps_export_run(exp_state, 0);
			next += interval;
			if (next < now)
				next = now + interval;  /* a slow pass: skip, don't burst */
		}
		/* Requests go out without the lock: a server that does not
		 * answer must not keep the last pass (and the local files)
		 * waiting. */
		ps_export_send(exp_state, 0, 0, &lock);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

static int
spawn(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (pthread_attr_init(&attr))
		return -ENOMEM;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	/* The thread inherits this mask: it never takes a host signal. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &attr, main_loop, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc)
		return -rc;
	atomic_store(&running, 1);
	return 0;
}

static void
init_sync(void)
{
	pthread_mutex_init(&lock, NULL);
	sem_init(&wake, 0, 0);
	sem_init(&exit_done, 0, 0);
	atomic_store(&exit_req, 0);
	stopping = 0;
}

int
ps_worker_start(struct ps_export *x, uint64_t interval_ns, int lazy)
{
	exp_state = x;
	interval = interval_ns;
	init_sync();
	atomic_store(&wanted_at, mono_ns() + interval);
	/* With a server, the interval uploads are the product: a program that
	 * burns CPU without ever allocating would otherwise never poke the
	 * thread awake and send everything at exit, in one request. */
	if (!lazy || x->remote.on || x->remote.otlp_url[0])
		return spawn();
	/* The first pass is one interval away: until then there is no thread,
	 * and a program that ends sooner never gets one.  (A second thread
	 * costs a single-threaded program glibc's lock-free malloc paths.) */
	atomic_store(&wanted, 1);
	return 0;
}

void
ps_worker_flush(uint64_t timeout_ns, int final)
{
	uint64_t deadline = mono_ns() + timeout_ns;
	struct timespec ts = to_ts(deadline);
	int rc;

	if (!exp_state)
		return;
	rc = pthread_mutex_clocklock(&lock, CLOCK_MONOTONIC, &ts);
	if (rc) {
		ps_debug("last pass skipped: the uploader did not finish within the flush timeout");
		return;
	}
	if (final) {
		stopping = 1;
		sem_post(&wake);
	}
	(void)ps_export_run(exp_state, 1);
	if (final)
		ps_export_end_span(exp_state);
	ps_export_send(exp_state, 1, deadline, NULL);
	pthread_mutex_unlock(&lock);
}

void
ps_worker_child(void)
{
	init_sync();
	atomic_store(&host_threads, 1);  /* the forking thread */
	atomic_store(&quit, 0);
	atomic_store(&running, 0);
	atomic_store(&wanted_at, mono_ns() + interval);
	atomic_store(&wanted, exp_state != NULL);
}

void
ps_worker_poke(int now)
{
	int expected = 1;

	if (PS_LIKELY(!atomic_load_explicit(&wanted, memory_order_relaxed)))
		return;
	if (!now && mono_ns() < atomic_load_explicit(&wanted_at, memory_order_relaxed))
		return;
	if (!atomic_compare_exchange_strong(&wanted, &expected, 0))
		return;
	if (spawn())
		ps_debug("uploader thread not started");
}

PS_SIGSAFE void
ps_worker_exit(uint64_t timeout_ns)
{
	struct timespec ts;
	uint64_t deadline = mono_ns() + timeout_ns;

	if (!atomic_load(&running) || !exp_state)
		return;
	atomic_store(&exit_deadline, deadline);
	atomic_store(&exit_req, 1);
	sem_post(&wake);
	ts = to_ts(deadline);
	while (sem_clockwait(&exit_done, CLOCK_MONOTONIC, &ts) && errno == EINTR)
		;
}

void
ps_worker_host_thread(int delta)
{
	if (atomic_fetch_add(&host_threads, delta) + delta > 0)
		return;
	/* The last thread of the program is leaving through pthread_exit:
	 * the process ends when our thread ends too, and then runs its exit
	 * handlers -- the destructor's last pass -- on our thread. */
	atomic_store(&quit, 1);
	sem_post(&wake);
}
