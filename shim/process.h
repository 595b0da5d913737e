/* process.h -- the one door from the host side to the rest of the shim.
 *
 * The hooks in shim/ never call the uploader: they report process events
 * here, and init/init.c -- the one file that wires the layers together --
 * registers what each event does (struct ps_process_ops).  So the host side
 * depends on nothing above it, and the uploader can change (a thread, a
 * helper process) without touching a hook.
 *
 * Until ops are registered, or when the shim is inactive in this process,
 * every event is a no-op.
 */
#ifndef PS_PROCESS_H
#define PS_PROCESS_H

#include "common/ps.h"

/* What the composition layer does for each event.  Every member may be
 * NULL.  The table must outlive the process (a static const). */
struct ps_process_ops {
	/* The program allocates (a sample) or starts a thread: a fork
	 * child's uploader may be due.  Context: host thread, guard held. */
	void (*wake)(void);
	/* A thread of the program starts (+1) or ends (-1).
	 * Context: host thread, outside signal context. */
	void (*host_thread)(int delta);
	/* An exec is about to replace this image; or it failed.
	 * Context: host thread. */
	void (*before_exec)(void);
	void (*exec_failed)(void);
	/* _exit/_Exit: the last pass, bounded by the flush timeout.
	 * Context: any thread; must be async-signal-safe. */
	void (*exit_now)(void);
	/* The run's exit status and command line, for its span.
	 * Context: host thread; async-signal-safe (plain stores). */
	void (*set_exit)(int status);
	void (*set_args)(int argc, const char *const *argv);
	/* The program is about to make a child (fork, vfork, posix_spawn,
	 * system, popen) or a thread: a leader that put off its helper starts
	 * it now, so that the child joins its tree.  Context: host thread,
	 * outside signal context, holding none of the C library's locks. */
	void (*spawn)(void);
	/* What an exec is to pass on in place of the environment entry
	 * `entry` ("PYROSHIM_HELPER=..."), or NULL to pass it as it is.
	 * Read-only: also called in a vfork child, which shares the parent's
	 * memory.  Context: the exec and spawn hooks. */
	const char *(*env_entry)(const char *entry);
};

/* Register the ops and mark the calling process as the profiled one (pid);
 * pid -1 marks it as one the shim decided not to profile, or no longer
 * profiles (its destructor ran).  Before the constructor decides (pid 0,
 * the start: other libraries' constructors run first), neither holds.
 * Context: constructor, fork child, destructor. */
void ps_process_setup(const struct ps_process_ops *ops, int pid);

/* 1 if the caller runs in the process the shim initialised (or in a fork
 * child the shim has adopted); 0 in a vfork child or a child made by a raw
 * clone, where the shim must not touch shared state.
 * Context: any thread; async-signal-safe. */
int ps_process_is_self(void) PS_SIGSAFE;
/* 1 if the shim does not profile the calling process: the constructor
 * decided so (PYROSCOPE_ENABLED=false, every profile type off, no tables),
 * the destructor ran, or this is another process than the one it
 * initialised (a helper, a vfork child).  The threads such a process
 * starts are the C library's alone (hook_thread.c).
 * Context: any thread. */
int ps_process_unprofiled(void);

/* The events; each forwards to its op when the shim is active here (wake:
 * and in this process, not in a vfork child sharing its memory). */
void ps_process_wake(void);
void ps_process_host_thread(int delta);
void ps_process_before_exec(void);
void ps_process_exec_failed(void);
void ps_process_exit_now(void) PS_SIGSAFE;
void ps_process_set_exit(int status) PS_SIGSAFE;
void ps_process_set_args(int argc, const char *const *argv);
void ps_process_spawn(void);
/* env_entry, forwarded in any process the shim was loaded in (a vfork
 * child too).  NULL when there is nothing to change. */
const char *ps_process_env_entry(const char *entry);
/* envp with the entry ps_process_env_entry changes changed: envp itself,
 * or a copy into `copy` (PS_ENV_COPY + 1 entries, on the caller's stack:
 * no allocation in a vfork child).  A longer environment passes the
 * tree's name as it is: its programs then lead trees of their own. */
#define PS_ENV_COPY 1024
char *const *ps_process_envp(char *const *envp, char **copy);

/* Count the calling thread as one of the program's (the main thread at
 * start-up, the forking thread in a fork child).  Defined in hook_thread.c. */
void ps_hook_thread_adopt(void);

/* Look up the C library's exec family, exit and _exit now, in a process
 * about to fork, so that its children do not (hook_exec.c).  Context: a
 * fork prepare handler, or any thread outside signal context.  Defined in
 * hook_exec.c and hook_exit.c. */
void ps_hook_exec_resolve(void);
void ps_hook_exit_resolve(void);

#endif
