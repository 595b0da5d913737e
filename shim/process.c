/* process.c -- process events from the hooks, forwarded to the ops that
 * init.c registered (process.h). */
#include <stdatomic.h>
#include <stddef.h>
#include <unistd.h>

#include "shim/process.h"

/* Written by the constructor and the fork child handler while the process
 * has one thread (or before the ops can be reached); read by every hook. */
static const struct ps_process_ops *ops;
static _Atomic int self_pid;  /* the profiled process; 0 = inactive */

void
ps_process_setup(const struct ps_process_ops *o, int pid)
{
	ops = o;
	atomic_store(&self_pid, pid);
}

PS_SIGSAFE int
ps_process_is_self(void)
{
	int pid = atomic_load(&self_pid);

	return pid > 0 && pid == (int)getpid();
}

int
ps_process_unprofiled(void)
{
	int pid = atomic_load(&self_pid);

	return pid < 0 || (pid > 0 && pid != (int)getpid());
}

/* Not in a vfork child (between vfork and exec, dash's way of running a
 * command): it shares the parent's memory, and what the uploader's side
 * would do there (settle the parent's birth notice, start a helper) would
 * be done to the parent's state from the wrong process. */
void
ps_process_wake(void)
{
	if (ops && ops->wake && ps_process_is_self())
		ops->wake();
}

void
ps_process_host_thread(int delta)
{
	if (ops && ops->host_thread)
		ops->host_thread(delta);
}

void
ps_process_before_exec(void)
{
	if (ops && ops->before_exec)
		ops->before_exec();
}

void
ps_process_exec_failed(void)
{
	if (ops && ops->exec_failed)
		ops->exec_failed();
}

PS_SIGSAFE void
ps_process_exit_now(void)
{
	if (ops && ops->exit_now)
		ops->exit_now();
	atomic_store(&self_pid, 0);
}

PS_SIGSAFE void
ps_process_set_exit(int status)
{
	if (ops && ops->set_exit)
		ops->set_exit(status);
}

void
ps_process_set_args(int argc, const char *const *argv)
{
	if (ops && ops->set_args)
		ops->set_args(argc, argv);
}

void
ps_process_spawn(void)
{
	if (ops && ops->spawn && ps_process_is_self())
		ops->spawn();
}

const char *
ps_process_env_entry(const char *entry)
{
	return ops && ops->env_entry && atomic_load(&self_pid) ? ops->env_entry(entry) : NULL;
}

#define ENV_NAME "PYROSHIM_HELPER="

/* 1 if s begins with ENV_NAME.  By hand: a shell's fork child calls this
 * before its exec, where a first call of strncmp through the PLT would
 * page in the loader's look-up (BENCHMARKS 14o). */
static int
env_named(const char *s)
{
	const char *n = ENV_NAME;

	while (*n && *s == *n)
		s++, n++;
	return !*n;
}

char *const *
ps_process_envp(char *const *envp, char **copy)
{
	const char *to = NULL;
	size_t i, at = 0;

	if (!envp)
		return envp;
	for (i = 0; envp[i]; i++)
		if (!to && env_named(envp[i]) && (to = ps_process_env_entry(envp[i])) != NULL)
			at = i;
	if (!to || i > PS_ENV_COPY)
		return envp;
	for (i = 0; envp[i]; i++)
		copy[i] = envp[i];
	copy[i] = NULL;
	copy[at] = (char *)to;
	return copy;
}
