/* profiles.c -- pprof from a fold.  See profiles.h. */
#include "uploader/profiles.h"

#include <errno.h>
#include <stdio.h>
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
	if (!p->loc_new || !p->func_new || !p->map_new)
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

/* One part, picked: its samples' values and renumbered stacks. */
struct part_pick {
	struct pick p;
	int64_t *v;            /* fold->n rows of fam->nvalues */
	uint8_t *used;
};

static int
pick_part(const struct ps_profile_part *pt, const struct ps_family *fam, struct part_pick *pp)
{
	const struct ps_fold *f = pt->fold;
	size_t n = f->n ? f->n : 1, i, k;
	const int64_t *src;

	memset(pp, 0, sizeof(*pp));
	pp->v = calloc(n * fam->nvalues, sizeof(*pp->v));
	pp->used = calloc(n, 1);
	if (!pp->v || !pp->used)
		return -ENOMEM;
	for (i = 0; i < f->n; i++) {
		src = pt->vals ? pt->vals[i] : f->e[i].v;
		for (k = 0; k < fam->nvalues; k++) {
			/* Rounded as the folded files round them. */
			pp->v[i * fam->nvalues + k] = fam->div[k] > 1 ?
				(src[fam->fold_values[k]] + fam->div[k] / 2) / fam->div[k] :
				src[fam->fold_values[k]];
			pp->used[i] |= pp->v[i * fam->nvalues + k] != 0;
		}
	}
	return pick(f, pp->used, &pp->p);
}

/* All parts' picks, one after another: indexes move by what the parts
 * before hold. */
struct joined {
	struct ps_pprof_location *locs;
	struct ps_pprof_line *lines;
	struct ps_pprof_mapping *maps;
	const char **fname, **fsys, **ffile;
	int64_t *fstart;
	uint32_t *stack;
	struct ps_pprof_sample *s;
	size_t nlocs, nlines, nmaps, nfuncs, nframes, nsamples;
};

static void
joined_free(struct joined *j)
{
	free(j->locs);
	free(j->lines);
	free(j->maps);
	free(j->fname);
	free(j->fsys);
	free(j->ffile);
	free(j->fstart);
	free(j->stack);
	free(j->s);
}

static int
join_parts(const struct ps_profile_part *parts, const struct part_pick *pp, size_t nparts,
	   const struct ps_family *fam, struct joined *j)
{
	size_t q, i, k, d, nl = 0, nlocs = 0, nfuncs = 0, nmaps = 0, nframes = 0, ns = 0;
	const struct ps_fold *f;
	const struct pick *p;
	struct ps_pprof_location *l;

	memset(j, 0, sizeof(*j));
	for (q = 0; q < nparts; q++) {
		j->nlocs += pp[q].p.nlocs;
		j->nlines += pp[q].p.nlines;
		j->nmaps += pp[q].p.nmaps;
		j->nfuncs += pp[q].p.nfuncs;
		j->nframes += parts[q].fold->nframes;
		j->nsamples += parts[q].fold->n;
	}
	j->locs = calloc(j->nlocs + 1, sizeof(*j->locs));
	j->lines = calloc(j->nlines + 1, sizeof(*j->lines));
	j->maps = calloc(j->nmaps + 1, sizeof(*j->maps));
	j->fname = calloc(j->nfuncs + 1, sizeof(*j->fname));
	j->fsys = calloc(j->nfuncs + 1, sizeof(*j->fsys));
	j->ffile = calloc(j->nfuncs + 1, sizeof(*j->ffile));
	j->fstart = calloc(j->nfuncs + 1, sizeof(*j->fstart));
	j->stack = calloc(j->nframes + 1, sizeof(*j->stack));
	j->s = calloc(j->nsamples + 1, sizeof(*j->s));
	if (!j->locs || !j->lines || !j->maps || !j->fname || !j->fsys || !j->ffile ||
	    !j->fstart || !j->stack || !j->s)
		return -ENOMEM;
	for (q = 0; q < nparts; q++) {
		p = &pp[q].p;
		f = parts[q].fold;
		for (i = 0; i < p->nlocs; i++) {
			l = &j->locs[nlocs + i];
			*l = p->locs[i];
			if (l->mapping)
				l->mapping += (uint32_t)nmaps;
			l->lines = &j->lines[nl];
			for (k = 0; k < l->nlines; k++, nl++) {
				j->lines[nl] = p->locs[i].lines[k];
				j->lines[nl].func += (uint32_t)nfuncs;
			}
		}
		memcpy(&j->maps[nmaps], p->maps, p->nmaps * sizeof(*p->maps));
		memcpy(&j->fname[nfuncs], p->fname, p->nfuncs * sizeof(*p->fname));
		memcpy(&j->fsys[nfuncs], p->fsys, p->nfuncs * sizeof(*p->fsys));
		memcpy(&j->ffile[nfuncs], p->ffile, p->nfuncs * sizeof(*p->ffile));
		memcpy(&j->fstart[nfuncs], p->fstart, p->nfuncs * sizeof(*p->fstart));
		for (i = 0; i < f->n; i++, ns++) {
			for (d = 0; pp[q].used[i] && d < f->e[i].depth; d++)
				j->stack[nframes + f->e[i].frames + d] =
					p->loc_new[f->frames[f->e[i].frames + d]] - 1 + (uint32_t)nlocs;
			j->s[ns].locs = &j->stack[nframes + f->e[i].frames];
			j->s[ns].depth = pp[q].used[i] ? f->e[i].depth : 0;
			j->s[ns].values = &pp[q].v[i * fam->nvalues];
			j->s[ns].set = f->e[i].tag ? f->e[i].tag : parts[q].set;
		}
		nlocs += p->nlocs;
		nmaps += p->nmaps;
		nfuncs += p->nfuncs;
		nframes += f->nframes;
	}
	return 0;
}

