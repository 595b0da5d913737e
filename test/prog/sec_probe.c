/* sec_probe: report what a preloaded profiler could have changed in this
 * process, for test_security.py.
 *
 *   sec_probe MS        burn MS ms of CPU in two threads and allocate,
 *                       then print the report below
 *   sec_probe wait MS   print the pid, wait for a line on stdin, then do
 *                       the same work (so a test can plant files first)
 *   sec_probe vdso MS   spend MS ms of CPU in the vDSO's clock_gettime
 *                       (no system call), print nothing, exit 0
 *   sec_probe quiet MS  the work of `sec_probe MS`, no report
 *
 * The report, read while both threads are alive:
 *   at_secure N         getauxval(AT_SECURE)
 *   itimer_prof S U     ITIMER_PROF as armed (0 0 when unarmed)
 *   sigprof_caught N    1 if a SIGPROF handler is installed (SigCgt in
 *                       /proc/self/status, which no interposer can hide)
 *   rt_caught N         1 if a handler is installed for any real-time
 *                       signal above glibc's own (35-64; the shim's is one)
 *   posix_timers N      timers listed in /proc/self/timers
 *   threads N           Threads in /proc/self/status (2 = ours only)
 *   map PATH            every file mapped (/proc/self/maps), once each
 * then a line "--env--" and every environment entry, each ended by a NUL
 * byte (values may hold newlines).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static pthread_barrier_t bar;
static double burn_ms;

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
	void *keep[64] = { 0 };
	unsigned i = 0;

	do {
		for (int k = 0; k < 1000; k++)
			x = x * 1.0000001 + 0.5;
		/* Allocations too, so the malloc hooks have work. */
		free(keep[i % 64]);
		keep[i % 64] = malloc(4096 + i % 8192);
		i++;
	} while (cpu_ms() < end);
	for (i = 0; i < 64; i++)
		free(keep[i]);
}

static void *
worker(void *unused)
{
	(void)unused;
	burn(burn_ms);
	pthread_barrier_wait(&bar);   /* report taken while we are alive */
	pthread_barrier_wait(&bar);
	return NULL;
}

/* Value of "Key:\t..." in /proc/self/status, or NULL. */
static char *
status_field(const char *key, char *line, size_t len)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t n = strlen(key);
	char *v = NULL;

	if (!f)
		return NULL;
	while (fgets(line, (int)len, f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = line + n + 1;
			break;
		}
	fclose(f);
	return v;
}

static void
report(void)
{
	struct itimerval it;
	char line[4096], seen[256][256];
	unsigned nseen = 0, i;
	int timers = 0;
	char *v;
	FILE *f;

	printf("at_secure %lu\n", getauxval(AT_SECURE));
	getitimer(ITIMER_PROF, &it);
	printf("itimer_prof %ld %ld\n", (long)it.it_value.tv_sec, (long)it.it_value.tv_usec);
	v = status_field("SigCgt", line, sizeof(line));
	printf("sigprof_caught %d\n",
	       v ? (int)((strtoull(v, NULL, 16) >> (SIGPROF - 1)) & 1) : -1);
	printf("rt_caught %d\n", v ? (strtoull(v, NULL, 16) >> 34) != 0 : -1);
	f = fopen("/proc/self/timers", "r");
	while (f && fgets(line, sizeof(line), f))
		timers += !strncmp(line, "ID:", 3);
	if (f)
		fclose(f);
	printf("posix_timers %d\n", f ? timers : -1);
	v = status_field("Threads", line, sizeof(line));
	printf("threads %d\n", v ? atoi(v) : -1);
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		for (i = 0; i < nseen && strcmp(seen[i], path); i++)
			;
		if (i < nseen || nseen == 256)
			continue;
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", path);
		printf("map %s\n", path);
	}
	if (f)
		fclose(f);
	printf("--env--\n");
	for (char **e = environ; *e; e++)
		fwrite(*e, 1, strlen(*e) + 1, stdout);
	fflush(stdout);
}

/* CLOCK_MONOTONIC is answered inside the vDSO: nearly every sample lands
 * in linux-vdso.so.1, which has no file. */
static void
in_vdso(double ms)
{
	struct timespec ts;
	double end = cpu_ms() + ms;

	do {
		for (int k = 0; k < 1000; k++)
			clock_gettime(CLOCK_MONOTONIC, &ts);
	} while (cpu_ms() < end);
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[1] : "";
	pthread_t t;
	char go[16];

	if (!strcmp(mode, "vdso")) {
		in_vdso(atof(argv[2]));
		return 0;
	}
	if (!strcmp(mode, "wait")) {
		printf("%d\n", (int)getpid());
		fflush(stdout);
		if (!fgets(go, sizeof(go), stdin))
			return 2;
	}
	burn_ms = argc > 1 ? atof(argv[argc - 1]) / 2 : 50;
	pthread_barrier_init(&bar, NULL, 2);
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	burn(burn_ms);
	pthread_barrier_wait(&bar);
	if (strcmp(mode, "quiet"))
		report();
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	return 0;
}
