/* torture_spawn: start N children with vfork+execve and N with
 * posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK) and an internal execve
 * the shim does not see), while a background thread burns CPU and
 * allocates.  A vfork child shares the parent's memory and runs the shim's
 * execve hook on the parent's stack; it must not touch the parent's timer
 * or profile.  Each child is this program again ("child K MS"), inheriting
 * the shim: it burns MS ms of CPU (LONG_MS for every 20th child, enough
 * for a profile of its own, a fraction of a millisecond for the others)
 * and exits K % 100.  After every tenth pair, one vfork child and one
 * posix_spawn try a file that does not exist: the vfork child's execve
 * must fail with ENOENT and the child leave with _exit(127); posix_spawn
 * must return ENOENT.
 * usage: torture_spawn N [REPORT]
 * prints "ok N N FAILS"; with REPORT, writes "-1 PID" for itself and
 * "K PID" for every long child to that file; exits 1 if a spawn failed or a child's status was wrong
 * (reported on stderr). */
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static atomic_int stop;
static void *volatile sink;

static void *
background(void *arg)
{
	volatile double x = 1;

	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int k = 0; k < 2000; k++)
			x = x * 1.0000001 + 0.5;
		void *p = malloc(3000);

		sink = p;
		free(p);
	}
	return NULL;
}

static int
check(pid_t pid, int k, const char *how)
{
	int st;

	if (waitpid(pid, &st, 0) != pid) {
		fprintf(stderr, "%s %d: waitpid: %s\n", how, k, strerror(errno));
		return 1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != k % 100) {
		fprintf(stderr, "%s %d: status 0x%x\n", how, k, st);
		return 1;
	}
	return 0;
}

/* vfork in a function of its own, so that no variable of the caller lives
 * across it (the child borrows this frame until it execs). */
__attribute__((noinline)) static pid_t
vfork_exec(const char *path, char *const args[])
{
	pid_t pid = vfork();

	if (pid == 0) {
		execve(path, args, environ);
		_exit(127);
	}
	return pid;
}

/* Long enough for a sample whatever the load: this VM's kernel delivers
 * CPU-timer signals late under load, sometimes none in 40 ms of CPU (seen
 * with a bare timer_create program too); 200 ms always got several. */
#define LONG_MS 200.0

static double
thread_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* What each spawned child does: CPU, and an allocation or two. */
__attribute__((noinline)) static int
spawned_child_work(int k, double ms)
{
	volatile double x = 1;
	double end = thread_ms() + ms;

	do {
		void *p = malloc(4096);

		sink = p;
		free(p);
		for (int i = 0; i < 2000; i++)
			x = x * 1.0000001 + 0.5;
	} while (thread_ms() < end);
	return k % 100;
}

/* A file that does not exist: vfork + execve fails in the child, which
 * leaves with 127; posix_spawn reports the exec's errno. */
static int
missing(const char *path, char *const args[], int k)
{
	pid_t pid = vfork_exec(path, args);
	int st, rc;

	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 127) {
		fprintf(stderr, "vfork %d: missing file: status 0x%x\n", k, pid < 0 ? -1 : st);
		return 1;
	}
	rc = posix_spawn(&pid, path, NULL, NULL, args, environ);
	if (rc != ENOENT) {
		fprintf(stderr, "posix_spawn %d: missing file: %s\n", k, strerror(rc));
		if (rc == 0)
			waitpid(pid, &st, 0);
		return 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	char self[4096], num[32], ms[32];
	FILE *report = NULL;
	ssize_t len;
	pthread_t t;
	int n, bad = 0, fails = 0;

	if (argc > 3 && !strcmp(argv[1], "child"))
		return spawned_child_work(atoi(argv[2]), atof(argv[3]));
	n = argc > 1 ? atoi(argv[1]) : 100;
	if (argc > 2 && !(report = fopen(argv[2], "w")))
		return 1;
	if (report)
		fprintf(report, "-1 %d\n", (int)getpid());
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 1;
	self[len] = '\0';
	if (pthread_create(&t, NULL, background, NULL))
		return 1;
	for (int k = 0; k < n && !bad; k++) {
		char *args[] = { self, "child", num, ms, NULL };
		int is_long = k % 20 == 0;
		pid_t pid;

		snprintf(num, sizeof(num), "%d", k);
		snprintf(ms, sizeof(ms), "%g", is_long ? LONG_MS : 0.05);
		pid = vfork_exec(self, args);
		if (pid < 0 || check(pid, k, "vfork")) {
			bad = 1;
			break;
		}
		if (report && is_long)
			fprintf(report, "%d %d\n", k, (int)pid);
		if (posix_spawn(&pid, self, NULL, NULL, args, environ) || check(pid, k, "posix_spawn")) {
			bad = 1;
			break;
		}
		if (report && is_long)
			fprintf(report, "%d %d\n", k, (int)pid);
		if (k % 10 == 9) {
			char *none[] = { "/nonexistent/torture_spawn", NULL };

			bad |= missing(none[0], none, k);
			fails += 2;
		}
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	if (report && fclose(report))
		bad = 1;
	if (bad)
		return 1;
	printf("ok %d %d %d\n", n, n, fails);
	return 0;
}
