/* worker.c -- the uploader's loop, in a helper process or a thread.
 * See worker.h. */
#include "uploader/worker.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "common/guard.h"
#include "common/log.h"
#include "common/shmem.h"
#include "shim/alloc.h"
#include "shim/bench.h"
#include "shim/stacktab.h"
#include "shim/wait.h"
#include "uploader/listen.h"
#include "uploader/symbols.h"

enum { REQ_NONE, REQ_FINAL, REQ_EXEC };
#define MAX_ARGS 256
/* The loop's stack: libdw walks DWARF scopes recursively (uploader/dwarf.c).
 * Reserved, not touched: only what is used becomes resident. */
#define HELPER_STACK (8u << 20)
/* What a pass may spend completing the symbol cache's functions
 * (symbols.h): one walk of each function's DWARF, once per function ever
 * (the generator's first run: 7 ms for all of them). */
#define CACHE_FILL_NS (250ull * 1000000)

/* The control block, shared between the program and the helper
 * (MAP_SHARED, so semaphores are process-shared).  The program writes the
 * requests and the run's exit status; the loop answers. */
struct ctl {
	sem_t wake;                 /* program -> loop: a request */
	sem_t done;                 /* loop -> program: the requested pass is over */
	_Atomic int req;            /* REQ_*, taken by the loop */
	_Atomic int exec_pending;   /* an exec is under way (program side) */
	_Atomic uint64_t deadline;  /* CLOCK_MONOTONIC, for the requested pass */
	_Atomic int has_exit, exit_code;
	_Atomic int quit;           /* thread mode: the program's last thread ended */
	_Atomic int host_threads;   /* thread mode: the program's threads alive */
	_Atomic int helper_pid;     /* written by the middle process */
	_Atomic int argc;           /* published after args */
	char args[4096];            /* NUL-separated */
};

/* Written by ps_worker_start / ps_worker_child while the process has one
 * thread, read-only after. */
static struct ctl *c;
static struct ps_export *x;
static uint64_t interval, flush_timeout;
static int helper;                 /* 1: the loop runs in a helper process */
static pid_t host;                 /* the profiled process */
/* Thread mode: protects the export state between the worker thread and
 * the exiting thread's last pass. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int running;                /* a worker thread exists */
/* A fork child's uploader is started at its first allocation sample,
 * thread start or exit, not in the fork handler: a child that only calls
 * exec (a shell's) never pays for one.  Set by ps_worker_child. */
static _Atomic int due;
/* 1 in the process whose constructor started the uploader, 0 in a fork
 * child: only the former serves /debug/pprof (listen.h).  Written as
 * `due`. */
static int listen_here;

PS_SIGSAFE static struct timespec
to_ts(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	return ts;
}

static uint64_t
min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

PS_SIGSAFE static int
ctl_new(void)
{
	struct ctl *m = ps_shmem_new(sizeof(*m));

	if (!m)
		return -ENOMEM;
	if (sem_init(&m->wake, 1, 0) || sem_init(&m->done, 1, 0)) {
		ps_shmem_free(m, sizeof(*m));
		return -errno;
	}
	atomic_store(&m->host_threads, 1);
	c = m;
	return 0;
}

/* ---- the last pass --------------------------------------------------- */

/* The exit status and command line the program reported, into the export
 * state.  A program killed by a signal reported none: the status is then
 * read from the zombie if it is still there, else left unknown (-1). */
static void
take_exit_info(int dead)
{
	static const char *argv[MAX_ARGS + 1];
	int argc = atomic_load_explicit(&c->argc, memory_order_acquire), i;
	const char *p = c->args;

	for (i = 0; i < argc && i < MAX_ARGS && p < c->args + sizeof(c->args); i++) {
		argv[i] = p;
		p += strnlen(p, (size_t)(c->args + sizeof(c->args) - p)) + 1;
	}
	argv[i] = NULL;
	x->argc = i;
	x->argv = i ? argv : NULL;
	x->exit_code = atomic_load(&c->has_exit) ? atomic_load(&c->exit_code) : dead ? -1 : 0;
}

static void
last_pass(uint64_t deadline, int end, int dead)
{
	(void)ps_export_run(x, 1);
	if (end) {
		take_exit_info(dead);
		ps_export_end_span(x);
	}
	ps_export_send(x, 1, deadline, &lock);
}

/* ---- the helper's view of the program -------------------------------- */