int
ps_profile_encode_parts(const struct ps_profile_part *parts, size_t nparts,
			const struct ps_family *fam, const struct ps_profile_meta *m,
			struct ps_buf *out)
{
	struct part_pick *pp = calloc(nparts + 1, sizeof(*pp));
	struct ps_pprof_desc desc;
	struct joined j = { 0 };
	size_t q;
	int rc = -ENOMEM;

	for (q = 0; pp && q < nparts; q++)
		if ((rc = pick_part(&parts[q], fam, &pp[q])) != 0)
			goto out;
	if (!pp || (rc = join_parts(parts, pp, nparts, fam, &j)) != 0)
		goto out;
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
	desc.funcs = j.fname;
	desc.func_system_names = j.fsys;
	desc.func_files = j.ffile;
	desc.func_start_lines = j.fstart;
	desc.nfuncs = j.nfuncs;
	desc.locations = j.locs;
	desc.nlocations = j.nlocs;
	desc.mappings = j.maps;
	desc.nmappings = j.nmaps;
	desc.samples = j.s;
	desc.nsamples = j.nsamples;
	desc.labels = m->labels;
	desc.nlabels = m->nlabels;
	desc.sets = m->sets;
	desc.nsets = m->nsets;
	ps_buf_reset(out);
	rc = ps_pprof_encode(&desc, out);
out:
	joined_free(&j);
	for (q = 0; pp && q < nparts; q++) {
		pick_free(&pp[q].p);
		free(pp[q].v);
		free(pp[q].used);
	}
	free(pp);
	return rc;
}

int
ps_profile_encode(const struct ps_fold *f, const struct ps_family *fam,
		  const int64_t (*vals)[PS_F_NVALUES], const struct ps_profile_meta *m,
		  struct ps_buf *out)
{
	struct ps_profile_part part = { f, vals, 0 };

	return ps_profile_encode_parts(&part, 1, fam, m, out);
}

/* One folded line: its stack and its value. */
struct line {
	const char *s;
	size_t len;
	int64_t val;
};

static int
line_cmp(const void *a, const void *b)
{
	const struct line *x = a, *y = b;
	int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The decimal number in [s, end): ps_fold_folded's, positive.  (The text
 * is not NUL-terminated: no strtoll.) */
static int64_t
number(const char *s, const char *end)
{
	int64_t v = 0;

	for (; s < end && *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (*s - '0');
	return v;
}

int
ps_profile_present(const struct ps_profile_part *parts, size_t nparts, const struct ps_family *fam)
{
	size_t k;

	for (k = 0; k < nparts; k++)
		if (ps_family_present(fam, parts[k].fold, parts[k].vals))
			return 1;
	return 0;
}

int
ps_profile_folded(const struct ps_profile_part *parts, size_t nparts, const struct ps_series *s,
		  struct ps_buf *out)
{
	struct ps_buf raw = { .cap = out->cap };
	struct line *ln = NULL;
	size_t n = 0, cap = 0, i, j;
	char *p, *end, *nl, *sp;
	struct line *t;
	int64_t val;
	int rc = 0;

	for (i = 0; i < nparts && !rc; i++)
		rc = ps_fold_folded(parts[i].fold, parts[i].vals, s->value, 1, &raw);
	for (p = (char *)raw.data, end = p + raw.len; !rc && p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		sp = nl ? memrchr(p, ' ', (size_t)(nl - p)) : NULL;
		if (!sp)
			break;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			t = realloc(ln, cap * sizeof(*ln));
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			ln = t;
		}
		ln[n++] = (struct line){ p, (size_t)(sp - p), number(sp + 1, nl) };
	}
	if (!rc && n)
		qsort(ln, n, sizeof(*ln), line_cmp);
	ps_buf_reset(out);
	for (i = 0; !rc && i < n; i = j) {
		for (val = 0, j = i; j < n && !line_cmp(&ln[i], &ln[j]); j++)
			val += ln[j].val;
		val = s->div > 1 ? (val + s->div / 2) / s->div : val;
		if (val > 0)
			rc = ps_buf_printf(out, "%.*s %lld\n", (int)ln[i].len, ln[i].s,
					   (long long)val);
	}
	free(ln);
	ps_buf_free(&raw);
	return rc;
}
