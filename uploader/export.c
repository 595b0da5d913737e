/* export.c -- fold, encode and write.  See export.h. */
#include "export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "pprof.h"

#define OUT_CAP (64u << 20)  /* the largest profile file we write */

static uint64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void
ps_export_setup(struct ps_export *x)
{
	x->ready = 0;
	x->dirfd = -1;
	x->passes = x->files_written = x->file_errors = 0;
	memset(&x->fold, 0, sizeof(x->fold));
	memset(&x->out, 0, sizeof(x->out));
	x->out.cap = OUT_CAP;
	x->start_ns = wall_ns();
}

void
ps_export_abandon(struct ps_export *x)
{
	ps_export_setup(x);
}

static int
write_file(struct ps_export *x, const char *kind, const struct ps_buf *b)
{
	char name[NAME_MAX + 1];
	int rc;

	if (x->dirfd == -1) {
		x->dirfd = ps_files_open_dir(x->dir);
		if (x->dirfd < 0) {
			ps_warn("output directory %s: %s; local profiles are not written",
				x->dir, strerror(-x->dirfd));
			rc = x->dirfd;
			x->dirfd = -2;
			return rc;
		}
	}
	if (x->dirfd < 0)
		return -EBADF;
	if (snprintf(name, sizeof(name), "%.200s.%d.%s", x->app, (int)x->pid, kind) >=
	    (int)sizeof(name))
		return -ENAMETOOLONG;
	rc = ps_files_write(x->dirfd, name, b->data, b->len);
	if (rc) {
		x->file_errors++;
		ps_warn("writing %s/%s: %s", x->dir, name, strerror(-rc));
		return rc;
	}
	x->files_written++;
	return 0;
}

/* The pprof of one profile family, from the fold. */
struct family {
	const char *kind;                  /* file-name part: "cpu", "alloc" */
	const char *const *types, *const *units;
	const int *fold_values;            /* fold value index per sample type */
	const int64_t *div;                /* divisor per sample type */
	size_t nvalues;
	const char *period_type, *period_unit;
	int64_t period;
	const char *default_type;
};

static int
encode(struct ps_export *x, const struct family *fam, const char *const *comments,
       size_t ncomments)
{
	struct ps_fold *f = &x->fold;
	struct ps_pprof_sample *s = calloc(f->n ? f->n : 1, sizeof(*s));
	int64_t *vals = calloc((size_t)(f->n ? f->n : 1) * fam->nvalues, sizeof(*vals));
	struct ps_pprof_desc d;
	size_t i, k, n = 0;
	int rc = -ENOMEM;

	if (!s || !vals)
		goto out;
	for (i = 0; i < f->n; i++) {
		for (k = 0; k < fam->nvalues; k++)
			vals[n * fam->nvalues + k] = f->e[i].v[fam->fold_values[k]] / fam->div[k];
		s[n].funcs = &f->frames[f->e[i].frames];
		s[n].depth = f->e[i].depth;
		s[n].values = &vals[n * fam->nvalues];
		n++;
	}
	memset(&d, 0, sizeof(d));
	d.type_names = fam->types;
	d.type_units = fam->units;
	d.nvalues = fam->nvalues;
	d.period_type = fam->period_type;
	d.period_unit = fam->period_unit;
	d.period = fam->period;
	d.time_nanos = (int64_t)x->start_ns;
	d.duration_nanos = (int64_t)(wall_ns() - x->start_ns);
	d.default_sample_type = fam->default_type;
	d.comments = comments;
	d.ncomments = ncomments;
	d.funcs = (const char *const *)f->names;
	d.nfuncs = f->nnames;
	d.samples = s;
	d.nsamples = n;
	ps_buf_reset(&x->out);
	rc = ps_pprof_encode(&d, &x->out);
out:
	free(s);
	free(vals);
	return rc;
}

static const char *const cpu_types[] = { "samples", "cpu" };
static const char *const cpu_units[] = { "count", "nanoseconds" };
static const int cpu_vals[] = { PS_F_CPU_SAMPLES, PS_F_CPU_NS };
static const int64_t cpu_div[] = { 1, 1 };
static const char *const alloc_types[] = { "alloc_objects", "alloc_space", "inuse_objects",
					   "inuse_space" };
static const char *const alloc_units[] = { "count", "bytes", "count", "bytes" };
static const int alloc_vals[] = { PS_F_ALLOC_OBJS, PS_F_ALLOC_BYTES, PS_F_INUSE_OBJS,
				  PS_F_INUSE_BYTES };
