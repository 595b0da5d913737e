/* init.c -- the constructor, the destructor and the fork handlers: where
 * the shim's pieces are put together.
 *
 * Start-up order matters: the allocation hooks are resolved first (the
 * loader has been calling them already), configuration is read once,
 * libunwind is loaded and warmed up, the tables are mapped, the uploader
 * thread starts, and only then is the timer armed -- so the first sample
 * finds everything in place.  An exec'd member of a tree, and a fork child
 * of one, make their tables and join the tree's helper at their first
 * record instead (first_record).
 * Nothing here prints unless configuration is wrong or the log level
 * asks.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim/alloc.h"
#include "common/clock.h"
#include "shim/altstack.h"
#include "shim/bench.h"
#include "common/config.h"
#include "uploader/export.h"
#include "uploader/listen.h"
#include "common/guard.h"
#include "common/shmem.h"
#include "common/text.h"
#include "shim/livetab.h"
#include "common/log.h"
#include "shim/process.h"
#include "shim/sampler.h"
#include "trace/span.h"
#include "shim/sigvirt.h"
#include "shim/stacktab.h"
#include "shim/unwind.h"
#include "shim/wait.h"
#include "uploader/worker.h"
#include "shim/next.h"

void ps_hook_malloc_resolve(void);

/* Process-wide state.  Written by the constructor before the shim's thread
 * and timer exist, by the fork child handler while the child has one
 * thread, and by the first record of a program that put off joining its
 * tree (first_record: once, every signal blocked); read-only otherwise.
 * The small members first, then the export's head, from the start of a
 * page: the pages a process or a shell's fork child writes are the fewer
 * (each one a fault). */
static struct {
	/* The sample tables: where their shared mappings are (stacktab.h).
	 * A program that put off joining its tree (an exec'd image or a fork
	 * child in a tree) has none until its first record; a fork child
	 * outside a tree has fresh pages at its parent's addresses. */
	struct ps_stacktab st;
	struct ps_livetab lt;
	/* A fork child's parent's tables, still mapped: unmapped at its first
	 * record, not in its fork handler, where that cost a shell's child
	 * 8-30 us for nothing when it execs at once (BENCHMARKS 14p).  The
	 * exec or the end unmaps them otherwise.  Written by the fork child
	 * handler and by the first record (every signal blocked). */
	struct ps_stacktab stale_st;
	struct ps_livetab stale_lt;
	struct ps_export x;
	struct ps_span span; /* the run's root span, if correlation is on */
	struct ps_config cfg;
} g PS_LARGE __attribute__((aligned(4096)));

/* The environment as the constructor found it, for the configuration;
 * until it is read, getenv() (n = -1).  Written by the constructor only
 * (start). */
static struct ps_env envs = { .n = -1 };

static const char *
env(const char *name)
{
	return ps_env_get(&envs, name);
}

static const char *
base(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The executable's path, for the default application name (its base
 * name).  The kernel's AT_EXECFN is the path exec was given, for nothing;
 * /proc/self/exe resolves it, but costs a walk through this process's
 * /proc, about 15 us of every process (BENCHMARKS 14o).  They may differ
 * in the base name only when the last part of the path is a symbolic link
 * (cc for gcc-12: lstat says so) or a script (its interpreter runs, and
 * the kernel makes the interpreter argv[0]): AT_EXECFN is used when its
 * base name is argv[0]'s and it names a file. */