/* 1 once the program is gone (its pidfd is readable). */
static int
host_gone(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

/* The inode of the control block's mapping: after a successful exec the
 * program's address space no longer holds it. */
static unsigned long ctl_inode;

static unsigned long
mapping_inode(pid_t pid, uintptr_t addr, int *found)
{
	char path[64], line[512];
	unsigned long lo, hi, ino = 0;
	FILE *f;

	*found = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &ino) != 3)
			continue;
		if (addr ? (lo == addr) : (ino == ctl_inode && strstr(line, "/dev/zero"))) {
			*found = 1;
			break;
		}
	}
	fclose(f);
	return *found ? ino : 0;
}

/* After an exec request: 1 when the image that made it is gone. */
static int
image_gone(void)
{
	int found;

	if (!ctl_inode)
		ctl_inode = mapping_inode(getpid(), (uintptr_t)c, &found);
	if (!ctl_inode)
		return 1;  /* cannot tell: the pass is done, end */
	(void)mapping_inode(host, 0, &found);
	return !found;
}

/* The helper's last pass is bounded too: if it hangs (a lock it copied
 * from the program held, a server that never answers), SIGALRM's default
 * action ends it a few seconds past the flush timeout. */
static void
watchdog(void)
{
	sigset_t alrm;

	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	(void)syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &alrm, NULL, _NSIG / 8);
	(void)alarm((unsigned)(flush_timeout / 1000000000ull) + 5);
}

