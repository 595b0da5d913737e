/* scrape_target: a program to scrape.  It keeps a known live set (LIVE_MIB
 * MiB in 64 KiB blocks, allocated in hold_live and never freed), runs
 * THREADS threads that burn CPU in burn_a, and ends when STOP_FILE exists
 * (checked every 10 ms) or after MAX_SECONDS: prints one fixed line and
 * exits 3, whatever happened around it.  STOP_FILE.ready is made once the
 * live set is allocated and the threads run.
 *
 * usage: scrape_target THREADS LIVE_MIB STOP_FILE MAX_SECONDS */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (64 * 1024)

static _Atomic int stop;
static void **live;

static void
hold_live(size_t n)
{
	size_t i;

	live = malloc(n * sizeof(*live));
	for (i = 0; live && i < n; i++) {
		live[i] = malloc(BLOCK);
		if (live[i])
			memset(live[i], 1, BLOCK);
	}
}

static void *
burn_a(void *arg)
{
	volatile double x = 1;
	int i;

	(void)arg;
	while (!atomic_load(&stop))
		for (i = 0; i < 100000; i++)
			x = x * 1.0000001 + 0.5;
	return NULL;
}

int
main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1, i;
	size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 0;
	const char *stop_file = argc > 3 ? argv[3] : "/nonexistent";
	double max_s = argc > 4 ? atof(argv[4]) : 30;
	pthread_t t[64];
	struct timespec ts = { 0, 10 * 1000000L };
	long ticks;
	char ready[4096];
	FILE *f;

	if (threads > 64)
		threads = 64;
	hold_live(mib * 1024 * 1024 / BLOCK);
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, burn_a, NULL);
	snprintf(ready, sizeof(ready), "%s.ready", stop_file);
	f = fopen(ready, "w");
	if (f)
		fclose(f);
	for (ticks = 0; ticks < (long)(max_s * 100) && access(stop_file, F_OK); ticks++)
		nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("scrape_target: %d threads, %zu MiB live\n", threads, mib);
	return 3;
}
