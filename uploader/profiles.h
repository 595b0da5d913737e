/* profiles.h -- the profile families, and their pprof encoding from a
 * fold.
 *
 * CPU: samples/count and cpu/nanoseconds, period cpu/nanoseconds.
 * Allocations: alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes, period space/bytes -- the sample types of Go's heap
 * profile, so `go tool pprof -sample_index=...` and Pyroscope's "memory"
 * profile types work unchanged.
 * Block and mutex: contentions/count and delay/nanoseconds, period
 * contentions/count, as Go's block and mutex profiles.
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

enum ps_family_id { PS_FAMILY_CPU, PS_FAMILY_ALLOC, PS_FAMILY_BLOCK, PS_FAMILY_MUTEX,
		    PS_NFAMILIES };

/* One folded-text series of a family: the local file app.pid.<type>.folded
 * and, with PYROSCOPE_INGEST_FORMAT=folded, the /ingest request named
 * app.<type>{tags}. */
struct ps_series {
	const char *type;                  /* "cpu", "alloc_space", ... */
	int value;                         /* fold value index */
	int64_t div;                       /* divisor (PS_FIXED_ONE for counts) */
	const char *units, *aggregation;   /* /ingest query */
	uint32_t sample_rate;              /* /ingest sampleRate, 0: none */
};

/* Everything that differs between the families, said once: export.c and
 * remote.c loop over ps_families[] and hold no list of their own. */
struct ps_family {
	enum ps_family_id id;
	const char *kind;                  /* "cpu", "alloc", "block", "mutex":
					    * file names, logs */
	const char *metric;                /* the server's __name__ (push API) */
	const char *const *types, *const *units;
	const int *fold_values;            /* fold value index per sample type */
	const int64_t *div;                /* divisor per sample type */
	size_t nvalues;
	const char *period_type, *period_unit;
	const char *default_type;
	/* Not empty when one of these fold values totals more than 0. */
	const int *present;
	size_t npresent;
	/* The pprof's /ingest query: units, and sampleRate = the CPU sample
	 * rate when rate_query is set; the multipart sample-type config. */
	const char *ingest_units;
	int rate_query;
	const char *type_config;
	const struct ps_series *series;    /* folded text, one per sample type */
	size_t nseries;
};

extern const struct ps_family ps_family_cpu, ps_family_alloc, ps_family_block,
	ps_family_mutex;
/* All, indexed by enum ps_family_id. */
extern const struct ps_family *const ps_families[PS_NFAMILIES];

/* 1 if family fam of fold f has data (vals as in ps_profile_encode).
 * Context: any thread outside signal context; no allocation. */
int ps_family_present(const struct ps_family *fam, const struct ps_fold *f,
		      const int64_t (*vals)[PS_F_NVALUES]);

/* The pprof period: one CPU sample's nanoseconds at sample_rate Hz, the
 * mean bytes between allocation samples, or 1 (a contention). */
int64_t ps_family_period(const struct ps_family *fam, unsigned sample_rate,
			 uint64_t alloc_sample_bytes);

/* What goes into one encoded profile besides the samples. */
struct ps_profile_meta {
	int64_t period;
	int64_t time_nanos, duration_nanos;
	const char *const *comments;
	size_t ncomments;
	const struct ps_pprof_label *labels;   /* on every sample */
	size_t nlabels;
	const struct ps_pprof_labelset *sets;  /* parts' and tags' (below) */
	size_t nsets;
};

/* One fold's share of a profile: its entries, valued from vals (as
 * below), labelled with m->sets[set - 1] (0: none) -- or, an entry that
 * has a tag (a store's, fold.h), with m->sets[tag - 1]. */
struct ps_profile_part {
	const struct ps_fold *fold;
	const int64_t (*vals)[PS_F_NVALUES];
	uint32_t set;
};

/* Encode family fam of several folds as one gzipped pprof into out (reset
 * first): each fold's locations, functions and mappings its own (another
 * process's addresses).  Returns as ps_profile_encode. */
int ps_profile_encode_parts(const struct ps_profile_part *parts, size_t nparts,
			    const struct ps_family *fam, const struct ps_profile_meta *m,
			    struct ps_buf *out) PS_WUR;

/* 1 if family fam has data in any of the parts (their vals). */
int ps_profile_present(const struct ps_profile_part *parts, size_t nparts,
		       const struct ps_family *fam);

/* Series s of several parts as folded text into out (reset first): each
 * stack's line once, its raw values summed over the parts, then divided
 * as ps_fold_folded divides them, so that a count per part is not lost to
 * rounding.  Returns 0, -E2BIG or -ENOMEM. */
int ps_profile_folded(const struct ps_profile_part *parts, size_t nparts,
		      const struct ps_series *s, struct ps_buf *out) PS_WUR;

/* Encode family fam of fold f as gzipped pprof into out (reset first).
 * vals: per fold entry, the values to use; NULL = the fold's own.
 * Returns 0 or the negative errno of ps_pprof_encode. */
int ps_profile_encode(const struct ps_fold *f, const struct ps_family *fam,
		      const int64_t (*vals)[PS_F_NVALUES], const struct ps_profile_meta *m,
		      struct ps_buf *out) PS_WUR;

#endif
