/* pprof.h -- encode a profile as a gzipped pprof Profile message
 * (google/pprof proto/profile.proto, see uploader/profile.proto).
 *
 * The caller describes the profile with plain arrays (struct
 * ps_pprof_desc): sample types, functions, locations, mappings, and
 * samples that are stacks of location indexes with one value per sample
 * type.  Ids are indexes + 1 (Function.id, Location.id, Mapping.id).
 * Without locations the profile is function-level: function i is also
 * location i + 1, at address 0 with one Line, and every location points at
 * one placeholder Mapping (id 1, has_functions set), so that readers
 * neither try to symbolize nor print location lines without "M=".
 *
 * Strings: every string goes through one deduplicated string table whose
 * entry 0 is "".  Pyroscope rejects a profile with invalid UTF-8, so bytes
 * that are not part of a valid UTF-8 sequence (including overlong forms,
 * surrogates and code points past U+10FFFF) are replaced with '?'; such
 * names are sanitised, never rejected.
 *
 * Output is streamed: nanopb writes straight into deflate (gzip.h) and
 * deflate into the caller's capped buffer, so neither an uncompressed copy
 * nor fixed maximum counts exist.  Compression is zlib level 1, what a
 * profiler living in somebody else's process can afford.
 *
 * Limits that are NOT enforced here but that a Pyroscope server applies by
 * default: 16000 samples per profile, stack depth 1000 (deeper stacks are
 * truncated), 4 MiB of uncompressed profile, strings valid UTF-8.  The
 * caller should stay under them (keep the heaviest stacks, truncate deep
 * ones); PS_PPROF_MAX_STRINGS below is this encoder's own cap.
 *
 * Context: uploader thread (or any thread, not signal context); allocates
 * the string table and zlib's state with malloc and frees them before
 * returning.
 */
#ifndef PS_PPROF_H
#define PS_PPROF_H

#include <stddef.h>
#include <stdint.h>
#include "common/buf.h"
#include "common/ps.h"

/* The most distinct strings one profile may hold, "" included. */
#define PS_PPROF_MAX_STRINGS (1u << 22)

struct ps_pprof_sample {
	const uint32_t *locs;    /* indexes into desc->locations (into
				  * desc->funcs when there are none), LEAF
				  * FIRST; may be NULL when depth is 0 */
	uint32_t depth;
	const int64_t *values;   /* desc->nvalues values */
	uint32_t set;            /* its own labels: desc->sets index + 1;
				  * 0: none */
};

/* One object segment, as /proc/PID/maps shows it. */
struct ps_pprof_mapping {
	uint64_t start, limit, offset;
	const char *file;          /* required */
	const char *build_id;      /* hex, or NULL */
	int has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct ps_pprof_line {
	uint32_t func;             /* index into desc->funcs */
	int64_t line;              /* 0: unknown */
};

struct ps_pprof_location {
	uint64_t address;          /* runtime address; 0 for a pseudo-frame */
	uint32_t mapping;          /* index into desc->mappings + 1; 0: none */
	const struct ps_pprof_line *lines;   /* innermost inlined first */
	uint32_t nlines;
};

/* A label: a string (str), or a number (str NULL: num), as perf's
 * converter labels samples with their "pid".  The key is required. */
struct ps_pprof_label {
	const char *key;
	const char *str;
	int64_t num;
};

/* Labels that some samples carry (struct ps_pprof_sample's set). */
struct ps_pprof_labelset {
	const struct ps_pprof_label *labels;
	size_t nlabels;
};

/* Everything the caller owns and keeps alive for the duration of the call;
 * the encoder only reads it. */
struct ps_pprof_desc {
	/* sample_type: nvalues (>= 1) pairs, e.g. {"samples","cpu"} with
	 * {"count","nanoseconds"}.  Pyroscope derives the profile type from
	 * these names (cpu -> process_cpu, alloc_* / inuse_* -> memory). */
	const char *const *type_names;
	const char *const *type_units;
	size_t nvalues;
	/* period_type; both NULL leaves it out.  period: events per sample
	 * (e.g. 10000000 ns at 100 Hz). */
	const char *period_type, *period_unit;
	int64_t period;
	int64_t time_nanos, duration_nanos;   /* wall clock, ns since epoch */
	/* NULL, or one of type_names: the type readers show by default. */
	const char *default_sample_type;
	const char *const *comments;          /* free text, shown by pprof */
	size_t ncomments;
	const char *const *funcs;             /* function names, id = index + 1 */
	size_t nfuncs;
	/* Per function, parallel to funcs; each array may be NULL: the
	 * mangled name (default: the name), the source file (default: none),
	 * the first line (default: 0). */
	const char *const *func_system_names;
	const char *const *func_files;
	const int64_t *func_start_lines;
	/* NULL/0: function-level, as described at the top. */
	const struct ps_pprof_location *locations;
	size_t nlocations;
	const struct ps_pprof_mapping *mappings;   /* NULL/0: the placeholder */
	size_t nmappings;
	const struct ps_pprof_sample *samples;
	size_t nsamples;
	/* Labels put on EVERY sample (e.g. span_id, trace_id), then each
	 * sample's set, if any.  A key should appear once per sample: pprof
	 * tools handle repeated keys badly. */
	const struct ps_pprof_label *labels;
	size_t nlabels;
	const struct ps_pprof_labelset *sets;
	size_t nsets;
};

/* Encode `d` as a gzipped pprof Profile and append it to `out`.
 *
 * Samples whose values are all zero are left out; a profile with no
 * sample left is still a valid (empty) Profile with its sample types.
 *
 * Returns:
 *   0        the whole gzip member was appended to out;
 *   -EINVAL  bad description: NULL pointer where a string or array is
 *            required, nvalues == 0, an index out of its array (sample
 *            location, location mapping, line function), or a
 *            default_sample_type that is not among type_names;
 *   -E2BIG   the compressed profile would pass out->cap, or more than
 *            PS_PPROF_MAX_STRINGS distinct strings;
 *   -ENOMEM  an allocation failed.
 * On failure out->len is what it was on entry (out->data may have grown).
 *
 * Context: any thread, not signal context; allocates (temporary string
 * table, zlib state, growth of out).
 */
int ps_pprof_encode(const struct ps_pprof_desc *d, struct ps_buf *out) PS_WUR;

/* Replace the bytes of s[0..n) that are not part of valid UTF-8 with '?',
 * in place.  Returns the number of bytes replaced.  Exposed for the
 * folded-text writer, which has the same Pyroscope constraint.
 * Context: any; async-signal-safe (no allocation, no state). */
size_t ps_pprof_utf8_fix(char *s, size_t n);

#endif
