/* offcpu.c -- waits of known length, for the block and mutex profiles
 * (test_offcpu.py).
 *
 *   offcpu known     one thread blocks in read() on a pipe for 1.5 s, one
 *                    in pthread_cond_wait for 1.0 s, four threads contend on
 *                    one mutex for 1.5 s, and one polls an idle pipe with
 *                    1 ms timeouts for 1.0 s; all at once.  Prints, as
 *                    "name seconds" lines, what each measured itself: the
 *                    contenders' time inside pthread_mutex_lock, summed.
 *   offcpu cancel    a thread blocked in read() is cancelled; prints
 *                    "cancelled" when pthread_join reports it.
 *   offcpu epoll     an event loop on epoll_wait: 200 ms timeouts for 1 s,
 *                    with a pipe written every 100 ms.
 *   offcpu errno     read() on a closed descriptor, and a lock that
 *                    deadlocks: prints what errno and the return values are.
 *   offcpu futex     a thread waits 0.5 s on a futex through syscall(), as
 *                    Rust's std locks do.
 *   offcpu relock    one thread, no wait: a recursive mutex locked again by
 *                    its owner, an error-checking one too (EDEADLK), 200000
 *                    times each; an rwlock's timed locks with a timeout the
 *                    C library refuses.  Prints what they answered.
 */
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
nap(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- known ----------------------------------------------------------- */

static int pipe_fds[2];

static void *
pipe_writer(void *arg)
{
	(void)arg;
	nap(1.5);
	if (write(pipe_fds[1], "x", 1) != 1)
		abort();
	return NULL;
}

static void *
wait_pipe_reader(void *arg)
{
	char c;

	(void)arg;
	if (read(pipe_fds[0], &c, 1) != 1)
		abort();
	return NULL;
}

static pthread_mutex_t cond_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int cond_ready;

static void *
cond_signaller(void *arg)
{
	(void)arg;
	nap(1.0);
	pthread_mutex_lock(&cond_lock);
	cond_ready = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&cond_lock);
	return NULL;
}

static void *
wait_cond_waiter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&cond_lock);
	while (!cond_ready)
		pthread_cond_wait(&cond, &cond_lock);
	pthread_mutex_unlock(&cond_lock);
	return NULL;
}

static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static double contend_end;
static double waited[4];

/* Holds the lock for ~50 us of work, then lets go. */
static void *
contend_worker(void *arg)
{
	int me = (int)(long)arg;
	volatile unsigned x = 0;

	while (now() < contend_end) {
		double t0 = now();

		pthread_mutex_lock(&hot);
		waited[me] += now() - t0;
		for (int i = 0; i < 20000; i++)
			x += (unsigned)i;
		pthread_mutex_unlock(&hot);
	}
	return NULL;
}

static int idle_fds[2];

static void *
idle_poller(void *arg)
{
	struct pollfd p = { .fd = idle_fds[0], .events = POLLIN };
	double end = now() + 1.0;

	(void)arg;
	while (now() < end)
		if (poll(&p, 1, 1) < 0)
			abort();
	return NULL;
}

static int
known(void)
{
	pthread_t t[9];
	double sum = 0;
	int i, n = 0;

	if (pipe(pipe_fds) || pipe(idle_fds))
		return 1;
	contend_end = now() + 1.5;
	pthread_create(&t[n++], NULL, wait_pipe_reader, NULL);
	pthread_create(&t[n++], NULL, pipe_writer, NULL);
	pthread_create(&t[n++], NULL, wait_cond_waiter, NULL);
	pthread_create(&t[n++], NULL, cond_signaller, NULL);
	pthread_create(&t[n++], NULL, idle_poller, NULL);
	for (i = 0; i < 4; i++)
		pthread_create(&t[n++], NULL, contend_worker, (void *)(long)i);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 4; i++)
		sum += waited[i];
	printf("mutex_wait %.6f\n", sum);
	return 0;
}

/* ---- cancel ---------------------------------------------------------- */

static void *
cancel_reader(void *arg)
{
	char c;

	(void)arg;
	(void)read(pipe_fds[0], &c, 1);
	return NULL;
}

