/* hook_exec.c -- the exec family.
 *
 * Pending signals survive execve, but signal handlers do not: a new image
 * that does not load the shim (LD_PRELOAD removed, a static binary) would
 * be killed by a real-time signal of the shim's still pending.  So every
 * exec-family call stops the timer (and accepts any of the shim's signals
 * already pending) first, gives the kernel the program's own view of that
 * signal (blocked or ignored, if it asked: sigvirt.h), and undoes all of it
 * if the exec fails.  An exec also ends this image's profile, so it is
 * flushed first, within the flush timeout.
 *
 * glibc's execvp, execl and friends call execve internally, not through
 * the PLT, so each of them is interposed on its own.
 *
 * In a vfork child (the pid differs from the profiled process's) nothing is
 * touched: the child shares the parent's memory, and its own timer is not
 * armed anyway.
 */
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "shim/process.h"
#include "common/ps.h"
#include "shim/sampler.h"
#include "shim/sigvirt.h"
#include "shim/next.h"

#define MAX_ARGS 65536

static int
before(void)
{
	int was = -1;

	if (ps_process_is_self()) {
		/* The timer first: its last expiries go into this image's
		 * last pass. */
		was = ps_sampler_disarm();
		ps_process_before_exec();
	}
	ps_sigvirt_before_exec();
	return was;
}

static void
after(int was_armed)
{
	int saved = errno;

	ps_sigvirt_exec_failed();
	if (was_armed >= 0)
		ps_process_exec_failed();
	if (was_armed > 0)
		ps_sampler_rearm(was_armed);
	errno = saved;
}

/* Each hook's C library definition (next.h), in a slot of the file's so
 * that ps_hook_exec_resolve() can look them all up ahead. */
#define EXEC_HOOK(name, params, args)                                   \
	static void *_Atomic next_##name;                               \
	PS_EXPORT int name params                                       \
	{                                                               \
		__typeof__(name) *real =                                \
			(__typeof__(name) *)ps_next_cached(&next_##name, #name); \
		int was, rc;                                            \
		if (!real) {                                            \
			errno = ENOSYS;                                 \
			return -1;                                      \
		}                                                       \
		was = before();                                         \
		rc = real args;                                         \
		after(was);                                             \
		return rc;                                              \
	}

/* The exec family, once: the hooks and the look-up ahead are made from
 * this one list. */
#define EXEC_FAMILY(X)                                                        \
	X(execve, (const char *path, char *const argv[], char *const envp[]),  \
	  (path, argv, envp))                                                  \
	X(execv, (const char *path, char *const argv[]), (path, argv))         \
	X(execvp, (const char *file, char *const argv[]), (file, argv))        \
	X(execvpe, (const char *file, char *const argv[], char *const envp[]), \
	  (file, argv, envp))                                                  \
	X(fexecve, (int fd, char *const argv[], char *const envp[]),           \
	  (fd, argv, envp))                                                    \
	X(execveat, (int dirfd, const char *path, char *const argv[],          \
		     char *const envp[], int flags),                           \
	  (dirfd, path, argv, envp, flags))

EXEC_FAMILY(EXEC_HOOK)

/* A shell's children each call execve once, and the shell itself never
 * does: looked up at the first call, the C library's execve was looked up
 * again in every child, where dlsym pages in much of the loader
 * (BENCHMARKS 14o).  The fork prepare handler looks them up in the parent
 * instead, whose children inherit the answers. */
#define RESOLVE(name, params, args) (void)ps_next_cached(&next_##name, #name);

void
ps_hook_exec_resolve(void)
{
	EXEC_FAMILY(RESOLVE)
}

/* Count the variadic arguments after arg0, up to the terminating NULL. */
static size_t
count_args(va_list ap)
{
	size_t n = 1;

	while (n < MAX_ARGS && va_arg(ap, char *))
		n++;
	return n;
}

enum { L_PATH, L_SEARCH, L_ENV };

/* execl, execlp and execle collect their arguments and go through the
 * vector forms above, which do the disarming. */
static int
execl_common(int kind, const char *target, const char *arg0, va_list ap)
{
	char *const *envp = NULL;
	va_list cp;
	size_t n, i;

	va_copy(cp, ap);
	n = count_args(cp);
	va_end(cp);
	if (n >= MAX_ARGS) {
		errno = E2BIG;
		return -1;
	}
	char *argv[n + 1];
	argv[0] = (char *)arg0;
	for (i = 1; i < n; i++)
		argv[i] = va_arg(ap, char *);
	argv[n] = NULL;
	if (kind == L_ENV) {
		(void)va_arg(ap, char *);  /* the NULL that ends the list */
		envp = va_arg(ap, char *const *);
		return execve(target, argv, envp);
	}
	return kind == L_SEARCH ? execvp(target, argv) : execv(target, argv);
}

#define EXECL_HOOK(name, kind)                                          \
	PS_EXPORT int name(const char *target, const char *arg0, ...)   \
	{                                                               \
		va_list ap;                                             \
		int rc;                                                 \
		va_start(ap, arg0);                                     \
		rc = execl_common(kind, target, arg0, ap);              \
		va_end(ap);                                             \
		return rc;                                              \
	}

EXECL_HOOK(execl, L_PATH)
EXECL_HOOK(execlp, L_SEARCH)
EXECL_HOOK(execle, L_ENV)
