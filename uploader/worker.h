/* worker.h -- the uploader: where the export passes run.
 *
 * The uploader runs in a helper process of its own, not in the program:
 *
 *   - The sample tables are shared memory (MAP_SHARED, mapped before the
 *     helper is forked), so whatever way the program ends -- exit, _exit,
 *     a fatal signal, the OOM killer's SIGKILL -- the helper still holds
 *     every sample and makes the last pass after it.  It learns of the end
 *     from a pidfd of the program, checked every PS_WORKER_POLL_MS.
 *   - The program keeps no thread of the shim's: glibc keeps its
 *     single-threaded malloc paths, and the profiles are written every
 *     interval whether or not the program allocates or starts threads.
 *   - The helper is invisible to the program: it is a grandchild made by a
 *     clone(2) with no exit signal (no SIGCHLD) and glibc's _Fork (none of
 *     the program's fork handlers), reparented away at once, so wait(2)
 *     never sees it; it holds none of the program's file descriptors (its
 *     standard streams are /dev/null, or stderr when the log level asks
 *     for more than errors and there is no log file), and it ends right
 *     after the program, once its last pass is done.
 *
 * A program that leads its tree starts the helper when it is first needed
 * (ps_worker_defer): a command that records nothing and makes no child
 * never has one.
 *
 * exit(), a return from main, _exit and _Exit ask the helper for the last
 * pass and wait for it, at most the flush timeout, so the files are there
 * when the program's exit is seen.  An exec asks for a pass the same way;
 * the helper then ends once the old image is gone, or goes on if the exec
 * fails.  A fork child in a tree joins the tree's helper at its first
 * record (ps_worker_child); outside one it gets a helper of its own, with
 * tables of its own, at its first allocation sample, thread start or exit
 * (ps_worker_poke).
 *
 * Where no helper can be made (clone fails, the program is a child
 * subreaper, so the helper would become its child), the same loop runs in
 * a thread of the program instead, as before: the last pass then runs in
 * the exiting thread, and a death by signal loses the last interval.
 *
 * All export state belongs to the loop; the program's side only posts
 * requests through a small shared control block.
 */
#ifndef PS_WORKER_H
#define PS_WORKER_H

#include <stdint.h>
#include "common/ps.h"
#include "uploader/export.h"

#define PS_WORKER_POLL_MS 100  /* how often the helper looks for the program's end */

/* Start the uploader for export state x (not owned, must outlive it): a
 * helper process, or a thread when none can be made.  `flush_timeout_ns`
 * bounds the last pass after the program's death by a signal.
 * Returns 0 or -errno.  Context: constructor, fork child (one thread). */
int ps_worker_start(struct ps_export *x, uint64_t interval_ns, uint64_t flush_timeout_ns) PS_WUR;

/* Put off joining this program's tree until its first record (a CPU
 * sample, an allocation sample or a wait kept), or its first thread: most
 * commands a shell or make runs record nothing (one of 1 ms crosses its
 * first expiry once in ten at 100 Hz), and such a command then costs
 * neither a control block, nor tables, nor a message to the helper.
 * Only a member of a tree, not a Go program, and one that neither serves
 * /debug/pprof nor sends a span.  The same for a program that leads its
 * tree (none is named, or the one named has no helper yet): its helper,
 * and the tree's socket, are put off until its first record, thread or
 * child (a fork, posix_spawn; ps_worker_put_off), and a command that has
 * none of these costs no helper at all.  Its children learn the tree's
 * name at once (PYROSHIM_HELPER, ps_worker_tree), and the whole name, with
 * the helper's bell, from the exec that makes them
 * (ps_worker_env_entry).  Returns 1 if put off -- the tables to be made
 * by the caller's function that ps_stacktab_defer names -- else 0.
 * Context: constructor, before ps_worker_start. */
int ps_worker_defer(const struct ps_config *cfg);

/* 1 if the process tree this program was started in (cfg->tree_helper)
 * runs as another user: sudo -E, setpriv or gosu inside a profiled tree.
 * Its output directory is then that user's, not this program's mistake.
 * Context: constructor. */
int ps_worker_tree_foreign(const struct ps_config *cfg);

/* 1 while this program leads its tree with its helper put off.  Before
 * it makes a child or a thread, its caller calls ps_worker_wake, makes
 * its first record's tables (ps_stacktab_current), and calls it again.
 * Context: any thread. */
int ps_worker_put_off(void);

/* Start the helper put off (ps_worker_put_off) now, if the tables are
 * made (else the start at their making says `at`): the tree's socket and
 * bell, then the helper, exec'd from this library's file (never a copy of
 * the program, which may hold any lock here).  Before a fork, vfork,
 * posix_spawn, system, popen or pthread_create; at the first record of
 * any kind, in whatever context made it (ps_worker_join_deferred); at the
 * exit or exec of a program that recorded (ps_worker_flush,
 * ps_worker_exit do it).  The info log says so, and `at` (where: a
 * static string), at the next place that may print.  Async-signal-safe. */
void ps_worker_wake(const char *at) PS_SIGSAFE;

/* What a put-off start or join did, in the info log, if it is not said
 * yet.  Context: host thread, outside signal context. */
