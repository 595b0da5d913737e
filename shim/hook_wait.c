/* hook_wait.c -- the interposers of the C library's waiting calls: what
 * the block and mutex profiles see (wait.h).
 *
 * Each one calls the C library's own function with the same arguments and
 * returns what it returned, errno included; around the call it reads the
 * cycle counter twice and hands the difference to ps_wait_done().  Nothing
 * else happens on the program's thread unless the wait is kept.  No signal
 * is sent, so no call returns EINTR because of the shim, and a call that is
 * a cancellation point stays one: pthread_cancel unwinds through these
 * frames, which hold nothing.
 *
 * An uncontended lock reads no clock.  A mutex is looked at first (its lock
 * word: mutex_held): a free one goes straight to the C library.  An rwlock
 * is tried first (pthread_rwlock_tryrdlock...), as the C library's own lock
 * does: only EBUSY goes on to the waiting call, whose answer (EDEADLK...) is
 * the program's.
 *
 * ppoll, pselect, epoll_pwait and epoll_pwait2 are interposed by
 * hook_signal.c (their signal masks), and syscall by hook_fd.c (its futex
 * waits); they time themselves the same way.  Not seen: code that enters
 * the kernel without the C library (Go's runtime), and calls the C library
 * makes internally (stdio's reads, sleep's own nanosleep).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/ps.h"
#include "shim/next.h"
#include "shim/wait.h"

/* A lock: `try` first; only when it answers EBUSY, the timed `call`. */
#define LOCK(fn, trycall, call)                                         \
	do {                                                            \
		uint64_t t0_;                                           \
		int r_;                                                 \
		if (!ps_wait_enabled(PS_WAIT_MUTEX))                    \
			return call;                                    \
		r_ = trycall;                                           \
		if (r_ != EBUSY)                                        \
			return r_;                                      \
		t0_ = ps_wait_ticks();                                  \
		r_ = call;                                              \
		ps_wait_done(t0_, PS_WAIT_MUTEX, (const void *)real_##fn); \
		return r_;                                              \
	} while (0)

/* 1 for a timeout the C library refuses (EINVAL) before it looks at the
 * lock: the try of LOCK, which never looks at it, would take a free lock.
 * NULL, which the prototype says never comes, is taken as glibc takes it:
 * not looked at (laundered, so that the check is not compiled away). */
static inline int
bad_timeout(const struct timespec *at)
{
	__asm__("" : "+r"(at));
	return at && (at->tv_nsec < 0 || at->tv_nsec >= 1000000000);
}

/* pthread functions answer an error number, not -1 and errno. */
#define MISSING_PT(fn)                                                  \
	do {                                                            \
		if (!real_##fn)                                         \
			return ENOSYS;                                  \
	} while (0)

/* ---- locks: the mutex profile (and the block profile) ----------------- */

/* glibc's lock word (the first member of pthread_mutex_t, part of its ABI):
 * 0 while the mutex is free, whatever its type. */
PS_SIGSAFE static inline int
mutex_held(pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 0;
}

/* The calling thread's id, as glibc writes it in the mutexes it holds:
 * looked up when an owner is not it (stale in a fork child, which then
 * looks it up again). */
static PS_TLS pid_t t_tid;

/* 1 if the calling thread holds m (glibc's owner field): a recursive or
 * error-checking mutex locked again by its owner answers at once (or
 * EDEADLK), without a wait. */
PS_SIGSAFE static int
mine(pthread_mutex_t *m)
{
	pid_t owner = __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED);
	int type = m->__data.__kind & 3;   /* PTHREAD_MUTEX_KIND_MASK_NP */

	if ((type != PTHREAD_MUTEX_RECURSIVE && type != PTHREAD_MUTEX_ERRORCHECK) || !owner)
		return 0;
	if (owner != t_tid)
		t_tid = gettid();
	return owner == t_tid;
}

/* A mutex that was held when we looked: the C library's lock, timed,
 * unless this thread holds it. */
PS_SIGSAFE __attribute__((noinline, cold)) static int
mutex_wait(int (*lock)(pthread_mutex_t *), pthread_mutex_t *m)
{
	uint64_t t0;
	int rc;

	if (!ps_wait_enabled(PS_WAIT_MUTEX) || mine(m))
		return lock(m);
	t0 = ps_wait_ticks();
	rc = lock(m);
	ps_wait_done(t0, PS_WAIT_MUTEX, (const void *)lock);
	return rc;
}

/* The hottest of these: a free mutex costs one load of its lock word and a
 * branch over a bare forwarding interposer (BENCHMARKS.md).  A mutex that
 * is taken between that look and the C library's own compare-and-swap, a
 * few nanoseconds later, waits untimed: the profile can only miss such a
 * wait, never invent one. */
PS_SIGSAFE PS_EXPORT int
pthread_mutex_lock(pthread_mutex_t *m)
{
	PS_NEXT(pthread_mutex_lock);
	MISSING_PT(pthread_mutex_lock);
	if (PS_LIKELY(!mutex_held(m)))
		return real_pthread_mutex_lock(m);
	return mutex_wait(real_pthread_mutex_lock, m);
}

PS_EXPORT int
pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *at)
{
	PS_NEXT(pthread_mutex_timedlock);
	MISSING_PT(pthread_mutex_timedlock);
	if (!mutex_held(m) || mine(m))
		return real_pthread_mutex_timedlock(m, at);
	PS_WAIT_TIMED(PS_WAIT_MUTEX, pthread_mutex_timedlock, int,
		      real_pthread_mutex_timedlock(m, at));
}

