/* group.h -- the local files of a tree: one set per program name.
 *
 * A tree's helper serves every program of the tree (worker.h).  It writes
 * one set of files per program name (the export state's app), not one per
 * process: app.tree.kind, where `tree` is the pid of the process that
 * leads the tree -- for a lone program, its own pid, so its files keep the
 * names they always had.  Each sample carries a numeric "pid" label (as
 * perf's pprof converter puts it) and its process's span labels, so that
 * `go tool pprof -tagfocus pid=N` shows one process of a merged file.
 *
 * A group's members are the export states of its programs that live:
 * each write encodes their folds as they are.  A program that ends leaves
 * what it recorded in the group's store (ps_fold_absorb), so its samples
 * stay in the files for the rest of the tree's life.  The store is
 * bounded: past PS_GROUP_STORE_BYTES its files are written one last time,
 * with the store alone, and the group goes on in app.tree.N.kind (the
 * first N free), so no sample is lost or counted twice.
 *
 * The files are rewritten at each upload interval, when the tree's leader
 * ends (so that whoever waited for it finds them), and when the helper
 * ends; each time they hold the whole run so far.
 *
 * Context: the groups are owned by whoever holds the worker's lock (the
 * loop's passes, a session's end, the last pass); they allocate.
 */
#ifndef PS_GROUP_H
#define PS_GROUP_H

#include <stddef.h>
#include "common/ps.h"

struct ps_export;

/* A store past this many bytes closes its files (see above):
 * ps_group_store_bytes, which tests may lower.  Written before any
 * group exists. */
#define PS_GROUP_STORE_BYTES (8u << 20)
extern size_t ps_group_store_bytes;

/* After a pass of x that folded something: x joins its group (made on
 * first use), whose files are now due.  Returns 0 or -ENOMEM. */
int ps_group_update(struct ps_export *x) PS_WUR;

/* x's program is over: what it recorded moves to its group's store.  Call
 * before ps_export_free(x).  No-op for a state that never joined one. */
void ps_group_leave(struct ps_export *x);

/* Write the files of every group that changed since it was last written.
 * Returns 0 or -EIO (each failure logged). */
int ps_group_write_all(void);

/* The comments of x's own profiles (its uploads): its pid, its span,
 * what it dropped and its delivery counters -- what a set of files says,
 * for one process.  At most PS_GROUP_COMMENTS lines.  Returns how many. */
#define PS_GROUP_COMMENTS 6
size_t ps_group_comments_of(const struct ps_export *x, char c[][200]);

/* A fork child: forget the parent's groups without freeing them (the
 * parent's worker may have been changing them). */
void ps_group_forget(void);

/* Free every group (their files written first with ps_group_write_all,
 * if wanted).  For tests under valgrind. */
void ps_group_free_all(void);

#endif
