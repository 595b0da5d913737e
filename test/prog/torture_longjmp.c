/* torture_longjmp: a signal handler that leaves the interrupted code by
 * siglongjmp, as a program may when that code is async-signal-safe (here
 * read(2), which the shim interposes and may be recording in).  300000
 * reads of /dev/zero under a SIGALRM every 37 us whose handler jumps out
 * of them; then what the thread can still do: make a pipe, block a signal,
 * get EBADF from syscall(2), and sleep 10 x 50 ms in after_sleep (the
 * block profile's).  Prints the same lines with and without the shim.
 * usage: torture_longjmp */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static sigjmp_buf env;
static volatile sig_atomic_t armed;

static void
on_alarm(int sig)
{
	(void)sig;
	if (armed)
		siglongjmp(env, 1);
}

__attribute__((noinline)) static void
after_sleep(void)
{
	struct timespec ts = { 0, 50 * 1000000 };

	for (int i = 0; i < 10; i++)
		nanosleep(&ts, NULL);
}

int
main(void)
{
	struct itimerval every = { { 0, 37 }, { 0, 37 } }, off = { { 0, 0 }, { 0, 0 } };
	struct sigaction sa;
	sigset_t one, cur;
	int fd = open("/dev/zero", O_RDONLY), p[2];
	long r;
	char b;

	if (fd < 0)
		return 98;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	if (sigaction(SIGALRM, &sa, NULL) || setitimer(ITIMER_REAL, &every, NULL))
		return 98;
	for (long i = 0; i < 300000; i++) {
		if (sigsetjmp(env, 1)) {
			armed = 0;
			continue;
		}
		armed = 1;
		(void)read(fd, &b, 1);
		armed = 0;
	}
	if (setitimer(ITIMER_REAL, &off, NULL))
		return 98;
	printf("pipe %d\n", pipe(p));
	sigemptyset(&one);
	sigaddset(&one, SIGUSR1);
	sigprocmask(SIG_BLOCK, &one, NULL);
	sigprocmask(SIG_BLOCK, NULL, &cur);
	printf("sigprocmask blocks SIGUSR1 %d\n", sigismember(&cur, SIGUSR1));
	errno = 0;
	r = syscall(SYS_write, -1, "x", 1);
	printf("syscall write to -1: %ld %s\n", r, strerror(errno));
	after_sleep();
	return 0;
}
