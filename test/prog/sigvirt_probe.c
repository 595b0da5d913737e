/* sigvirt_probe: a program that uses the real-time signal the shim uses
 * for itself, in every way the C library allows.  Its output (and exit
 * status) must be the same with and without the shim.
 * usage: sigvirt_probe SIGNO MODE
 *   query      install, query, reset to default, ignore; signal/sysv_signal/sigset
 *   resethand  SA_RESETHAND: caught once, then the disposition is SIG_DFL
 *   nodefer    a handler that sends the signal again from inside itself:
 *              nested at once with SA_NODEFER, after it returns without
 *   sigqueue   sigqueue to itself: the handler gets si_code and si_value
 *   mask       every signal blocked: the old and current masks show it
 *              blocked, a signal sent meanwhile waits for the unblock;
 *              so it does after SIGUSR1 was let in by sigrelse (which
 *              the shim does not see) and its handler blocked and
 *              restored every signal (the kernel's mask on its return
 *              lacks SIGUSR1: no reason to think it unblocked)
 *   sigwait    every signal blocked, one sent, sigwaitinfo receives it
 *   burnwait   every signal blocked, 300 ms of CPU, then sigtimedwait and a
 *              signalfd on a full set: nothing to receive
 *   default    sent with the default action: the process dies by it
 *   fork       the child sends itself the signal and reports; both burn
 *   exec       block it and ignore it, then exec `sigvirt_probe N show`
 *   exec-bare  the same, but the new image runs without LD_PRELOAD
 *   show       report whether it is blocked / ignored, as the program
 *              asks (sigprocmask, sigaction) and as the kernel says
 *              (/proc/self/status, which nothing can virtualize; the
 *              same only in an image without the shim) */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int S;
static volatile sig_atomic_t caught, depth, max_depth, code, value;

static void
on_sig(int sig)
{
	(void)sig;
	caught++;
}

static void
on_info(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	caught++;
	code = si->si_code;
	value = si->si_value.sival_int;
}

static void
on_nest(int sig)
{
	depth++;
	if (depth > max_depth)
		max_depth = depth;
	if (caught++ == 0)
		raise(sig);
	depth--;
}

static double
cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
burn(double ms)
{
	volatile double x = 1;
	double end = cpu_ms() + ms;

	while (cpu_ms() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 1.0000001 + 0.1;
}

static const char *
name(void (*h)(int))
{
	return h == SIG_DFL ? "dfl" : h == SIG_IGN ? "ign" : h == on_sig ? "mine" : "other";
}

static void
send_self(int v)
{
	union sigval sv = { .sival_int = v };

	if (sigqueue(getpid(), S, sv))
		perror("sigqueue");
}

static int
status_bit(const char *field)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	int bit = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)))
			bit = (int)((strtoull(line + strlen(field) + 1, NULL, 16) >> (S - 1)) & 1);
	if (f)
		fclose(f);
	return bit;
}

