/* torture_exec: an exec chain through `sh -c`.  Level LEVEL burns MS ms of
 * CPU and allocates in its own function (work_level0 .. work_level7, so a
 * profile tells which level it holds), prints "level LEVEL", then, if LEVEL
 * > 0, replaces itself with /bin/sh running level LEVEL-1:
 *   LEVEL odd:  sh -c 'exec "$0" "$1" "$2"'       (sh execs it: same pid)
 *   LEVEL even: sh -c '"$0" "$1" "$2"; exit $?'   (sh forks it and waits)
 * A SIGPROF timer armed across an exec, or a signal left pending, would
 * kill the shell or the next level before the shim in it starts.  Level 0
 * exits with status 7, which every shell passes on, so the chain's status
 * is 7.  With TORTURE_REPORT set, every level appends "LEVEL PID" to that
 * file, so a test can find each level's profile.
 * usage: torture_exec LEVEL MS   (LEVEL 0..7)
 * exits 2 on bad arguments, 3 if the exec failed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;

static double
thread_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static void
burn(double ms)
{
	volatile double x = 1;
	double end = thread_ms() + ms;
	unsigned n = 0;

	do {
		void *p = malloc(1024 + (n++ % 16) * 1024);

		sink = p;
		free(p);
		for (int k = 0; k < 2000; k++)
			x = x * 1.0000001 + 0.5;
	} while (thread_ms() < end);
}

#define LEVEL_FN(n)                                      \
	__attribute__((noinline)) static void            \
	work_level##n(double ms)                         \
	{                                                \
		burn(ms);                                \
		__asm__ volatile("" ::: "memory");       \
	}
LEVEL_FN(0)
LEVEL_FN(1)
LEVEL_FN(2)
LEVEL_FN(3)
LEVEL_FN(4)
LEVEL_FN(5)
LEVEL_FN(6)
LEVEL_FN(7)

static void (*const work[8])(double) = {
	work_level0, work_level1, work_level2, work_level3,
	work_level4, work_level5, work_level6, work_level7,
};

static void
report(int level)
{
	const char *path = getenv("TORTURE_REPORT");
	char line[64];
	int fd, n;

	if (!path)
		return;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%d %d\n", level, (int)getpid());
	if (write(fd, line, (size_t)n) != n)
		n = -1;
	close(fd);
}

int
main(int argc, char **argv)
{
	char self[4096], next[16];
	ssize_t len;
	int level;

	if (argc != 3)
		return 2;
	level = atoi(argv[1]);
	if (level < 0 || level > 7)
		return 2;
	report(level);
	work[level](atof(argv[2]));
	printf("level %d\n", level);
	fflush(stdout);
	if (level == 0)
		return 7;
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 3;
	self[len] = '\0';
	snprintf(next, sizeof(next), "%d", level - 1);
	execl("/bin/sh", "sh", "-c",
	      level % 2 ? "exec \"$0\" \"$1\" \"$2\"" : "\"$0\" \"$1\" \"$2\"; exit $?",
	      self, next, argv[2], (char *)NULL);
	return 3;
}
