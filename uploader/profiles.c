/* profiles.c -- pprof from a fold.  See profiles.h. */
#include "uploader/profiles.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shim/stacktab.h"

/* What one profile holds: only what its non-zero samples use, renumbered
 * (new[i] = new index + 1 of fold item i; 0 = unused). */
struct pick {
	uint32_t *loc_new, *func_new, *map_new;
	uint32_t nlocs, nfuncs, nmaps;
	struct ps_pprof_location *locs;
	struct ps_pprof_line *lines;
	uint32_t nlines;
	struct ps_pprof_mapping *maps;
	const char **fname, **fsys, **ffile;
	int64_t *fstart;
	uint32_t *stack;        /* renumbered location ids of every sample */
};

static void
pick_free(struct pick *p)
{
	free(p->loc_new);
	free(p->func_new);
	free(p->map_new);
	free(p->locs);
	free(p->lines);
	free(p->maps);
	free(p->fname);
	free(p->fsys);
	free(p->ffile);
	free(p->fstart);
	free(p->stack);
}

/* Number the locations, functions and mappings that `used` entries reach.
 * Mappings keep the fold's order, where the executable comes first: pprof
 * takes the first mapping for the main binary ("File:"). */
static void
pick_mark(const struct ps_fold *f, const uint8_t *used, struct pick *p)
{
	const struct ps_fold_loc *l;
	uint32_t i, d, k, id;

	for (i = 0; i < f->n; i++) {
		for (d = 0; used[i] && d < f->e[i].depth; d++) {
			id = f->frames[f->e[i].frames + d];
			if (p->loc_new[id])
				continue;
			p->loc_new[id] = ++p->nlocs;
			l = &f->locs[id];
			p->nlines += l->nlines;
			if (l->map)
				p->map_new[l->map - 1] = 1;     /* used; numbered below */
			for (k = 0; k < l->nlines; k++)
				if (!p->func_new[f->lines[l->line0 + k].func])
					p->func_new[f->lines[l->line0 + k].func] = ++p->nfuncs;
		}
	}
	for (i = 0; i < f->nmaps; i++)
		if (p->map_new[i])
			p->map_new[i] = ++p->nmaps;
}

static void
pick_fill(const struct ps_fold *f, struct pick *p)
{
	const struct ps_fold_loc *l;
	const struct ps_fold_map *m;
	const struct ps_fold_func *fn;
	struct ps_pprof_location *pl;
	uint32_t i, k, j, nl = 0;

	for (i = 0; i < f->nlocs; i++) {
		if (!p->loc_new[i])
			continue;
		l = &f->locs[i];
		pl = &p->locs[p->loc_new[i] - 1];
		pl->address = l->addr;
		pl->mapping = l->map ? p->map_new[l->map - 1] : 0;
		pl->lines = &p->lines[nl];
		pl->nlines = l->nlines;
		for (k = 0; k < l->nlines; k++, nl++) {
			p->lines[nl].func = p->func_new[f->lines[l->line0 + k].func] - 1;
			p->lines[nl].line = f->lines[l->line0 + k].line;
		}
	}
	for (i = 0; i < f->nfuncs; i++) {
		if (!(j = p->func_new[i]))
			continue;
		fn = &f->funcs[i];
		p->fname[j - 1] = f->names[fn->name];
		p->fsys[j - 1] = f->names[fn->system_name];
		p->ffile[j - 1] = f->names[fn->file];
		p->fstart[j - 1] = fn->start_line;
	}
	for (i = 0; i < f->nmaps; i++) {
		if (!(j = p->map_new[i]))
			continue;
		m = &f->maps[i];
		p->maps[j - 1] = (struct ps_pprof_mapping){
			.start = m->start, .limit = m->limit, .offset = m->offset,
			.file = f->names[m->file], .build_id = f->names[m->build_id],
			/* Names where a symbol table gave them; lines and
			 * inlined frames only where DWARF was found. */
			.has_functions = m->has_functions, .has_filenames = m->has_lines,
			.has_line_numbers = m->has_lines, .has_inline_frames = m->has_lines,
		};
	}
}

