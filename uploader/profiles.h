/* profiles.h -- the two profile families, and their pprof encoding from a
 * fold.
 *
 * CPU: samples/count and cpu/nanoseconds, period cpu/nanoseconds.
 * Allocations: alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes, period space/bytes -- the sample types of Go's heap
 * profile, so `go tool pprof -sample_index=...` and Pyroscope's "memory"
 * profile types work unchanged.
 *
 * Context: uploader thread (or the exiting thread holding its lock);
 * allocates.
 */
#ifndef PS_PROFILES_H
#define PS_PROFILES_H

#include <stdint.h>
#include "common/buf.h"
#include "uploader/fold.h"
#include "uploader/pprof.h"

struct ps_family {
	const char *kind;                  /* "cpu" or "alloc": file names, logs */
	const char *const *types, *const *units;
	const int *fold_values;            /* fold value index per sample type */
	const int64_t *div;                /* divisor per sample type */
	size_t nvalues;
	const char *period_type, *period_unit;
	const char *default_type;
};

extern const struct ps_family ps_family_cpu, ps_family_alloc;

/* What goes into one encoded profile besides the samples. */
struct ps_profile_meta {
	int64_t period;
	int64_t time_nanos, duration_nanos;
	const char *const *comments;
	size_t ncomments;
	const struct ps_pprof_label *labels;   /* on every sample */
	size_t nlabels;
};

/* Encode family fam of fold f as gzipped pprof into out (reset first).
 * vals: per fold entry, the values to use; NULL = the fold's own.
 * Returns 0 or the negative errno of ps_pprof_encode. */
int ps_profile_encode(const struct ps_fold *f, const struct ps_family *fam,
		      const int64_t (*vals)[PS_F_NVALUES], const struct ps_profile_meta *m,
		      struct ps_buf *out) PS_WUR;

#endif
