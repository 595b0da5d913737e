/* worker.c -- the uploader's loop, in a helper process or a thread.
 * See worker.h. */
#include "uploader/worker.h"
#include "common/clock.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
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
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <stddef.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "common/dl.h"
#include "common/guard.h"
#include "common/log.h"
#include "common/shmem.h"
#include "common/text.h"
#include "shim/alloc.h"
#include "shim/bench.h"
#include "shim/gostack.h"
#include "shim/next.h"
#include "shim/stacktab.h"
#include "trace/traceparent.h"
#include "shim/wait.h"
#include "symbolize/symbolizer.h"
#include "uploader/group.h"
#include "uploader/listen.h"
#include "uploader/remote.h"
#include "symbolize/symbols.h"

enum { REQ_NONE, REQ_FINAL, REQ_EXEC };
#define MAX_ARGS 256
/* The loop's stack: libdw walks DWARF scopes recursively (symbolize/dwarf.c).
 * Reserved, not touched: only what is used becomes resident. */
#define HELPER_STACK (8u << 20)
/* What a pass may spend completing the symbol cache (symbols.h): one walk
 * of each function's DWARF, once per function ever (the generator's first
 * run: 7 ms for all of them); and the loop's last save (save_symbols),
 * whole objects too (libc6-dbg's libc: 1.3-2.4 s of CPU, once per build
 * ID; 2 s left a loaded machine's first run short of it, and the second
 * run opened DWARF). */
#define CACHE_FILL_NS (250ull * 1000000)
#define CACHE_FILL_LAST_NS (5000ull * 1000000)
/* How long the helper's end waits for /debug/pprof answers being made. */
#define LISTEN_FINISH_NS (1000ull * 1000000)

/* What a program says about itself to join a tree: its export state as
 * its constructor made it.  It is in the program's control block, which
 * the helper maps (an announced program, ps_worker_start), or sent with
 * the descriptors of its control block, stack table and (has_lt) live
 * table (a program that joins over the socket).  Both ends must be the
 * same build, which `magic` says. */
/* "pyroshim VERSION BUILD-ID": what the tree's processes check in each
 * other's bell, registrations and replies, so that two builds of one
 * version, their structures laid out differently, never take each
 * other's for their own.  Written by the constructor (magic_init, from
 * ps_worker_defer) before anything is sent; read-only after. */
static char magic[32];
struct reg {
	char magic[32];
	uint32_t size;                 /* sizeof(struct reg) */
	int has_lt, has_span;
	int on[PS_NFAMILIES];
	uint64_t start_ns;
	uintptr_t skip_lo, skip_hi, entry;
	uint32_t cfg_set;              /* cfg's strings written (ps_config_copy) */
	int dir_refused;               /* its constructor refused dir, and said so */
	char app[256];
	char dir[PATH_MAX];
	struct ps_stacktab st;         /* as the program maps them */
	struct ps_livetab lt;
	struct ps_span span;
	struct ps_config cfg;
};

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
	struct reg r;               /* written before the program announces
				     * or joins, not after */
	/* A member of a tree that ends without waiting for its last pass
	 * (end_unwaited) leaves here the executable lines of its maps, to
	 * name its frames from once it is gone; maps_len, stored last,
	 * says it ended so. */
	_Atomic uint32_t maps_len;
	char maps[16384];
	/* The same lines as the helper's accepting thread read them when the
	 * program handed its tables over (hand_over), to name its frames
	 * from if it dies before its notice is taken (take_birth).  Written
	 * by the helper only. */
	_Atomic uint32_t seen_len;
	char seen[16384];
};

/* A birth notice, in the tree's bell: a program of the tree says where
 * its control block and tables are (their descriptors -- a fork child's
 * open in it until the helper has them, an exec'd image's handed over
 * through the socket (struct hand) -- and their structs), so that the
 * helper serves it from its first instruction, whatever way it ends.  A
 * program writes one at its first record (ps_worker_join_deferred), or in
 * its constructor (one that cannot put that off: ps_worker_defer), with
 * `exec` set: its settings are its own, in its control block.  A fork
 * child that cannot put it off (ps_worker_child) writes one in its fork
 * handler, `exec` clear: its settings are its parent's session's.
 * `word` is the program's pid << 8 | BIRTH_*: a slot is claimed, published
 * and taken by compare-and-swap on it, so no one mistakes another
 * program's notice for its own.  The helper takes a notice BIRTH_GRACE_NS
 * after it was written, or at once when the program waits for it
 * (urgent).  A program that execs within that time, or ends with nothing
 * recorded, withdraws its notice instead and costs the helper nothing.  A
 * program killed within it loses at most that much CPU. */
enum { BIRTH_FREE = 0, BIRTH_WRITING = 1, BIRTH_READY = 2, BIRTH_TAKING = 3 };
#define NBIRTHS 32
#define BIRTH_GRACE_NS (20 * 1000000ull)
struct birth {
	_Atomic uint64_t word;
	_Atomic int urgent;         /* the program waits for it: take it now */
	uint64_t at;                /* when it was written (CLOCK_MONOTONIC) */
	int32_t ppid;               /* a fork child's parent */
	int32_t exec;               /* an exec'd image: settings in its ctl */
	int32_t fd[3];              /* ctl, stack table, live table (-1: none) */
	uint64_t id[3][2];          /* their device and inode */
	uint64_t start_ns;
	struct ps_stacktab st;
	struct ps_livetab lt;
};

/* A fork child that puts off joining until its first record
 * (ps_worker_child) holds an entry of the bell's `waits` meanwhile, with
 * its pid only (`word` is pid << 8 | WAIT_*), so that the helper outlives
 * a parent that ends first: it ends when no session is left and no such
 * pid is alive.  The parent reserves the entry before the fork
 * (WAIT_FORK, with its own pid), and the child's fork handler makes it
 * its own: a parent that ends right after its fork (`sh -c 'prog &'`)
 * cannot end the helper before the child's handler ran; one not made its
 * own within FORK_STALE_NS (the fork failed) is free again.  The child's
 * first record writes its notice and then frees the entry; its end frees
 * it, and the helper frees it when the pid is gone (killed).  Its exec
 * leaves it as WAIT_EXEC for the new image, which takes it back when it
 * maps the bell; one not taken back within SUCCESSOR_NS (an image without
 * the shim) is free again.  With no entry free, a fork child is announced
 * in its fork handler instead. */
enum { WAIT_FREE = 0, WAIT_HELD = 1, WAIT_EXEC = 2, WAIT_FORK = 3 };
#define NWAITS 256
#define FORK_STALE_NS (1000ull * 1000000)
struct wait {
	_Atomic uint64_t word;
	uint64_t at;                /* WAIT_EXEC, WAIT_FORK: when (CLOCK_MONOTONIC) */
};

/* The sampling grid an image leaves at its exec for the next image of the
 * same process (ps_sampler_grid): the next expiry on the thread's CPU
 * clock, every one before it counted.  Without it the next image, which
 * cannot tell what the one before counted, counted the process's CPU from
 * its start again (an exec chain of short images: pyenv's shims, `env`
 * in a #! line) or lost exec and the loader.  `key` is pid << 8 |
 * GRID_*; an entry older than GRID_STALE_NS (an exec into an image
 * without the shim, or one that failed to start), or being written by a
 * process gone (killed in its exec hook), is free again. */
enum { GRID_FREE = 0, GRID_WRITING = 1, GRID_READY = 2 };
#define NGRIDS 32
#define GRID_STALE_NS (2000ull * 1000000)
struct grid {
	_Atomic uint64_t key;
	uint64_t next, at;
};

/* A tree's doorbell: pages that every program of the tree maps and the
 * tree's helper waits on.  A program rings it after posting a request in
 * its own control block, or a birth notice.  An exec'd image maps it from
 * the helper's descriptor (/proc/PID/fd/N, named in PYROSHIM_HELPER), and
 * checks `magic` and `name` first. */
struct bell {
	char magic[32];             /* magic: the same build */
	char name[64];              /* the tree's socket's name */
	sem_t wake;
	_Atomic int helper_pid;     /* the tree's helper, once it runs */
	_Atomic unsigned members;   /* sessions the helper made for programs
				     * other than its own (add_session) */
	_Atomic int lingering;      /* the helper has no session left and waits
				     * for the pids in `waits`: one that
				     * frees its entry rings */
	_Atomic int closing;        /* the helper is about to end: a notice
				     * written now is withdrawn (notice) */
	struct birth births[NBIRTHS];
	struct grid grids[NGRIDS];
	struct wait waits[NWAITS];
};

/* What an announced program sends with its descriptors, once its notice
 * is in the bell: which notice they are for.  Unanswered, so that the
 * program holds no descriptor of the shim's and waits for no one. */
struct hand {
	char magic[32];
	int32_t slot;
};

/* The helper's answer, with its bell's descriptor. */
struct reg_reply {
	char magic[32];
	int32_t pid;
};

/* How long a program waits to join (its constructor): the helper's
 * accepting thread answers at once unless it is stopped or starved. */
#define JOIN_TIMEOUT_MS 1000
#define MAX_PENDING 64
/* How long a session outlives its image after an exec, for the new image
 * to join (the helper ends when no session is left). */
#define SUCCESSOR_NS (2 * JOIN_TIMEOUT_MS * 1000000ull)

/* A program the loop serves.  The helper's first is the program it was
 * forked from (or, in thread mode, its own); the tree's others joined
 * it, and their state is their own. */
struct session {
	pid_t pid;
	int pidfd;                  /* -1 in thread mode */
	int root;                   /* the program this loop was started for */
	struct ctl *c;
	struct ps_export *x;
	unsigned long ctl_inode;    /* tells when its image is gone after an exec */
	uint64_t gone_at;           /* when it was found gone (CLOCK_MONOTONIC) */
	int killed;                 /* taken once dead, without a word (no pidfd) */
	int final_asked;            /* its last pass was asked for before the
				     * loop's look at the dead (loop()) */
	uint64_t next_look;         /* when its maps may be read again */
	const char *argv[MAX_ARGS + 1];
	/* A joined program's (mmap'ed by the accepting thread, which does
	 * not allocate: no malloc arena for it): */
	struct reg r;
	struct ps_stacktab st;      /* views of its tables */
	struct ps_livetab lt;
	struct ps_export own;
};

/* Written by ps_worker_start / ps_worker_child while the process has one
 * thread, read-only after. */
static struct ctl *c;
/* A fork child's parent's control block, still mapped: unmapped when the
 * child makes its own (ctl_new), not in its fork handler, where that cost
 * a shell's child 30 us for nothing when it execs at once (BENCHMARKS
 * 14p).  Its exec or end unmaps it otherwise.  Written by the fork child
 * handler and by ctl_new, in the thread that makes the control block. */
static struct ctl *stale_c;
static sem_t *bell;                /* where requests ring: c->wake, or the tree's */
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
 * exec (a shell's) never pays for one.  Set by ps_worker_child (outside a
 * tree), or by a first record that could not join its tree. */
static _Atomic int due;
/* 1 in the process whose constructor started the uploader, 0 in a fork
 * child: only the former serves /debug/pprof (listen.h), and leads or
 * joins a tree.  Written as `due`. */
static int listen_here;

/* The tree (worker.h): its name, and in the program that leads it, its
 * listening socket and bell until the helper holds them.  Written by the
 * constructor's start(), or by wake(); in the helper, read-only. */
static char tree_name[64];
static int tree_fd = -1, tree_bell_fd = -1;
/* "PYROSHIM_HELPER=" and the tree's whole name, once the helper holds the
 * bell: what an exec passes on in place of the name without it
 * (ps_worker_env_entry).  Written with tree_name, by the leader. */
static char tree_env[16 + sizeof(tree_name)];
static size_t tree_env_short;      /* its length without "-HPID-FD" */
/* A program that leads its tree puts off starting the helper until its
 * first record, child or thread (ps_worker_defer): most commands make
 * none, and then cost neither a helper nor the tree's socket.  1 until
 * then, taken by compare-and-swap (wake), from any thread or handler.
 * Set by the constructor. */
static _Atomic int put_off;
/* What a late start did, for the info log at the next place that may
 * print (say_deferred): the helper's pid, or -errno. */
static _Atomic int woke;
static const char *_Atomic woke_at; /* where (ps_worker_wake's `at`) */
/* Why the first record's tables are being made, when a child or a
 * thread is (ps_worker_wake before them). */
static const char *_Atomic wake_at_first = "its first record";
static _Atomic int tree_errno;     /* why tree_open failed, for the same */
/* The tree's bell, in every process of the tree (a fork child inherits
 * the mapping).  Written by start() in the constructor, or by wake(). */
static struct bell *tree_bell;
/* 1 in the process that leads the tree, the one its caller waits for
 * (an exec'd image of it too): once the tree has other programs, its last
 * pass waits for the helper even when it recorded nothing itself, so that
 * the children it reaped are drained ("the dead first") when it ends.
 * Written by the constructor's start(); 0 in a fork child. */
static int tree_leader;
/* This program's birth notice (NBIRTHS: none), until the helper took it
 * or refused it.  Written by ps_worker_child (a fork child) or the
 * constructor (an exec'd image), then by the host thread that learns the
 * outcome (exit, exec, poke: one at a time). */
static int birth_slot = NBIRTHS;
/* This fork child's entry of the bell's `waits` (NWAITS: none), from its
 * fork handler (or, after an exec, bell_map) until its first record, exec
 * or end.  Written by the host thread that does one of those, one at a
 * time (the first record with every signal blocked). */
static int wait_slot = NWAITS;
/* The entry the forking thread reserved for its child (ps_worker_fork_
 * prepare), plus one (0: none), and the pid that reserved it: per thread,
 * as forks are, and so copied into the child. */
static PS_TLS int fork_slot;
static PS_TLS pid_t fork_from;
/* A member of a tree that put off joining it until its first record
 * (ps_worker_defer, ps_worker_child): DEFER_WAITING until then,
 * DEFER_JOINING while that record joins, DEFER_NONE otherwise.  Set by the
 * constructor or the fork handler; the first record takes it by
 * compare-and-swap. */
enum { DEFER_NONE, DEFER_WAITING, DEFER_JOINING };
static _Atomic int deferred;
/* The parent of a fork child that put off joining, for the helper's log;
 * 0 in an exec'd image.  Either joins with settings of its own
 * (announce_tables).  Written with `deferred`. */
static pid_t defer_parent;
/* 1 once this program forked while its own notice was pending: the
 * notices of children announced at their fork name it, and are taken with
 * its settings, so its notice is not withdrawn when it ends or execs with
 * nothing recorded (request).  Written by the thread that forks
 * (ps_worker_forked), read at the exit or exec; 0 in a fork child and a
 * new image. */
static int forked;
/* What that first record did, for the info log at the next place that may
 * print (say_deferred): the helper it joined, or why it could not. */
static _Atomic int deferred_joined;
static const char *_Atomic deferred_why;
/* What the program said before it had a control block, for the one its
 * first record makes.  Written by the host thread (args) and the exit
 * hooks (exit). */
static int early_argc;
static const char *const *early_argv;
static _Atomic int early_has_exit, early_exit_code;
PS_SIGSAFE static void args_copy(int argc, const char *const *argv);

/* The helper's sessions and the joins its accepting thread took.
 * Protected by `lock`; the loop adds and ends sessions. */
static struct session **ss;
static unsigned nss, ss_cap;
static PS_LARGE struct session *pending[MAX_PENDING];
static unsigned npending;
/* The descriptors announced programs handed over, by their notice's slot,
 * until the notice is taken or withdrawn.  Protected by `hand_lock`, which
 * the accepting thread takes alone (never behind a pass, which holds
 * `lock`: taken first when both are). */
static pthread_mutex_t hand_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	pid_t pid;
	uid_t uid;         /* the sender's user */
	int n, fd[3];
	uint64_t id[2];    /* the control block's device and inode */
} handed[NBIRTHS] PS_LARGE;

/* 1 if what was handed over for slot i is for the notice b there now,
 * whose word is w (not for an earlier image of the same process, say).
 * Holding `hand_lock`. */
static int
handed_for_locked(int i, const struct birth *b, uint64_t w)
{
	return handed[i].pid && handed[i].pid == (pid_t)(w >> 8) &&
	       handed[i].id[0] == b->id[0][0] && handed[i].id[1] == b->id[0][1];
}

/* 1 if a word of the bell names no process of a tree at all (the bell
 * written over by a process of the same user): pid 0 or 1, or beyond. */
static int
not_a_pid(uint64_t w)
{
	return w >> 8 <= 1 || w >> 8 > INT_MAX;
}

/* 1 if the process that owns a word of the bell (its pid above the low
 * byte: a notice, an entry of `waits`, a grid) is gone.  Its slot then
 * waits for nothing: no process has that pid now, so none writes there.
 * errno is kept (an exec hook calls it). */
static int
owner_gone(uint64_t w)
{
	int saved = errno, gone;

	/* kill() would probe a group, or every process, and never answer
	 * ESRCH. */
	if (not_a_pid(w))
		return 1;
	gone = kill((pid_t)(w >> 8), 0) && errno == ESRCH;
	errno = saved;
	return gone;
}

/* How long after its notice (word w) an exec'd image's descriptors, which
 * come through the socket, are waited for: a second, or ten for a program gone
 * already (it ended without waiting, end_unwaited), which can make no
 * helper of its own any more: they are in the socket's queue unless it
 * died sending them, and a helper stopped or starved for a while finds
 * the notice due before its accepting thread has run. */
#define HAND_WAIT_NS (JOIN_TIMEOUT_MS * 1000000ull)
#define HAND_WAIT_GONE_NS (10 * HAND_WAIT_NS)

static uint64_t
hand_wait(uint64_t w)
{
	return owner_gone(w) ? HAND_WAIT_GONE_NS : HAND_WAIT_NS;
}

