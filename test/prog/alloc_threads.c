/* alloc_threads: NTHREADS threads allocate, check and free blocks; half of
 * the blocks are handed to the next thread through a mutex-protected queue
 * and freed there, so frees often run on another thread than the malloc.
 * The run is bounded by iterations, not time.
 *
 * Every block carries its size and a pattern derived from a per-block
 * sequence number; whoever frees it checks the pattern.  At exit every
 * block has been freed (queues drained after the join).
 * usage: alloc_threads ITERATIONS_PER_THREAD
 * prints "ok BLOCKS BYTES CHECKSUM", exit 0; or "corrupt ..." and exit 1. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 8
#define QCAP 256

struct block {
	uint64_t seq;
	size_t size;
	/* followed by size - sizeof(struct block) pattern bytes */
};

struct queue {
	pthread_mutex_t lock;
	struct block *items[QCAP];  /* protected by lock */
	unsigned head, len;         /* protected by lock */
};

static struct queue queues[NTHREADS];
static _Atomic uint64_t corrupt, freed_sum, blocks, bytes;
static long iterations;

static unsigned char
pat(uint64_t seq, size_t i)
{
	return (unsigned char)(seq * 131 + i * 7);
}

/* Touch the first and last 64 bytes only: the test is about the
 * allocator's bookkeeping, not memset bandwidth. */
static void
mark(struct block *b)
{
	unsigned char *d = (unsigned char *)(b + 1);
	size_t n = b->size - sizeof(*b);

	for (size_t i = 0; i < n && i < 64; i++)
		d[i] = pat(b->seq, i);
	for (size_t i = n > 64 ? n - 64 : 0; i < n; i++)
		d[i] = pat(b->seq, i);
}

static void
check_and_free(struct block *b)
{
	unsigned char *d = (unsigned char *)(b + 1);
	size_t n = b->size - sizeof(*b);

	for (size_t i = 0; i < n && i < 64; i++)
		if (d[i] != pat(b->seq, i))
			atomic_fetch_add(&corrupt, 1);
	for (size_t i = n > 64 ? n - 64 : 0; i < n; i++)
		if (d[i] != pat(b->seq, i))
			atomic_fetch_add(&corrupt, 1);
	atomic_fetch_add(&freed_sum, b->seq);
	free(b);
}

static int
push(struct queue *q, struct block *b)
{
	int ok = 0;

	pthread_mutex_lock(&q->lock);
	if (q->len < QCAP) {
		q->items[(q->head + q->len++) % QCAP] = b;
		ok = 1;
	}
	pthread_mutex_unlock(&q->lock);
	return ok;
}

static struct block *
pop(struct queue *q)
{
	struct block *b = NULL;

	pthread_mutex_lock(&q->lock);
	if (q->len) {
		b = q->items[q->head];
		q->head = (q->head + 1) % QCAP;
		q->len--;
	}
	pthread_mutex_unlock(&q->lock);
	return b;
}

__attribute__((noinline)) static struct block *
thread_alloc(uint64_t seq, uint64_t *rng)
{
	struct block *b;
	size_t n;
	int kind;

	*rng ^= *rng << 13;
	*rng ^= *rng >> 7;
	*rng ^= *rng << 17;
	n = sizeof(*b) + (*rng >> 20) % 4096;
	kind = (int)(*rng % 4);
	/* Mix the entry points: malloc, calloc, realloc-grown, aligned. */
	if (kind == 0)
		b = calloc(1, n);
	else if (kind == 1)
		b = realloc(malloc(16), n);
	else if (kind == 2)
		b = aligned_alloc(64, (n + 63) & ~(size_t)63);
	else
		b = malloc(n);
	if (!b)
		abort();
	b->seq = seq;
	b->size = n;
	mark(b);
	atomic_fetch_add_explicit(&blocks, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&bytes, n, memory_order_relaxed);
	return b;
}

static void *
worker(void *arg)
{
	long id = (long)arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
	struct queue *next = &queues[(id + 1) % NTHREADS];
	struct block *b;

	for (long i = 0; i < iterations; i++) {
		uint64_t seq = (uint64_t)id * (uint64_t)iterations + (uint64_t)i + 1;

		b = thread_alloc(seq, &rng);
		if (i % 2 == 0 || !push(next, b))
			check_and_free(b);
		while ((b = pop(&queues[id])) != NULL)
			check_and_free(b);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t th[NTHREADS];
	struct block *b;
	uint64_t n, want;

	iterations = argc > 1 ? atol(argv[1]) : 100000;
	for (int i = 0; i < NTHREADS; i++)
		pthread_mutex_init(&queues[i].lock, NULL);
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i))
			return 2;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NTHREADS; i++)
		while ((b = pop(&queues[i])) != NULL)
			check_and_free(b);
	/* Every sequence number 1..N was freed exactly once. */
	n = (uint64_t)NTHREADS * (uint64_t)iterations;
	want = n * (n + 1) / 2;
	if (atomic_load(&corrupt) || atomic_load(&freed_sum) != want || atomic_load(&blocks) != n) {
		printf("corrupt %llu sum %llu want %llu\n", (unsigned long long)corrupt,
		       (unsigned long long)freed_sum, (unsigned long long)want);
		return 1;
	}
	printf("ok %llu %llu %llu\n", (unsigned long long)blocks, (unsigned long long)bytes,
	       (unsigned long long)freed_sum);
	return 0;
}
