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
 *
 * Every exec, and posix_spawn (whose child glibc execs without a hook),
 * passes the tree's whole name on (ps_process_env_entry): a program that
 * leads its tree exports the name before it has a helper, and a shell or
 * make builds its children's environment from what it read at its start.
 * Every way of making a child -- fork, vfork, posix_spawn, system, popen
 * -- starts that helper first (ps_process_spawn), as pthread_create does.
 */
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shim/process.h"
#include "common/ps.h"
#include "shim/sampler.h"
#include "shim/sigvirt.h"
#include "shim/next.h"

#define MAX_ARGS 65536

extern char **environ;

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
 * that ps_hook_exec_resolve() can look them all up ahead.  `env`, after
 * before() (which may start the helper), passes the tree's name on: it
 * changes envp, or makes the call itself with a changed copy of environ
 * (which is the program's: a shell frees what it finds there) and is then
 * true. */
#define EXEC_HOOK(name, params, args, env)                              \
	static void *_Atomic next_##name;                               \
	PS_EXPORT int name params                                       \
	{                                                               \
		__typeof__(name) *real =                                \
			(__typeof__(name) *)ps_next_cached(&next_##name, #name); \
		char *copy[PS_ENV_COPY + 1];                            \
		char *const *e;                                         \
		int was, rc = -1;                                       \
		if (!real) {                                            \
			errno = ENOSYS;                                 \
			return -1;                                      \
		}                                                       \
		was = before();                                         \
		if (!(env))                                             \
			rc = real args;                                 \
		after(was);                                             \
		return rc;                                              \
	}

/* The environ family's call with envp e, through the hook's slot of the
 * envp form (defined above it in the list). */
#define WITH_ENV(form, ...)                                                    \
	((e = ps_process_envp(environ, copy)) != environ &&                    \
	 (rc = ((__typeof__(form) *)ps_next_cached(&next_##form, #form))(__VA_ARGS__), 1))
#define ENVP ((void)e, envp = ps_process_envp(envp, copy), 0)

/* The exec family, once: the hooks and the look-up ahead are made from
 * this one list. */
#define EXEC_FAMILY(X)                                                        \
	X(execve, (const char *path, char *const argv[], char *const envp[]),  \
	  (path, argv, envp), ENVP)                                            \
	X(execvpe, (const char *file, char *const argv[], char *const envp[]), \
	  (file, argv, envp), ENVP)                                            \
	X(execv, (const char *path, char *const argv[]), (path, argv),         \
	  WITH_ENV(execve, path, argv, e))                                     \
	X(execvp, (const char *file, char *const argv[]), (file, argv),        \
	  WITH_ENV(execvpe, file, argv, e))                                    \
	X(fexecve, (int fd, char *const argv[], char *const envp[]),           \
	  (fd, argv, envp), ENVP)                                              \
	X(execveat, (int dirfd, const char *path, char *const argv[],          \
		     char *const envp[], int flags),                           \
	  (dirfd, path, argv, envp, flags), ENVP)

EXEC_FAMILY(EXEC_HOOK)

/* A shell's children each call execve once, and the shell itself never
 * does: looked up at the first call, the C library's execve was looked up
 * again in every child, where dlsym pages in much of the loader
 * (BENCHMARKS 14o).  The fork prepare handler looks them up in the parent
 * instead, whose children inherit the answers. */
#define RESOLVE(name, params, args, env) (void)ps_next_cached(&next_##name, #name);

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

/* posix_spawn and posix_spawnp: glibc's child execs without going through
 * a hook (its timer and signals are its own: nothing to disarm), so these
 * only start a leader's helper and pass the tree's name on.  The program
 * finds errno as the C library leaves it. */
#define SPAWN_HOOK(name)                                                      \
	static void *_Atomic next_##name;                                     \
	PS_EXPORT int name(pid_t *pid, const char *path,                      \
			   const posix_spawn_file_actions_t *fa,              \
			   const posix_spawnattr_t *attr, char *const argv[],  \
			   char *const envp[])                                 \
	{                                                                     \
		__typeof__(name) *real =                                      \
			(__typeof__(name) *)ps_next_cached(&next_##name, #name); \
		char *copy[PS_ENV_COPY + 1];                                     \
		int saved = errno;                                            \
		if (!real)                                                    \
			return ENOSYS;                                        \
		ps_process_spawn();                                           \
		errno = saved;                                                \
		return real(pid, path, fa, attr, argv, ps_process_envp(envp, copy)); \
	}

SPAWN_HOOK(posix_spawn)
SPAWN_HOOK(posix_spawnp)

/* fork: before the C library's, which runs the fork handlers holding its
 * lock of them (a helper forked from the prepare handler would find it
 * held, and hang in the first library it loads that registers its own). */
PS_EXPORT pid_t
fork(void)
{
	PS_NEXT(fork);
	int saved = errno;

	if (!real_fork) {
		errno = ENOSYS;
		return -1;
	}
	ps_process_spawn();
	errno = saved;
	return real_fork();
}

/* system and popen: glibc makes their child without a hook. */
PS_EXPORT int
system(const char *cmd)
{
	PS_NEXT(system);
	int saved = errno;

	if (!real_system)
		return -1;
	if (cmd)
		ps_process_spawn();
	errno = saved;
	return real_system(cmd);
}

PS_EXPORT FILE *
popen(const char *cmd, const char *mode)
{
	PS_NEXT(popen);
	int saved = errno;

	if (!real_popen) {
		errno = ENOSYS;
		return NULL;
	}
	ps_process_spawn();
	errno = saved;
	return real_popen(cmd, mode);
}

/* vfork: the C library's, reached by a jump after ps_process_spawn: a
 * vfork child returns into its caller's frame, so no frame of ours may
 * stand between (a C wrapper's would be the child's to overwrite, and
 * its return the parent's to find gone).  The look-up is made, and errno
 * kept, here.  x86-64, as the unwinder. */
__attribute__((visibility("hidden"), used)) void *
ps_hook_vfork_prepare(void)
{
	static void *_Atomic next_vfork;
	void *real = ps_next_cached(&next_vfork, "vfork");
	int saved = errno;

	ps_process_spawn();
	errno = saved;
	return real ? real : (void *)(uintptr_t)fork;   /* ours: fork does what vfork may */
}

__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	endbr64\n"
	"	sub $8, %rsp\n"            /* the stack 16-aligned for the call */
	"	call ps_hook_vfork_prepare\n"
	"	add $8, %rsp\n"
	"	jmp *%rax\n"               /* the caller's return address on top */
	".size vfork, .-vfork\n");
