/* profiles.c -- pprof from a fold.  See profiles.h. */
#include "uploader/profiles.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shim/stacktab.h"

int
ps_profile_encode(const struct ps_fold *f, const struct ps_family *fam,
		  const int64_t (*vals)[PS_F_NVALUES], const struct ps_profile_meta *m,
		  struct ps_buf *out)
{
	size_t n = f->n ? f->n : 1, i, k;
	struct ps_pprof_sample *s = calloc(n, sizeof(*s));
	int64_t *v = calloc(n * fam->nvalues, sizeof(*v));
	const int64_t *src;
	struct ps_pprof_desc d;
	int rc = -ENOMEM;

	if (!s || !v)
		goto out;
	for (i = 0; i < f->n; i++) {
		src = vals ? vals[i] : f->e[i].v;
		for (k = 0; k < fam->nvalues; k++)
			/* Rounded as the folded files round them. */
			v[i * fam->nvalues + k] = fam->div[k] > 1 ?
				(src[fam->fold_values[k]] + fam->div[k] / 2) / fam->div[k] :
				src[fam->fold_values[k]];
		s[i].funcs = &f->frames[f->e[i].frames];
		s[i].depth = f->e[i].depth;
		s[i].values = &v[i * fam->nvalues];
	}
	memset(&d, 0, sizeof(d));
	d.type_names = fam->types;
	d.type_units = fam->units;
	d.nvalues = fam->nvalues;
	d.period_type = fam->period_type;
	d.period_unit = fam->period_unit;
	d.period = m->period;
	d.time_nanos = m->time_nanos;
	d.duration_nanos = m->duration_nanos;
	d.default_sample_type = fam->default_type;
	d.comments = m->comments;
	d.ncomments = m->ncomments;
	d.funcs = (const char *const *)f->names;
	d.nfuncs = f->nnames;
	d.samples = s;
	d.nsamples = f->n;
	d.labels = m->labels;
	d.nlabels = m->nlabels;
	ps_buf_reset(out);
	rc = ps_pprof_encode(&d, out);
out:
	free(s);
	free(v);
	return rc;
}
