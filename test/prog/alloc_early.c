/* alloc_early: memory obtained before the shim initialised, freed after.
 *
 * The executable's .preinit_array runs before any shared library's
 * constructor, the preloaded shim's included: what it allocates goes
 * through hooks that are not resolved or not started yet.  A
 * constructor(101) of the program allocates again (setenv, strdup, fopen).
 * main then reallocates and frees all of it, on the main thread and on
 * another thread, and runs libc paths that allocate internally (stdio
 * buffers, qsort's temporary, setenv, getline, opendir).
 * Output is the same with and without the shim; exit 0. */
#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEARLY 64

static char *pre_blocks[NEARLY];
static void *pre_aligned, *pre_aligned2;
static char *ctor_dup, *ctor_big;
static FILE *ctor_file;

static void
pre_init(int argc, char **argv, char **envp)
{
	(void)argc;
	(void)envp;
	/* The very first allocation of the process is an aligned one: the
	 * hooks must resolve the C library's functions from any entry. */
	if (posix_memalign(&pre_aligned, 64, 1000) || ((uintptr_t)pre_aligned & 63))
		abort();
	pre_aligned2 = aligned_alloc(4096, 8192);
	if (!pre_aligned2 || ((uintptr_t)pre_aligned2 & 4095) || malloc_usable_size(pre_aligned2) < 8192)
		abort();
	for (int i = 0; i < NEARLY; i++) {
		pre_blocks[i] = malloc((size_t)16 << (i % 12));
		if (!pre_blocks[i])
			abort();
		snprintf(pre_blocks[i], 16, "pre%d", i);
	}
	/* strdup and calloc too, before anything else is initialised. */
	pre_blocks[0] = realloc(pre_blocks[0], 100);
	free(pre_blocks[1]);
	pre_blocks[1] = strdup(argv[0]);
	free(pre_blocks[2]);
	pre_blocks[2] = calloc(10, 10);
}

__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **, char **) =
	pre_init;

__attribute__((constructor(101))) static void
ctor(void)
{
	if (setenv("ALLOC_EARLY_VAR", "set in a constructor", 1))
		abort();
	ctor_dup = strdup("duplicated in a constructor");
	ctor_big = malloc(1 << 20);
	ctor_file = fopen("/proc/self/status", "r");
	if (!ctor_dup || !ctor_big || !ctor_file)
		abort();
	memset(ctor_big, 7, 1 << 20);
}

static int
cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* Frees half of the preinit blocks on another thread than the one that
 * allocated them. */
static void *
free_odd(void *arg)
{
	(void)arg;
	for (int i = 3; i < NEARLY; i += 2) {
		pre_blocks[i] = realloc(pre_blocks[i], 1 << 14);
		free(pre_blocks[i]);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	char *line = NULL;
	size_t cap = 0, big = 1 << 20;
	long *v;
	pthread_t th;
	DIR *d;
	int n = 0;

	(void)argc;
	printf("%s %s %s\n", pre_blocks[0], strcmp(pre_blocks[1], argv[0]) ? "differs" : "argv0",
	       pre_blocks[2][99] ? "dirty" : "zeroed");
	printf("%s / %s\n", getenv("ALLOC_EARLY_VAR"), ctor_dup);
	if (getline(&line, &cap, ctor_file) > 0)
		printf("status starts %.5s\n", line);
	fclose(ctor_file);
	free(line);
	free(ctor_dup);
	for (size_t i = 0; i < big; i++)
		if (ctor_big[i] != 7)
			return 5;
	ctor_big = realloc(ctor_big, 4 << 20);
	free(ctor_big);
	if (pthread_create(&th, NULL, free_odd, NULL) || pthread_join(th, NULL))
		return 6;
	for (int i = 0; i < NEARLY; i += 2)
		free(pre_blocks[i]);
	pre_aligned = realloc(pre_aligned, 5000);
	free(pre_aligned);
	free(pre_aligned2);
	/* setenv again: replaces (and leaks, as glibc does) the old string. */
	for (int i = 0; i < 100; i++) {
		char val[32];

		snprintf(val, sizeof(val), "%d", i);
		if (setenv("ALLOC_EARLY_VAR", val, 1))
			return 7;
	}
	printf("var %s\n", getenv("ALLOC_EARLY_VAR"));
	unsetenv("ALLOC_EARLY_VAR");
	/* qsort of more than a page allocates its merge buffer. */
	v = malloc(200000 * sizeof(*v));
	for (long i = 0; i < 200000; i++)
		v[i] = (i * 7919) % 200003;
	qsort(v, 200000, sizeof(*v), cmp);
	for (long i = 1; i < 200000; i++)
		if (v[i - 1] > v[i])
			return 8;
	free(v);
	d = opendir("/");
	if (!d)
		return 9;
	while (readdir(d))
		n++;
	closedir(d);
	printf("root has entries: %s\n", n > 2 ? "yes" : "no");
	/* Buffered stdout: many small writes, flushed at exit. */
	for (int i = 0; i < 2000; i++)
		printf("%d%c", i, i % 20 == 19 ? '\n' : ' ');
	return 0;
}
