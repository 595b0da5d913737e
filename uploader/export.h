/* export.h -- one export pass: fold the tables, and mark the program's
 * local files and uploads due (group.h writes and queues them, one set per
 * program name of the tree).
 *
 * Local files always cover the whole run so far (cumulative); uploads
 * cover the interval since the previous upload (remote.h).  An empty profile
 * (no CPU sample, no sampled allocation) is neither written nor sent, so
 * that short helper processes -- every child of a shell or of make inherits
 * the shim -- do not litter the output directory.
 *
 * The tables are the export state's own (st, lt): the program's, or a
 * view of them in the process that reads them.
 *
 * Context: uploader thread, or the exiting/exec'ing thread while it holds
 * the worker's lock; allocates (guard held).
 */
#ifndef PS_EXPORT_H
#define PS_EXPORT_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/buf.h"
#include "common/config.h"
#include "symbolize/symbols.h"
#include "uploader/fold.h"
#include "shim/livetab.h"
#include "uploader/pprof.h"
#include "uploader/profiles.h"
#include "uploader/remote.h"
#include "trace/span.h"
#include "shim/stacktab.h"

struct ps_export {
	const struct ps_config *cfg;   /* not owned */
	struct ps_stacktab *st;        /* not owned */
	struct ps_livetab *lt;         /* not owned; NULL without allocation profiling */
	int on[PS_NFAMILIES];          /* per family: profiled in this run */
	pid_t pid;
	pid_t tree;                    /* the tree's leader; 0: pid (group.h) */
	/* The process whose objects name the stacks (ps_symbols_watch):
	 * 0 for this one; watch_only when this process is no copy of it. */
	pid_t watch;
	int watch_only;
	struct ps_maps_left watch_left; /* where it leaves its maps at its end */
	uint64_t start_ns;             /* wall clock when profiling started */
	uintptr_t skip_lo, skip_hi;    /* the shim's own code */
	uintptr_t entry;               /* the program's entry point (AT_ENTRY), in its
					* own address space: its executable is the first
					* Mapping (pprof's "File:"); 0 = unknown */
	/* Trace correlation: the run's root span (not owned) or NULL. */
	struct ps_span *span;
	char trace_hex[33], span_hex[17];
	struct ps_pprof_label labels[2];
	size_t nlabels;
	/* For the span at exit; set by the exit hooks (not owned). */
	int exit_code;
	const char *const *argv;
	int argc;
	/* Owned, created by the first pass. */
	int ready;
	int dirfd;                     /* -2: the directory was refused */
	struct ps_group *group;        /* its local files (not owned) */
	int incomplete;                /* the last fold was (out of memory) */
	/* Counters, shown in the debug log and in profile comments.
	 * fold_errors: passes whose fold was incomplete (out of memory). */
	uint64_t passes, fold_errors;
	/* The large members last, what every process writes at its start
	 * first: each page of this struct a process touches costs it a fault
	 * (BENCHMARKS 14q). */
	struct ps_fold fold;
	char app[256];                 /* application name, safe in a file name */
	struct ps_remote remote;       /* server state; remote.on = 0 without one */
	char dir[PATH_MAX];            /* local output directory; "" = none */
};

/* Prepare (no allocation yet): reset the pass state and the start time.
 * Context: constructor or fork child. */
void ps_export_setup(struct ps_export *x);

/* Connect the run's span (labels on every sample, tags, OTLP).  Call after
 * ps_export_setup and before the first pass. */
void ps_export_set_span(struct ps_export *x, struct ps_span *sp);

/* Check the output directory now, from the program's side, so that a
 * refusal is said on the program's stderr (the helper process has none):
 * 0, or -errno (then ps_export_refuse_dir says it, unless the program
 * has a reason not to).  Context: constructor, fork child. */
int ps_export_check_dir(struct ps_export *x);

/* The output directory cannot be used (rc: a negative errno): a
 * configuration mistake, said once per process or tree; a failed write
 * is not, and stays at warn. */
void ps_export_refuse_dir(const char *dir, int rc);

/* Run one pass.  `final` is set for the pass at exit or exec.  The local
 * files are written, and the uploads queued, by ps_group_pass (group.h).
 * Returns 0 or a negative errno of the first failure (already logged). */
int ps_export_run(struct ps_export *x, int final);

/* For a program the helper is no copy of (x->watch): read its object list
 * now, while it lives (ps_symbols_learn).  Context: the uploader. */
void ps_export_learn(struct ps_export *x);

/* Write what the symbol cache learned in the passes so far, after at most
 * fill_ns completing its functions and, with `busy`, whole objects until
 * busy() says there is other work (symbols.h, ps_symbols_save); with
 * `final`, log what the source look-ups cost.  Called after a pass's
 * profiles are out, so that the program does not wait for it. */
void ps_export_save_symbols(struct ps_export *x, int final, uint64_t fill_ns,
			    int (*busy)(void));

/* Bring x->fold up to date with the tables (making it on first use)
 * without writing or queuing anything: for the /debug/pprof listener,
 * whose views are differences of, or the same as, the fold's cumulative
 * values.  Passes recompute every counter from the tables, so an extra
 * update changes nothing for them.  Returns 0 or -ENOMEM (the fold may
 * then be partial).  Context: holding the worker's lock. */
int ps_export_refresh(struct ps_export *x) PS_WUR;

/* Send what x queued itself (its span, at exit) when due (final: all,
 * once, by deadline_ns).  `lock` is the worker's lock, held by the
 * caller: non-final requests go out with it released, and a final flush
 * releases it while it waits for one in flight (ps_upload_send).  Its
 * profiles go out with its group's (ps_group_send). */
void ps_export_send(struct ps_export *x, int final, uint64_t deadline_ns, pthread_mutex_t *lock);
/* When the next of them is due (CLOCK_MONOTONIC), or UINT64_MAX. */
uint64_t ps_export_next_due(const struct ps_export *x);

/* At exit: queue the run's span with x->exit_code, x->argv. */
void ps_export_end_span(struct ps_export *x);

/* Free what the passes made (the fold); what the upload queue
 * still holds is dropped, counted.  Context: the owner, once the last pass
 * is done, after ps_group_leave. */
void ps_export_free(struct ps_export *x);

/* Fork child: forget the parent's state without freeing it (the parent's
 * worker may have been half-way through changing it). */
void ps_export_abandon(struct ps_export *x);

#endif