static void
exe_path(char *buf, size_t len)
{
	const char *fn = (const char *)getauxval(AT_EXECFN);
	struct stat st;
	ssize_t n;

	if (fn && program_invocation_name && !strcmp(base(fn), base(program_invocation_name)) &&
	    lstat(fn, &st) == 0 && S_ISREG(st.st_mode) &&
	    ps_cat(buf, len, 0, fn) < len)
		return;
	n = readlink("/proc/self/exe", buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

/* Change the environment with the C library's functions even when the
 * program defines its own setenv (bash does, and keeps its own table, which
 * it only builds in main from the environment). */
static int
env_set(const char *name, const char *value)
{
	PS_NEXT(setenv);
	PS_NEXT(unsetenv);

	if (!real_setenv || !real_unsetenv)
		return -1;
	return value ? real_setenv(name, value, 1) : real_unsetenv(name);
}

/* The configuration lines held since the start (log.h): each printed
 * unless a process of the tree printed it to the same file already
 * (PYROSHIM_SAID), so that a mistake is one line for a whole build, not
 * one per compiler.  The digests of those printed join the inherited ones
 * for the children (the newest first, as many as fit). */
static void
say_config(const struct ps_config *c)
{
	uint64_t said[PS_CONFIG_SAID_MAX];
	char list[PS_CONFIG_SAID_MAX * 17];
	size_t n = ps_log_config_release(c->config_said, c->nconfig_said, said,
					 PS_CONFIG_SAID_MAX), i, k;

	if (!n)
		return;   /* nothing said here: the inherited list is the children's */
	for (i = 0; i < c->nconfig_said && n < PS_CONFIG_SAID_MAX; i++)
		said[n++] = c->config_said[i];
	for (i = k = 0; i < n; i++)
		k = ps_cat_x64(list, sizeof(list), i ? ps_cat(list, sizeof(list), k, ",") : k,
			       said[i]);
	if (env_set("PYROSHIM_SAID", list))
		ps_debug("could not export PYROSHIM_SAID");
}

/* Absolute output directory; the default one is exported so that children
 * started in other directories write next to their parent's files. */
static void
output_dir(struct ps_config *c, int server_on, char *dir, size_t len)
{
	char cwd[PATH_MAX];
	const char *d = c->output_dir;

	dir[0] = '\0';
	if (!d[0] && server_on)
		return;  /* server only */
	if (!d[0])
		d = "pyroshim-profiles";
	if (d[0] == '/') {
		(void)ps_cat(dir, len, 0, d);
	} else if (getcwd(cwd, sizeof(cwd))) {
		if (ps_cat(dir, len, ps_cat(dir, len, ps_cat(dir, len, 0, cwd), "/"), d) >= len)
			dir[0] = '\0';
	}
	if (dir[0] && strcmp(dir, c->output_dir) && env_set("PYROSCOPE_OUTPUT_DIR", dir))
		ps_debug("could not export PYROSCOPE_OUTPUT_DIR");
}

static void
log_setup(const struct ps_config *c)
{
	struct stat st;
	int fd = -1;

	if (c->log_file[0]) {
		/* O_NONBLOCK: opening a FIFO nobody reads would otherwise block
		 * the program before main, for ever.  Only files and character
		 * devices (/dev/null, a terminal) are used: a pipe whose reader
		 * goes away would raise SIGPIPE in the program's threads. */
		fd = open(c->log_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
			  O_NONBLOCK, 0600);
		if (fd < 0 && errno == EACCES && ps_worker_tree_foreign(c)) {
			/* The tree's log, of another user (sudo -E, setpriv):
			 * its lines would be this program's stderr. */
			ps_log_setup(PS_LOG_ERROR, -1);   /* as if none were asked for */
			return;
		} else if (fd < 0) {
			ps_log_config("PYROSCOPE_LOG_FILE=%s: %s; using stderr", c->log_file,
				      strerror(errno));
		} else if (fstat(fd, &st) || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
			ps_log_config("PYROSCOPE_LOG_FILE=%s: not a file or a terminal; using stderr",
				      c->log_file);
			close(fd);
			fd = -1;
		} else {
			(void)fcntl(fd, F_SETFL, O_APPEND);  /* blocking writes again */
			/* Out of the numbers the program opens: its own first
			 * file is where it would be without the shim. */
			fd = ps_fd_park(fd);
		}
	}
	ps_log_setup(c->log_level, fd);
}

static void
shim_range(uintptr_t *lo, uintptr_t *hi)
{
	struct dl_find_object f;

	*lo = *hi = 0;
	if (_dl_find_object((void *)(uintptr_t)shim_range, &f) == 0) {
		*lo = (uintptr_t)f.dlfo_map_start;
		*hi = (uintptr_t)f.dlfo_map_end;
	}
}

/* Remove the member "pyroshim=..." from a tracestate list, in place. */
static void
drop_marker(char *ts)
{
	char out[sizeof(g.span.tracestate)] = "", *save = NULL, *m;
	size_t n = 0;

	for (m = strtok_r(ts, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
		while (*m == ' ' || *m == '\t')
			m++;
		if (!strncmp(m, "pyroshim=", 9) || !*m)
			continue;
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%s", n ? "," : "", m);
		if (n >= sizeof(out))
			return;
	}
	memcpy(ts, out, n + 1);
}

/* The run's root span: join the caller's trace (TRACEPARENT) or start one,
 * and hand this span to children through the environment, before main.
 * pyrorun marks a trace it made up with tracestate "pyroshim=root": the
 * run then becomes the root span of that trace, with the span id pyrorun
 * chose and printed, instead of the child of a span nobody exports. */
static struct ps_span *
start_trace(const struct ps_config *c)
{
	struct ps_span *sp = &g.span;
	char tp[64];
	int warned = 0, root = strstr(c->tracestate, "pyroshim=root") != NULL;

	if (!c->trace_correlation)
		return NULL;
	if (ps_span_start(sp, c->traceparent[0] ? c->traceparent : NULL,
			  c->tracestate[0] ? c->tracestate : NULL, c->app_name,
			  c->span_name[0] ? c->span_name : NULL, ps_clock_ns(CLOCK_REALTIME), &warned)) {
		ps_warn("trace correlation not started: no random ids");
		return NULL;
	}
	if (warned)
		ps_log_config("TRACEPARENT=%.64s: not a valid W3C traceparent; starting a new trace",
			      c->traceparent);
	if (root && sp->has_parent) {
		/* pyrorun made up this trace and named its root span (and
		 * tagged root_span_id with it): this run is that span. */
		memcpy(sp->span_id, sp->parent_span_id, sizeof(sp->span_id));
		sp->has_parent = 0;
		memset(sp->parent_span_id, 0, sizeof(sp->parent_span_id));
		drop_marker(sp->tracestate);
	}
	if (ps_span_child_traceparent(sp, tp, sizeof(tp)) == 0 && env_set("TRACEPARENT", tp))
		ps_debug("could not export TRACEPARENT");
	if (env_set("TRACESTATE", sp->tracestate[0] ? sp->tracestate : NULL))
		ps_debug("could not export TRACESTATE");
	ps_debug("trace correlation: %s (span %s)", tp, sp->name);
	return sp;
}

PS_SIGSAFE static void
exit_now(void)
{
	(void)ps_sampler_disarm();
	ps_worker_exit(g.cfg.flush_timeout_ns);
}

static void
before_exec(void)
{
	ps_guard_enter();
	ps_worker_flush(g.cfg.flush_timeout_ns, 0);
	ps_worker_exec_grid(ps_sampler_grid());
	ps_guard_leave();
}

static void
exec_failed(void)
{
	ps_worker_exec_grid(0);
	ps_worker_exec_failed();
}

static void wake_leader(void);

/* What the host side's events do (shim/process.h). */
static const struct ps_process_ops ops = {
	.wake = ps_worker_poke,
	.host_thread = ps_worker_host_thread,
	.before_exec = before_exec,
	.exec_failed = exec_failed,
	.exit_now = exit_now,
	.set_exit = ps_worker_set_exit,
	.set_args = ps_worker_set_args,
	.spawn = wake_leader,
	.env_entry = ps_worker_env_entry,
};

/* 1 once the constructor started profiling in this image.  Written by the
 * constructor only. */
static int active;

/* Nothing is recorded any more: the tables could not be made. */
PS_SIGSAFE static void
profiling_off(void)
{
	ps_alloc_off();
	ps_wait_off();
	(void)ps_sampler_disarm();
}

PS_SIGSAFE static void first_record(void);

/* A fork child that puts off joining its tree: its parent's tables (none
 * if the parent put it off too) are not its own, and its own are made at
 * its first record.  Allocation sampling stops looking in the parent's
 * live table before it is unmapped. */
static void
drop_tables(void)
{
	ps_stacktab_publish(NULL);
	if (g.st.c) {   /* a grandparent's, if any, went at the parent's join */
		g.stale_st = g.st;
		g.stale_lt = g.lt;
	}
	memset(&g.st, 0, sizeof(g.st));
	memset(&g.lt, 0, sizeof(g.lt));
	if (ps_alloc_mode() == PS_ALLOC_ON)
		ps_alloc_start(&g.lt, g.cfg.alloc_sample_bytes);
	ps_stacktab_defer(first_record);
}

/* The parent's tables, no longer looked at by anything (drop_tables). */
PS_SIGSAFE static void
free_stale(void)
{
	ps_shmem_free(g.stale_st.c, g.stale_st.map_len);
	ps_shmem_free(g.stale_lt.c, g.stale_lt.map_len);
	g.stale_st.c = NULL;
	g.stale_lt.c = NULL;
}

static void
fork_child(void)
{
	int rc;

	ps_unwind_fork_child();
	if (!active)
		return;
	ps_process_setup(&ops, (int)getpid());
	ps_export_abandon(&g.x);
	g.x.pid = getpid();
	rc = ps_worker_child();
	if (rc > 0) {
		drop_tables();
	} else if (rc < 0 || (g.st.c && (ps_stacktab_reset(&g.st) ||
					 (g.x.on[PS_FAMILY_ALLOC] && ps_livetab_reset(&g.lt))))) {
		profiling_off();
		return;
	} else {
		ps_worker_child_announce();
	}
	ps_hook_thread_adopt();
	ps_sampler_child();
}

/* A child or a thread is about to be made, which is to join this
 * program's tree: a leader that put off its helper makes its first
 * record's tables and starts it now (ps_worker_put_off). */
static void
wake_leader(void)
{
	ps_guard_enter();
	if (ps_worker_put_off()) {
		ps_worker_wake("its first child or thread");
		(void)ps_stacktab_current();
		ps_worker_wake("its first child or thread");
	}
	ps_worker_say();
	ps_guard_leave();
}

static void
on_fork_prepare(void)
{
	int saved = errno;

	ps_unwind_fork_prepare();
	if (active) {
		ps_hook_exec_resolve();
		ps_hook_exit_resolve();
		ps_worker_fork_prepare();
	}
	errno = saved;
}

/* A process the shim does not profile still has its hooks: a fork
 * child's first exec or exit would look the C library's definition up
 * (dlsym), in every child of a shell, where the parent never calls them.
 * Looked up in the parent, once, the children inherit them: about 30 us
 * and 11 page faults less per child of a bash loop (BENCHMARKS 14y). */
static void
on_fork_prepare_unprofiled(void)
{
	int saved = errno;

	ps_hook_exec_resolve();
	ps_hook_exit_resolve();
	errno = saved;
}

/* The parent sees fork's errno too. */
static void
on_fork_parent(void)
{
	int saved = errno;

	ps_unwind_fork_parent();
	if (active)
		ps_worker_forked();
	errno = saved;
}

/* The child sees fork's errno: the system calls above may fail (a tree
 * whose helper is gone answers kill(2) with ESRCH). */
static void
on_fork_child(void)
{
	int saved = errno;

	fork_child();
	errno = saved;
}

/* The stack table's size: PYROSCOPE_STACK_MEMORY, but under a finite
 * RLIMIT_AS (ulimit -v) at most a 64th of it, and no less than the
 * variable's least: the tables take from the program's address space, and
 * 11 MiB of them made programs fail that fit without the shim (Python at
 * its start under 24 MB; a 35 MB bytearray under 60 MB).  Async-signal-
 * safe. */
PS_SIGSAFE static uint64_t
stack_memory(const struct ps_config *c)
{
	struct rlimit as;
	uint64_t share;

	if (getrlimit(RLIMIT_AS, &as) || as.rlim_cur == RLIM_INFINITY)
		return c->stack_memory;
	share = (uint64_t)as.rlim_cur / 64;
	if (share < PS_STACK_MEMORY_MIN)
		share = PS_STACK_MEMORY_MIN;
	return share < c->stack_memory ? share : c->stack_memory;
}

/* The sample tables, mapped; none when one cannot be.  Async-signal-safe
 * (first_record). */
PS_SIGSAFE static int
make_tables(const struct ps_config *c)
{
	int rc = ps_stacktab_init(&g.st, stack_memory(c));

	if (rc)
		return rc;
	if (c->alloc_enabled) {
		rc = ps_livetab_init(&g.lt);
		if (rc) {
			ps_shmem_free(g.st.c, g.st.map_len);
			g.st.c = NULL;
			return rc;
		}
		ps_alloc_start(&g.lt, c->alloc_sample_bytes);
	}
	return 0;
}

/* The first record of a program that put off joining its tree
 * (ps_worker_defer), in whatever thread or handler makes it: the tables,
 * the join, then the tables published.  Every signal is blocked
 * meanwhile, so that no handler of this thread records half-way.  A
 * record of another thread meanwhile finds no table and is dropped: the
 * program has one thread until its first pthread_create, which joins
 * first (hook_thread.c). */
PS_SIGSAFE static void
first_record(void)
{
	sigset_t all, old;
	int made, saved = errno;

	(void)sigfillset(&all);
	(void)ps_sigvirt_real_mask(SIG_BLOCK, &all, &old);
	ps_guard_enter();   /* its sockets' waits are the shim's */
	if (ps_worker_defer_take()) {
		ps_stacktab_defer(NULL);   /* profiling_off's last sample comes here */
		free_stale();
		made = make_tables(&g.cfg) == 0;
		ps_worker_join_deferred(made);
		if (made)
			ps_stacktab_publish(&g.st);
		else
			profiling_off();
	}
	ps_guard_leave();
	(void)ps_sigvirt_real_mask(SIG_SETMASK, &old, NULL);
	errno = saved;
}

static void
start_export(struct ps_config *c)
{
	struct ps_export *x = &g.x;
	char digest[17];
	int rc;

	/* g is zero (static; once per image): not cleared, which would fault
	 * in the 15 pages of x in every process (BENCHMARKS 14n). */
	x->cfg = c;
	x->st = &g.st;
	x->lt = c->alloc_enabled ? &g.lt : NULL;
	x->on[PS_FAMILY_CPU] = c->cpu_enabled;
	x->on[PS_FAMILY_ALLOC] = c->alloc_enabled;
	x->on[PS_FAMILY_BLOCK] = c->block_enabled;
	x->on[PS_FAMILY_MUTEX] = c->mutex_enabled;
	x->pid = getpid();
	(void)ps_cat(x->app, sizeof(x->app), 0, c->app_name);
	shim_range(&x->skip_lo, &x->skip_hi);
	x->entry = (uintptr_t)getauxval(AT_ENTRY);
	ps_export_setup(x);
	ps_export_set_span(x, start_trace(c));
	(void)ps_remote_setup(&x->remote, c, x->span, x->start_ns);
	/* A server that cannot be used falls back to local files. */
	output_dir(c, x->remote.on, x->dir, sizeof(x->dir));
	rc = ps_export_check_dir(x);
	/* sudo -E, setpriv, gosu in a profiled tree: the directory is the
	 * tree's, and its user's; not a mistake of this program's. */
	if (rc && ps_worker_tree_foreign(c))
		ps_info("PYROSCOPE_OUTPUT_DIR=%s: %s: the directory of a process tree of another "
			"user; local profiles are not written", x->dir, strerror(-rc));
	else if (rc)
		ps_export_refuse_dir(x->dir, rc);
	if (x->nlabels)
		ps_info("trace_id %s, root span_id %s", x->trace_hex, x->span_hex);
	say_config(c);  /* before the helper: a copy must hold nothing */
	if (ps_worker_start(x, c->upload_interval_ns, c->flush_timeout_ns)) {
		ps_listen_drop();   /* no helper will serve it */
		ps_warn("uploader not started: profiles are written at exit only");
	}
	/* Children join this process's tree: the one it joined or leads.
	 * A tree's first program says which address is its: the children
	 * that inherit the same one do not listen. */
	if (strcmp(ps_worker_tree(), c->tree_helper)) {
		if (env_set("PYROSHIM_HELPER", ps_worker_tree()[0] ? ps_worker_tree() : NULL))
			ps_debug("could not export PYROSHIM_HELPER");
		digest[0] = '\0';
		if (ps_worker_tree()[0] && c->pprof_address[0])
			(void)ps_cat_x64(digest, sizeof(digest), 0,
					 ps_config_digest(c->pprof_address));
		if ((digest[0] || c->tree_pprof) &&
		    env_set("PYROSHIM_PPROF", digest[0] ? digest : NULL))
			ps_debug("could not export PYROSHIM_PPROF");
	}
}

/* The info line of what this process profiles: the kinds that are on once
 * started (CPU may have failed to start), each with its rate, and where the
 * profiles go.  Built with ps_cat, as say_config: cut to fit, never past
 * the buffer. */
static void
say_profiling(const struct ps_config *c)
{
	char kinds[256];
	const int *on = g.x.on;
	size_t k = 0;

	kinds[0] = '\0';
	if (on[PS_FAMILY_CPU])
		k = ps_cat(kinds, sizeof(kinds), ps_cat_u(kinds, sizeof(kinds),
			   ps_cat(kinds, sizeof(kinds), k, ", CPU at "), c->sample_rate), " Hz");
	if (on[PS_FAMILY_ALLOC])
		k = ps_cat(kinds, sizeof(kinds), ps_cat_u(kinds, sizeof(kinds),
			   ps_cat(kinds, sizeof(kinds), k, ", allocations every "),
			   (unsigned long)c->alloc_sample_bytes), " bytes");
	if (on[PS_FAMILY_BLOCK] || on[PS_FAMILY_MUTEX])
		(void)ps_cat(kinds, sizeof(kinds), ps_cat_u(kinds, sizeof(kinds),
			     ps_cat(kinds, sizeof(kinds), k,
				    on[PS_FAMILY_BLOCK] && on[PS_FAMILY_MUTEX] ?
				    ", block and mutex waits of " :
				    on[PS_FAMILY_BLOCK] ? ", block waits of " : ", mutex waits of "),
			     (unsigned long)(c->block_rate_ns / 1000)), " us or more");
	ps_info("profiling %s (pid %d): %s; output %s", c->app_name, (int)getpid(),
		kinds[0] ? kinds + 2 : "nothing",
		g.x.dir[0] ? g.x.dir : g.x.remote.on ? g.x.remote.base : "nowhere");
}

static void
start(void)
{
	char exe[PATH_MAX];
	struct ps_config *c = &g.cfg;
	int rc, deferred;

	ps_log_config_hold();
	exe_path(exe, sizeof(exe));
	ps_env_scan(&envs, environ);
	(void)ps_config_load(c, env, exe);
	log_setup(c);
	if (!c->enabled ||
	    (!c->cpu_enabled && !c->alloc_enabled && !c->block_enabled && !c->mutex_enabled)) {
		say_config(c);
		/* (With PYROSCOPE_ENABLED=false nothing was read, the log
		 * included: nothing prints.) */
		ps_info("not profiling %s (pid %d): every kind of profile is off", c->app_name,
			(int)getpid());
		ps_process_setup(NULL, -1);
		(void)pthread_atfork(on_fork_prepare_unprofiled, NULL, NULL);  /* else only slower */
		return;
	}
	ps_unwind_init();
	/* Before the tree is looked at: a program that holds the address
	 * serves /debug/pprof itself; one of a tree that finds it in use
	 * joins (ps_worker_defer).  One that inherited its tree's address
	 * never tries: in the gap of an exec of the tree's first program,
	 * the port is free for its next image. */
	if (ps_worker_pprof_theirs(c))
		ps_info("PYROSCOPE_PPROF_ADDRESS=%s: the program that started this process's "
			"tree listens on it; this program does not", c->pprof_address);
	else if (ps_listen_configure(c->pprof_address) == 0)
		ps_listen_bind();
	deferred = ps_worker_defer(c);
	if (deferred) {
		if (c->alloc_enabled)   /* sampling, into tables made at the first sample */
			ps_alloc_start(&g.lt, c->alloc_sample_bytes);
	} else if ((rc = make_tables(c)) != 0) {
		say_config(c);
		ps_listen_drop();   /* no helper will serve it */
		ps_warn("profiler not started: %s", strerror(-rc));
		ps_process_setup(NULL, -1);
		return;
	} else {
		ps_stacktab_publish(&g.st);
	}
	start_export(c);
	if (deferred)
		ps_stacktab_defer(first_record);
	if (pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child))
		ps_warn("fork handler not installed");
	ps_hook_thread_adopt();  /* the main thread is one of the program's */
	active = 1;
	ps_process_setup(&ops, (int)getpid());
	if (c->cpu_enabled) {
		ps_altstack_thread_start();
		rc = ps_sampler_start(c->sample_rate, c->cpu_timer, c->cpu_signal,
				      ps_worker_take_grid());
		if (rc)
			ps_warn("CPU profiling not started: %s", strerror(-rc));
		if (rc)
			g.x.on[PS_FAMILY_CPU] = 0;
	}
	if (c->block_enabled || c->mutex_enabled)
		ps_wait_start((c->block_enabled ? PS_WAIT_BLOCK : 0) |
			      (c->mutex_enabled ? PS_WAIT_MUTEX : 0), c->block_rate_ns);
	if (ps_log_level() >= PS_LOG_INFO)
		say_profiling(c);
}

/* main finds errno as it would without the shim: the start-up's failed
 * calls (a directory not made yet, a tree's bell out of sight) are ours. */
__attribute__((constructor)) static void
ps_init(void)
{
	int saved = errno;

	ps_hook_malloc_resolve();
	/* setuid/setgid/capabilities: never act on the environment. */
	if (getauxval(AT_SECURE)) {
		ps_alloc_off();
		errno = saved;
		return;
	}
	ps_guard_enter();
	start();
	if (!active || !g.cfg.alloc_enabled)
		ps_alloc_off();
	ps_guard_leave();
	errno = saved;
}

__attribute__((destructor)) static void
ps_fini(void)
{
	if (!ps_process_is_self())
		return;
	ps_guard_enter();
	ps_sampler_stop();
	/* Only when it is printed: it reads every live signal stack. */
	if (ps_log_level() >= PS_LOG_DEBUG)
		ps_debug("signal stacks: at most %zu of %u bytes used", ps_altstack_max_used(),
			 PS_ALTSTACK_SIZE);
	ps_worker_flush(g.cfg.flush_timeout_ns, 1);
	ps_bench_write(g.x.dir, g.x.app, (int)getpid());
	ps_process_setup(&ops, -1);
	ps_guard_leave();
}

/* ---- the library run as a program: the tree's helper ------------------ *
 *
 * The helper is a fresh image of this very file, exec'd with the leader's
 * descriptors (uploader/worker.c, exec_child), not a copy of the program:
 * it holds none of the program's pages (the program's writes after the
 * spawn copy none), none of its locks, and none of its memory when the
 * program has grown, so it can be started late, from any context.  The
 * loader runs a program's initializers only from its libc start-up,
 * which this entry never calls: ps_init does not run here, the C
 * library's own set-up does (the loader runs it for every library it
 * loads). */
#if defined(__x86_64__)
const char ps_interp[] __attribute__((section(".interp"), used)) = "/lib64/ld-linux-x86-64.so.2";
__asm__(".text\n"
	".globl ps_image_entry\n"
	".hidden ps_image_entry\n"
	".type ps_image_entry,@function\n"
	"ps_image_entry:\n"
	"	xor %ebp, %ebp\n"       /* the outermost frame, for unwinders */
	"	mov %rsp, %rdi\n"       /* argc, argv..., NULL, envp..., NULL */
	"	and $-16, %rsp\n"
	"	call ps_image_start\n"
	"	hlt\n");
#elif defined(__aarch64__)
const char ps_interp[] __attribute__((section(".interp"), used)) = "/lib/ld-linux-aarch64.so.1";
__asm__(".text\n"
	".globl ps_image_entry\n"
	".hidden ps_image_entry\n"
	".type ps_image_entry,%function\n"
	"ps_image_entry:\n"
	"	mov x29, #0\n"
	"	mov x30, #0\n"
	"	mov x0, sp\n"
	"	bl ps_image_start\n"
	"	brk #0\n");
#endif

PS_HIDDEN __attribute__((noreturn, used)) void ps_image_start(long *sp);

void
ps_image_start(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);

	environ = argv + argc + 1;
	ps_hook_malloc_resolve();
	ps_process_setup(NULL, -1);   /* the hooks are the C library's here */
	ps_worker_image(argc, argv);
}
