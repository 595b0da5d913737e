/* alloc_fork: the main thread forks NCHILD times while NTHREADS other
 * threads allocate and free as fast as they can, so a fork often lands
 * while another thread is inside malloc, inside the shim's sampling slow
 * path, or inside the unwinder.  Each child allocates a little in
 * child_alloc, checks it, frees it and leaves: even-numbered children with
 * exit(0) (destructors run, so the shim writes the child's profile), odd
 * ones with _exit(0).
 * usage: alloc_fork NCHILD
 * prints one line per child, "exit PID" or "_exit PID", then "ok";
 * exit 0 only if every child exited 0. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 3

static atomic_int stop;
static void *volatile sink;

__attribute__((noinline)) static void *
background_alloc(size_t n)
{
	return malloc(n);
}

static void *
churn(void *arg)
{
	unsigned long r = (unsigned long)arg * 2654435761u + 1;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		char *p;

		r = r * 6364136223846793005ul + 1442695040888963407ul;
		p = background_alloc(16 + (r >> 33) % 8192);
		if (!p)
			abort();
		p[0] = 1;
		sink = p;
		free(p);
	}
	return NULL;
}

/* About 2 MiB in blocks of 1-32 KiB: at the test's sampling rate, enough to
 * be sampled many times, so the child has a profile to write. */
__attribute__((noinline)) static int
child_alloc(void)
{
	char *keep[256];
	int bad = 0;

	for (int i = 0; i < 256; i++) {
		size_t n = 1024 + (size_t)(i % 32) * 1024;

		keep[i] = malloc(n);
		if (!keep[i])
			return 1;
		memset(keep[i], i, n);
	}
	for (int i = 0; i < 256; i++) {
		if (keep[i][0] != (char)i)
			bad = 1;
		free(keep[i]);
	}
	return bad;
}

int
main(int argc, char **argv)
{
	int nchild = argc > 1 ? atoi(argv[1]) : 50, bad = 0, st;
	pthread_t th[NTHREADS];
	pid_t pid;

	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, churn, (void *)i))
			return 2;
	for (int i = 0; i < nchild; i++) {
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return 3;
		if (pid == 0) {
			int rc = child_alloc();

			if (i % 2)
				_exit(rc);
			exit(rc);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("child %d failed: status %d\n", (int)pid, st);
			bad = 1;
		}
		printf("%s %d\n", i % 2 ? "_exit" : "exit", (int)pid);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	if (bad)
		return 1;
	printf("ok\n");
	return 0;
}