static void
helper_end(void)
{
	struct rusage ru;

	/* What the uploader cost, apart from the program (bench/ reads it). */
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		ps_debug("uploader: helper used %lld ms of CPU, peak RSS %ld KiB",
			 (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
			 (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000, ru.ru_maxrss);
	/* Never the program's exit handlers or stdio buffers. */
	syscall(SYS_exit_group, 0);
	for (;;)
		;
}

/* ---- the loop -------------------------------------------------------- */

static void
loop(int pidfd)
{
	uint64_t next = ps_clock_ns(CLOCK_MONOTONIC) + interval, wake_at, now;
	struct timespec ts;
	int req;

	for (;;) {
		wake_at = min_u64(next, ps_export_next_due(x));
		if (pidfd >= 0)
			wake_at = min_u64(wake_at, ps_clock_ns(CLOCK_MONOTONIC) + PS_WORKER_POLL_MS * 1000000ull);
		ts = to_ts(wake_at);
		(void)sem_clockwait(&c->wake, CLOCK_MONOTONIC, &ts);
		pthread_mutex_lock(&lock);
		req = atomic_exchange(&c->req, REQ_NONE);
		if (req == REQ_FINAL && pidfd >= 0)
			watchdog();
		if (req != REQ_NONE) {
			last_pass(atomic_load(&c->deadline), req == REQ_FINAL, 0);
			sem_post(&c->done);
			/* The program no longer waits: now the cache. */
			ps_export_save_symbols(x, req == REQ_FINAL, CACHE_FILL_NS);
			if (req == REQ_FINAL) {
				pthread_mutex_unlock(&lock);
				return;
			}
		}
		if (pidfd >= 0 && host_gone(pidfd)) {
			/* Killed, or ended without a word (a raw exit_group,
			 * as Go programs end): everything sampled is here. */
			watchdog();
			if (!atomic_load(&c->exec_pending)) {
				last_pass(ps_clock_ns(CLOCK_MONOTONIC) + flush_timeout, 1, 1);
				ps_export_save_symbols(x, 1, CACHE_FILL_NS);
				/* The bench build's handler timings, which the
				 * program's destructor did not write. */
				ps_bench_write(x->dir, x->app, (int)host);
			}
			pthread_mutex_unlock(&lock);
			return;
		}
		if (pidfd >= 0 && atomic_load(&c->exec_pending) && image_gone()) {
			pthread_mutex_unlock(&lock);
			return;
		}
		if (atomic_load(&c->quit)) {
			pthread_mutex_unlock(&lock);
			return;
		}
		now = ps_clock_ns(CLOCK_MONOTONIC);
		if (now >= next) {
			(void)ps_export_run(x, 0);
			ps_export_save_symbols(x, 0, CACHE_FILL_NS);
			next += interval;
			if (next < now)
				next = now + interval;  /* a slow pass: skip, don't burst */
		}
		/* Requests go out without the lock: a server that does not
		 * answer must not keep the last pass waiting.  (In the helper
		 * they go out from a thread of their own, so that the passes
		 * are never late either.) */
		if (pidfd < 0)
			ps_export_send(x, 0, 0, &lock);
		pthread_mutex_unlock(&lock);
	}
}

/* The helper's sending thread: queued uploads, as they fall due. */
static void *
sender_main(void *arg)
{
	struct timespec ts;
	uint64_t due;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&lock);
		/* Only when something is due: a program with nothing to send
		 * never loads libcurl, and never delays its own last pass. */
		if (ps_export_next_due(x) <= ps_clock_ns(CLOCK_MONOTONIC))
			ps_export_send(x, 0, 0, &lock);
		due = ps_export_next_due(x);
		pthread_mutex_unlock(&lock);
		ts = to_ts(min_u64(due, ps_clock_ns(CLOCK_MONOTONIC) + PS_WORKER_POLL_MS * 1000000ull));
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	return NULL;
}

/* ---- the helper process ---------------------------------------------- */

/* Everything the program opened is closed, but the log file, `keep`
 * (the helper's pidfd) and the listener's socket; the standard streams
 * are /dev/null, or the program's stderr when the log level asks for more
 * than errors and lines go there. */
static void
detach_fds(int keep)
{
	int logfd = ps_log_fd(), keep_err = logfd < 0 && ps_log_level() > PS_LOG_ERROR;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int k[3] = { logfd, keep, listen_here ? ps_listen_fd() : -1 }, t;
	unsigned from = 3;
	int i, j;

	if (null >= 0) {
		(void)dup2(null, 0);
		(void)dup2(null, 1);
		if (!keep_err)
			(void)dup2(null, 2);
	}
	for (i = 0; i < 3; i++)         /* sorted, so the gaps close in order */
		for (j = i + 1; j < 3; j++)
			if (k[j] < k[i]) {
				t = k[i];
				k[i] = k[j];
				k[j] = t;
			}
	for (i = 0; i < 3; i++) {
		if (k[i] < (int)from)
			continue;
		if ((unsigned)k[i] > from)
			(void)syscall(SYS_close_range, from, (unsigned)k[i] - 1, 0u);
		from = (unsigned)k[i] + 1;
	}
	(void)syscall(SYS_close_range, from, ~0u, 0u);
}

/* The program's pidfd, opened by the program itself just before the
 * helper is made (no ptrace rights needed), inherited by the helper and
 * closed in the program.  Written by spawn_helper only. */
static int host_pidfd = -1;

/* The helper's pidfd of the program, for helper_loop.  Written by
 * helper_main before the switch. */
static int helper_pidfd = -1;

/* The helper's loop, on a stack of its own: the process starts on the
 * 32 KiB clone stack of spawn_helper(), too small for libdw's recursive
 * walk of DWARF scopes.  The same thread switches to it (makecontext), so
 * a helper makes no thread, nor the malloc arena a thread gets: 0.1 ms of
 * the 0.4-0.6 ms a `/bin/true`'s helper cost (BENCHMARKS 14e). */
static void
helper_loop(void)
{
	loop(helper_pidfd);
	helper_end();
}

static void
helper_main(void)
{
	static ucontext_t here, there;
	pthread_t sender;
	sigset_t all;
	void *stk;

	sigfillset(&all);
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, _NSIG / 8);
	ps_alloc_off();  /* nothing of the helper's goes in the program's tables */
	ps_wait_off();
	ps_log_set_pid(host);
	x->watch = host;
	(void)setsid();  /* the terminal's signals are for the program */
	(void)prctl(PR_SET_NAME, "pyroshim", 0, 0, 0);
	helper_pidfd = host_pidfd;
	detach_fds(helper_pidfd);
	if (listen_here && ps_listen_start(x, &lock, host))
		ps_debug("uploader: no listener thread");
	if (x->remote.on && pthread_create(&sender, NULL, sender_main, NULL))
		ps_warn("uploader: no sending thread; uploads go out at exit");
	/* Reserved, not touched: only what is used becomes resident.  The
	 * lowest page is the guard. */
	stk = mmap(NULL, HELPER_STACK, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (stk != MAP_FAILED && mprotect(stk, 4096, PROT_NONE) == 0 && getcontext(&there) == 0) {
		there.uc_stack.ss_sp = stk;
		there.uc_stack.ss_size = HELPER_STACK;
		there.uc_link = NULL;
		makecontext(&there, helper_loop, 0);
		(void)swapcontext(&here, &there);   /* helper_end() exits first */
	}
	ps_warn("uploader: no stack for the helper's loop; running on the small one");
	loop(helper_pidfd);
	helper_end();
}

/* The middle process: a clone(2) sharing the program's memory, with no
 * exit signal, so the program gets no SIGCHLD for it and its memory is
 * copied once, for the helper; it forks the helper (glibc's _Fork runs none
 * of the program's fork handlers) and ends, so the helper is reparented
 * away.  It touches nothing but its own stack: the program is suspended
 * (CLONE_VFORK) until it is gone. */
static int
middle(void *arg)
{
	pid_t pid;

	(void)arg;
	pid = _Fork();
	if (pid == 0)
		helper_main();
	if (pid > 0)
		atomic_store(&c->helper_pid, pid);
	syscall(SYS_exit, pid < 0 ? 1 : 0);
	return 0;
}

PS_SIGSAFE static int
spawn_helper(void)
{
	static char stack[32768] __attribute__((aligned(16)));
	int sub = 0, st, saved = errno, rc = 0;
	pid_t pid;

	/* A child subreaper, or the init of a pid namespace, would get the
	 * helper back as its own child. */
	if (getpid() == 1 || (prctl(PR_GET_CHILD_SUBREAPER, &sub, 0, 0, 0) == 0 && sub))
		return -EPERM;
	host_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (host_pidfd < 0)
		return -errno;
	pid = clone(middle, stack + sizeof(stack), CLONE_VM | CLONE_VFORK, NULL);
	if (pid < 0)
		rc = -errno;
	else {
		while (waitpid(pid, &st, __WCLONE) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			rc = -EAGAIN;
	}
	close(host_pidfd);
	host_pidfd = -1;
	errno = saved;
	return rc;
}

/* ---- the thread, where no helper can be made -------------------------- */

static void *
thread_main(void *arg)
{
	(void)arg;
	ps_guard_enter();  /* for the thread's whole life */
	/* Named from inside: naming from outside opens /proc/self/task/N/comm. */
	(void)prctl(PR_SET_NAME, "pyroshim", 0, 0, 0);
	if (listen_here && ps_listen_start(x, &lock, host))
		ps_debug("uploader: no listener thread");
	loop(-1);
	return NULL;
}

static int
spawn_thread(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (pthread_attr_init(&attr))
		return -ENOMEM;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, HELPER_STACK);
	/* The thread inherits this mask: it never takes a host signal. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &attr, thread_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc)
		return -rc;
	running = 1;
	return 0;
}

/* The helper process alone: what _exit may do, perhaps in a signal
 * handler (no log line, no thread: neither is async-signal-safe). */
PS_SIGSAFE static int
start_helper(void)
{
	int rc;

	host = getpid();
	rc = spawn_helper();
	if (rc == 0)
		helper = 1;
	return rc;
}

/* The helper, or a thread where none can be made. */
static int
start(void)
{
	int rc = start_helper();

	if (rc == 0) {
		ps_listen_drop();  /* the helper holds it now */
		ps_info("uploader: helper process started");
		return 0;
	}
	ps_info("uploader: no helper process (%s); a thread instead: a death by signal "
		"loses the last interval", rc == -EPERM ? "the program is a child subreaper or pid 1" :
		strerror(-rc));
	helper = 0;
	return spawn_thread();
}

int
ps_worker_start(struct ps_export *e, uint64_t interval_ns, uint64_t flush_timeout_ns)
{
	int rc;

	x = e;
	listen_here = 1;
	interval = interval_ns;
	flush_timeout = flush_timeout_ns;
	rc = ctl_new();
	if (rc)
		return rc;
	return start();
}

void
ps_worker_poke(void)
{
	int expected = 1;

	if (PS_LIKELY(!atomic_load_explicit(&due, memory_order_relaxed)))
		return;
	if (!atomic_compare_exchange_strong(&due, &expected, 0))
		return;
	if (ctl_new() == 0 && start() == 0)
		return;
	ps_debug("uploader not started in the fork child");
}

/* 1 if a fork child that never poked ends (or execs) with something
 * recorded: its uploader is to be started now (once). */
PS_SIGSAFE static int
due_at_end(void)
{
	int expected = 1;

	return atomic_load_explicit(&due, memory_order_relaxed) &&
	       !ps_stacktab_empty(x->st) &&
	       atomic_compare_exchange_strong(&due, &expected, 0);
}

int
ps_worker_is_helper(void)
{
	return helper;
}

/* Ask the loop for a pass and wait for it, at most until the deadline.
 * A last pass with nothing to write or send is not waited for: the helper
 * ends by itself.  That is nothing recorded and no span to send: with
 * PYROSCOPE_TRACE_CORRELATION a span goes only to an OTLP endpoint, and
 * without one it only labels samples, of which there are none.
 * Async-signal-safe: atomics and semaphores only. */
PS_SIGSAFE static void
request(int req, uint64_t timeout_ns)
{
	uint64_t deadline = ps_clock_ns(CLOCK_MONOTONIC) + timeout_ns;
	struct timespec ts = to_ts(deadline);
	pid_t pid;

	atomic_store(&c->deadline, deadline);
	atomic_store(&c->req, req);
	sem_post(&c->wake);
	if (helper && req == REQ_FINAL && !(x->span && x->remote.otlp_url[0]) &&
	    ps_stacktab_empty(x->st))
		return;
	/* A helper that is gone (killed, or ended after an exec it could not
	 * follow) never answers: do not wait for it. */
	pid = atomic_load(&c->helper_pid);
	if (helper && pid > 0 && kill(pid, 0) && errno == ESRCH)
		return;
	/* The shim's own wait: never in the program's block profile. */
	ps_guard_enter();
	while (sem_clockwait(&c->done, CLOCK_MONOTONIC, &ts) && errno == EINTR)
		;
	ps_guard_leave();
}

void
ps_worker_flush(uint64_t timeout_ns, int final)
{
	uint64_t deadline = ps_clock_ns(CLOCK_MONOTONIC) + timeout_ns;
	struct timespec ts = to_ts(deadline);

	/* A fork child that has not started one yet. */
	if (due_at_end() && (ctl_new() || start()))
		c = NULL;
	if (!c)
		return;
	if (helper) {
		if (!final)
			atomic_store(&c->exec_pending, 1);
		request(final ? REQ_FINAL : REQ_EXEC, timeout_ns);
		return;
	}
	/* Thread mode: the pass runs here, once the lock is free. */
	if (pthread_mutex_clocklock(&lock, CLOCK_MONOTONIC, &ts)) {
		ps_debug("last pass skipped: the uploader did not finish within the flush timeout");
		return;
	}
	if (final) {
		atomic_store(&c->quit, 1);
		sem_post(&c->wake);
	}
	last_pass(deadline, final, 0);
	/* The program waits here: what was learned, nothing more. */
	ps_export_save_symbols(x, final, 0);
	pthread_mutex_unlock(&lock);
}

void
ps_worker_exec_failed(void)
{
	if (c)
		atomic_store(&c->exec_pending, 0);
}

PS_SIGSAFE void
ps_worker_exit(uint64_t timeout_ns)
{
	if (due_at_end() && (ctl_new() || start_helper()))
		c = NULL;
	if (!c || (!helper && !running))
		return;
	request(REQ_FINAL, timeout_ns);
}

PS_SIGSAFE void
ps_worker_set_exit(int status)
{
	if (!c)
		return;
	atomic_store(&c->exit_code, status);
	atomic_store(&c->has_exit, 1);
}

void
ps_worker_set_args(int argc, const char *const *argv)
{
	size_t off = 0, n;
	int i;

	if (!c || argc < 0 || !argv)
		return;
	for (i = 0; i < argc && i < MAX_ARGS && argv[i]; i++) {
		n = strlen(argv[i]) + 1;
		if (off + n > sizeof(c->args))
			break;
		memcpy(c->args + off, argv[i], n);
		off += n;
	}
	atomic_store_explicit(&c->argc, i, memory_order_release);
}

void
ps_worker_host_thread(int delta)
{
	if (!c || helper)
		return;
	if (atomic_fetch_add(&c->host_threads, delta) + delta > 0)
		return;
	/* The last thread of the program is leaving through pthread_exit:
	 * the process ends when our thread ends too, and then runs its exit
	 * handlers -- the destructor's last pass -- on our thread. */
	atomic_store(&c->quit, 1);
	sem_post(&c->wake);
}

void
ps_worker_child(void)
{
	struct ctl *parent = c;

	if (!x)
		return;
	/* The parent's control block and helper (or thread) are not ours. */
	c = NULL;
	helper = running = listen_here = 0;
	/* Thread mode: the parent's listening socket was copied into this
	 * child's descriptor table; only the parent serves it. */
	ps_listen_drop();
	pthread_mutex_init(&lock, NULL);
	if (parent)
		ps_shmem_free(parent, sizeof(*parent));
	atomic_store(&due, 1);
}
