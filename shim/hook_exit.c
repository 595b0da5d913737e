/* hook_exit.c -- the exit status and command line of the run, for its span.
 *
 * The span of a run is an error when the program exits non-zero, so the
 * real status is needed at exit.  A return from main reaches exit() inside
 * libc, where no interposer can see it; so __libc_start_main is
 * interposed to wrap main, and exit() to catch explicit calls.  Both only
 * record and pass on: the program's behaviour is unchanged.  _exit and
 * fatal signals end the process without any of this (and without the last
 * profile write), as pyroshim(7) says.
 */
#include <stdlib.h>
#include <unistd.h>

#include "shim/process.h"
#include "common/ps.h"
#include "shim/next.h"

typedef int (*main_fn)(int, char **, char **);
typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void),
			void (*)(void), void *);

static void leaving(int status) __attribute__((noreturn));

/* Written once by __libc_start_main, before main runs. */
static main_fn real_main;

static int
wrapped_main(int argc, char **argv, char **envp)
{
	/* The shim may have exported variables before main (TRACEPARENT, the
	 * output directory): main gets the environment as it is now, which is
	 * envp itself unless something was changed. */
	int rc = real_main(argc, argv, environ ? environ : envp);

	ps_process_set_exit(rc);
	return rc;
}

PS_EXPORT int
__libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
		  void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
	PS_NEXT_AS(start_fn, __libc_start_main);

	real_main = main;
	ps_process_set_args(argc, (const char *const *)argv);
	if (!real___libc_start_main)
		exit(main(argc, argv, environ));
	return real___libc_start_main(wrapped_main, argc, argv, init, fini, rtld_fini, stack_end);
}

/* The C library's exit and _exit (next.h), looked up ahead by
 * ps_hook_exit_resolve(): at the first call, a fork child would look them
 * up itself, as hook_exec.c says of execve. */
static void *_Atomic next_exit, *_Atomic next__exit;

void
ps_hook_exit_resolve(void)
{
	(void)ps_next_cached(&next_exit, "exit");
	(void)ps_next_cached(&next__exit, "_exit");
}

PS_EXPORT void
exit(int status)
{
	void (*real_exit)(int) = (void (*)(int))ps_next_cached(&next_exit, "exit");

	ps_process_set_exit(status);
	if (real_exit)
		real_exit(status);
	leaving(status);  /* not reached */
}

/* _exit and _Exit run no exit handler, so the destructor never writes the
 * last profile nor sends the run's span (Debian's /bin/sh ends this way).
 * In the profiled process -- never in a fork or vfork child the shim has
 * not adopted -- the uploader thread is asked for that last pass, within
 * the flush timeout; the calling thread itself does only async-signal-safe
 * work, because _exit is often called from signal handlers. */
PS_SIGSAFE static void
leaving(int status)
{
	void (*real__exit)(int) = (void (*)(int))ps_next_cached(&next__exit, "_exit");

	if (ps_process_is_self()) {
		ps_process_set_exit(status);
		ps_process_exit_now();
	}
	if (real__exit)
		real__exit(status);
	for (;;)
		;
}

PS_SIGSAFE PS_EXPORT void
_exit(int status)
{
	leaving(status);
}

PS_SIGSAFE PS_EXPORT void
_Exit(int status)
{
	leaving(status);
}
