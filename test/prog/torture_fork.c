/* torture_fork: a fork storm.  The main thread forks NCHILD children one
 * after the other while NTHREADS other threads burn CPU and allocate (0
 * for a single-threaded storm), so forks land while another thread is in
 * malloc, in the shim's sampling path or in the SIGPROF handler.  Child i
 * burns a little CPU, allocates and checks a block, and leaves with status
 * i % 200: by exit() when i is even (atexit handlers and the shim's
 * destructor run: it writes the child's profile), by _exit() when odd.
 * Two children run at a time, so the storm is not serialised on wait.
 * usage: torture_fork NCHILD NTHREADS [REPORT]
 * prints "ok NCHILD"; with REPORT, writes "I PID" for every child to that
 * file (pids differ from run to run, so they stay off stdout); exits 1 if
 * a child failed, exited with the wrong status or died of a signal
 * (reported on stderr). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;
static void *volatile sink;

static void *
background(void *arg)
{
	unsigned long r = (unsigned long)arg + 1;
	volatile double x = 1;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		char *p;

		for (int k = 0; k < 2000; k++)
			x = x * 1.0000001 + 0.5;
		r = r * 6364136223846793005ul + 1442695040888963407ul;
		p = malloc(16 + (r >> 33) % 16384);
		if (!p)
			abort();
		p[0] = 1;
		sink = p;
		free(p);
	}
	return NULL;
}

__attribute__((noinline)) static int
child_work(int i)
{
	volatile double x = 1;
	unsigned char *p;
	int bad = 0;

	for (int k = 0; k < 20000; k++)
		x = x * 1.0000001 + 0.5;
	for (int k = 0; k < 16; k++) {
		size_t n = 4096 + (size_t)k * 512;

		p = malloc(n);
		if (!p)
			return -1;
		memset(p, i & 0xff, n);
		bad |= p[n - 1] != (unsigned char)(i & 0xff);
		free(p);
	}
	return bad ? -1 : 0;
}

static int
reap(pid_t pid, int i)
{
	int st;

	if (waitpid(pid, &st, 0) != pid) {
		perror("waitpid");
		return 1;
	}
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "child %d killed by signal %d\n", i, WTERMSIG(st));
		return 1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != i % 200) {
		fprintf(stderr, "child %d exited %d\n", i, WEXITSTATUS(st));
		return 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	int nchild = argc > 1 ? atoi(argv[1]) : 300, nthreads = argc > 2 ? atoi(argv[2]) : 0;
	pthread_t t[8];
	pid_t prev = 0, *pids;
	FILE *report = NULL;
	int bad = 0;

	if (nthreads < 0 || nthreads > 8 || nchild < 1)
		return 2;
	if (argc > 3 && !(report = fopen(argv[3], "w")))
		return 1;
	pids = calloc((size_t)nchild, sizeof(*pids));
	if (!pids)
		return 1;
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, background, (void *)(long)i))
			return 1;
	for (int i = 0; i < nchild; i++) {
		pid_t pid;

		fflush(NULL);  /* nothing buffered for a child to write twice */
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			int rc = child_work(i) ? 255 : i % 200;

			if (i % 2 == 0)
				exit(rc);
			_exit(rc);
		}
		if (prev)
			bad |= reap(prev, i - 1);
		prev = pids[i] = pid;
	}
	bad |= reap(prev, nchild - 1);
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; report && i < nchild; i++)
		fprintf(report, "%d %d\n", i, (int)pids[i]);
	if (report && fclose(report))
		bad = 1;
	free(pids);
	if (bad)
		return 1;
	printf("ok %d\n", nchild);
	return 0;
}
