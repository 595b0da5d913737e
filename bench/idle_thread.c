/* idle_thread: a preloadable library whose only effect is one idle thread.
 *
 * The anchor for "the cost of having a background thread at all": once a
 * process has a second thread, glibc leaves its single-threaded fast paths
 * (SINGLE_THREAD_P) and malloc, realloc and free take the arena lock.  Any
 * profiler with an uploader thread pays this; the benchmarks report it next
 * to the shim so the two costs can be told apart.
 */
#include <pthread.h>
#include <unistd.h>

static void *
idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

__attribute__((constructor)) static void
start(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, idle, NULL) == 0)
		pthread_detach(t);
}
