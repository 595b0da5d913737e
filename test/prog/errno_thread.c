/* errno_thread: set errno to 0, start a thread (the program's first) and
 * join it; print errno as pthread_create left it in the caller and as the
 * thread's start routine found it: "0 0" without the shim, so with it. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

static void *
first(void *arg)
{
	*(int *)arg = errno;
	return arg;
}

int
main(void)
{
	pthread_t t;
	int at_start = -1, after;

	errno = 0;
	if (pthread_create(&t, NULL, first, &at_start))
		return 1;
	after = errno;
	if (pthread_join(t, NULL))
		return 1;
	printf("%d %d\n", after, at_start);
	return 0;
}
