/* group.h -- the profiles of a tree: one set per program name.
 *
 * A tree's helper serves every program of the tree (worker.h).  It writes
 * one set of files per program name (the export state's app), not one per
 * process: app.tree.kind, where `tree` is the pid of the process that
 * leads the tree -- for a lone program, its own pid, so its files keep the
 * names they always had.  Each sample carries a numeric "pid" label (as
 * perf's pprof converter puts it) and its process's span labels, so that
 * `go tool pprof -tagfocus pid=N` shows one process of a merged file.
 *
 * Uploads merge the same way: one request per family (and interval) for
 * every program of a name that sends to the same series of the same
 * server (ps_remote_same), labelled as the files are.  The series' tags
 * are the first such program's, with the root_span_id of the tree's first
 * program when it is in the same trace: so a tree's series are one per
 * program name, and the span id its caller knows finds all of them.
 *
 * A group's members are the export states of its programs that live:
 * each write encodes their folds as they are, and each upload their values
 * since their last one (remote.h).  A program that ends leaves what it
 * recorded in the group's store (ps_fold_absorb), so its samples stay in
 * the files for the rest of the tree's life, and its last interval (with
 * no live heap: it has none now) for the next upload.  The store is
 * bounded: past PS_GROUP_STORE_BYTES its files are written one last time,
 * with the store alone, and the group goes on in app.tree.N.kind (the
 * first N free), so no sample is lost or counted twice.
 *
 * The files are rewritten, and the uploads queued, at each upload
 * interval, when the tree's leader ends (so that whoever waited for it
 * finds them, and the server has them), and when the helper ends; the
 * files hold the whole run so far each time.
 *
 * Context: the groups are owned by whoever holds the worker's lock (the
 * loop's passes, a session's end, the last pass); they allocate.
 */
#ifndef PS_GROUP_H
#define PS_GROUP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"

struct ps_export;
struct ps_span;

/* A store past this many bytes closes its files (see above):
 * ps_group_store_bytes, which tests may lower.  Written before any
 * group exists. */
#define PS_GROUP_STORE_BYTES (8u << 20)
extern size_t ps_group_store_bytes;

/* The span of the tree's first program (or NULL): the root_span_id of its
 * uploads.  Called by the worker before any group exists. */
void ps_group_tree_span(const struct ps_span *sp);

/* After a pass of x that folded something: x joins its group (made on
 * first use), whose files are now due.  Returns 0 or -ENOMEM. */
int ps_group_update(struct ps_export *x) PS_WUR;

/* x's program is over: what it recorded moves to its group's store.  Call
 * before ps_export_free(x).  No-op for a state that never joined one. */
void ps_group_leave(struct ps_export *x);

/* Write the files of every group that changed since it was last written,
 * and queue the uploads of every group with an interval to send.
 * Returns 0 or -EIO (each failure to write logged). */
int ps_group_pass(void);

/* Send the groups' queued uploads that are due (final: all, once, by
 * deadline_ns), as ps_export_send sends a program's. */
void ps_group_send(int final, uint64_t deadline_ns, pthread_mutex_t *lock);

/* The remote x's uploads go through (its queue, its counters), or NULL
 * (no server, or x has not joined its group yet). */
struct ps_remote *ps_group_remote(const struct ps_export *x);

/* When the groups' next queued upload is due (CLOCK_MONOTONIC), or
 * UINT64_MAX. */
uint64_t ps_group_next_due(void);

/* The comments x's own profiles would have: its pid, its span, what it
 * dropped and its delivery counters -- what a set of files says, for one
 * process (the export pass's debug line).  At most PS_GROUP_COMMENTS lines.  Returns how many. */
#define PS_GROUP_COMMENTS 6
size_t ps_group_comments_of(const struct ps_export *x, char c[][200]);

/* A fork child: forget the parent's groups without freeing them (the
 * parent's worker may have been changing them). */
void ps_group_forget(void);

/* Free every group (their files written first with ps_group_pass,
 * if wanted).  For tests under valgrind. */
void ps_group_free_all(void);

#endif