static int
pick(const struct ps_fold *f, const uint8_t *used, struct pick *p)
{
	memset(p, 0, sizeof(*p));
	p->loc_new = calloc(f->nlocs + 1, sizeof(*p->loc_new));
	p->func_new = calloc(f->nfuncs + 1, sizeof(*p->func_new));
	p->map_new = calloc(f->nmaps + 1, sizeof(*p->map_new));
	p->stack = calloc(f->nframes + 1, sizeof(*p->stack));
	if (!p->loc_new || !p->func_new || !p->map_new || !p->stack)
		return -ENOMEM;
	pick_mark(f, used, p);
	p->locs = calloc(p->nlocs + 1, sizeof(*p->locs));
	p->lines = calloc(p->nlines + 1, sizeof(*p->lines));
	p->maps = calloc(p->nmaps + 1, sizeof(*p->maps));
	p->fname = calloc(p->nfuncs + 1, sizeof(*p->fname));
	p->fsys = calloc(p->nfuncs + 1, sizeof(*p->fsys));
	p->ffile = calloc(p->nfuncs + 1, sizeof(*p->ffile));
	p->fstart = calloc(p->nfuncs + 1, sizeof(*p->fstart));
	if (!p->locs || !p->lines || !p->maps || !p->fname || !p->fsys || !p->ffile || !p->fstart)
		return -ENOMEM;
	pick_fill(f, p);
	return 0;
}

int
ps_profile_encode(const struct ps_fold *f, const struct ps_family *fam,
		  const int64_t (*vals)[PS_F_NVALUES], const struct ps_profile_meta *m,
		  struct ps_buf *out)
{
	size_t n = f->n ? f->n : 1, i, k, d;
	struct ps_pprof_sample *s = calloc(n, sizeof(*s));
	int64_t *v = calloc(n * fam->nvalues, sizeof(*v));
	uint8_t *used = calloc(n, 1);
	const int64_t *src;
	struct ps_pprof_desc desc;
	struct pick p = { 0 };
	int rc = -ENOMEM;

	if (!s || !v || !used)
		goto out;
	for (i = 0; i < f->n; i++) {
		src = vals ? vals[i] : f->e[i].v;
		for (k = 0; k < fam->nvalues; k++) {
			/* Rounded as the folded files round them. */
			v[i * fam->nvalues + k] = fam->div[k] > 1 ?
				(src[fam->fold_values[k]] + fam->div[k] / 2) / fam->div[k] :
				src[fam->fold_values[k]];
			used[i] |= v[i * fam->nvalues + k] != 0;
		}
	}
	rc = pick(f, used, &p);
	if (rc)
		goto out;
	for (i = 0; i < f->n; i++) {
		for (d = 0; used[i] && d < f->e[i].depth; d++)
			p.stack[f->e[i].frames + d] = p.loc_new[f->frames[f->e[i].frames + d]] - 1;
		s[i].locs = &p.stack[f->e[i].frames];
		s[i].depth = used[i] ? f->e[i].depth : 0;
		s[i].values = &v[i * fam->nvalues];
	}
	memset(&desc, 0, sizeof(desc));
	desc.type_names = fam->types;
	desc.type_units = fam->units;
	desc.nvalues = fam->nvalues;
	desc.period_type = fam->period_type;
	desc.period_unit = fam->period_unit;
	desc.period = m->period;
	desc.time_nanos = m->time_nanos;
	desc.duration_nanos = m->duration_nanos;
	desc.default_sample_type = fam->default_type;
	desc.comments = m->comments;
	desc.ncomments = m->ncomments;
	desc.funcs = p.fname;
	desc.func_system_names = p.fsys;
	desc.func_files = p.ffile;
	desc.func_start_lines = p.fstart;
	desc.nfuncs = p.nfuncs;
	desc.locations = p.locs;
	desc.nlocations = p.nlocs;
	desc.mappings = p.maps;
	desc.nmappings = p.nmaps;
	desc.samples = s;
	desc.nsamples = f->n;
	desc.labels = m->labels;
	desc.nlabels = m->nlabels;
	ps_buf_reset(out);
	rc = ps_pprof_encode(&desc, out);
out:
	pick_free(&p);
	free(used);
	free(s);
	free(v);
	return rc;
}