static const int64_t alloc_div[] = { PS_FIXED_ONE, 1, PS_FIXED_ONE, 1 };

/* Folded files: one per sample type that a flame graph tool would draw. */
static int
write_folded(struct ps_export *x, const char *kind, int v, int64_t div)
{
	int rc;

	ps_buf_reset(&x->out);
	rc = ps_fold_folded(&x->fold, v, div, &x->out);
	if (!rc)
		rc = write_file(x, kind, &x->out);
	return rc;
}

static int
write_family(struct ps_export *x, const struct family *fam, char comments[][160],
	     size_t ncomments)
{
	const char *cp[8];
	char name[32];
	size_t i;
	int rc;

	for (i = 0; i < ncomments && i < PS_ARRAY_LEN(cp); i++)
		cp[i] = comments[i];
	rc = encode(x, fam, cp, i);
	if (rc) {
		ps_warn("encoding the %s profile: %s", fam->kind, strerror(-rc));
		return rc;
	}
	snprintf(name, sizeof(name), "%s.pb.gz", fam->kind);
	return write_file(x, name, &x->out);
}

static int
write_local(struct ps_export *x, char comments[][160], size_t nc)
{
	struct family cpu = { "cpu", cpu_types, cpu_units, cpu_vals, cpu_div, 2, "cpu",
			      "nanoseconds", 1000000000ll / x->cfg->sample_rate, "cpu" };
	struct family alloc = { "alloc", alloc_types, alloc_units, alloc_vals, alloc_div, 4,
				"space", "bytes", (int64_t)x->cfg->alloc_sample_bytes,
				"inuse_space" };
	int rc = 0;

	if (x->cpu_on && ps_fold_total(&x->fold, PS_F_CPU_SAMPLES) > 0) {
		rc |= write_family(x, &cpu, comments, nc);
		rc |= write_folded(x, "cpu.folded", PS_F_CPU_NS, 1);
	}
	if (x->alloc_on && (ps_fold_total(&x->fold, PS_F_ALLOC_OBJS) > 0 ||
			    ps_fold_total(&x->fold, PS_F_INUSE_OBJS) > 0)) {
		rc |= write_family(x, &alloc, comments, nc);
		rc |= write_folded(x, "alloc_objects.folded", PS_F_ALLOC_OBJS, PS_FIXED_ONE);
		rc |= write_folded(x, "alloc_space.folded", PS_F_ALLOC_BYTES, 1);
		rc |= write_folded(x, "inuse_objects.folded", PS_F_INUSE_OBJS, PS_FIXED_ONE);
		rc |= write_folded(x, "inuse_space.folded", PS_F_INUSE_BYTES, 1);
	}
	return rc ? -EIO : 0;
}

int
ps_export_run(struct ps_export *x, int final)
{
	char comments[4][160];
	size_t nc = 0;
	int rc;

	if (!x->st)
		return 0;
	if (!x->ready) {
		rc = ps_fold_init(&x->fold, ps_stacktab_size(x->st), x->skip_lo, x->skip_hi);
		if (rc)
			return rc;
		x->ready = 1;
	}
	x->passes++;
	rc = ps_fold_update(&x->fold, x->st, x->alloc_on ? x->lt : NULL);
	snprintf(comments[nc++], sizeof(comments[0]), "pyroshim %s, pid %d, app %.100s",
		 PS_VERSION, (int)x->pid, x->app);
	snprintf(comments[nc++], sizeof(comments[0]),
		 "dropped: %llu stacks (table full), %llu stacks (fold full), %llu live blocks",
		 (unsigned long long)atomic_load(&x->st->dropped),
		 (unsigned long long)x->fold.dropped,
		 (unsigned long long)(x->lt ? atomic_load(&x->lt->dropped) : 0));
	if (rc)
		snprintf(comments[nc++], sizeof(comments[0]), "incomplete: out of memory");
	ps_debug("export pass %llu%s: %u stacks, %llu cpu samples, %s", (unsigned long long)x->passes,
		 final ? " (final)" : "", x->fold.n,
		 (unsigned long long)ps_fold_total(&x->fold, PS_F_CPU_SAMPLES), comments[1]);
	if (x->dir[0])
		rc = write_local(x, comments, nc);
	return rc;
}