PS_EXPORT int
pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *at)
{
	PS_NEXT(pthread_mutex_clocklock);
	MISSING_PT(pthread_mutex_clocklock);
	if (!mutex_held(m) || mine(m))
		return real_pthread_mutex_clocklock(m, clk, at);
	PS_WAIT_TIMED(PS_WAIT_MUTEX, pthread_mutex_clocklock, int,
		      real_pthread_mutex_clocklock(m, clk, at));
}

PS_EXPORT int
pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	PS_NEXT(pthread_rwlock_rdlock);
	PS_NEXT(pthread_rwlock_tryrdlock);
	MISSING_PT(pthread_rwlock_rdlock);
	MISSING_PT(pthread_rwlock_tryrdlock);
	LOCK(pthread_rwlock_rdlock, real_pthread_rwlock_tryrdlock(l),
	     real_pthread_rwlock_rdlock(l));
}

PS_EXPORT int
pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	PS_NEXT(pthread_rwlock_wrlock);
	PS_NEXT(pthread_rwlock_trywrlock);
	MISSING_PT(pthread_rwlock_wrlock);
	MISSING_PT(pthread_rwlock_trywrlock);
	LOCK(pthread_rwlock_wrlock, real_pthread_rwlock_trywrlock(l),
	     real_pthread_rwlock_wrlock(l));
}

PS_EXPORT int
pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *at)
{
	PS_NEXT(pthread_rwlock_timedrdlock);
	PS_NEXT(pthread_rwlock_tryrdlock);
	MISSING_PT(pthread_rwlock_timedrdlock);
	MISSING_PT(pthread_rwlock_tryrdlock);
	if (bad_timeout(at))
		return real_pthread_rwlock_timedrdlock(l, at);
	LOCK(pthread_rwlock_timedrdlock, real_pthread_rwlock_tryrdlock(l),
	     real_pthread_rwlock_timedrdlock(l, at));
}

PS_EXPORT int
pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *at)
{
	PS_NEXT(pthread_rwlock_timedwrlock);
	PS_NEXT(pthread_rwlock_trywrlock);
	MISSING_PT(pthread_rwlock_timedwrlock);
	MISSING_PT(pthread_rwlock_trywrlock);
	if (bad_timeout(at))
		return real_pthread_rwlock_timedwrlock(l, at);
	LOCK(pthread_rwlock_timedwrlock, real_pthread_rwlock_trywrlock(l),
	     real_pthread_rwlock_timedwrlock(l, at));
}

/* ---- waits for another thread: the block profile ---------------------- */

PS_EXPORT int
pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	PS_NEXT(pthread_cond_wait);
	MISSING_PT(pthread_cond_wait);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, pthread_cond_wait, int, real_pthread_cond_wait(c, m));
}

PS_EXPORT int
pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *at)
{
	PS_NEXT(pthread_cond_timedwait);
	MISSING_PT(pthread_cond_timedwait);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, pthread_cond_timedwait, int, real_pthread_cond_timedwait(c, m, at));
}

PS_EXPORT int
pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk,
		       const struct timespec *at)
{
	PS_NEXT(pthread_cond_clockwait);
	MISSING_PT(pthread_cond_clockwait);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, pthread_cond_clockwait, int,
	      real_pthread_cond_clockwait(c, m, clk, at));
}

PS_EXPORT int
pthread_join(pthread_t t, void **ret)
{
	PS_NEXT(pthread_join);
	MISSING_PT(pthread_join);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, pthread_join, int, real_pthread_join(t, ret));
}

PS_EXPORT int
sem_wait(sem_t *s)
{
	PS_NEXT(sem_wait);
	PS_NEXT_MISSING(sem_wait, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, sem_wait, int, real_sem_wait(s));
}

PS_EXPORT int
sem_timedwait(sem_t *s, const struct timespec *at)
{
	PS_NEXT(sem_timedwait);
	PS_NEXT_MISSING(sem_timedwait, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, sem_timedwait, int, real_sem_timedwait(s, at));
}

PS_SIGSAFE PS_EXPORT int
sem_clockwait(sem_t *s, clockid_t clk, const struct timespec *at)
{
	PS_NEXT(sem_clockwait);
	PS_NEXT_MISSING(sem_clockwait, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, sem_clockwait, int, real_sem_clockwait(s, clk, at));
}

/* ---- system calls that wait: the block profile ------------------------ */

PS_SIGSAFE PS_EXPORT ssize_t
read(int fd, void *b, size_t n)
{
	PS_NEXT(read);
	PS_NEXT_MISSING(read, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, read, ssize_t, real_read(fd, b, n));
}