void ps_worker_say(void);

/* What an exec passes on in place of the environment entry `entry`
 * ("PYROSHIM_HELPER=" and the name of this tree without the helper's
 * bell): the tree's whole name, once its helper holds the bell; NULL
 * otherwise.  Read-only: also called in a vfork child.  Context: the exec
 * hooks. */
const char *ps_worker_env_entry(const char *entry);

/* The first record of a program that put off joining: 1 for the one
 * caller that is to make the tables now and then call
 * ps_worker_join_deferred; 0 for every other.  Async-signal-safe. */
int ps_worker_defer_take(void) PS_SIGSAFE;

/* Join the tree now, the tables made (`made`) or not (no profile then).
 * One that cannot makes a helper of its own at its end, as a fork child
 * outside a tree.  A leader that put off its helper only makes its control
 * block here (ps_worker_wake starts the helper).  Async-signal-safe; the
 * info log says which at the next pass or exit. */
void ps_worker_join_deferred(int made) PS_SIGSAFE;

/* The name of the tree this process leads or joined ("" if none), and
 * where its helper holds the tree's bell, for PYROSHIM_HELPER.  Context:
 * constructor, after ps_worker_start. */
const char *ps_worker_tree(void);

/* 1 if /debug/pprof on cfg's address is its tree's: the program that
 * started the tree (PYROSHIM_PPROF) listens on the same one, and this is
 * another process.  Such a program never listens, even on a free port
 * (its tree's first program lets go of it at an exec, for its next
 * image).  Context: constructor. */
int ps_worker_pprof_theirs(const struct ps_config *cfg);

/* 1 if the uploader is a helper process (0: a thread, or not started). */
int ps_worker_is_helper(void);
/* The library run as a program (init.c's entry): the helper exec'd by a
 * program's spawn, given its descriptors in argv.  Never returns. */
__attribute__((noreturn)) void ps_worker_image(int argc, char **argv);

/* The last pass, at exit (`final` 1) or before an exec (0), waiting at
 * most timeout_ns.  Context: the exiting or exec'ing host thread. */
void ps_worker_flush(uint64_t timeout_ns, int final);

/* The exec failed: the uploader goes on.  Context: the exec hooks. */
void ps_worker_exec_failed(void);

/* An exec is under way: leave `next` (ps_sampler_grid; 0: withdraw what
 * an exec that failed left) in the tree's bell for the next image of this
 * process.  Context: the exec hook. */
void ps_worker_exec_grid(uint64_t next);

/* The grid the image before this one left at its exec, taken; 0 if none
 * (not in a tree, or not exec'd from an image of it).  Context:
 * constructor, after ps_worker_start. */
uint64_t ps_worker_take_grid(void);

/* _exit: the last pass, waiting at most timeout_ns.  Nothing else is done
 * in the calling thread, which may be inside a signal handler or hold the
 * C library's locks.  Context: any thread; async-signal-safe. */
void ps_worker_exit(uint64_t timeout_ns) PS_SIGSAFE;

/* The run's exit status and command line, for the span of the last pass.
 * Context: host thread; set_exit is async-signal-safe. */
void ps_worker_set_exit(int status) PS_SIGSAFE;
void ps_worker_set_args(int argc, const char *const *argv);

/* A thread of the program starts (+1) or ends (-1).  When none is left
 * a worker thread ends, so that it never keeps the process alive after
 * the program's last thread called pthread_exit.  (A helper process
 * notices the end by itself.)  Context: host thread. */
void ps_worker_host_thread(int delta);

/* This program is about to fork: an entry of its tree's bell is reserved
 * for the child, which makes it its own in its fork handler
 * (ps_worker_child), so that the helper outlives a parent that ends at
 * once for it.  Context: the fork prepare handler. */
void ps_worker_fork_prepare(void);

/* Fork parent: this program forked.  Context: the fork parent handler. */
void ps_worker_forked(void);

/* Fork child: the parent's uploader is not ours.  A child of a tree puts
 * off joining it until its first record, as ps_worker_defer says, and
 * joins with settings of its own: then 1, and its caller drops the
 * parent's tables and names the function that makes its own
 * (ps_stacktab_defer).  Otherwise 0: its caller makes its tables fresh and
 * calls ps_worker_child_announce.  -1 when the child cannot be profiled
 * (its parent was joining in another thread).  Context: fork child
 * handler. */
int ps_worker_child(void) PS_WUR;

/* Fork child that did not put off joining, its tables fresh: announced to
 * its tree's helper now, or (outside a tree) its own helper started by
 * ps_worker_poke, or at its exit, _exit or exec if it recorded anything.
 * Context: fork child handler. */
void ps_worker_child_announce(void);

/* A fork child's uploader is due: start it now.  Called at an allocation
 * sample and a thread start; cheap otherwise.  A fork child that only
 * execs never starts one; one that ends before either gets one at its
 * exit, _exit or exec if it recorded anything (from _exit with nothing
 * but async-signal-safe calls: the helper, a copy of the program at that
 * moment, is bounded by a watchdog in case it inherited a held lock).
 * Context: host thread outside signal context, guard held. */
void ps_worker_poke(void);

#endif