static int
cancel(void)
{
	pthread_t t;
	void *ret;

	if (pipe(pipe_fds))
		return 1;
	pthread_create(&t, NULL, cancel_reader, NULL);
	nap(0.2);
	if (pthread_cancel(t))
		return 1;
	if (pthread_join(t, &ret))
		return 1;
	printf("%s\n", ret == PTHREAD_CANCELED ? "cancelled" : "not cancelled");
	return 0;
}

/* ---- epoll ----------------------------------------------------------- */

static void *
ticker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++) {
		nap(0.1);
		if (write(pipe_fds[1], "x", 1) != 1)
			abort();
	}
	return NULL;
}

static int
event_loop(void)
{
	struct epoll_event ev = { .events = EPOLLIN }, out[4];
	double end;
	pthread_t t;
	int ep, events = 0, n;
	char buf[16];

	if (pipe(pipe_fds) || (ep = epoll_create1(0)) < 0)
		return 1;
	ev.data.fd = pipe_fds[0];
	if (epoll_ctl(ep, EPOLL_CTL_ADD, pipe_fds[0], &ev))
		return 1;
	pthread_create(&t, NULL, ticker, NULL);
	end = now() + 1.0;
	while (now() < end) {
		n = epoll_wait(ep, out, 4, 200);
		if (n < 0)
			return 1;
		if (n > 0 && read(pipe_fds[0], buf, sizeof(buf)) > 0)
			events++;
	}
	pthread_join(t, NULL);
	printf("events %d\n", events);
	return 0;
}

/* ---- futex ---------------------------------------------------------- */

static _Atomic int futex_word;

static void *
futex_waiter(void *arg)
{
	(void)arg;
	while (!futex_word)
		if (syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0) &&
		    errno != EAGAIN && errno != EINTR)
			abort();
	return NULL;
}

static int
futex(void)
{
	pthread_t t;

	pthread_create(&t, NULL, futex_waiter, NULL);
	nap(0.5);
	futex_word = 1;
	if (syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) < 0)
		return 1;
	pthread_join(t, NULL);
	printf("woken\n");
	return 0;
}

/* ---- errno ----------------------------------------------------------- */

static int
errors(void)
{
	pthread_mutex_t m;
	pthread_mutexattr_t a;
	char c;
	ssize_t r;
	int e, rc;

	errno = 0;
	r = read(-1, &c, 1);
	e = errno;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&m, &a);
	pthread_mutex_lock(&m);
	errno = 1234;
	rc = pthread_mutex_lock(&m);
	printf("read %zd errno %s; relock %s errno %d\n", r, strerror(e), strerror(rc), errno);
	return 0;
}

/* ---- relock ---------------------------------------------------------- */

static int
relock(void)
{
	pthread_mutex_t rec, chk;
	pthread_mutexattr_t a;
	pthread_rwlock_t l = PTHREAD_RWLOCK_INITIALIZER;
	struct timespec bad = { time(NULL) + 5, 2000000000L };
	int i, again = 0, deadlk = 0, rd, wr;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&rec, &a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&chk, &a);
	pthread_mutex_lock(&rec);
	pthread_mutex_lock(&chk);
	for (i = 0; i < 200000; i++) {
		again += pthread_mutex_lock(&rec) == 0;
		pthread_mutex_unlock(&rec);
		deadlk += pthread_mutex_lock(&chk) == EDEADLK;
	}
	rd = pthread_rwlock_timedrdlock(&l, &bad);
	wr = pthread_rwlock_timedwrlock(&l, &bad);
	printf("recursive relocked %d; error-checking EDEADLK %d; timedrdlock %s; timedwrlock %s\n",
	       again, deadlk, strerror(rd), strerror(wr));
	return 0;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "known";

	if (!strcmp(mode, "known"))
		return known();
	if (!strcmp(mode, "cancel"))
		return cancel();
	if (!strcmp(mode, "epoll"))
		return event_loop();
	if (!strcmp(mode, "errno"))
		return errors();
	if (!strcmp(mode, "futex"))
		return futex();
	if (!strcmp(mode, "relock"))
		return relock();
	fprintf(stderr, "usage: offcpu known|cancel|epoll|errno|futex|relock\n");
	return 2;
}