PS_SIGSAFE PS_EXPORT ssize_t
write(int fd, const void *b, size_t n)
{
	PS_NEXT(write);
	PS_NEXT_MISSING(write, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, write, ssize_t, real_write(fd, b, n));
}

PS_EXPORT ssize_t
readv(int fd, const struct iovec *v, int n)
{
	PS_NEXT(readv);
	PS_NEXT_MISSING(readv, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, readv, ssize_t, real_readv(fd, v, n));
}

PS_EXPORT ssize_t
writev(int fd, const struct iovec *v, int n)
{
	PS_NEXT(writev);
	PS_NEXT_MISSING(writev, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, writev, ssize_t, real_writev(fd, v, n));
}

PS_SIGSAFE PS_EXPORT ssize_t
recv(int fd, void *b, size_t n, int flags)
{
	PS_NEXT(recv);
	PS_NEXT_MISSING(recv, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, recv, ssize_t, real_recv(fd, b, n, flags));
}

PS_SIGSAFE PS_EXPORT ssize_t
recvfrom(int fd, void *b, size_t n, int flags, struct sockaddr *a, socklen_t *al)
{
	PS_NEXT(recvfrom);
	PS_NEXT_MISSING(recvfrom, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, recvfrom, ssize_t, real_recvfrom(fd, b, n, flags, a, al));
}

PS_SIGSAFE PS_EXPORT ssize_t
recvmsg(int fd, struct msghdr *m, int flags)
{
	PS_NEXT(recvmsg);
	PS_NEXT_MISSING(recvmsg, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, recvmsg, ssize_t, real_recvmsg(fd, m, flags));
}

PS_SIGSAFE PS_EXPORT ssize_t
send(int fd, const void *b, size_t n, int flags)
{
	PS_NEXT(send);
	PS_NEXT_MISSING(send, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, send, ssize_t, real_send(fd, b, n, flags));
}

PS_SIGSAFE PS_EXPORT ssize_t
sendto(int fd, const void *b, size_t n, int flags, const struct sockaddr *a, socklen_t al)
{
	PS_NEXT(sendto);
	PS_NEXT_MISSING(sendto, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, sendto, ssize_t, real_sendto(fd, b, n, flags, a, al));
}

PS_SIGSAFE PS_EXPORT ssize_t
sendmsg(int fd, const struct msghdr *m, int flags)
{
	PS_NEXT(sendmsg);
	PS_NEXT_MISSING(sendmsg, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, sendmsg, ssize_t, real_sendmsg(fd, m, flags));
}

PS_SIGSAFE PS_EXPORT int
accept(int fd, struct sockaddr *a, socklen_t *al)
{
	PS_NEXT(accept);
	PS_NEXT_MISSING(accept, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, accept, int, real_accept(fd, a, al));
}

PS_EXPORT int
accept4(int fd, struct sockaddr *a, socklen_t *al, int flags)
{
	PS_NEXT(accept4);
	PS_NEXT_MISSING(accept4, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, accept4, int, real_accept4(fd, a, al, flags));
}

PS_SIGSAFE PS_EXPORT int
connect(int fd, const struct sockaddr *a, socklen_t al)
{
	PS_NEXT(connect);
	PS_NEXT_MISSING(connect, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, connect, int, real_connect(fd, a, al));
}

PS_SIGSAFE PS_EXPORT int
poll(struct pollfd *fds, nfds_t n, int ms)
{
	PS_NEXT(poll);
	PS_NEXT_MISSING(poll, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, poll, int, real_poll(fds, n, ms));
}

PS_SIGSAFE PS_EXPORT int
select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	PS_NEXT(select);
	PS_NEXT_MISSING(select, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, select, int, real_select(n, r, w, e, t));
}

PS_EXPORT int
epoll_wait(int fd, struct epoll_event *ev, int max, int ms)
{
	PS_NEXT(epoll_wait);
	PS_NEXT_MISSING(epoll_wait, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, epoll_wait, int, real_epoll_wait(fd, ev, max, ms));
}

PS_EXPORT int
nanosleep(const struct timespec *req, struct timespec *rem)
{
	PS_NEXT(nanosleep);
	PS_NEXT_MISSING(nanosleep, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, nanosleep, int, real_nanosleep(req, rem));
}

PS_SIGSAFE PS_EXPORT int
clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	PS_NEXT(clock_nanosleep);
	if (!real_clock_nanosleep)
		return ENOSYS;
	PS_WAIT_TIMED(PS_WAIT_BLOCK, clock_nanosleep, int, real_clock_nanosleep(clk, flags, req, rem));
}

PS_SIGSAFE PS_EXPORT unsigned int
sleep(unsigned int s)
{
	PS_NEXT(sleep);
	if (!real_sleep)
		return s;
	PS_WAIT_TIMED(PS_WAIT_BLOCK, sleep, unsigned int, real_sleep(s));
}

PS_EXPORT int
usleep(useconds_t us)
{
	PS_NEXT(usleep);
	PS_NEXT_MISSING(usleep, -1);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, usleep, int, real_usleep(us));
}
