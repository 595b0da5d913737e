/* thread_stacks: do the signal stacks of ended threads go away?
 *
 * usage: thread_stacks THREADS TAKE_KEYS
 *
 * With TAKE_KEYS 1, the program first makes pthread keys until the C
 * library refuses (PTHREAD_KEYS_MAX, 1024 on glibc), as a program that
 * leaks keys does, and only then starts its first thread.  It then starts
 * THREADS threads one after the other, each burning 2 ms of CPU (so that a
 * sampler arms its timer) and ending by return or by pthread_exit in turn.
 *
 * It counts its 128 KiB read-write anonymous mappings (the size of the
 * shim's signal stacks) before the first thread and after the last, and
 * prints "stacks grew by N": 0 with or without the shim, unless each
 * ended thread left its signal stack mapped.  Exits 1 if a pthread call
 * fails. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Anonymous read-write mappings of exactly 128 KiB in /proc/self/maps. */
static int
stacks(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], perms[8];
	unsigned long lo, hi, off;
	int n = 0, fields, name;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		name = 0;
		fields = sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &name);
		if (fields >= 4 && hi - lo == 128 << 10 && strcmp(perms, "rw-p") == 0 &&
		    (!name || line[name] == '\n' || line[name] == '\0'))
			n++;
	}
	fclose(f);
	return n;
}

static void *
thread_main(void *arg)
{
	double end = cpu_ms() + 2;
	volatile unsigned long x = 0;

	while (cpu_ms() < end)
		x++;
	if ((long)arg % 2)
		pthread_exit(NULL);
	return NULL;
}

int
main(int argc, char **argv)
{
	long threads = argc > 1 ? atol(argv[1]) : 100, i;
	int take_keys = argc > 2 && atoi(argv[2]), before, after;
	pthread_key_t k;
	pthread_t t;

	if (take_keys)
		while (pthread_key_create(&k, NULL) == 0)
			;
	before = stacks();
	for (i = 0; i < threads; i++) {
		if (pthread_create(&t, NULL, thread_main, (void *)i) || pthread_join(t, NULL)) {
			fprintf(stderr, "thread_stacks: pthread call failed\n");
			return 1;
		}
	}
	after = stacks();
	if (before < 0 || after < 0) {
		fprintf(stderr, "thread_stacks: /proc/self/maps unreadable\n");
		return 1;
	}
	printf("stacks grew by %d\n", after - before);
	return 0;
}