/* sigset is obsolescent; programs still call it. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void
query(void)
{
	struct sigaction sa, old;

	sigaction(S, NULL, &old);
	printf("initial %s\n", name(old.sa_handler));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigaction(S, &sa, &old);
	printf("was %s\n", name(old.sa_handler));
	sigaction(S, NULL, &old);
	printf("now %s flags %s\n", name(old.sa_handler),
	       (old.sa_flags & SA_SIGINFO) ? "siginfo" : "plain");
	send_self(1);
	printf("caught %d\n", (int)caught);
	printf("signal(DFL) returned %s\n", name(signal(S, SIG_DFL)));
	printf("signal(IGN) returned %s\n", name(signal(S, SIG_IGN)));
	send_self(2);
	printf("ignored, still alive\n");
	printf("sysv_signal returned %s\n", name(sysv_signal(S, on_sig)));
	send_self(3);
	sigaction(S, NULL, &old);
	printf("caught %d, after sysv delivery %s\n", (int)caught, name(old.sa_handler));
	printf("sigset returned %s\n", name(sigset(S, on_sig)));
	printf("sigset(HOLD) returned %s\n", name(sigset(S, SIG_HOLD)) );
	send_self(4);
	printf("held: caught %d\n", (int)caught);
	printf("sigset again returned %s\n", sigset(S, on_sig) == SIG_HOLD ? "hold" : "not hold");
	printf("released: caught %d\n", (int)caught);
}

static void
resethand(void)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = SA_RESETHAND;
	sigaction(S, &sa, NULL);
	send_self(1);
	sigaction(S, NULL, &old);
	printf("caught %d, then %s\n", (int)caught, name(old.sa_handler));
}

static void
nodefer(int flags)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_nest;
	sa.sa_flags = flags;
	sigaction(S, &sa, NULL);
	caught = depth = max_depth = 0;
	raise(S);
	printf("%s: caught %d, deepest %d\n", flags ? "nodefer" : "defer", (int)caught,
	       (int)max_depth);
}

static void
info(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_info;
	sa.sa_flags = SA_SIGINFO;
	sigaction(S, &sa, NULL);
	send_self(1234);
	printf("caught %d code %s value %d\n", (int)caught, code == SI_QUEUE ? "SI_QUEUE" : "other",
	       (int)value);
}

static volatile sig_atomic_t critical;

static void
on_usr1(int sig)
{
	sigset_t all, old;

	(void)sig;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	critical++;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static void
mask(void)
{
	sigset_t all, old, cur;
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigaction(S, &sa, NULL);
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	sigprocmask(SIG_BLOCK, NULL, &cur);
	printf("old has it %d, current has it %d\n", sigismember(&old, S), sigismember(&cur, S));
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	printf("pthread_sigmask shows it %d\n", sigismember(&cur, S));
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);
	sigrelse(SIGUSR1);
	printf("critical section %d\n", (int)critical);
	send_self(7);
	burn(50);
	printf("while blocked: caught %d\n", (int)caught);
	sigprocmask(SIG_SETMASK, &old, NULL);
	printf("after unblock: caught %d\n", (int)caught);
}

static void
wait_one(void)
{
	sigset_t all;
	siginfo_t si;
	int got;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	send_self(42);
	got = sigwaitinfo(&all, &si);
	printf("sigwaitinfo %s value %d\n", got == S ? "ours" : "other", si.si_value.sival_int);
}

static void
burnwait(void)
{
	struct timespec zero = { 0, 0 };
	struct signalfd_siginfo fdsi;
	sigset_t all;
	int fd, got;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	burn(300);
	got = sigtimedwait(&all, NULL, &zero);
	printf("sigtimedwait %s\n", got < 0 && errno == EAGAIN ? "nothing" : "got a signal");
	fd = signalfd(-1, &all, SFD_NONBLOCK);
	got = (int)read(fd, &fdsi, sizeof(fdsi));
	printf("signalfd %s\n", got < 0 && errno == EAGAIN ? "nothing" : "got a signal");
}

static void
forked(void)
{
	struct sigaction sa;
	pid_t pid;
	int st;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigaction(S, &sa, NULL);
	pid = fork();
	if (pid == 0) {
		burn(100);
		send_self(1);
		printf("child caught %d\n", (int)caught);
		fflush(stdout);
		_exit(0);
	}
	burn(100);
	waitpid(pid, &st, 0);
	printf("parent caught %d, child status %d\n", (int)caught, WEXITSTATUS(st));
}

static void
exec_show(const char *self, int bare)
{
	char num[16];
	sigset_t one;

	sigemptyset(&one);
	sigaddset(&one, S);
	signal(S, SIG_IGN);
	sigprocmask(SIG_BLOCK, &one, NULL);
	burn(50);
	snprintf(num, sizeof(num), "%d", S);
	if (bare)
		unsetenv("LD_PRELOAD");
	fflush(stdout);
	execl(self, self, num, "show", (char *)NULL);
	perror("execl");
}

static void
show(int preloaded)
{
	struct sigaction old;
	sigset_t cur;

	sigprocmask(SIG_BLOCK, NULL, &cur);
	sigaction(S, NULL, &old);
	printf("asked: blocked %d ignored %d\n", sigismember(&cur, S), old.sa_handler == SIG_IGN);
	if (!preloaded)
		printf("kernel: blocked %d ignored %d\n", status_bit("SigBlk:"),
		       status_bit("SigIgn:"));
}

int
main(int argc, char **argv)
{
	const char *m;

	if (argc != 3)
		return 2;
	S = atoi(argv[1]);
	m = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "query"))
		query();
	else if (!strcmp(m, "resethand"))
		resethand();
	else if (!strcmp(m, "nodefer")) {
		nodefer(SA_NODEFER);
		nodefer(0);
	} else if (!strcmp(m, "sigqueue"))
		info();
	else if (!strcmp(m, "mask"))
		mask();
	else if (!strcmp(m, "sigwait"))
		wait_one();
	else if (!strcmp(m, "burnwait"))
		burnwait();
	else if (!strcmp(m, "default")) {
		burn(50);
		send_self(1);
		printf("not killed\n");
	} else if (!strcmp(m, "fork"))
		forked();
	else if (!strcmp(m, "exec") || !strcmp(m, "exec-bare"))
		exec_show(argv[0], !strcmp(m, "exec-bare"));
	else if (!strcmp(m, "show"))
		show(getenv("LD_PRELOAD") != NULL);
	else
		return 2;
	return 0;
}
