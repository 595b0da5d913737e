/* dlopen_storm: one thread loops dlopen/dlclose while others burn CPU and
 * allocate.  A SIGPROF handler that takes the loader lock deadlocks this
 * program (REFERENCES.md section 7); it must finish.
 * usage: dlopen_storm ITERATIONS THREADS */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int stop;

__attribute__((noinline)) static void *
burner(void *arg)
{
	volatile double x = 1;
	(void)arg;
	while (!atomic_load(&stop)) {
		for (int i = 0; i < 10000; i++)
			x = x * 1.0000001 + 0.5;
		char *p = malloc(1000 + (size_t)(x) % 5000);
		if (p)
			memset(p, 1, 100);
		free(p);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	/* Libraries the shim does not load itself, so each dlopen maps them. */
	static const char *const libs[] = { "libresolv.so.2", "libcrypt.so.1", "libanl.so.1" };
	long iters = argc > 1 ? atol(argv[1]) : 2000, n = argc > 2 ? atol(argv[2]) : 2;
	pthread_t t[16];

	if (n > 16)
		n = 16;
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, burner, NULL))
			return 1;
	for (long i = 0; i < iters; i++) {
		void *h = dlopen(libs[i % 3], RTLD_NOW | RTLD_LOCAL);
		if (!h)
			return 1;
		dlclose(h);
	}
	atomic_store(&stop, 1);
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	puts("ok");
	return 0;
}