/* 1 if the notice b in slot i, whose word is w, is an exec'd image's whose
 * descriptors have not come through the socket yet. */
static int
hand_awaited(int i, const struct birth *b, uint64_t w)
{
	int r;

	if (!b->exec)
		return 0;
	pthread_mutex_lock(&hand_lock);
	r = !handed_for_locked(i, b, w);
	pthread_mutex_unlock(&hand_lock);
	return r;
}
static _Atomic int closing;        /* the loop ends: no more joins */
/* Zero-initialized (root_session sets it): with an initializer its 95 KiB
 * were file pages of every preloaded process's image, mapped around the
 * pages near them that the loader and the hooks touch. */
static PS_LARGE struct session root_s;

PS_SIGSAFE static void leave_slot(int exec);
PS_SIGSAFE static void drop_bell(void);
static void take_slot(void);

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
	struct ctl *m;

	ps_shmem_free(stale_c, sizeof(*stale_c));
	stale_c = NULL;
	m = ps_shmem_new(sizeof(*m));
	if (!m)
		return -ENOMEM;
	if (sem_init(&m->wake, 1, 0) || sem_init(&m->done, 1, 0)) {
		ps_shmem_free(m, sizeof(*m));
		return -errno;
	}
	atomic_store(&m->host_threads, 1);
	c = m;
	bell = &m->wake;
	return 0;
}

/* ---- the last pass --------------------------------------------------- */

/* The exit status and command line the program reported, into the export
 * state.  A program killed by a signal reported none: the status is then
 * read from the zombie if it is still there, else left unknown (-1). */
static void
take_exit_info(struct session *s, int dead)
{
	struct ctl *k = s->c;
	int argc = atomic_load_explicit(&k->argc, memory_order_acquire), i;
	const char *p = k->args;

	for (i = 0; i < argc && i < MAX_ARGS && p < k->args + sizeof(k->args); i++) {
		s->argv[i] = p;
		p += strnlen(p, (size_t)(k->args + sizeof(k->args) - p)) + 1;
	}
	s->argv[i] = NULL;
	s->x->argc = i;
	s->x->argv = i ? s->argv : NULL;
	s->x->exit_code = atomic_load(&k->has_exit) ? atomic_load(&k->exit_code) : dead ? -1 : 0;
}

static void
last_pass(struct session *s, uint64_t deadline, int end, int dead)
{
	(void)ps_export_run(s->x, 1);
	/* The leader's caller looks at the files when it returns (whatever
	 * image of it ends): every program's so far, the dead drained first
	 * (loop()).  At its exec too: in thread mode the new image has no
	 * uploader to write what this one recorded. */
	if (s->pid == host)
		(void)ps_group_pass();
	if (end) {
		take_exit_info(s, dead);
		ps_export_end_span(s->x);
	}
	ps_export_send(s->x, 1, deadline, &lock);
	if (s->pid == host)
		ps_group_send(1, deadline, &lock);
}

/* ---- the helper's view of the program -------------------------------- */

/* 1 once the program is gone (its pidfd is readable). */
static int
host_gone(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

static unsigned long
mapping_inode(pid_t pid, uintptr_t addr, unsigned long want, int *found)
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
		if (addr ? (lo == addr) : (ino == want && (strstr(line, "/memfd:pyroshim") ||
							   strstr(line, "/dev/zero")))) {
			*found = 1;
			break;
		}
	}
	fclose(f);
	return *found ? ino : 0;
}

/* 1 if the program of control block k ended without waiting for its last
 * pass (end_unwaited): it left its maps and its request. */
static int
ended_unwaited(const struct ctl *k)
{
	return atomic_load_explicit(&k->maps_len, memory_order_acquire) != 0;
}

/* 1 once session s's program is gone: its pidfd says so, or it was taken
 * after it ended without waiting (no pidfd). */
static int
dead(const struct session *s)
{
	if (s->pidfd >= 0)
		return host_gone(s->pidfd);
	return !s->root && ended_unwaited(s->c);
}

/* An exec'd helper's root, gone without leaving its maps (killed, or Go's
 * raw exit_group): its frames are named from the maps read at the
 * helper's start (ps_worker_image), as a member killed before its notice
 * was taken is (take_birth).  A forked helper names them from its own
 * copy of the program's mappings. */
static void
root_left(struct session *s)
{
	uint32_t n = atomic_load_explicit(&s->c->seen_len, memory_order_acquire);

	if (!s->root || !s->x->watch_only || ended_unwaited(s->c) || !n || n > sizeof(s->c->maps))
		return;
	memcpy(s->c->maps, s->c->seen, n);
	atomic_store_explicit(&s->c->maps_len, n, memory_order_release);
}

/* After an exec request: 1 when the image that made it is gone (its
 * control block is no longer in its address space). */
static int
image_gone(struct session *s)
{
	int found;

	if (!s->ctl_inode)
		s->ctl_inode = mapping_inode(getpid(), (uintptr_t)s->c, 0, &found);
	if (!s->ctl_inode)
		return 1;  /* cannot tell: the pass is done, end */
	(void)mapping_inode(s->pid, 0, s->ctl_inode, &found);
	return !found;
}

/* The helper is bounded where it can be: if it hangs (a lock it copied
 * from the program held, in the C library's stdio, malloc or loader, a
 * server that never answers), SIGALRM's default action ends it
 * (helper_main made it the default).  Its last pass, which the program
 * may wait for, a few seconds past the flush timeout; its start-up after
 * START_BOUND_S.  Not its periodic passes: one may wait on a debuginfod
 * server for minutes (its timeout is 90 s a connection) and be doing its
 * work, so a lock copied from another thread that hangs one hangs the
 * helper for good. */
#define START_BOUND_S 60
static void
watchdog_after(unsigned s)
{
	sigset_t alrm;

	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	(void)syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &alrm, NULL, _NSIG / 8);
	(void)alarm(s);
}

static void
watchdog(void)
{
	watchdog_after((unsigned)(flush_timeout / 1000000000ull) + 5);
}

__attribute__((noreturn)) static void
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

/* ---- sessions ---------------------------------------------------------- */

/* Map the first len bytes of fd -- if it is a memfd, the one announced
 * (id: its device and inode; NULL for a descriptor handed over through the
 * socket), that long and sealed so that it stays so (a shorter file would
 * fault on access).  What is mapped is written to: a descriptor number
 * read from /proc may have been reused for any file by then (after an
 * exec: the loader's libraries), which must never be mapped.  The helper
 * maps programs' tables so; a program, its tree's bell. */
static void *
map_fd(int fd, size_t len, const uint64_t *id, unsigned long *ino)
{
	struct stat sb;
	void *p;

	if (fd < 0 || !len || !ps_shmem_sealed(fd) || fstat(fd, &sb) ||
	    !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < len ||
	    (id && (id[0] != (uint64_t)sb.st_dev || id[1] != (uint64_t)sb.st_ino)))
		return NULL;
	p = ps_shmem_map(NULL, len, fd);
	if (ino)
		*ino = (unsigned long)sb.st_ino;
	return p;
}

/* A joined program's export state, from what it sent: as its own
 * constructor made it, with its tables read through views. */
static void
session_export(struct session *s)
{
	struct ps_export *e = &s->own;

	memset(e, 0, sizeof(*e));
	e->cfg = &s->r.cfg;
	e->st = &s->st;
	e->lt = s->r.has_lt ? &s->lt : NULL;
	memcpy(e->on, s->r.on, sizeof(e->on));
	e->pid = s->pid;
	e->tree = host;                 /* the helper's first program */
	e->watch = s->pid;
	e->watch_only = 1;
	e->watch_left.text = s->c->maps;
	e->watch_left.len = &s->c->maps_len;
	e->watch_left.cap = sizeof(s->c->maps);
	e->skip_lo = s->r.skip_lo;
	e->skip_hi = s->r.skip_hi;
	e->entry = s->r.entry;
	snprintf(e->app, sizeof(e->app), "%s", s->r.app);
	snprintf(e->dir, sizeof(e->dir), "%s", s->r.dir);
	ps_export_setup(e);
	if (s->r.dir_refused)
		e->dirfd = -2;
	e->start_ns = s->r.start_ns;
	ps_export_set_span(e, s->r.has_span ? &s->r.span : NULL);
	/* The program printed its settings' mistakes already. */
	ps_log_config_quiet(1);
	(void)ps_remote_setup(&e->remote, e->cfg, e->span, e->start_ns);
	ps_log_config_quiet(0);
	s->x = e;
}

/* Sessions' memory, kept for the next ones: a new mapping faults in a
 * page for each of the 9 its settings are copied into (2.5 us each on
 * these machines), more as its passes run, and unmapping it interrupts
 * the other processor; a tree's sessions come one after another
 * (BENCHMARKS 14q).  Taken and given back by the helper's loop and its
 * accepting thread, which does not allocate: mmap, not malloc. */
#define SESSION_LEN ((sizeof(struct session) + 4095) & ~(size_t)4095)
#define NSPARE 4
static struct session *spare[NSPARE];
static unsigned nspare;
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;

