/* export.h -- one export pass: fold the tables and write every output.
 *
 * The profile always covers the whole run so far (cumulative) in local
 * files.  An empty profile (no CPU sample, no sampled allocation) is not
 * written, so that short helper processes -- every child of a shell or of
 * make inherits the shim -- do not litter the output directory.
 *
 * Context: uploader thread, or the exiting/exec'ing thread while it holds
 * the worker's lock; allocates (guard held).
 */
#ifndef PS_EXPORT_H
#define PS_EXPORT_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include "buf.h"
#include "config.h"
#include "fold.h"
#include "livetab.h"
#include "stacktab.h"

struct ps_export {
	const struct ps_config *cfg;   /* not owned */
	struct ps_stacktab *st;        /* not owned; NULL when nothing is sampled */
	struct ps_livetab *lt;         /* not owned; NULL without allocation profiling */
	int cpu_on, alloc_on;
	pid_t pid;
	uint64_t start_ns;             /* wall clock when profiling started */
	char app[256];                 /* application name, safe in a file name */
	char dir[PATH_MAX];            /* local output directory; "" = none */
	uintptr_t skip_lo, skip_hi;    /* the shim's own code */
	/* Owned, created by the first pass. */
	int ready;
	int dirfd;                     /* -1 until opened; -2 after a refusal */
	struct ps_fold fold;
	struct ps_buf out;
	/* Counters, shown in the debug log and in profile comments. */
	uint64_t passes, files_written, file_errors;
};

/* Prepare (no allocation yet).  Context: constructor or fork child. */
void ps_export_setup(struct ps_export *x);

/* Run one pass.  `final` is set for the pass at exit or exec.
 * Returns 0 or a negative errno of the first failure (already logged). */
int ps_export_run(struct ps_export *x, int final);

/* Fork child: forget the parent's state without freeing it (the parent's
 * worker may have been half-way through changing it). */
void ps_export_abandon(struct ps_export *x);

#endif
