/* reaper: a program that must see exactly its own children.  It counts
 * SIGCHLD, starts N children that burn CPU, then reaps with waitpid(-1)
 * until ECHILD, and lists every descriptor it holds.
 * usage: reaper N MS
 * prints "reaped R of N", "sigchld S" (S >= 1 and <= N: signals merge),
 * "unknown U" (reaped pids that are not its children) and "fds LIST". */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int sigchld;

static void
on_chld(int sig)
{
	(void)sig;
	atomic_fetch_add(&sigchld, 1);
}

static void
burn(int ms)
{
	struct timespec ts;
	volatile double x = 1;
	double end;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	end = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 + ms;
	do {
		for (int i = 0; i < 10000; i++)
			x = x * 1.0000001 + 0.1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 < end);
}

int
main(int argc, char **argv)
{
	struct sigaction sa;
	pid_t kids[64], pid;
	int n, ms, i, j, reaped = 0, unknown = 0, st;
	DIR *d;
	struct dirent *e;

	if (argc != 3)
		return 2;
	n = atoi(argv[1]);
	ms = atoi(argv[2]);
	if (n < 1 || n > 64)
		return 2;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	burn(ms);
	for (i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			burn(ms);
			_exit(0);
		}
	}
	while ((pid = waitpid(-1, &st, 0)) > 0 || (pid < 0 && errno == EINTR)) {
		if (pid < 0)
			continue;
		for (j = 0; j < n && kids[j] != pid; j++)
			;
		if (j == n)
			unknown++;
		else
			reaped++;
	}
	printf("reaped %d of %d\n", reaped, n);
	printf("sigchld %s\n", sigchld >= 1 && sigchld <= n ? "ok" : "wrong");
	printf("unknown %d\n", unknown);
	printf("fds");
	d = opendir("/proc/self/fd");
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			printf(" %s", e->d_name);
	if (d)
		closedir(d);
	printf("\n");
	return 0;
}