/* A session, zeroed, or NULL. */
static struct session *
session_new(void)
{
	struct session *s = NULL;

	pthread_mutex_lock(&spare_lock);
	if (nspare)
		s = spare[--nspare];
	pthread_mutex_unlock(&spare_lock);
	if (s)
		memset(s, 0, SESSION_LEN);
	else if ((s = mmap(NULL, SESSION_LEN, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
		return NULL;
	s->pidfd = -1;
	return s;
}

static void
session_unmap(struct session *s)
{
	if (s->c)
		(void)munmap(s->c, sizeof(*s->c));
	if (s->st.c)
		(void)munmap(s->st.c, s->st.map_len);
	if (s->lt.c)
		(void)munmap(s->lt.c, s->lt.map_len);
	if (s->pidfd >= 0)
		close(s->pidfd);
	pthread_mutex_lock(&spare_lock);
	if (nspare < NSPARE) {
		spare[nspare++] = s;
		s = NULL;
	}
	pthread_mutex_unlock(&spare_lock);
	if (s)
		(void)munmap(s, SESSION_LEN);
}

static int add_session(struct session *s);
static void *sender_main(void *arg);

/* 1 once the helper's sending thread runs: started for the first session
 * that has a server.  Written by the helper's loop (and helper_main). */
static int sending;

static void
need_sender(const struct ps_export *e)
{
	pthread_t t;

	if (sending || !e->remote.on)
		return;
	sending = 1;
	if (pthread_create(&t, NULL, sender_main, NULL))
		ps_warn("uploader: no sending thread; uploads go out at exit");
}

/* The loop's first session: the program it was started for (pidfd -1:
 * thread mode, in that program).  Before the loop runs.  Returns 0 or
 * -ENOMEM. */
static int
root_session(int pidfd)
{
	root_s.root = 1;
	root_s.pid = host;
	root_s.pidfd = pidfd;
	root_s.c = c;
	root_s.x = x;
	ss = malloc(16 * sizeof(*ss));
	if (!ss)
		return -ENOMEM;
	ss[0] = &root_s;
	nss = 1;
	ss_cap = 16;
	return 0;
}

/* The joins the accepting thread took become sessions.  Holding `lock`. */
static void
take_pending(void)
{
	struct session *s;

	while (npending) {
		s = pending[--npending];
		if (add_session(s)) {
			ps_warn("uploader: out of memory: a joined program (pid %d) is not profiled",
				(int)s->pid);
			session_unmap(s);
			continue;
		}
		ps_debug("uploader: pid %d (%s) joined the tree", (int)s->pid, s->x->app);
	}
}

/* Open descriptor n of process pid if it is still the memfd `id` (device
 * and inode) the process announced.  Looked at through an O_PATH
 * descriptor first: opening whatever the number names by now (a device,
 * after an exec) could have effects of its own. */
static int
their_fd(pid_t pid, int n, const uint64_t *id)
{
	char path[64];
	struct stat sb;
	int p, fd = -1;

	if (n < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, n);
	p = open(path, O_PATH | O_CLOEXEC);
	if (p < 0)
		return -1;
	if (fstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && id[0] == (uint64_t)sb.st_dev &&
	    id[1] == (uint64_t)sb.st_ino) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", p);
		fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
	}
	close(p);
	return fd;
}

/* Add session s.  Holding `lock`.  Returns 0 or -ENOMEM. */
static int
add_session(struct session *s)
{
	struct session **v;
	unsigned cap;

	if (nss == ss_cap) {
		cap = ss_cap ? 2 * ss_cap : 16;
		v = realloc(ss, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ss = v;
		ss_cap = cap;
	}
	session_export(s);
	ss[nss++] = s;
	need_sender(s->x);
	if (tree_bell)
		atomic_fetch_add(&tree_bell->members, 1);
	/* A program that dies before its first pass (Go ends by a raw
	 * exit_group) leaves no /proc/PID/maps to name its frames from. */
	ps_export_learn(s->x);
	return 0;
}

/* The export state of the live session of process pid, or NULL.  Holding
 * `lock`. */
static const struct ps_export *
session_of(pid_t pid)
{
	unsigned i;

	for (i = 0; i < nss; i++)
		if (ss[i]->pid == pid && !ss[i]->gone_at)
			return ss[i]->x;
	return NULL;
}

/* A program's settings, as it sent or announced them, made safe to read:
 * 0, or -1 if they are another build's. */
static int
reg_check(struct reg *r)
{
	if (memcmp(r->magic, magic, sizeof(magic)) || r->size != sizeof(*r))
		return -1;
	r->cfg.app_name[sizeof(r->cfg.app_name) - 1] = '\0';
	r->app[sizeof(r->app) - 1] = r->dir[sizeof(r->dir) - 1] = '\0';
	return 0;
}

/* src, a string of at most len - 1 bytes, into dst (len bytes), which
 * holds a string or zero bytes past it: only the bytes of the string are
 * written. */
PS_SIGSAFE static void
copy_string(char *dst, const char *src, size_t len)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* A joined program's settings, out of its control block into dst (zero
 * bytes: a new session): what it wrote, and nothing of the pages it left
 * alone (each one the helper would read here is a page of the control
 * block's memory file made for nothing). */
static void
reg_copy(struct reg *dst, const struct reg *src)
{
	memcpy(dst, src, offsetof(struct reg, app));
	copy_string(dst->app, src->app, sizeof(dst->app));
	copy_string(dst->dir, src->dir, sizeof(dst->dir));
	dst->st = src->st;
	dst->lt = src->lt;
	dst->span = src->span;
	dst->cfg_set = ps_config_copy(&dst->cfg, &src->cfg, src->cfg_set, 0);
}

/* The settings of a program of another user (a fork child that gave up
 * root, as a server's workers do), made those of a program of this one,
 * e: what it sent is trusted no more than any program of that user, and
 * this helper would write files where it says, with its name.  It keeps
 * its own name (a file name's part), its addresses, span and tables. */
static void
distrust(struct reg *r, const struct ps_export *e)
{
	char *p;

	r->cfg = *e->cfg;
	memcpy(r->dir, e->dir, sizeof(r->dir));
	for (p = r->app; *p; p++)
		if (*p == '/' || !isprint((unsigned char)*p))
			*p = '_';
	snprintf(r->cfg.app_name, sizeof(r->cfg.app_name), "%s", r->app);
}

/* Session s's stack table and (s->r.has_lt) live table: mapped from
 * fd[1] and fd[2], each checked to be the memfd of id[1], id[2] (NULL:
 * descriptors handed over, nothing to check), at the sizes st and lt
 * say, and viewed as laid out there.  Returns 0 or -1. */
static int
session_tables(struct session *s, const int fd[3], const uint64_t (*id)[2],
	       const struct ps_stacktab *st, const struct ps_livetab *lt)
{
	s->st.c = map_fd(fd[1], st->map_len, id ? id[1] : NULL, NULL);
	s->st.map_len = st->map_len;
	if (s->r.has_lt) {
		s->lt.c = map_fd(fd[2], lt->map_len, id ? id[2] : NULL, NULL);
		s->lt.map_len = lt->map_len;
	}
	return !s->st.c || (s->r.has_lt && !s->lt.c) || ps_stacktab_view(&s->st, st, s->st.c) ||
	       (s->r.has_lt && ps_livetab_view(&s->lt, lt, s->lt.c)) ? -1 : 0;
}

/* One birth notice, taken: a session with the program's own tables, and
 * the settings of its parent's session (a fork child) or its own (an
 * exec'd image).  The program learns it was taken from its control block
 * (helper_pid), set before the slot is freed; a refused program finds its
 * slot freed with helper_pid still 0, and makes a helper of its own.
 * `orphans`: a fork child whose parent has no session is refused, not
 * left for later; `now`: the grace is over for every notice.  Holding
 * `lock`. */
static void
take_birth(struct birth *b, int orphans, int now)
{
	const struct ps_export *px = NULL;
	struct session *s;
	struct ps_stacktab st;
	struct ps_livetab lt;
	int fd[3] = { -1, -1, -1 }, i, ok = 0, exec, own = 1, slot = (int)(b - tree_bell->births);
	const char *why = "out of memory", *then;
	uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire);
	uint64_t age = ps_clock_ns(CLOCK_MONOTONIC) - b->at;
	pid_t pid = (pid_t)(w >> 8), ppid;
	struct birth *p;
	unsigned k;
	uint32_t n;

	if ((w & 0xff) != BIRTH_READY)
		return;
	exec = b->exec;
	ppid = b->ppid;
	/* Not due: in its grace; or an exec'd image's descriptors, which
	 * come through the socket after its notice, are not there yet (for
	 * a while). */
	if ((hand_awaited(slot, b, w) && age < hand_wait(w)) ||
	    (!now && !atomic_load(&b->urgent) && age < BIRTH_GRACE_NS))
		return;
	px = session_of(ppid);
	/* A fork child whose parent's own notice waits (an image exec'd
	 * less than the grace ago): the parent is taken with it (an exec'd
	 * image's notice needs no parent: no deeper), or the child waits for
	 * its parent's descriptors. */
	for (k = 0; k < NBIRTHS && !exec && !px; k++) {
		p = &tree_bell->births[k];
		w = atomic_load_explicit(&p->word, memory_order_acquire);
		if (p == b || (w & 0xff) != BIRTH_READY || (pid_t)(w >> 8) != ppid || !p->exec)
			continue;
		take_birth(p, orphans, 1);
		px = session_of(ppid);
		if (!px && (atomic_load(&p->word) & 0xff) == BIRTH_READY)
			return;
	}
	w = (uint64_t)pid << 8 | BIRTH_READY;
	if ((!exec && !px && !orphans) ||
	    !atomic_compare_exchange_strong(&b->word, &w, (w & ~(uint64_t)0xff) | BIRTH_TAKING))
		return;
	/* Ours now, and no longer written by the program.  The same pid may
	 * have withdrawn a notice in this slot and written another since the
	 * first look (a shell's child that execs): then look again. */
	if (b->exec != exec || b->ppid != ppid) {
		atomic_store_explicit(&b->word, w, memory_order_release);
		return;
	}
	s = session_new();
	if (!s)
		goto out;
	why = "its parent is gone: nothing to copy the settings from";
	if (!px && !exec)
		goto out;
	s->pid = pid;
	s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	pthread_mutex_lock(&hand_lock);
	if (exec && handed_for_locked(slot, b, (uint64_t)pid << 8)) {
		memcpy(fd, handed[slot].fd, (size_t)handed[slot].n * sizeof(int));
		own = handed[slot].uid == getuid();
		handed[slot].n = handed[slot].pid = 0;   /* fd[] has them now */
	}
	pthread_mutex_unlock(&hand_lock);
	for (i = 0; i < 3 && !exec; i++)
		fd[i] = their_fd(pid, b->fd[i], b->id[i]);
	s->c = map_fd(fd[0], sizeof(*s->c), b->id[0], &s->ctl_inode);
	why = exec && fd[0] < 0 ? "its tables never came" :
	      !s->c ? "its tables are not the memfds it announced" : "it is gone";
	/* Gone without a word (killed, crashed) before its notice was
	 * taken: its frames are named from what it mapped when it handed
	 * its tables over, and its last pass is made now. */
	if (s->c && exec && !ended_unwaited(s->c) && (s->pidfd < 0 || host_gone(s->pidfd)) &&
	    (n = atomic_load_explicit(&s->c->seen_len, memory_order_acquire)) != 0 &&
	    n <= sizeof(s->c->maps)) {
		memcpy(s->c->maps, s->c->seen, n);
		atomic_store_explicit(&s->c->maps_len, n, memory_order_release);
		s->killed = 1;
	}
	/* Gone already is no matter for an image that ended without
	 * waiting: it left all its last pass needs, and asked for it. */
	if (!s->c || (s->pidfd < 0 && !(exec && ended_unwaited(s->c))))
		goto out;
	if (exec) {
		/* Its own settings, copied out of memory it can still write. */
		reg_copy(&s->r, &s->c->r);
		why = "its settings are another build's";
		if (reg_check(&s->r))
			goto out;
		if (!own)
			distrust(&s->r, px ? px : x);
	} else {
		/* What the parent's constructor made, as a join would send it. */
		s->r.has_lt = px->lt != NULL;
		s->r.has_span = px->span != NULL;
		memcpy(s->r.on, px->on, sizeof(s->r.on));
		s->r.skip_lo = px->skip_lo;
		s->r.skip_hi = px->skip_hi;
		s->r.entry = px->entry;   /* the same image */
		memcpy(s->r.app, px->app, sizeof(s->r.app));
		copy_string(s->r.dir, px->dir, sizeof(s->r.dir));
		if (px->span)
			s->r.span = *px->span;
		s->r.cfg_set = ps_config_copy(&s->r.cfg, px->cfg, PS_CONFIG_ALL, 0);
	}
	s->r.start_ns = b->start_ns;
	/* The tables' sizes read once: what is mapped, viewed and unmapped
	 * must be the same length, whatever is written in the bell now. */
	st = b->st;
	lt = b->lt;
	why = "its tables are not the memfds it announced";
	if (session_tables(s, fd, b->id, &st, &lt))
		goto out;
	why = "out of memory";
	if (add_session(s) == 0) {
		ok = 1;
		atomic_store(&s->c->helper_pid, getpid());
		if (exec && !b->ppid)
			ps_debug("uploader: pid %d joined the tree", (int)pid);
		else
			ps_debug("uploader: fork child %d of %d joined the tree", (int)pid,
				 (int)b->ppid);
	}
out:
	for (i = 0; i < 3; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	/* The program cannot say it (it learns it in its exit), so the
	 * helper does. */
	if (!ok) {
		then = owner_gone((uint64_t)pid << 8) ? "it has ended: what it recorded is lost" :
		       "it makes a helper of its own";
		if (exec && !b->ppid)
			ps_info("uploader: pid %d not taken (%s): %s", (int)pid, why, then);
		else
			ps_info("uploader: fork child %d of %d not taken (%s): %s", (int)pid,
				(int)b->ppid, why, then);
	}
	if (!ok && s)
		session_unmap(s);
	atomic_store_explicit(&b->word, BIRTH_FREE, memory_order_release);
}

/* When the oldest notice not yet taken falls due, or UINT64_MAX. */
static uint64_t
births_due(void)
{
	uint64_t due = UINT64_MAX, w;
	int i;

	for (i = 0; tree_bell && i < NBIRTHS; i++) {
		w = atomic_load_explicit(&tree_bell->births[i].word, memory_order_acquire);
		if ((w & 0xff) != BIRTH_READY)
			continue;
		if (hand_awaited(i, &tree_bell->births[i], w))
			due = min_u64(due, tree_bell->births[i].at + hand_wait(w));
		else
			due = min_u64(due, tree_bell->births[i].at + BIRTH_GRACE_NS);
	}
	return due;
}

/* 1 if a notice in the bell waits for its descriptors (an exec'd image's,
 * written less than hand_wait ago, or `most` if less).  Holding `lock`. */
static int
hands_awaited(uint64_t most)
{
	const struct birth *b;
	uint64_t w;
	int i;

	for (i = 0; tree_bell && i < NBIRTHS; i++) {
		b = &tree_bell->births[i];
		w = atomic_load_explicit(&b->word, memory_order_acquire);
		if ((w & 0xff) == BIRTH_READY && hand_awaited(i, b, w) &&
		    ps_clock_ns(CLOCK_MONOTONIC) - b->at < min_u64(hand_wait(w), most))
			return 1;
	}
	return 0;
}

/* 1 if a program of the tree may yet join: a fork child that puts off
 * joining, alive (its entry of `waits`; WAIT_EXEC across its exec,
 * WAIT_FORK across its fork); or a notice not taken yet (written after the
 * loop last took the notices, or being written by a program alive).  The
 * entries of pids gone (killed before their first record), those left at
 * an exec that no image took back, and the notice slots of programs killed
 * while writing in them are freed.  Holding `lock`. */
static int
tree_pending(void)
{
	uint64_t w, now = ps_clock_ns(CLOCK_MONOTONIC);
	int i, n = 0;

	/* Words in no state of ours (the bell written over by a process of
	 * the same user) are freed as those of processes gone: they would
	 * keep the helper for good. */
	for (i = 0; tree_bell && i < NWAITS; i++) {
		w = atomic_load(&tree_bell->waits[i].word);
		if (w == WAIT_FREE)
			continue;
		if ((w & 0xff) > WAIT_FORK ||
		    ((w & 0xff) == WAIT_FORK ? now - tree_bell->waits[i].at > FORK_STALE_NS :
		     owner_gone(w) ||
		     ((w & 0xff) == WAIT_EXEC && now - tree_bell->waits[i].at > SUCCESSOR_NS)))
			(void)atomic_compare_exchange_strong(&tree_bell->waits[i].word, &w,
							     WAIT_FREE);
		else
			n++;
	}
	/* A notice being taken is the loop's own, which holds `lock`: one
	 * found so here is not. */
	for (i = 0; tree_bell && i < NBIRTHS; i++) {
		w = atomic_load(&tree_bell->births[i].word);
		if ((w & 0xff) > BIRTH_READY || (w != BIRTH_FREE && not_a_pid(w)) ||
		    ((w & 0xff) == BIRTH_WRITING && owner_gone(w)))
			(void)atomic_compare_exchange_strong(&tree_bell->births[i].word, &w,
							     BIRTH_FREE);
		else if (w != BIRTH_FREE)
			n++;
	}
	return n > 0;
}

/* 1 if the helper may end now, no program of the tree pending.  It says
 * so in the bell (`closing`) before a last look, so that a program that
 * writes its notice meanwhile either is seen here or sees `closing` and
 * withdraws it (notice): the notice and the flag are each written before
 * the other is read.  Holding `lock`. */
static int
ending(void)
{
	if (!tree_bell)
		return 1;
	if (tree_pending())
		return 0;
	atomic_store(&tree_bell->closing, 1);
	if (!tree_pending())
		return 1;
	atomic_store(&tree_bell->closing, 0);
	return 0;
}

/* The birth notices in the tree's bell that are due, or (`now`) every
 * one.  Holding `lock`. */
static void
take_births(int now)
{
	unsigned before;
	int i, last = 0;

	if (!tree_bell)
		return;
	/* Descriptors handed over for a notice that was withdrawn. */
	pthread_mutex_lock(&hand_lock);
	for (i = 0; i < NBIRTHS; i++) {
		uint64_t w = atomic_load_explicit(&tree_bell->births[i].word, memory_order_acquire);

		if (handed[i].pid && ((w & 0xff) == BIRTH_FREE ||
				      !handed_for_locked(i, &tree_bell->births[i], w))) {
			while (handed[i].n)
				close(handed[i].fd[--handed[i].n]);
			handed[i].pid = 0;
		}
	}
	pthread_mutex_unlock(&hand_lock);
	/* Again while a pass adds sessions: a child announced before its
	 * parent (itself a fork child) became one has its parent now.  Then
	 * the rest, which are refused. */
	do {
		before = nss;
		for (i = 0; i < NBIRTHS; i++)
			take_birth(&tree_bell->births[i], last, now);
		if (nss == before)
			last++;
	} while (last < 2);
}

/* This process's resident memory now (statm), or -1. */
static long
rss_kib(void)
{
	long size, rss = -1;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Session i is over.  Holding `lock`. */
static void
end_session(unsigned i)
{
	struct session *s = ss[i];
	struct birth *b;
	uint64_t w;
	int k;

	/* Its fork children's notices in their grace are taken now, while
	 * its settings are here to copy: a parent that ends at once (sh -c
	 * 'prog &') leaves its children in the tree. */
	for (k = 0; tree_bell && !s->gone_at && k < NBIRTHS; k++) {
		b = &tree_bell->births[k];
		w = atomic_load_explicit(&b->word, memory_order_acquire);
		if ((w & 0xff) == BIRTH_READY && !b->exec && b->ppid == s->pid)
			take_birth(b, 0, 1);
	}
	ss[i] = ss[--nss];
	/* Its last interval (with no live heap: its image is gone) goes with
	 * its group's next upload, its run stays in its files. */
	ps_group_leave(s->x);
	if (s->root) {
		/* Its /debug/pprof port was its own: let go, not kept serving a
		 * dead process while the tree's other programs (a daemon(3)
		 * child) keep the helper, and holding the port from the next
		 * instance of the program. */
		ps_listen_stop();
		/* The program this helper is a copy of is done: the watchdog
		 * (for a lock it held when copied) no longer applies; the loop
		 * arms it again for its own end (the tree's programs may keep it
		 * for long, some not even sessions yet).  Only in a helper: in
		 * thread mode the alarm is the program's.  Its export state is
		 * the program's own (x): not freed. */
		if (s->pidfd >= 0)
			(void)alarm(0);
		return;
	}
	ps_export_free(s->x);
	if (ps_log_level() >= PS_LOG_DEBUG)
		ps_debug("uploader: pid %d's session ended, %u left; helper RSS %ld KiB",
			 (int)s->pid, nss, rss_kib());
	session_unmap(s);
}

PS_SIGSAFE static int tree_busy(void);

/* 1 while the loop has a program to take or serve other than the one it
 * is saving for: the tree's notices and members.  Holding `lock`. */
static int
loop_busy(void)
{
	return nss > 1 || (tree_bell && tree_busy());
}

/* The busy() of the helper's walk once it is closing: the accepting
 * thread answers no one, so no program comes. */
static int
nobody_comes(void)
{
	return 0;
}

/* What is left of CACHE_FILL_LAST_NS, the time the helper may spend
 * looking objects up whole after its programs no longer wait: in the last
 * save of the loop's own program, then in the walk at the loop's end.
 * Holding `lock`. */
static uint64_t walk_left = CACHE_FILL_LAST_NS;

/* Session s's save of the symbol cache (ps_export_save_symbols).  The
 * last save of the loop's own program, when it serves no other, may take
 * walk_left and look whole objects up (the helper ends after it, and no
 * program waits), until another program comes; any other save,
 * CACHE_FILL_NS.  The walk at the loop's end alone would not do: a
 * program that leaves behind a child that never records (a daemon, an
 * idle `sleep 3600 &`) keeps its helper for that child's entry in the
 * bell's waits, and that walk would come only at the child's end, or
 * never if the helper is killed first.  Holding `lock`. */
static void
save_symbols(struct session *s, int final)
{
	int last = final && s->root && !loop_busy();
	uint64_t t0 = ps_clock_ns(CLOCK_MONOTONIC), spent;

	/* The walk has a bound of its own, after the last pass's (watchdog()):
	 * a pass that took most of that must not end the helper in the
	 * walk, before the cache is written.  Only in a helper (a pidfd): in
	 * thread mode the alarm is the program's. */
	if (last && s->pidfd >= 0)
		watchdog_after((unsigned)(walk_left / 1000000000ull) + 5);
	ps_export_save_symbols(s->x, final, last ? walk_left : CACHE_FILL_NS,
			       last ? loop_busy : NULL);
	spent = ps_clock_ns(CLOCK_MONOTONIC) - t0;
	if (last)
		walk_left -= spent < walk_left ? spent : walk_left;
}

/* 1 if the process of session s (whose image is gone) joined again with
 * its new image.  Holding `lock`. */
static int
successor(const struct session *s)
{
	unsigned i;

	for (i = 0; i < nss; i++)
		if (ss[i] != s && ss[i]->pid == s->pid)
			return 1;
	return 0;
}

/* After session s's pass for request req: a leader that stopped waiting
 * (its flush timeout) before its pass was done is told of in the info
 * log, since the files its caller found at its end were not all of them;
 * they are whole when the helper ends.  (A deadline of 0: it did not
 * wait, having nothing to write; other programs of a tree never wait.) */
static void
late(const struct session *s, int req)
{
	uint64_t now = ps_clock_ns(CLOCK_MONOTONIC), deadline = atomic_load(&s->c->deadline);

	if (s->root && deadline && now > deadline)
		ps_info("uploader: pid %d's last pass (%s) ended %llu ms after it stopped "
			"waiting (PYROSCOPE_FLUSH_TIMEOUT): its files were written after its %s",
			(int)s->pid, req == REQ_FINAL ? "exit" : "exec",
			(unsigned long long)((now - deadline) / 1000000),
			req == REQ_FINAL ? "exit" : "exec");
}

/* What session s asked for, or its program's end: 1 once it is over. */
static int
serve(struct session *s, uint64_t now)
{
	struct ctl *k = s->c;
	int req;

	/* The leader's last pass writes every file of the tree: not while a
	 * program's tables are on their way (one that ended without waiting
	 * is drained first), for a second at most: the leader waits.  Nor
	 * before the loop has looked at the dead since it was asked for: the
	 * programs the leader waited for died before it asked, and are
	 * drained first (a pool's workers, killed while the loop drained
	 * another). */
	if (s->root && atomic_load(&k->req) == REQ_FINAL &&
	    (!s->final_asked || hands_awaited(HAND_WAIT_NS)))
		return 0;
	req = atomic_exchange(&k->req, REQ_NONE);

	if (req == REQ_FINAL && s->root && s->pidfd >= 0)
		watchdog();
	if (req != REQ_NONE) {
		last_pass(s, atomic_load(&k->deadline), req == REQ_FINAL, 0);
		late(s, req);
		sem_post(&k->done);
		/* The program no longer waits: now the cache. */
		save_symbols(s, req == REQ_FINAL);
		if (req == REQ_FINAL)
			return 1;
	}
	if (s->killed || (s->pidfd >= 0 && host_gone(s->pidfd))) {
		/* Killed, or ended without a word (a raw exit_group,
		 * as Go programs end): everything sampled is here. */
		if (s->root)
			watchdog();
		if (!atomic_load(&k->exec_pending)) {
			last_pass(s, now + flush_timeout, 1, 1);
			save_symbols(s, 1);
			/* The bench build's handler timings, which the
			 * program's destructor did not write. */
			if (s->root)
				ps_bench_write(s->x->dir, s->x->app, (int)s->pid);
		}
		return 1;
	}
	if (s->pidfd >= 0 && atomic_load(&k->exec_pending)) {
		/* Its new image joins at once if it is preloaded: the session
		 * (and so the helper) lasts until it did, or a while.  Its
		 * maps are read at most every PS_WORKER_POLL_MS. */
		if (successor(s))
			return 1;
		if (!s->gone_at && now >= s->next_look) {
			s->next_look = now + PS_WORKER_POLL_MS * 1000000ull;
			if (image_gone(s))
				s->gone_at = now;
			/* Its /debug/pprof port is the new image's (which
			 * retries for it), not this helper's to keep. */
			if (s->gone_at && s->root)
				ps_listen_stop();
		}
		return s->gone_at && (now - s->gone_at > SUCCESSOR_NS || tree_fd < 0);
	}
	return atomic_load(&k->quit);
}

/* 1 in a child subreaper or a pid namespace's init, which profiles in a
 * thread (spawn_helper): the helpers of the processes below it come back
 * to it once their own parent is gone, and its thread reaps them
 * (reap_helpers).  Written by the constructor (spawn_helper). */
static int reaper;
#define REAP_NS (1000ull * 1000000)

/* This process's children that are helpers of the shim's (named so by
 * prctl) and have ended, reaped.  Nothing else would: a program that
 * waits for its own children by their pids (Python's subprocess) left
 * every one a zombie for good, one for each process below it that made a
 * helper (20 subprocesses of a Python as a container's init: 20 zombies).
 * One that waits for any child may still meet one first.  The uploader's
 * thread, in a reaper. */
static void
reap_helpers(void)
{
	char path[300], comm[32], list[4096], *p, *end;
	struct dirent *e;
	DIR *d = opendir("/proc/self/task");
	long pid;
	ssize_t n;
	int fd;

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : read(fd, list, sizeof(list) - 1);
		if (fd >= 0)
			close(fd);
		list[n > 0 ? n : 0] = '\0';
		for (p = list; (pid = strtol(p, &end, 10)) > 0; p = end) {
			snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			n = fd < 0 ? -1 : read(fd, comm, sizeof(comm) - 1);
			if (fd >= 0)
				close(fd);
			if (n == 9 && !memcmp(comm, "pyroshim\n", 9))
				(void)waitpid((pid_t)pid, NULL, WNOHANG);
		}
	}
	if (d)
		closedir(d);
}

/* ---- the loop -------------------------------------------------------- */

/* Serve every session until none is left.  `helper_side`: in the helper
 * process (0: a thread of the program, which has its one session). */
static void
loop(int helper_side)
{
	uint64_t next = ps_clock_ns(CLOCK_MONOTONIC) + interval, wake_at, now, sweep = 0, reap = 0;
	struct timespec ts;
	unsigned i;

	for (;;) {
		pthread_mutex_lock(&lock);
		wake_at = min_u64(min_u64(next, births_due()), ps_group_next_due());
		for (i = 0; i < nss; i++)
			wake_at = min_u64(wake_at, ps_export_next_due(ss[i]->x));
		pthread_mutex_unlock(&lock);
		if (helper_side)
			wake_at = min_u64(wake_at, ps_clock_ns(CLOCK_MONOTONIC) + PS_WORKER_POLL_MS * 1000000ull);
		if (reaper)
			wake_at = min_u64(wake_at, reap);
		ts = to_ts(wake_at);
		(void)sem_clockwait(bell, CLOCK_MONOTONIC, &ts);
		pthread_mutex_lock(&lock);
		take_pending();
		take_births(0);
		now = ps_clock_ns(CLOCK_MONOTONIC);
		/* The entries of programs killed before they joined, at most
		 * every PS_WORKER_POLL_MS: free for others. */
		if (helper_side && now >= sweep) {
			(void)tree_pending();
			sweep = now + PS_WORKER_POLL_MS * 1000000ull;
		}
		if (reaper && now >= reap) {
			reap_helpers();
			reap = now + REAP_NS;
		}
		/* The dead first: a program that waited for its children (a
		 * pool that killed its workers) then finds their profiles
		 * written when its own last pass answers.  A last pass asked
		 * for after this look waits for the next (serve()): the bell
		 * it rang wakes the loop at once. */
		for (i = 0; i < nss; i++)
			ss[i]->final_asked = atomic_load(&ss[i]->c->req) == REQ_FINAL;
		for (i = 0; i < nss; i++) {
			if (!dead(ss[i]))
				continue;
			root_left(ss[i]);
			if (serve(ss[i], now))
				end_session(i--);
		}
		for (i = 0; i < nss;)
			if (serve(ss[i], now))
				end_session(i);
			else
				i++;
		/* The last program is gone: the notices in their grace are
		 * taken now, or never; one whose descriptors are still on
		 * their way is waited for (hand_wait: a second, ten for a
		 * program gone). */
		if (!nss)
			take_births(1);
		/* Set before the entries are looked at: one freed after the
		 * look rings. */
		if (helper_side && tree_bell)
			atomic_store(&tree_bell->lingering, !nss);
		if (!nss && !hands_awaited(UINT64_MAX) && (!helper_side || ending())) {
			atomic_store(&closing, 1);  /* the accepting thread answers no one now */
			if (helper_side)
				watchdog();   /* the last pass and sends are bounded too */
			(void)ps_group_pass();
			/* The ended programs' last intervals, in the helper: no
			 * one waits.  (In thread mode the exiting thread's last
			 * pass was the final flush.) */
			if (helper_side)
				ps_group_send(1, ps_clock_ns(CLOCK_MONOTONIC) + flush_timeout, &lock);
			/* A /debug/pprof window still open gets what it has: its
			 * answer takes the lock. */
			if (helper_side) {
				pthread_mutex_unlock(&lock);
				ps_listen_finish(LISTEN_FINISH_NS);
				pthread_mutex_lock(&lock);
			}
			/* Then the objects the sessions offered to be looked up
			 * whole: in a tree they are mostly members', and the
			 * leader's last save (save_symbols) came while other
			 * programs were still here.  Nobody waits now. */
			if (helper_side && walk_left) {
				watchdog_after((unsigned)(walk_left / 1000000000ull) + 5);
				ps_symbolizer_walk(walk_left, nobody_comes);
			}
			pthread_mutex_unlock(&lock);
			return;
		}
		now = ps_clock_ns(CLOCK_MONOTONIC);
		if (now >= next) {
			for (i = 0; i < nss; i++) {
				(void)ps_export_run(ss[i]->x, 0);
				ps_export_save_symbols(ss[i]->x, 0, CACHE_FILL_NS, NULL);
			}
			(void)ps_group_pass();
			next += interval;
			if (next < now)
				next = now + interval;  /* a slow pass: skip, don't burst */
		}
		/* Requests go out without the lock: a server that does not
		 * answer must not keep the last pass waiting.  (In the helper
		 * they go out from a thread of their own, so that the passes
		 * are never late either.) */
		if (!helper_side) {
			ps_export_send(x, 0, 0, &lock);
			ps_group_send(0, 0, &lock);
		}
		pthread_mutex_unlock(&lock);
	}
}

/* The helper's sending thread: queued uploads, as they fall due.  A send
 * releases the lock while it waits for the server, so the sessions may
 * change meanwhile: the scan starts again after each. */
static void *
sender_main(void *arg)
{
	struct timespec ts;
	uint64_t due, now;
	unsigned i;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&lock);
again:
		/* Only when something is due: a program with nothing to send
		 * never loads libcurl, and never delays its own last pass. */
		now = ps_clock_ns(CLOCK_MONOTONIC);
		due = UINT64_MAX;
		for (i = 0; i < nss; i++) {
			if (ps_export_next_due(ss[i]->x) <= now) {
				ps_export_send(ss[i]->x, 0, 0, &lock);
				goto again;
			}
			due = min_u64(due, ps_export_next_due(ss[i]->x));
		}
		if (ps_group_next_due() <= now) {
			ps_group_send(0, 0, &lock);
			goto again;
		}
		due = min_u64(due, ps_group_next_due());
		pthread_mutex_unlock(&lock);
		ts = to_ts(min_u64(due, ps_clock_ns(CLOCK_MONOTONIC) + PS_WORKER_POLL_MS * 1000000ull));
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	return NULL;
}

/* ---- one message with descriptors, each way --------------------------- */

#define MAX_FDS 3

/* Send len bytes of buf and n descriptors (SCM_RIGHTS) on socket fd.
 * Returns what sendmsg returned. */
PS_SIGSAFE static ssize_t
send_fds(int fd, const void *buf, size_t len, const int *fds, int n)
{
	union {
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec io = { (void *)buf, len };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cm.buf,
			    .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	ssize_t rc;

	memset(&cm, 0, sizeof(cm));
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(h), fds, (size_t)n * sizeof(int));
	/* Through syscall(2), not the shim's own sendmsg (hook_wait.c),
	 * whose first call looks the C library's up with dlsym: a program's
	 * first record may be in a signal handler (ps_worker_defer made the
	 * first call of syscall). */
	while ((rc = syscall(SYS_sendmsg, fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return rc;
}

/* Receive one message of at most len bytes into buf, and up to MAX_FDS
 * descriptors (close-on-exec) into fds[*n].  Returns its length, or -1
 * (also for a message or descriptors cut short). */
static ssize_t
recv_fds(int fd, void *buf, size_t len, int *fds, int *n)
{
	union {
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec io = { buf, len };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cm.buf,
			    .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *h;
	ssize_t got;

	*n = 0;
	while ((got = recvmsg(fd, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	for (h = got < 0 ? NULL : CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS && !*n) {
			*n = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			*n = *n > MAX_FDS ? MAX_FDS : *n;
			memcpy(fds, CMSG_DATA(h), (size_t)*n * sizeof(int));
		}
	return (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? -1 : got;
}

/* The executable mappings of a maps file (/proc/PID/maps), as its lines,
 * into dst.  Returns their length, or 0 when they cannot be read or do not
 * fit in cap bytes.  Async-signal-safe: system calls, a stack buffer; no
 * malloc (the accepting thread has no arena). */
PS_SIGSAFE static uint32_t
maps_lines(const char *path, char *dst, size_t cap)
{
	char buf[4096], *line, *nl, *sp;
	size_t have = 0, used = 0, n;
	ssize_t r;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	for (;;) {
		r = syscall(SYS_read, fd, buf + have, sizeof(buf) - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		for (line = buf; (nl = memchr(line, '\n', (size_t)(buf + have - line))); line = nl + 1) {
			n = (size_t)(nl + 1 - line);
			sp = memchr(line, ' ', n);
			/* "lo-hi perms ...": the executable ones. */
			if (!sp || nl - sp < 4 || sp[3] != 'x')
				continue;
			if (used + n > cap)
				goto fail;
			memcpy(dst + used, line, n);
			used += n;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf))   /* a line longer than the buffer */
			goto fail;
	}
	if (r == 0) {
		(void)syscall(SYS_close, fd);
		return (uint32_t)used;
	}
fail:
	(void)syscall(SYS_close, fd);
	return 0;
}

/* ---- joining a tree: the helper's side --------------------------------- */

/* What program pid maps, read now, into its control block (descriptor
 * fd): at its first record, to name its frames from if it dies before
 * its notice is taken.  A crash or a kill within the notice's grace had
 * lost all it recorded.  Accepting thread. */
static void
seen(pid_t pid, int fd)
{
	char path[64];
	struct ctl *k = map_fd(fd, sizeof(*k), NULL, NULL);
	uint32_t n;

	if (!k)
		return;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	n = maps_lines(path, k->seen, sizeof(k->seen));
	atomic_store_explicit(&k->seen_len, n, memory_order_release);
	(void)munmap(k, sizeof(*k));
}

/* An announced program's descriptors (a struct hand from pid, of user
 * uid): kept for its notice, which take_birth() takes or take_births()
 * drops.  Takes the descriptors. */
static void
hand_over(const struct hand *h, pid_t pid, uid_t uid, int *fds, int nfd)
{
	struct stat sb;
	int slot = h->slot;
	uint64_t w;

	/* (pid 0: a program in a pid namespace this helper does not see.)
	 * Only for the sender's own notice: another process of the user
	 * must not replace (and close) what a program handed over. */
	if (memcmp(h->magic, magic, sizeof(magic)) || slot < 0 || slot >= NBIRTHS ||
	    !tree_bell || pid <= 0 ||
	    (w = atomic_load(&tree_bell->births[slot].word)) >> 8 != (uint64_t)pid ||
	    ((w & 0xff) != BIRTH_READY && (w & 0xff) != BIRTH_TAKING)) {
		while (nfd > 0)
			close(fds[--nfd]);
		return;
	}
	if (nfd < 1 || fstat(fds[0], &sb)) {
		while (nfd > 0)
			close(fds[--nfd]);
		return;
	}
	seen(pid, fds[0]);
	pthread_mutex_lock(&hand_lock);
	while (handed[slot].n)
		close(handed[slot].fd[--handed[slot].n]);
	handed[slot].pid = pid;
	handed[slot].uid = uid;
	handed[slot].n = nfd;
	handed[slot].id[0] = (uint64_t)sb.st_dev;
	handed[slot].id[1] = (uint64_t)sb.st_ino;
	memcpy(handed[slot].fd, fds, (size_t)nfd * sizeof(int));
	pthread_mutex_unlock(&hand_lock);
	sem_post(bell);   /* a notice waiting for them is due now */
}

/* 1 if process pid has a notice in the bell, not yet taken: only a
 * process that maps the tree's bell can have written one. */
static int
holds_notice(pid_t pid)
{
	uint64_t w;
	int i;

	for (i = 0; tree_bell && pid > 0 && i < NBIRTHS; i++) {
		w = atomic_load_explicit(&tree_bell->births[i].word, memory_order_acquire);
		if (w >> 8 == (uint64_t)pid &&
		    ((w & 0xff) == BIRTH_READY || (w & 0xff) == BIRTH_TAKING))
			return 1;
	}
	return 0;
}

/* One message on connection fd: an announced program's descriptors
 * (hand_over), or a join: its message, its mappings, its pidfd; answered
 * with this helper's pid and bell once queued.  A join that fails gets no
 * answer, so the program makes a helper of its own. */
static void
admit(int fd)
{
	/* What came, before it is known to be a join: the accepting
	 * thread's alone. */
	static union {
		struct reg r;
		struct hand h;
	} in PS_LARGE;
	struct reg_reply rep = { { 0 }, 0 };
	struct timeval tv = { 1, 0 };
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	struct session *s = NULL;
	int fds[MAX_FDS] = { -1, -1, -1 }, nfd = 0, i, queued = 0;
	ssize_t n;

	/* A process of another user is heard only if it holds a notice in
	 * the bell (below): any user can connect to the socket, and one that
	 * sends nothing holds this thread for the timeout. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) ||
	    (cr.uid != getuid() && !holds_notice(cr.pid)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		return;
	n = recv_fds(fd, &in, sizeof(in), fds, &nfd);
	if (n == (ssize_t)sizeof(in.h)) {
		/* From any user: only a process that maps the tree's bell
		 * holds a notice there (hand_over checks), and one of
		 * another user -- a fork child that gave up root, as a
		 * server's workers do -- is taken with its parent's
		 * settings, not its own (take_birth). */
		hand_over(&in.h, cr.pid, cr.uid, fds, nfd);
		return;
	}
	/* A join brings settings of its own: this user's programs only.  A
	 * helper that is closing answers none, at once (the loop may hold
	 * `lock` for its last walk): the program makes a helper of its own. */
	if (atomic_load(&closing) || cr.uid != getuid() || n != (ssize_t)sizeof(in.r) ||
	    reg_check(&in.r) ||
	    nfd != 2 + (in.r.has_lt != 0))
		goto out;
	s = session_new();
	if (!s)
		goto out;
	memcpy(&s->r, &in.r, sizeof(s->r));
	s->c = map_fd(fds[0], sizeof(*s->c), NULL, &s->ctl_inode);
	if (!s->c || !(s->st.c = map_fd(fds[1], s->r.st.map_len, NULL, NULL)))
		goto out;
	s->st.map_len = s->r.st.map_len;
	if (ps_stacktab_view(&s->st, &s->r.st, s->st.c))
		goto out;
	if (s->r.has_lt) {
		s->lt.map_len = s->r.lt.map_len;
		if (!(s->lt.c = map_fd(fds[2], s->r.lt.map_len, NULL, NULL)) ||
		    ps_livetab_view(&s->lt, &s->r.lt, s->lt.c))
			goto out;
	}
	s->pid = cr.pid;
	s->pidfd = (int)syscall(SYS_pidfd_open, cr.pid, 0);
	if (s->pidfd < 0)
		goto out;
	pthread_mutex_lock(&lock);
	if (!atomic_load(&closing) && npending < MAX_PENDING) {
		pending[npending++] = s;
		queued = 1;
	}
	pthread_mutex_unlock(&lock);
	if (queued) {
		memcpy(rep.magic, magic, sizeof(magic));
		rep.pid = (int32_t)getpid();
		/* Unanswered, the program gives up and makes its own
		 * helper: the session then ends with the program. */
		(void)send_fds(fd, &rep, sizeof(rep), &tree_bell_fd, 1);
		sem_post(bell);
	}
out:
	for (i = 0; i < nfd; i++)
		close(fds[i]);
	if (!queued && s)
		session_unmap(s);
}

/* The helper's accepting thread: joins and hand-overs, one at a time. */
static void *
accept_main(void *arg)
{
	struct timespec pause = { 0, 10 * 1000000 };
	int fd;

	(void)arg;
	for (;;) {
		fd = accept4(tree_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			admit(fd);
			close(fd);
		} else if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) {
			return NULL;
		} else if (errno != EINTR && errno != ECONNABORTED) {
			(void)nanosleep(&pause, NULL);   /* out of descriptors or memory */
		}
	}
	return NULL;
}

/* ---- the helper process ---------------------------------------------- */

/* Everything the program opened is closed, but the log file, `keep`
 * (the helper's pidfd), the listener's socket, the tree's socket and
 * bell, and `tables` (NULL, or the three that exec_child passes on); the
 * standard streams are /dev/null, or the program's stderr when the log
 * level asks for more than errors and lines go there. */
static void
detach_fds(int keep, const int *tables)
{
	int logfd = ps_log_fd(), keep_err = logfd < 0 && ps_log_level() > PS_LOG_ERROR;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int k[] = { logfd, keep, listen_here ? ps_listen_fd() : -1, tree_fd, tree_bell_fd,
		    tables ? tables[0] : -1, tables ? tables[1] : -1, tables ? tables[2] : -1 }, t;
	int nk = (int)(sizeof(k) / sizeof(k[0])), i, j;
	unsigned from = 3;

	if (null >= 0) {
		(void)dup2(null, 0);
		(void)dup2(null, 1);
		if (!keep_err)
			(void)dup2(null, 2);
	}
	for (i = 0; i < nk; i++)        /* sorted, so the gaps close in order */
		for (j = i + 1; j < nk; j++)
			if (k[j] < k[i]) {
				t = k[i];
				k[i] = k[j];
				k[j] = t;
			}
	for (i = 0; i < nk; i++) {
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

/* The helper's loop, on a stack of its own: the process starts on the
 * 32 KiB clone stack of spawn_helper(), too small for libdw's recursive
 * walk of DWARF scopes.  The same thread switches to it (makecontext), so
 * a helper makes no thread, nor the malloc arena a thread gets: 0.1 ms of
 * the 0.4-0.6 ms a `/bin/true`'s helper cost (BENCHMARKS 14e). */
static void
helper_loop(void)
{
	loop(1);
	helper_end();
}

/* The helper is a copy of the program, command line included: `pidof
 * prog`, `pgrep -f` and `pkill -f` counted it as the program while it
 * finished the program's profiles.  Its copy of the argument area
 * (arg_start and arg_end, fields 48 and 49 of /proc/self/stat) now starts
 * with its name and a NUL, and ends with a byte that is not NUL: the kernel
 * then reads the command line as setproctitle(3) leaves it, up to its
 * first NUL.  An area too short for the whole gets "pyroshim", cut to it
 * if need be; one of less than 2 bytes is left as it is.  Written through
 * the kernel, which fails where the area is not writable (moved by
 * PR_SET_MM) instead of faulting. */
static void
retitle(pid_t of)
{
	char st[1024], title[48], *p;
	unsigned long field[2] = { 0, 0 };
	struct iovec mine[2], area[2];
	size_t n, len, at;
	ssize_t got;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), i;

	if (fd < 0)
		return;
	got = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (got <= 0)
		return;
	st[got] = '\0';
	/* Fields counted from the state (field 3), after the name's ')'. */
	p = strrchr(st, ')');
	for (i = 3; p && i <= 49; i++) {
		p = strchr(p + 1, ' ');
		if (p && i >= 48)
			field[i - 48] = strtoul(p + 1, NULL, 10);
	}
	if (!p || field[1] < field[0] + 2)
		return;
	len = field[1] - field[0];
	at = ps_cat(title, sizeof(title), 0, "pyroshim: helper of ");
	n = ps_cat_u(title, sizeof(title), at, (unsigned long)of);
	if (n > len - 2)   /* the title's first word alone, cut to the area */
		n = sizeof("pyroshim") - 1 < len - 2 ? sizeof("pyroshim") - 1 : len - 2;
	title[n] = '\0';
	mine[0] = (struct iovec){ title, n + 1 };
	mine[1] = (struct iovec){ (char *)" ", 1 };
	area[0] = (struct iovec){ (void *)field[0], n + 1 };
	area[1] = (struct iovec){ (void *)(field[1] - 1), 1 };
	(void)process_vm_writev(getpid(), mine, 2, area, 2, 0);
}

PS_SIGSAFE static int table_fds(int fd[3]);
PS_SIGSAFE static void reg_fill(void);

/* What every helper does first, forked or exec'd: out of the program's
 * signals, priority, hooks and session. */
static void
helper_alone(void)
{
	sigset_t all;

	/* The kernel's struct sigaction, its mask empty: the same on every
	 * architecture for SIG_DFL. */
	static const struct {
		void (*handler)(int);
		unsigned long flags;
		void (*restorer)(void);
		unsigned long mask;
	} dfl = { SIG_DFL, 0, NULL, 0 };

	sigfillset(&all);
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, _NSIG / 8);
	/* A forked helper is a copy of the program: its SIGALRM handler, or
	 * a SIG_IGN it inherited across exec (which an exec'd helper
	 * inherits too), would run or void the watchdog.  The system call,
	 * not sigaction(), which the shim virtualizes. */
	(void)syscall(SYS_rt_sigaction, SIGALRM, &dfl, NULL, _NSIG / 8);
	/* A program's real-time policy is not for its helper: at the same
	 * priority, on the same processor, one of them starves the other.
	 * Lowering it needs no privilege. */
	if (sched_getscheduler(0) == SCHED_FIFO || sched_getscheduler(0) == SCHED_RR)
		(void)sched_setscheduler(0, SCHED_OTHER, &(struct sched_param){ 0 });
	ps_alloc_off();  /* nothing of the helper's goes in the program's tables */
	ps_wait_off();
	ps_log_set_pid(host);
	(void)setsid();  /* the terminal's signals are for the program */
	(void)prctl(PR_SET_NAME, "pyroshim", 0, 0, 0);
}

/* The helper from its root session on: the tree's joins, the listener,
 * the sender and the loop.  Never returns. */
__attribute__((noreturn)) static void
helper_serve(void)
{
	static PS_LARGE ucontext_t here, there;
	pthread_attr_t attr;
	pthread_t acceptor;
	void *stk;

	watchdog_after(START_BOUND_S);
	if (root_session(host_pidfd))
		helper_end();
	/* Births are for the helper of the tree, not for a fork child's own
	 * (which inherited the tree's bell). */
	if (tree_fd < 0)
		tree_bell = NULL;
	else
		atomic_store(&tree_bell->helper_pid, getpid());
	/* The tree's joins: a thread that only waits and maps (it never
	 * allocates, so it gets no malloc arena), with a small stack. */
	if (tree_fd >= 0 && (pthread_attr_init(&attr) ||
			     pthread_attr_setstacksize(&attr, 64u << 10) ||
			     pthread_create(&acceptor, &attr, accept_main, NULL)))
		ps_warn("uploader: no thread to accept the tree's programs; each makes a helper");
	if (listen_here && ps_listen_start(x, &lock, host))
		ps_debug("uploader: no listener thread");
	need_sender(x);
	(void)alarm(0);
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
	loop(1);
	helper_end();
}

/* The forked helper: a copy of the program. */
static void
helper_main(void)
{
	helper_alone();
	x->watch = host;
	retitle(host);
	/* Not bounded: closing the program's descriptors may flush a file
	 * system's writes (NFS, FUSE) for long. */
	detach_fds(host_pidfd, NULL);
	helper_serve();
}

/* ---- the helper as a fresh image of this library ---------------------- */

/* What the exec'd helper is told, in its environment's HELPER_VAR: these
 * numbers, in this order, each ended by ','.  Not its arguments: its
 * command line is its title ("pyroshim: helper of PID"), all that `ps`,
 * pgrep -f or pkill -f see. */
enum {
	A_HOST, A_PIDFD, A_CTL, A_ST, A_LT, A_TREE, A_BELL, A_LOGFD, A_LOGLEVEL,
	A_LISTENING, A_LFD, A_BINDERR, A_LISTEN_HERE, NARGS_IMAGE
};
#define HELPER_VAR "PYROSHIM_IMAGE="

/* Where this library was loaded from (magic_init), for the helper's
 * exec; "" when unknown (the helper is then forked).  Written by the
 * constructor, read-only after. */
static char self_path[PATH_MAX];

/* The exec'd helper's arguments and environment, built by the process
 * that execs it (exec_child, sharing the program's memory: none of this
 * is on the program's heap).  Written only between the spawn's clone
 * calls, while the thread that spawns waits. */
static PS_LARGE char exec_vars[sizeof(HELPER_VAR) + NARGS_IMAGE * 24];
static char exec_title[48];
static char *exec_argv[2];
static char **exec_envp;
static _Atomic int exec_err;
/* 1 while wake() starts a put-off helper: if the exec fails, no copy of
 * the program is made then (the start fails, and is tried again where a
 * thread may be made instead).  Written by wake(). */
static _Atomic int spawn_late;

/* v in decimal, sign included, and a ',' at dst[at]; the new length. */
static size_t
text_of(char *dst, size_t cap, size_t at, long v)
{
	if (v < 0) {
		at = ps_cat(dst, cap, at, "-");
		v = -v;
	}
	return ps_cat(dst, cap, ps_cat_u(dst, cap, at, (unsigned long)v), ",");
}

/* The loader's settings are the program's, never its helper's, but for
 * where libraries are: a preload or audit list would start another
 * profiler's library in it, LD_DEBUG_OUTPUT and LD_PROFILE write files
 * of its own. */
static int
env_kept(const char *e)
{
	return strncmp(e, "LD_", 3) || !strncmp(e, "LD_LIBRARY_PATH=", 16);
}

/* 1 if fd is still a memfd of ours of len bytes (map_fd's checks). */
static int
still_mapped(int fd, size_t len)
{
	struct stat sb;

	return fd >= 0 && ps_shmem_sealed(fd) && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
	       (uint64_t)sb.st_size >= len;
}

/* The grandchild: a clone sharing the program's memory (CLONE_VM), with
 * its own descriptor table, that keeps only the helper's descriptors and
 * execs this library.  System calls only: it runs on the program's
 * memory while another thread of the program may hold any lock.  Ends by
 * the exec, or with exec_err set. */
static int
exec_child(void *arg)
{
	long v[NARGS_IMAGE];
	int fd[3] = { -1, -1, -1 }, i, n;
	size_t at;

	(void)arg;
	n = table_fds(fd);
	/* Still the tables' memfds: a fork child that closed every
	 * descriptor (a daemon's habit) has none left, and only a copy of
	 * it can have its tables. */
	if (n < 0 || !still_mapped(fd[0], sizeof(*c)) || !still_mapped(fd[1], x->st->map_len) ||
	    (x->lt && !still_mapped(fd[2], x->lt->map_len))) {
		atomic_store(&exec_err, EBADF);
		syscall(SYS_exit, 127);
	}
	detach_fds(host_pidfd, fd);
	v[A_HOST] = host;
	v[A_PIDFD] = host_pidfd;
	v[A_CTL] = fd[0];
	v[A_ST] = fd[1];
	v[A_LT] = fd[2];
	v[A_TREE] = tree_fd;
	v[A_BELL] = tree_bell_fd;
	v[A_LOGFD] = ps_log_fd();
	v[A_LOGLEVEL] = ps_log_level();
	v[A_LISTENING] = listen_here && ps_listen_configured();
	v[A_LFD] = v[A_LISTENING] ? ps_listen_fd() : -1;
	v[A_BINDERR] = v[A_LISTENING] ? ps_listen_bind_err() : 0;
	v[A_LISTEN_HERE] = listen_here;
	at = ps_cat(exec_vars, sizeof(exec_vars), 0, HELPER_VAR);
	for (i = 0; i < NARGS_IMAGE; i++) {
		/* The descriptors it keeps, open across the exec. */
		if ((i == A_PIDFD || i == A_CTL || i == A_ST || i == A_LT || i == A_TREE ||
		     i == A_BELL || i == A_LOGFD || i == A_LFD) && v[i] >= 0)
			(void)fcntl((int)v[i], F_SETFD, 0);
		at = text_of(exec_vars, sizeof(exec_vars), at, v[i]);
	}
	/* Its command line is its title (retitle's for a forked one). */
	at = ps_cat(exec_title, sizeof(exec_title), 0, "pyroshim: helper of ");
	(void)ps_cat_u(exec_title, sizeof(exec_title), at, (unsigned long)host);
	exec_argv[0] = exec_title;
	exec_argv[1] = NULL;
	exec_envp[0] = exec_vars;
	for (n = 1, i = 0; environ && environ[i]; i++)
		if (env_kept(environ[i]))
			exec_envp[n++] = environ[i];
	exec_envp[n] = NULL;
	atomic_store(&exec_err, 0);   /* still -1: it died before the exec */
	syscall(SYS_execve, self_path, exec_argv, exec_envp);
	atomic_store(&exec_err, errno ? errno : ENOEXEC);
	syscall(SYS_exit, 127);
	return 0;
}

/* Exec the helper from the middle process.  Returns its pid, or -1 (then
 * fork it).  The grandchild is a clone sharing the memory (no copy of the
 * program's page tables) and suspending the middle process until its
 * exec; its parent, the middle process, ends next, so it is reparented
 * away as a forked helper is. */
static pid_t
exec_helper(void)
{
	static PS_LARGE char stack[16384] __attribute__((aligned(16)));
	size_t n = 0, len;
	pid_t pid;
	int st;

#ifdef PS_BENCH
	/* The benchmark build's handler timings are in memory the program
	 * shares with a forked helper only (shim/bench.c). */
	atomic_store(&exec_err, ENOTSUP);
	return -1;
#endif
	if (!self_path[0])
		return -1;
	while (environ && environ[n])
		n++;
	len = (n + 2) * sizeof(char *);
	exec_envp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (exec_envp == MAP_FAILED)
		return -1;
	atomic_store(&exec_err, -1);
	pid = clone(exec_child, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	(void)munmap(exec_envp, len);
	exec_envp = NULL;
	if (pid > 0 && atomic_load(&exec_err)) {
		(void)waitpid(pid, &st, 0);
		pid = -1;
	}
	return pid < 0 ? -1 : pid;
}

/* The middle process: a clone(2) sharing the program's memory, with no
 * exit signal, so the program gets no SIGCHLD for it.  It execs the helper
 * (exec_helper) or, where it cannot, forks it (glibc's _Fork runs none of
 * the program's fork handlers; the program's memory is then copied once,
 * for the helper), and ends, so the helper is reparented away.  It
 * touches nothing but its own stack: the program is suspended
 * (CLONE_VFORK) until it is gone. */
static int
middle(void *arg)
{
	sigset_t all;
	pid_t pid;

	(void)arg;
	/* Nothing of the program's may run here, nor in the grandchild
	 * before its exec: both run on the program's memory. */
	sigfillset(&all);
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, _NSIG / 8);
	pid = exec_helper();
	if (pid < 0 && !atomic_load(&spawn_late))
		pid = _Fork();
	if (pid == 0)
		helper_main();
	if (pid > 0)
		atomic_store(&c->helper_pid, pid);
	/* A tree's leader: its children may announce themselves from now
	 * on, before the helper runs (born() asks whether it lives). */
	if (pid > 0 && tree_fd >= 0 && tree_bell)
		atomic_store(&tree_bell->helper_pid, pid);
	syscall(SYS_exit, pid < 0 ? 1 : 0);
	return 0;
}

PS_SIGSAFE static int
spawn_helper(void)
{
	static PS_LARGE char stack[32768] __attribute__((aligned(16)));
	int sub = 0, st, saved = errno, rc = 0;
	pid_t pid;

	/* A child subreaper, or the init of a pid namespace, would get the
	 * helper back as its own child. */
	if (getpid() == 1 || (prctl(PR_GET_CHILD_SUBREAPER, &sub, 0, 0, 0) == 0 && sub)) {
		reaper = 1;
		return -EPERM;
	}
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
	loop(0);
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
	reg_fill();   /* an exec'd helper reads the program's settings there */
	rc = spawn_helper();
	if (rc == 0)
		helper = 1;
	ps_shmem_close_fds();   /* the helper has the mappings */
	return rc;
}

/* ---- joining a tree: the program's side -------------------------------- */

/* The length of a tree's name's first part, "pyroshim-PID-RANDOM": its
 * socket's.  What follows it, "-HPID-FD", says where the helper holds the
 * bell (config.c checked the form). */
PS_SIGSAFE static size_t
sock_len(const char *name)
{
	size_t n = strlen(name), k = 9 + strspn(name + 9, "0123456789") + 17;

	return k < n ? k : n;
}

PS_SIGSAFE static socklen_t
tree_addr(struct sockaddr_un *a, const char *name)
{
	size_t n = sock_len(name);

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path + 1, name, n);   /* abstract: no file to leave behind */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* The tree's name, "pyroshim-PID-RANDOM", into tree_name: its socket's.
 * Returns 0, or -1 (no random bytes). */
static int
tree_name_new(void)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		return -1;
	snprintf(tree_name, sizeof(tree_name), "pyroshim-%d-%016llx", (int)getpid(),
		 (unsigned long long)r);
	return 0;
}

/* Lead a tree: a socket for its programs to join, named in tree_name
 * (tree_name_new), and its bell, both handed to the helper about to be
 * made.  Without them the helper serves this program alone.  Returns 0,
 * or -1 with errno set (tree_name then "").  Async-signal-safe (wake). */
PS_SIGSAFE static int
tree_open(void)
{
	struct sockaddr_un a;
	struct bell *b;
	socklen_t n;
	int fd, saved;

	n = tree_addr(&a, tree_name);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	b = ps_shmem_new(sizeof(*b));
	if (fd < 0 || !b || ps_shmem_fd(b) < 0 || bind(fd, (struct sockaddr *)&a, n) ||
	    listen(fd, MAX_PENDING) || sem_init(&b->wake, 1, 0)) {
		saved = errno;
		if (fd >= 0)
			close(fd);
		if (b)
			ps_shmem_free(b, sizeof(*b));
		tree_name[0] = '\0';
		errno = saved;
		return -1;
	}
	memcpy(b->magic, magic, sizeof(magic));
	memcpy(b->name, tree_name, sizeof(b->name));
	tree_fd = fd;
	tree_bell_fd = ps_shmem_fd(b);
	tree_bell = b;
	bell = &b->wake;
	tree_leader = 1;
	return 0;
}

/* "-N" after the first `at` bytes of buf (size `room`).  Returns the new
 * length, or 0 if it does not fit.  Async-signal-safe (no snprintf). */
PS_SIGSAFE static size_t
put_num(char *buf, size_t at, size_t room, unsigned long v)
{
	at = ps_cat_u(buf, room, ps_cat(buf, room, at, "-"), v);
	return at < room ? at : 0;
}

/* The program no longer holds the tree's socket: the helper does, or
 * there is none.  Async-signal-safe. */
PS_SIGSAFE static void
tree_handed_over(int ok)
{
	size_t n = strlen(tree_name);

	/* Where the helper holds the bell: an exec'd image maps it from
	 * there, and announces itself without a word to the helper. */
	if (ok && n && tree_bell_fd >= 0 &&
	    (!(n = put_num(tree_name, n, sizeof(tree_name),
			  (unsigned long)atomic_load(&c->helper_pid))) ||
	     !put_num(tree_name, n, sizeof(tree_name), (unsigned long)tree_bell_fd)))
		ok = 0;
	if (ok && tree_name[0]) {
		memcpy(tree_env, "PYROSHIM_HELPER=", 16);
		memcpy(tree_env + 16, tree_name, strlen(tree_name) + 1);
		tree_env_short = 16 + sock_len(tree_name);
	}
	if (tree_fd >= 0)
		close(tree_fd);
	tree_fd = tree_bell_fd = -1;   /* the bell's closes with the others */
	if (!ok) {
		tree_name[0] = '\0';
		if (tree_bell)
			ps_shmem_free(tree_bell, sizeof(*tree_bell));
		tree_bell = NULL;
		bell = c ? &c->wake : NULL;
	}
}

/* What this program says about itself to its tree's helper, in its
 * control block (struct reg). */
PS_SIGSAFE static void
reg_fill(void)
{
	struct reg *r = &c->r;

	memcpy(r->magic, magic, sizeof(magic));
	r->size = sizeof(*r);
	r->has_lt = x->lt != NULL;
	r->has_span = x->span != NULL;
	memcpy(r->on, x->on, sizeof(r->on));
	r->start_ns = x->start_ns;
	r->skip_lo = x->skip_lo;
	r->skip_hi = x->skip_hi;
	r->entry = x->entry;
	memcpy(r->app, x->app, sizeof(r->app));
	/* Not the whole of dir and cfg: their strings, into the control
	 * block's zero bytes (a page written is a page fault, here and in
	 * the helper that reads it). */
	copy_string(r->dir, x->dir, sizeof(r->dir));
	r->dir_refused = x->dirfd == -2;
	r->st = *x->st;
	if (x->lt)
		r->lt = *x->lt;
	if (x->span)
		r->span = *x->span;
	r->cfg_set = ps_config_copy(&r->cfg, x->cfg, PS_CONFIG_ALL, r->cfg_set);
}

/* The descriptors of this program's control block, stack table and (if
 * any) live table, into fd[3] (-1 for no live table).  Returns how many
 * there are, or -1 if one has none (memfd_create refused). */
PS_SIGSAFE static int
table_fds(int fd[3])
{
	fd[0] = ps_shmem_fd(c);
	fd[1] = ps_shmem_fd(x->st->c);
	fd[2] = x->lt ? ps_shmem_fd(x->lt->c) : -1;
	if (fd[0] < 0 || fd[1] < 0 || (x->lt && fd[2] < 0))
		return -1;
	return x->lt ? 3 : 2;
}

/* 1 if the tree's helper is running. */
PS_SIGSAFE static int
tree_alive(void)
{
	int pid = atomic_load(&tree_bell->helper_pid);

	return pid > 0 && !(kill(pid, 0) && errno == ESRCH);
}

/* A birth notice in the tree's bell (struct birth): this program's control
 * block and tables.  A fork child's descriptors stay open, out of its way,
 * until the helper has them.  `exec`: an exec'd image, whose settings are
 * in its control block, and which hands its descriptors over next (hand()).
 * Returns 0, -1 (no free slot: the helper is behind), -2 (no descriptor)
 * or -3 (the helper is ending).  Context: constructor, fork handler
 * (born), or a program's first record (ps_worker_join_deferred);
 * async-signal-safe. */
PS_SIGSAFE static int
notice(int exec)
{
	uint64_t me = (uint64_t)getpid() << 8, w;
	struct birth *b = NULL;
	struct stat sb;
	int fd[3], i, slot;

	if (!exec)
		ps_shmem_park_fds();   /* an exec'd image hands them over at once */
	if (table_fds(fd) < 0)
		return -2;
	for (slot = 0; slot < NBIRTHS && !b; slot++) {
		w = BIRTH_FREE;
		if (atomic_compare_exchange_strong(&tree_bell->births[slot].word, &w,
						   me | BIRTH_WRITING))
			b = &tree_bell->births[slot];
	}
	if (!b)
		return -1;
	for (i = 0; i < 3; i++) {
		b->id[i][0] = b->id[i][1] = 0;
		if (fd[i] >= 0 && fstat(fd[i], &sb) == 0) {
			b->id[i][0] = (uint64_t)sb.st_dev;
			b->id[i][1] = (uint64_t)sb.st_ino;
		}
	}
	b->ppid = exec ? defer_parent : getppid();
	b->exec = exec;
	b->at = ps_clock_ns(CLOCK_MONOTONIC);
	atomic_store(&b->urgent, 0);
	memcpy(b->fd, fd, sizeof(fd));
	b->start_ns = x->start_ns;
	b->st = *x->st;
	if (x->lt)
		b->lt = *x->lt;
	atomic_store(&b->word, me | BIRTH_READY);
	/* The helper is ending (ending()): withdrawn, unless it is taking
	 * it after all. */
	w = me | BIRTH_READY;
	if (atomic_load(&tree_bell->closing) &&
	    atomic_compare_exchange_strong(&b->word, &w, BIRTH_FREE))
		return -3;
	leave_slot(0);   /* the notice keeps the helper now */
	birth_slot = slot - 1;
	bell = &tree_bell->wake;
	helper = 1;
	host = getpid();
	if (!exec)
		sem_post(bell);   /* an exec'd image's descriptors ring it */
	return 0;
}

PS_SIGSAFE static int birth_outcome(int withdraw);

/* Hand this program's descriptors to the helper of the tree named `name`
 * for its notice: one message, not answered.  Never waits: a full backlog
 * or socket buffer fails at once.  Returns 0 or -1. */
PS_SIGSAFE static int
hand(const char *name)
{
	struct hand h;
	struct sockaddr_un a;
	socklen_t n = tree_addr(&a, name);
	int fds[3], nfd = table_fds(fds), fd, rc = -1;

	if (nfd < 0)
		return -1;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, magic, sizeof(magic));
	h.slot = birth_slot;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	/* The system call, as in send_fds. */
	if (syscall(SYS_connect, fd, (struct sockaddr *)&a, n) == 0 &&
	    send_fds(fd, &h, sizeof(h), fds, nfd) == (ssize_t)sizeof(h))
		rc = 0;
	close(fd);
	return rc;
}

/* The helper's pid in a tree's name ("SOCKET-HPID-BELLFD"), and the
 * number of its bell's descriptor in *bfd; or -1. */
static long
name_pid(const char *name, long *bfd)
{
	const char *q = name + sock_len(name);
	char *end;
	long hpid;

	if (*q++ != '-')
		return -1;
	hpid = strtol(q, &end, 10);
	if (*end != '-' || hpid <= 0 || hpid > INT_MAX)
		return -1;
	*bfd = strtol(end + 1, &end, 10);
	if (*end || *bfd < 0 || *bfd > INT_MAX)
		return -1;
	return hpid;
}

int
ps_worker_tree_foreign(const struct ps_config *cfg)
{
	char path[32];
	struct stat sb;
	long bfd, hpid = name_pid(cfg->tree_helper, &bfd);

	snprintf(path, sizeof(path), "/proc/%ld", hpid);
	return hpid > 0 && stat(path, &sb) == 0 && sb.st_uid != geteuid();
}

/* Map the bell of the tree named `name` from the helper's descriptor, and
 * check it is that tree's, of this build, with its helper alive.  Returns
 * 0, or -1 with *why set.  Context: constructor. */
static int
bell_map(const char *name, const char **why)
{
	char path[64];
	struct stat sb;
	struct bell *b;
	uint64_t id[2];
	size_t k = sock_len(name);
	long hpid, bfd;
	int dir, p, fd = -1;

	if (tree_bell)   /* announced before, and withdrawn (an exec failed) */
		drop_bell();
	*why = "its name says nowhere to announce this program";
	if ((hpid = name_pid(name, &bfd)) <= 0)
		return -1;
	/* Through an O_PATH descriptor first, as the helper opens a
	 * program's (their_fd): opening whatever the number names now (the
	 * helper gone, its pid reused) could have effects of its own.  Then
	 * again, not through /proc/self/fd/N as their_fd does: a new
	 * process's first look at /proc/self costs it 50 us (BENCHMARKS
	 * 14q).  Both through a descriptor of the helper's /proc directory,
	 * which names that process for good: once it is gone, they fail
	 * (ESRCH), even if its pid is reused in between. */
	(void)ps_cat_u(path, sizeof(path), ps_cat(path, sizeof(path), 0, "/proc/"),
		       (unsigned long)hpid);
	dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	(void)ps_cat_u(path, sizeof(path), ps_cat(path, sizeof(path), 0, "fd/"), (unsigned long)bfd);
	p = dir < 0 ? -1 : openat(dir, path, O_PATH | O_CLOEXEC);
	*why = "its bell cannot be opened (it is gone, not ours, or out of sight)";
	if (p >= 0 && fstat(p, &sb) == 0 && S_ISREG(sb.st_mode) &&
	    (uint64_t)sb.st_size >= sizeof(*b)) {
		/* Made by this user only: a root program given a user's
		 * PYROSHIM_HELPER (sudo -E) must not wait on what that user
		 * may write. */
		if (sb.st_uid != geteuid())
			*why = "its bell belongs to another user";
		else
			fd = openat(dir, path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	}
	if (p >= 0)
		close(p);
	if (dir >= 0)
		close(dir);
	if (fd < 0)
		return -1;
	/* The helper never closes its bell: the same file, or none; and
	 * sealed, so that it cannot shrink under the mapping (map_fd). */
	id[0] = (uint64_t)sb.st_dev;
	id[1] = (uint64_t)sb.st_ino;
	b = map_fd(fd, sizeof(*b), id, NULL);
	close(fd);
	if (!b)
		return -1;
	tree_bell = b;
	*why = "its bell is not this tree's, or another build's";
	if (memcmp(b->magic, magic, sizeof(magic)) || strncmp(b->name, name, k) ||
	    b->name[k] || atomic_load(&b->helper_pid) != hpid || !tree_alive()) {
		(void)munmap(b, sizeof(*b));
		tree_bell = NULL;
		return -1;
	}
	take_slot();
	return 0;
}

/* Announce this program, its bell mapped, to the tree named `name`: write
 * a birth notice in the bell and hand the descriptors over.  Nothing
 * waits for the helper, which takes the notice when its grace is over; a
 * command that ends within the grace with nothing recorded withdraws it
 * and costs the helper a message.  Returns 0, or -1 with *why set (the
 * bell then unmapped).  Context: constructor, or a deferred program's
 * first record (ps_worker_join_deferred); async-signal-safe. */
PS_SIGSAFE static int
announce_tables(const char *name, const char **why)
{
	int rc = notice(1);

	*why = rc == -2 ? "its tables have no descriptor to hand over" :
	       rc == -3 ? "it is ending" : "its bell has no free slot";
	if (rc)
		goto fail;
	*why = "its socket did not take this program's tables at once";
	if (hand(name) == 0 || birth_outcome(1) >= 0) {
		/* The helper has them; or it is taking the notice already,
		 * and refuses it for want of them: the program then makes a
		 * helper of its own at its end, from its mappings. */
		ps_shmem_close_fds();
		return 0;
	}
	birth_slot = NBIRTHS;
	helper = 0;
	bell = &c->wake;
fail:
	drop_bell();
	return -1;
}

/* Map the bell of the tree named `name` and announce this exec'd image
 * there.  Returns 0, or -1 with *why set.  Context: constructor. */
static int
announce(const char *name, const char **why)
{
	return bell_map(name, why) || announce_tables(name, why) ? -1 : 0;
}

/* Join the tree whose helper listens at `name`: hand it this program's
 * control block and tables, and wait for its answer.  Where announce()
 * cannot be used.  Returns 0, or -1 with *why set. */
static int
join(const char *name, const char **why)
{
	struct timeval tv = { JOIN_TIMEOUT_MS / 1000, JOIN_TIMEOUT_MS % 1000 * 1000 };
	struct reg_reply rep;
	struct sockaddr_un a;
	struct ucred cr;
	socklen_t crl = sizeof(cr), n = tree_addr(&a, name);
	struct pollfd p;
	int fds[MAX_FDS], nfd = table_fds(fds), fd, bfd = -1, nb;
	struct bell *b;
	ssize_t got;

	if (nfd < 0) {
		*why = "its tables have no descriptor to hand over (memfd_create refused)";
		return -1;
	}
	/* Blocking, each step at most JOIN_TIMEOUT_MS: a connect waits while
	 * the helper's backlog is full, a send while the message cannot be
	 * queued yet. */
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		*why = "no socket";
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&a, n)) {
		*why = errno == EAGAIN || errno == EINPROGRESS ? "it is too busy to accept" :
		       "it is gone, or in another network namespace";
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) || cr.uid != geteuid()) {
		*why = "it belongs to another user";
		goto fail;
	}
	if (send_fds(fd, &c->r, sizeof(c->r), fds, nfd) != (ssize_t)sizeof(c->r)) {
		*why = "it did not take this program's tables";
		goto fail;
	}
	p.fd = fd;
	p.events = POLLIN;
	while ((got = poll(&p, 1, JOIN_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (got <= 0) {
		*why = "it did not answer within a second";
		goto fail;
	}
	got = recv_fds(fd, &rep, sizeof(rep), fds, &nb);
	if (nb == 1)
		bfd = fds[0];
	else
		while (nb > 0)
			close(fds[--nb]);
	if (got != (ssize_t)sizeof(rep) || memcmp(rep.magic, magic, sizeof(magic)) ||
	    rep.pid <= 0 || bfd < 0) {
		*why = "it refused this program (another build of pyroshim, or it is ending)";
		goto fail;
	}
	/* Sealed and of a bell's size, as one mapped through /proc (its
	 * sender is of this user: SO_PEERCRED above). */
	*why = "its bell could not be mapped";
	b = map_fd(bfd, sizeof(*b), NULL, NULL);
	if (!b)
		goto fail;
	close(bfd);
	close(fd);
	tree_bell = b;
	bell = &b->wake;
	host = getpid();
	atomic_store(&c->helper_pid, rep.pid);
	return 0;
fail:
	if (bfd >= 0)
		close(bfd);
	close(fd);
	return -1;
}

const char *
ps_worker_tree(void)
{
	return tree_name;
}

/* 1 if this process leads the tree named `name` (an exec'd image of the
 * process that made it). */
static int
leads(const char *name)
{
	char *end;
	long pid;

	if (strncmp(name, "pyroshim-", 9))
		return 0;
	pid = strtol(name + 9, &end, 10);
	return end != name + 9 && *end == '-' && pid == getpid();
}

int
ps_worker_pprof_theirs(const struct ps_config *cfg)
{
	return cfg->tree_helper[0] && cfg->pprof_address[0] && !leads(cfg->tree_helper) &&
	       cfg->tree_pprof == ps_config_digest(cfg->pprof_address);
}

/* 1 if this program serves /debug/pprof itself, which only a helper of
 * its own can: it holds the address, or it is an exec'd image of the
 * tree's leader, whose old helper holds it until it finds the old image
 * gone (ps_listen_stop; the listener retries meanwhile).  Any other
 * program of a tree that finds the address in use (the tree's helper
 * serves it, usually) goes without and joins. */
static int
serves_pprof(const char *name)
{
	return ps_listen_fd() >= 0 || (ps_listen_configured() && leads(name));
}

/* A leader that put off its helper (put_off): the tree's socket and bell,
 * and the helper, now, whatever the context.  What it did is said at the
 * next place that may print (say_woke).  Returns 0 (also when it was not
 * put off), or -errno of the helper's start.  Async-signal-safe. */
PS_SIGSAFE static int
wake(const char *at)
{
	int expected = 1, rc;

	if (!atomic_compare_exchange_strong(&put_off, &expected, 0))
		return 0;
	atomic_store(&woke_at, at);
	if (tree_open())
		atomic_store(&tree_errno, errno);
	atomic_store(&spawn_late, 1);
	rc = start_helper();
	atomic_store(&spawn_late, 0);
	tree_handed_over(rc == 0);
	atomic_store(&woke, rc ? rc : (int)atomic_load(&c->helper_pid));
	if (rc)   /* a helper, or a thread, at the next poke or the end (start) */
		atomic_store(&due, 1);
	return rc;
}

/* The C library's environment told the tree's whole name, over the name
 * without it that this leader exported at its start: for the children
 * made from it with no exec hook on the way (system, popen).  With the C
 * library's setenv (bash has one of its own), which allocates the string:
 * a program that frees what it finds in environ (bash) frees that.  Its
 * exec hooks pass the whole name on in any case (ps_worker_env_entry). */
static void
env_whole(void)
{
	extern char **environ;
	PS_NEXT(setenv);
	char **e;

	for (e = environ; e && *e; e++) {
		if (!ps_worker_env_entry(*e))
			continue;
		if (!real_setenv || real_setenv("PYROSHIM_HELPER", tree_env + 16, 1))
			ps_debug("could not export PYROSHIM_HELPER");
		return;
	}
}

/* What wake() did, in the info log once, and the environment told.
 * Context: where the log may be written (not a signal handler). */
static void
say_woke(void)
{
	int w, e;

	if (PS_LIKELY(!atomic_load_explicit(&woke, memory_order_relaxed)))
		return;
	w = atomic_exchange(&woke, 0);
	e = atomic_exchange(&tree_errno, 0);
	if (e)
		ps_info("uploader: this program's children each make a helper: no socket for "
			"them to join (%s)", strerror(e));
	if (w > 0)
		ps_info("uploader: helper process started (pid %d), at %s", w,
			atomic_load(&woke_at));
	else
		ps_info("uploader: no helper process at %s (%s); another try at the next "
			"allocation sample, thread or the end", atomic_load(&woke_at), strerror(-w));
	if (w > 0)
		env_whole();
}

/* The helper, or a thread where none can be made.  The process whose
 * constructor starts it joins the tree it was started in, if any, else
 * leads a tree of its own. */
static int
start(void)
{
	const char *why = NULL, *name = x->cfg->tree_helper;
	int rc, joined = -1;

	if (listen_here && name[0]) {
		reg_fill();
		if (serves_pprof(name)) {
			why = "this program serves /debug/pprof itself";
		} else if (!ps_gostack_objects() && announce(name, &why) == 0) {
			joined = atomic_load(&tree_bell->helper_pid);
		} else {
			/* A Go program joins at once: it ends by a raw
			 * exit_group, which no hook sees, so a notice could be
			 * found only once its descriptors are gone. */
			if (!ps_gostack_objects())
				ps_debug("uploader: not announced to the tree's helper (%s)", why);
			if (join(name, &why) == 0) {
				ps_shmem_close_fds();   /* the helper has the mappings */
				joined = atomic_load(&c->helper_pid);
			}
		}
		if (joined > 0) {
			helper = 1;
			snprintf(tree_name, sizeof(tree_name), "%s", name);
			tree_leader = leads(name);
			ps_info("uploader: joined the tree's helper (pid %d)", joined);
			return 0;
		}
		ps_info("uploader: the tree's helper %s cannot be used (%s); this program makes "
			"a helper of its own, which its children join", x->cfg->tree_helper, why);
	}
	if (listen_here && (tree_name_new() ? (errno = EAGAIN) : tree_open()))
		ps_info("uploader: this program's children each make a helper: no socket for "
			"them to join (%s)", strerror(errno));
	rc = start_helper();
	tree_handed_over(rc == 0);
	if (rc == 0) {
		ps_listen_drop();  /* the helper holds it now */
		if (!self_path[0])
			ps_info("uploader: helper process started, a copy of this program (the "
				"library's own file is not known)");
		else if (atomic_load(&exec_err))
			ps_info("uploader: helper process started, a copy of this program (%s: %s)",
				self_path, atomic_load(&exec_err) < 0 ? "its exec did not come" :
				strerror(atomic_load(&exec_err)));
		else
			ps_info("uploader: helper process started (%s)", self_path);
		return 0;
	}
	ps_info("uploader: no helper process (%s); a thread instead: a death by signal "
		"loses the last interval", rc == -EPERM ? "the program is a child subreaper or pid 1" :
		strerror(-rc));
	helper = 0;
	rc = root_session(-1);
	return rc ? rc : spawn_thread();
}

/* 1 if a program of a tree may join it at its first record rather than
 * at its start: not a Go program (it ends with a raw exit_group, which no
 * hook sees), and none with a span to send over OTLP (the span ends at
 * the program's last pass, which it waits for). */
static int
may_defer(const struct ps_config *cfg)
{
	return !ps_gostack_objects() && !(cfg->trace_correlation && ps_remote_otlp_on(cfg));
}

/* dl_iterate_phdr's callback: the build ID of the object holding magic,
 * its first 8 bytes in hex, into arg. */
static int
magic_of(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t me = (uintptr_t)magic, lo;
	const unsigned char *id;
	size_t len;
	int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
		if (info->dlpi_phdr[i].p_type == PT_LOAD && me >= lo &&
		    me - lo < info->dlpi_phdr[i].p_memsz)
			break;
	}
	if (i == info->dlpi_phnum)
		return 0;
	/* Where the helper is exec'd from: relative only if LD_PRELOAD
	 * said so, and then from the directory it was said in. */
	if (info->dlpi_name[0] == '/')
		(void)ps_cat(self_path, sizeof(self_path), 0, info->dlpi_name);
	else if (info->dlpi_name[0] && !realpath(info->dlpi_name, self_path))
		self_path[0] = '\0';
	id = ps_dl_note(info, NT_GNU_BUILD_ID, "GNU", &len);
	if (id)
		ps_hex_encode(id, len < 8 ? len : 8, arg);
	return 1;
}

static void
magic_init(void)
{
	char id[17] = "";

	(void)dl_iterate_phdr(magic_of, id);
	(void)ps_cat(magic, sizeof(magic), ps_cat(magic, sizeof(magic), 0, "pyroshim " PS_VERSION " "),
		     id);
}

/* The helper, exec'd (exec_child): its root session is the program's
 * control block and tables, as an exec'd member's are (take_birth). */
void
ps_worker_image(int argc, char **argv)
{
	static const char usage[] = "pyroshim: this library is not a program: preload it "
				    "(LD_PRELOAD, or pyrorun)\n";
	struct session *s = &root_s;
	const char *p = environ && environ[0] ? environ[0] : "";
	long v[NARGS_IMAGE];
	char *end;
	int fd[3], i;

	/* Only where exec_child puts it: first, and no argument. */
	(void)argv;
	if (argc != 1 || strncmp(p, HELPER_VAR, sizeof(HELPER_VAR) - 1)) {
		(void)!write(2, usage, sizeof(usage) - 1);
		syscall(SYS_exit_group, 2);
	}
	p += sizeof(HELPER_VAR) - 1;
	for (i = 0; i < NARGS_IMAGE; i++, p = end + 1) {
		v[i] = strtol(p, &end, 10);
		if (end == p || *end != ',' || v[i] < INT_MIN || v[i] > INT_MAX) {
			(void)!write(2, usage, sizeof(usage) - 1);
			syscall(SYS_exit_group, 2);
		}
	}
	ps_log_setup((int)v[A_LOGLEVEL], (int)v[A_LOGFD]);
	host = (pid_t)v[A_HOST];
	host_pidfd = (int)v[A_PIDFD];
	tree_fd = (int)v[A_TREE];
	tree_bell_fd = (int)v[A_BELL];
	listen_here = (int)v[A_LISTEN_HERE];
	helper_alone();
	magic_init();
	c = map_fd((int)v[A_CTL], sizeof(*c), NULL, NULL);
	if (!c) {
		ps_warn("uploader: the exec'd helper cannot map its program's control block");
		helper_end();
	}
	s->c = c;
	reg_copy(&s->r, &c->r);
	for (i = 0; i < 3; i++)
		fd[i] = (int)v[A_CTL + i];
	if (reg_check(&s->r) || session_tables(s, fd, NULL, &s->r.st, &s->r.lt)) {
		ps_warn("uploader: the exec'd helper cannot read its program's tables");
		helper_end();
	}
	/* Its maps now, while it lives: it may die before a pass reads them
	 * (root_left). */
	seen(host, fd[0]);
	for (i = 0; i < 3; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	s->pid = host;
	session_export(s);
	x = s->x;
	interval = s->r.cfg.upload_interval_ns;
	flush_timeout = s->r.cfg.flush_timeout_ns;
	ps_group_tree_span(x->span);
	if (tree_bell_fd >= 0 &&
	    !(tree_bell = map_fd(tree_bell_fd, sizeof(*tree_bell), NULL, NULL))) {
		close(tree_fd);
		tree_fd = -1;
	}
	bell = tree_bell ? &tree_bell->wake : &c->wake;
	if (v[A_LISTENING]) {
		/* The program printed its settings' mistakes already. */
		ps_log_config_quiet(1);
		if (ps_listen_configure(s->r.cfg.pprof_address) == 0)
			ps_listen_adopt((int)v[A_LFD], (int)v[A_BINDERR]);
		ps_log_config_quiet(0);
	}
	helper_serve();
}

/* 1 if the helper can be exec'd from this library's file, as far as
 * can be told before trying (a seccomp filter is not): a helper started
 * late must not be a copy of the program, which may hold any lock then
 * (BENCHMARKS 14p). */
static int
can_exec(void)
{
#ifdef PS_BENCH
	return 0;   /* exec_helper */
#endif
	return self_path[0] && access(self_path, X_OK) == 0;
}

/* 1 if a program about to lead its tree may put off its helper until
 * its first record, child or thread: as may_defer; with a helper that
 * can be exec'd; none that serves /debug/pprof (the helper listens), nor
 * one whose helper would be a thread (pid 1, a child subreaper: made at
 * start, as before). */
static int
may_put_off(const struct ps_config *cfg)
{
	int sub = 0;

	return may_defer(cfg) && can_exec() && !cfg->pprof_address[0] && getpid() != 1 &&
	       !(prctl(PR_GET_CHILD_SUBREAPER, &sub, 0, 0, 0) == 0 && sub);
}

int
ps_worker_defer(const struct ps_config *cfg)
{
	const char *name = cfg->tree_helper, *why;

	magic_init();
	/* No tree to join: none named, or one named without its bell (a
	 * leader's that had no helper yet when this image was exec'd; it
	 * may have one now, but then the exec would have said so). */
	if ((!name[0] || name[sock_len(name)] != '-') && may_put_off(cfg)) {
		if (tree_name_new())
			return 0;
		atomic_store(&put_off, 1);
		atomic_store(&deferred, DEFER_WAITING);
		return 1;
	}
	if (!name[0])
		return 0;
	if (ps_listen_configured() && !serves_pprof(name))
		ps_info("uploader: PYROSCOPE_PPROF_ADDRESS is in use (the tree's helper serves "
			"it, or another program): this program does not listen, and joins the tree");
	if (serves_pprof(name) || !may_defer(cfg) || leads(name) || bell_map(name, &why))
		return 0;
	/* The join makes its system calls through syscall(2), which the
	 * shim interposes (hook_fd.c): its first call looks the C library's
	 * up with dlsym, done here rather than in a signal handler. */
	(void)syscall(SYS_getpid);
	atomic_store(&deferred, DEFER_WAITING);
	return 1;
}

int
ps_worker_put_off(void)
{
	return atomic_load_explicit(&put_off, memory_order_relaxed);
}

PS_SIGSAFE void
ps_worker_wake(const char *at)
{
	if (atomic_load(&put_off) && !c)
		atomic_store(&wake_at_first, at);
	if (atomic_load(&put_off) && c)
		(void)wake(at);
}

static void say_deferred(void);

void
ps_worker_say(void)
{
	if (x)
		say_deferred();
}

const char *
ps_worker_env_entry(const char *entry)
{
	size_t i;

	/* tree_env is made whole before it is read here (the same thread,
	 * or a vfork child of it).  Compared by hand: a shell's fork child
	 * calls this before its exec, where a first call through the PLT
	 * would page in the loader's look-up (BENCHMARKS 14o). */
	if (!tree_env_short)
		return NULL;
	for (i = 0; i < tree_env_short; i++)
		if (entry[i] != tree_env[i])
			return NULL;
	return entry[i] ? NULL : tree_env;
}

PS_SIGSAFE int
ps_worker_defer_take(void)
{
	int expected = DEFER_WAITING;

	return atomic_compare_exchange_strong(&deferred, &expected, DEFER_JOINING);
}

/* The command line and exit status said before the control block was made,
 * into it.  Async-signal-safe. */
PS_SIGSAFE static void
early_copy(void)
{
	if (early_argv)
		args_copy(early_argc, early_argv);
	if (atomic_load(&early_has_exit))
		ps_worker_set_exit(atomic_load(&early_exit_code));
}

PS_SIGSAFE void
ps_worker_join_deferred(int made)
{
	const char *why = made ? "no memory for its control block" : "no memory for its tables";

	if (atomic_load(&put_off)) {
		/* The tree's leader: its helper now, as it has something to
		 * write.  Exec'd, not forked: whatever this record
		 * interrupted holds no lock the helper needs. */
		if (made && ctl_new() == 0) {
			early_copy();
			(void)wake(atomic_load(&wake_at_first));
		} else {
			/* No tree: a helper of its own at its end, if it has
			 * tables (as a fork child outside a tree). */
			atomic_store(&put_off, 0);
			tree_name[0] = '\0';
			listen_here = 0;
			atomic_store(&due, made);
			atomic_store(&deferred_why, why);
		}
		atomic_store(&deferred, DEFER_NONE);
		return;
	}

	if (made && ctl_new() == 0) {
		reg_fill();
		early_copy();
		if (!tree_bell)
			why = "its parent's tree had no helper when it forked";
		else if (announce_tables(tree_name, &why) == 0) {
			helper = 1;
			atomic_store(&deferred_joined, atomic_load(&tree_bell->helper_pid));
			atomic_store(&deferred, DEFER_NONE);
			return;
		}
	}
	atomic_store(&deferred_why, why);
	leave_slot(0);   /* if announce_tables did not drop it with the bell */
	if (made) {
		/* As a fork child outside a tree: a helper of its own (not
		 * another try at the tree, which may wait) when it ends, or at
		 * its next allocation sample or thread; it inherits the
		 * mappings. */
		listen_here = 0;
		ps_shmem_close_fds();
		atomic_store(&due, 1);
	}
	atomic_store(&deferred, DEFER_NONE);
}

/* What a deferred program's first record did, in the info log once.
 * Context: where the log may be written (not a signal handler). */
static void
say_deferred(void)
{
	int pid;
	const char *why;

	say_woke();
	if (PS_LIKELY(!atomic_load_explicit(&deferred_joined, memory_order_relaxed) &&
		      !atomic_load_explicit(&deferred_why, memory_order_relaxed)))
		return;
	pid = atomic_exchange(&deferred_joined, 0);
	why = atomic_exchange(&deferred_why, NULL);
	if (pid > 0)
		ps_info("uploader: joined the tree's helper (pid %d) at its first record", pid);
	if (why)
		ps_info("uploader: the tree's helper %s cannot be used at this program's first "
			"record (%s); it makes a helper of its own", tree_name, why);
}

int
ps_worker_start(struct ps_export *e, uint64_t interval_ns, uint64_t flush_timeout_ns)
{
	int rc;

	x = e;
	ps_group_tree_span(e->span);
	listen_here = 1;
	interval = interval_ns;
	flush_timeout = flush_timeout_ns;
	if (atomic_load(&put_off)) {
		if (e->cfg->tree_helper[0])
			ps_info("uploader: the tree %s had no helper yet when this program was "
				"started; it leads a tree of its own", e->cfg->tree_helper);
		ps_info("uploader: this program leads its tree; its helper starts at its first "
			"record, child or thread");
		return 0;
	}
	if (atomic_load(&deferred) == DEFER_WAITING) {
		(void)ps_cat(tree_name, sizeof(tree_name), 0, e->cfg->tree_helper);
		ps_info("uploader: this program joins the tree's helper (pid %d) when it first "
			"records", atomic_load(&tree_bell->helper_pid));
		return 0;
	}
	rc = ctl_new();
	if (rc)
		return rc;
	return start();
}

/* ---- the sampling grid across an exec --------------------------------- */

void
ps_worker_exec_grid(uint64_t next)
{
	uint64_t me = (uint64_t)getpid() << 8, now, w;
	struct grid *g;
	int i;

	if (!tree_bell)
		return;
	/* Ours from an exec that failed: withdrawn, or written again. */
	for (i = 0; i < NGRIDS; i++) {
		w = me | GRID_READY;
		atomic_compare_exchange_strong(&tree_bell->grids[i].key, &w, GRID_FREE);
	}
	if (!next)
		return;
	now = ps_clock_ns(CLOCK_MONOTONIC);
	for (i = 0; i < NGRIDS; i++) {
		g = &tree_bell->grids[i];
		w = atomic_load_explicit(&g->key, memory_order_acquire);
		if ((w & 0xff) == GRID_WRITING ? !owner_gone(w) :
		    w != GRID_FREE && now - g->at < GRID_STALE_NS)
			continue;
		if (!atomic_compare_exchange_strong(&g->key, &w, me | GRID_WRITING))
			continue;
		g->next = next;
		g->at = now;
		atomic_store_explicit(&g->key, me | GRID_READY, memory_order_release);
		return;
	}
}

uint64_t
ps_worker_take_grid(void)
{
	uint64_t me = (uint64_t)getpid() << 8 | GRID_READY, w, next, at;
	struct grid *g;
	int i;

	for (i = 0; tree_bell && i < NGRIDS; i++) {
		g = &tree_bell->grids[i];
		if (atomic_load_explicit(&g->key, memory_order_acquire) != me)
			continue;
		next = g->next;
		at = g->at;
		w = me;
		if (atomic_compare_exchange_strong(&g->key, &w, GRID_FREE) &&
		    ps_clock_ns(CLOCK_MONOTONIC) - at < GRID_STALE_NS)
			return next;
	}
	return 0;
}

/* ---- a fork child's birth notice, and where notices stand ------------ */

/* Fork child: announce this child in the tree's bell, so that the tree's
 * helper serves it from now on, however it ends.  Returns 0, or -1: the
 * child then makes a helper of its own when it is due.  Context: fork
 * child handler. */
static int
born(void)
{
	if (!tree_bell || !tree_alive() || ctl_new())
		return -1;
	return notice(0) ? -1 : 0;
}

/* Where this child's birth notice stands: 1 taken, 0 not yet (withdraw:
 * withdrawn unless the helper is taking it), -1 refused or withdrawn.  The
 * helper sets helper_pid before it frees the slot. */
PS_SIGSAFE static int
birth_outcome(int withdraw)
{
	_Atomic uint64_t *word = &tree_bell->births[birth_slot].word;
	uint64_t me = (uint64_t)getpid() << 8, w = me | BIRTH_READY;

	if (atomic_load(&c->helper_pid))
		return 1;
	if (withdraw && atomic_compare_exchange_strong(word, &w, BIRTH_FREE))
		return -1;
	w = atomic_load_explicit(word, memory_order_acquire);
	if (w == (me | BIRTH_READY) || w == (me | BIRTH_TAKING))
		return 0;
	return atomic_load(&c->helper_pid) ? 1 : -1;
}

/* The first entry of the bell's `waits` (struct wait) whose word is
 * `from`, made `to` by compare-and-swap: its index, or -1. */
static int
claim(uint64_t from, uint64_t to)
{
	uint64_t w;
	int i;

	for (i = 0; tree_bell && i < NWAITS; i++) {
		w = from;
		if (atomic_load_explicit(&tree_bell->waits[i].word, memory_order_relaxed) == from &&
		    atomic_compare_exchange_strong(&tree_bell->waits[i].word, &w, to))
			return i;
	}
	return -1;
}

void
ps_worker_fork_prepare(void)
{
	static _Atomic int bound;
	uint64_t me = (uint64_t)getpid() << 8;
	int i;

	/* A child's fork handler makes no call into the C library that its
	 * parent has not made: the first call of a function through the PLT
	 * looks it up, and in a fork child that pages in the loader's lookup
	 * (35 of a shell's child's 120 us: BENCHMARKS 14o).  The handler
	 * asks for its parent's pid, and unmaps the tree's bell when that
	 * says another pid namespace (its parent's tables it leaves mapped
	 * since 14p): this munmap fails (EINVAL) and getppid is the parent's
	 * own; both only bind the functions here, for every child to
	 * inherit. */
	if (!atomic_exchange(&bound, 1)) {
		(void)munmap(NULL, 0);
		(void)getppid();
	}
	fork_slot = 0;
	if (!tree_bell || !x || !may_defer(x->cfg) || (i = claim(WAIT_FREE, me | WAIT_HELD)) < 0)
		return;
	/* Ours until stamped and handed to the child. */
	tree_bell->waits[i].at = ps_clock_ns(CLOCK_MONOTONIC);
	atomic_store(&tree_bell->waits[i].word, me | WAIT_FORK);
	fork_slot = i + 1;
	fork_from = getpid();
}

/* Fork child that puts off joining: hold an entry of the bell's `waits`,
 * the one its parent reserved if it can.  Returns 0, or -1 if none is
 * free. */
static int
hold_slot(void)
{
	int i;

	if (wait_slot != NWAITS)
		return 0;
	i = claim(WAIT_FREE, (uint64_t)getpid() << 8 | WAIT_HELD);
	if (i < 0)
		return -1;
	wait_slot = i;
	return 0;
}

/* This program joined, or ends (or execs: `exec`) before its first
 * record: its entry is free again, and a helper that waits only for such
 * entries is rung; or, at an exec, it is left for the new image
 * (WAIT_EXEC), which takes it back in bell_map, as the old one does if the
 * exec fails (ps_worker_exec_failed).  Async-signal-safe. */
PS_SIGSAFE static void
leave_slot(int exec)
{
	uint64_t me = (uint64_t)getpid() << 8, w = me | WAIT_HELD;
	struct wait *e;

	if (PS_LIKELY(wait_slot == NWAITS))
		return;
	e = tree_bell ? &tree_bell->waits[wait_slot] : NULL;
	if (e && exec) {
		e->at = ps_clock_ns(CLOCK_MONOTONIC);   /* ours while held */
		if (atomic_compare_exchange_strong(&e->word, &w, me | WAIT_EXEC))
			return;
	} else if (e && atomic_compare_exchange_strong(&e->word, &w, WAIT_FREE) &&
		   atomic_load(&tree_bell->lingering)) {
		sem_post(&tree_bell->wake);
	}
	wait_slot = NWAITS;
}

/* This image takes back the entry its process left at its exec, if any
 * (leave_slot).  Context: constructor, or the exec hook after a failed
 * exec. */
static void
take_slot(void)
{
	uint64_t me = (uint64_t)getpid() << 8;
	int i = claim(me | WAIT_EXEC, me | WAIT_HELD);

	wait_slot = i < 0 ? NWAITS : i;
}

/* The tree's bell is no longer this program's: its entry freed, unmapped.
 * Async-signal-safe. */
PS_SIGSAFE static void
drop_bell(void)
{
	leave_slot(0);
	(void)munmap(tree_bell, sizeof(*tree_bell));
	tree_bell = NULL;
}

/* A millisecond, not through the shim's own nanosleep hook (hook_wait.c). */
PS_SIGSAFE static void
pause_ms(void)
{
	struct timespec step = { 0, 1000000 };

	(void)syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &step, NULL);
}

/* A program that announced itself and must know: wait until its notice
 * is taken, at most JOIN_TIMEOUT_MS, then withdraw it.  One not taken
 * makes a helper of its own, as a fork child outside a tree.  Returns 0
 * when the program has a helper.  Context: the exit, _exit or exec hooks,
 * poke; async-signal-safe. */
PS_SIGSAFE static int
settle(void)
{
	int i, o = 0;

	if (birth_slot == NBIRTHS)
		return helper || running ? 0 : -1;
	atomic_store(&tree_bell->births[birth_slot].urgent, 1);
	sem_post(bell);
	for (i = 0; i < JOIN_TIMEOUT_MS && !(o = birth_outcome(0)) && tree_alive(); i++)
		pause_ms();
	if (!o)
		o = birth_outcome(1);
	/* Being taken: a few system calls away, unless the helper died
	 * taking it, or is stopped, or the word is not its (a process of
	 * the same user wrote over the bell): a second at most, then a
	 * helper of its own, as for a refusal.  Should the tree's helper
	 * take it after all, the program's samples are in two profiles
	 * rather than in none, and its exit never hangs. */
	for (i = 0; !o; i++) {
		pause_ms();
		o = birth_outcome(0);
		if (!o && (!tree_alive() || i >= JOIN_TIMEOUT_MS))
			o = -1;
	}
	birth_slot = NBIRTHS;
	if (o > 0) {
		ps_shmem_close_fds();   /* the helper has the mappings */
		return 0;
	}
	leave_slot(0);
	tree_bell = NULL;   /* its own children would be refused as well */
	helper = 0;
	bell = &c->wake;
	return start_helper();
}

void
ps_worker_poke(void)
{
	int expected = 1;

	say_deferred();
	/* Born: once the helper has taken (or refused) this child. */
	if (PS_UNLIKELY(birth_slot != NBIRTHS) && birth_outcome(0) && settle())
		ps_debug("uploader not started in the fork child");
	if (PS_LIKELY(!atomic_load_explicit(&due, memory_order_relaxed)))
		return;
	if (!atomic_compare_exchange_strong(&due, &expected, 0))
		return;
	if ((c || ctl_new() == 0) && start() == 0)
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

/* This program's executable mappings, as lines of its /proc/self/maps,
 * into its control block.  Returns their length, or 0 when they cannot be
 * read or do not fit.  Async-signal-safe. */
PS_SIGSAFE static uint32_t
maps_copy(void)
{
	return maps_lines("/proc/self/maps", c->maps, sizeof(c->maps));
}

/* A member of a tree that ends, and whose helper has (or will take from
 * its notice) its tables: it leaves its maps and its last request, and
 * goes without waiting.  The helper holds the memory, takes a notice of a
 * program gone (its descriptors came at its start) and names its frames
 * from the lines it left.  Not for a fork child whose notice is not taken
 * yet (its descriptors are in it until then), nor when the helper is
 * gone (the program then makes one of its own).  Returns 1 if it went so.
 * Async-signal-safe. */
PS_SIGSAFE static int
end_unwaited(uint64_t deadline)
{
	struct birth *b = birth_slot != NBIRTHS ? &tree_bell->births[birth_slot] : NULL;
	int o = b ? birth_outcome(0) : 1;
	uint32_t n;

	/* Served by the tree's helper, not one of its own (a fork child
	 * whose notice found no slot keeps the tree's bell mapped). */
	if (bell != &tree_bell->wake || o < 0 || (o == 0 && !b->exec) || !tree_alive())
		return 0;
	n = maps_copy();
	if (!n)
		return 0;
	atomic_store(&c->deadline, deadline);
	atomic_store(&c->req, REQ_FINAL);
	atomic_store_explicit(&c->maps_len, n, memory_order_release);
	if (b)
		atomic_store(&b->urgent, 1);
	sem_post(bell);
	return 1;
}

/* 1 if this program has a span to send over OTLP: it ends at the last
 * pass, which the program must wait for. */
PS_SIGSAFE static int
span_to_send(void)
{
	return x->span && x->remote.otlp_url[0];
}

/* 1 if the tree's helper serves, or has yet to take the notice of, a
 * program other than the leader: one that ended without waiting
 * (end_unwaited) may not be a session yet.  Async-signal-safe. */
PS_SIGSAFE static int
tree_busy(void)
{
	uint64_t w;
	int i;

	if (atomic_load(&tree_bell->members))
		return 1;
	for (i = 0; i < NBIRTHS; i++) {
		w = atomic_load_explicit(&tree_bell->births[i].word, memory_order_acquire);
		if ((w & 0xff) != BIRTH_FREE)
			return 1;
	}
	return 0;
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

	/* Nothing to write or send: not worth waiting for, nor (a program
	 * whose notice is pending) the helper's taking it, unless the leader
	 * of a tree with other programs ends: its children are drained
	 * first; or a program whose children's notices name it (forked): they
	 * need its settings, and its new image joins only at its first
	 * record.  An exec ends no span. */
	if (helper && (req == REQ_EXEC || !span_to_send()) &&
	    ps_stacktab_empty(x->st) && !(forked && birth_slot != NBIRTHS) &&
	    !(tree_leader && tree_bell && req == REQ_FINAL && tree_busy())) {
		/* A shell's child, a short command: its notice is withdrawn,
		 * no session made. */
		if (birth_slot != NBIRTHS && birth_outcome(1) < 0) {
			/* As a fork child outside a tree: no uploader until it
			 * is due (the exec may fail: a shell tries every
			 * directory of PATH). */
			birth_slot = NBIRTHS;
			helper = 0;
			bell = &c->wake;
			atomic_store(&due, req == REQ_EXEC);
			return;
		}
		atomic_store(&c->deadline, 0);
		atomic_store(&c->req, req);
		sem_post(bell);
		return;
	}
	/* A member of a tree ends: its helper needs nothing more from it.
	 * (The leader waits: its caller looks at the files when it returns.
	 * A span to send ends at the last pass.) */
	if (req == REQ_FINAL && helper && !tree_leader && tree_bell &&
	    !span_to_send() && end_unwaited(deadline))
		return;
	if (settle())
		return;
	atomic_store(&c->deadline, deadline);
	atomic_store(&c->req, req);
	sem_post(bell);
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

	if (x)
		say_deferred();
	leave_slot(!final);
	/* A leader that put off its helper, and recorded: it starts now. */
	if (atomic_load(&put_off) && c && !ps_stacktab_empty(x->st)) {
		ps_worker_wake(final ? "this program's end, with a profile to write" :
				       "this program's exec, with a profile to write");
		say_woke();
	}
	/* A fork child that has not started one yet. */
	if (due_at_end() && ((!c && ctl_new()) || start()))
		c = NULL;
	if (!c || (!helper && !running))
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
		sem_post(bell);
	}
	last_pass(&root_s, deadline, final, 0);
	/* The program waits here: what was learned, nothing more. */
	ps_export_save_symbols(x, final, 0, NULL);
	pthread_mutex_unlock(&lock);
}

void
ps_worker_exec_failed(void)
{
	if (c)
		atomic_store(&c->exec_pending, 0);
	if (wait_slot != NWAITS)
		take_slot();
}

PS_SIGSAFE void
ps_worker_exit(uint64_t timeout_ns)
{
	leave_slot(0);
	if (atomic_load(&put_off) && c && !ps_stacktab_empty(x->st))
		ps_worker_wake("this program's _exit, with a profile to write");
	if (due_at_end() && ((!c && ctl_new()) || start_helper()))
		c = NULL;
	if (!c || (!helper && !running))
		return;
	request(REQ_FINAL, timeout_ns);
}

PS_SIGSAFE void
ps_worker_set_exit(int status)
{
	/* Kept first, for the control block a first record makes (as
	 * ps_worker_set_args). */
	atomic_store(&early_exit_code, status);
	atomic_store(&early_has_exit, 1);
	if (!c)
		return;
	atomic_store(&c->exit_code, status);
	atomic_store(&c->has_exit, 1);
}

void
ps_worker_set_args(int argc, const char *const *argv)
{
	/* Kept first, for the control block a first record makes (it may
	 * make it in a handler between here and the test below). */
	early_argc = argc;
	early_argv = argv;
	if (c)
		args_copy(argc, argv);
}

PS_SIGSAFE static void
args_copy(int argc, const char *const *argv)
{
	size_t off = 0, n;
	int i;

	if (argc < 0 || !argv)
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
	if (!c || helper || !running)
		return;
	if (atomic_fetch_add(&c->host_threads, delta) + delta > 0)
		return;
	/* The last thread of the program is leaving through pthread_exit:
	 * the process ends when our thread ends too, and then runs its exit
	 * handlers -- the destructor's last pass -- on our thread. */
	atomic_store(&c->quit, 1);
	sem_post(bell);
}

void
ps_worker_forked(void)
{
	fork_slot = 0;   /* the child's now */
	if (birth_slot != NBIRTHS)
		forked = 1;
}

int
ps_worker_child(void)
{
	struct ctl *parent = c;
	int d = atomic_load(&deferred), reserved;
	pid_t ppid;

	if (!x)
		return 0;
	/* The parent's control block and helper (or thread) are not ours,
	 * nor its sessions (thread mode). */
	c = NULL;
	bell = NULL;
	birth_slot = NBIRTHS;   /* a notice of the parent's is the parent's */
	ss = NULL;
	nss = ss_cap = 0;
	helper = running = listen_here = tree_leader = 0;
	/* Thread mode: the parent's listening socket was copied into this
	 * child's descriptor table; only the parent serves it. */
	ps_listen_drop();
	ps_group_forget();
	/* Thread mode: what its sessions offered to be looked up whole is
	 * the parent's to walk; this child's helper would spend its end on
	 * it (2 s for libc), for objects it may never have sampled. */
	ps_symbolizer_forget_offers();
	walk_left = CACHE_FILL_LAST_NS;
	lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	if (parent)   /* a grandparent's, if any, went at the parent's ctl_new */
		stale_c = parent;
	ps_shmem_close_fds();   /* the parent's, if it had any open */
	atomic_store(&deferred_joined, 0);
	atomic_store(&deferred_why, NULL);
	/* A parent whose helper was put off forked without the fork hook
	 * (daemon(), a raw clone): its tree has no helper, and this child
	 * joins none (ps_worker_join_deferred). */
	if (atomic_exchange(&put_off, 0))
		tree_name[0] = '\0';
	atomic_store(&woke, 0);
	atomic_store(&early_has_exit, 0);
	forked = 0;
	wait_slot = NWAITS;   /* an entry of the parent's is the parent's */
	atomic_store(&due, 0);   /* the parent's helper was due, not ours */
	/* The entry the parent reserved for this child, made its own. */
	reserved = fork_slot - 1;
	fork_slot = 0;
	if (reserved >= 0 && reserved < NWAITS && tree_bell) {
		uint64_t w = (uint64_t)fork_from << 8 | WAIT_FORK;

		if (atomic_compare_exchange_strong(&tree_bell->waits[reserved].word, &w,
						   (uint64_t)getpid() << 8 | WAIT_HELD))
			wait_slot = reserved;
	}
	/* One whose parent was joining in another thread has tables half
	 * made: not profiled. */
	if (d == DEFER_JOINING) {
		leave_slot(0);
		atomic_store(&deferred, DEFER_NONE);
		return -1;
	}
	/* A child whose parent is in another pid namespace (unshare -p,
	 * nsenter -p: getppid() says 0): its parent and the tree's helper are
	 * out of its sight, and its pid is not the one they see: not of the
	 * tree.  One whose parent put off joining has no tables either: not
	 * profiled. */
	ppid = getppid();
	if (!ppid && tree_bell) {
		drop_bell();
		if (d == DEFER_WAITING) {
			atomic_store(&deferred, DEFER_NONE);
			return -1;
		}
	}
	/* A child of the tree puts off joining until its first record, as
	 * an exec'd image does: a shell's or make's child that execs at once,
	 * and a worker that records nothing, cost neither tables nor a
	 * notice.  It joins with settings of its own (its parent's,
	 * inherited), which need no session of its parent's: its parent may
	 * have ended by then, or (DEFER_WAITING) not joined either.  Its
	 * entry of the bell's `waits` keeps the helper for it meanwhile; with
	 * none free, the child of a joined parent is announced now.  (A
	 * helper gone is found out at the first record, which then makes a
	 * helper of its own.) */
	if (d == DEFER_WAITING || (tree_bell && may_defer(x->cfg))) {
		if (hold_slot() && d != DEFER_WAITING)
			return 0;
		atomic_store(&deferred, DEFER_WAITING);
		defer_parent = ppid;
		return 1;
	}
	leave_slot(0);
	return 0;
}

void
ps_worker_child_announce(void)
{
	if (born() == 0)
		return;
	/* A helper of its own, forked when due, inherits the mappings. */
	ps_shmem_close_fds();
	atomic_store(&due, 1);
}
