/* pprof.c -- gzipped pprof Profile encoder on nanopb.  See pprof.h.
 *
 * Design.  Encoding happens in two steps.  First every string the profile
 * will mention is interned into one table (deduplicated through an
 * open-addressing hash of the sanitised bytes), and the string indexes the
 * messages need are stored in small arrays, so the second step only looks
 * things up.  Then the Profile message is encoded by nanopb with every
 * repeated field filled by an encode callback that walks the caller's
 * arrays.  nanopb sizes each submessage before writing it (it runs the
 * callbacks twice, once into a sizing stream), so the callbacks are pure
 * functions of the prepared state.  The output stream writes into
 * ps_gzip, which appends compressed bytes to the caller's capped buffer.
 *
 * Packed repeated scalars (Sample.location_id, Sample.value,
 * Profile.comment) are written by hand -- tag, length, varints -- with the
 * length measured by a first run into a sizing stream, because nanopb's
 * callback API leaves packing to the callback.
 */
#include "uploader/pprof.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <pb_encode.h>

#include "common/hash.h"
#include "common/gzip.h"
#include "profile.pb.h"

#define MAPPING_ID 1            /* the single placeholder mapping */

/* ---- UTF-8 ---------------------------------------------------------- */

/* Length of the valid UTF-8 sequence that starts p[0..n), or 0 if the
 * bytes there are not one (RFC 3629: no overlongs, no surrogates, nothing
 * past U+10FFFF). */
static size_t
utf8_seq(const unsigned char *p, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if ((p[0] & 0xf0) == 0xe0)
		len = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (n < len)
		return 0;
	cp = p[0] & (0x7f >> len);
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
		return 0;
	if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

static bool
utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t k;

	while (n > 0) {
		k = utf8_seq(p, n);
		if (k == 0)
			return false;
		p += k;
		n -= k;
	}
	return true;
}

size_t
ps_pprof_utf8_fix(char *s, size_t n)
{
	unsigned char *p = (unsigned char *)s;
	size_t k, fixed = 0;

	while (n > 0) {
		k = utf8_seq(p, n);
		if (k == 0) {
			*p = '?';
			k = 1;
			fixed++;
		}
		p += k;
		n -= k;
	}
	return fixed;
}

/* ---- string table --------------------------------------------------- */

struct str {
	const char *s;          /* the caller's string, or `owned` */
	size_t len;
	char *owned;            /* sanitised copy, or NULL */
};

struct strtab {
	struct str *v;          /* v[0] is "" */
	uint32_t n, max;
	uint32_t *slot;         /* index + 1; 0 = empty */
	uint32_t mask;          /* slots - 1, slots a power of two > 2 * max */
};

static int
strtab_init(struct strtab *t, size_t max)
{
	size_t slots = 16;

	while (slots < 2 * max)
		slots *= 2;
	t->v = calloc(max, sizeof(*t->v));
	t->slot = calloc(slots, sizeof(*t->slot));
	if (!t->v || !t->slot)
		return -ENOMEM;
	t->n = 0;
	t->max = (uint32_t)max;
	t->mask = (uint32_t)(slots - 1);
	return 0;
}

static void
strtab_free(struct strtab *t)
{
	uint32_t i;

	for (i = 0; t->v && i < t->n; i++)
		free(t->v[i].owned);
	free(t->v);
	free(t->slot);
	t->v = NULL;
	t->slot = NULL;
}

/* Intern s (sanitised) and store its index in *idx.  Returns 0, -ENOMEM,
 * -E2BIG (more strings than the table was sized for). */
static int
strtab_add(struct strtab *t, const char *s, int64_t *idx)
{
	size_t len = strlen(s);
	char *copy = NULL;
	uint32_t h, k;
	struct str *e;

	if (!utf8_valid(s, len)) {
		copy = malloc(len + 1);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, s, len + 1);
		(void)ps_pprof_utf8_fix(copy, len);
		s = copy;
	}
	h = (uint32_t)ps_hash_bytes(s, len) & t->mask;
	for (; t->slot[h]; h = (h + 1) & t->mask) {
		e = &t->v[t->slot[h] - 1];
		if (e->len == len && memcmp(e->s, s, len) == 0) {
			free(copy);
			*idx = t->slot[h] - 1;
			return 0;
		}
	}
	if (t->n == t->max) {
		free(copy);
		return -E2BIG;
	}
	k = t->n++;
	t->v[k] = (struct str){ .s = s, .len = len, .owned = copy };
	t->slot[h] = k + 1;
	*idx = k;
	return 0;
}

/* ---- validation ----------------------------------------------------- */

/* n strings, none NULL (arr may be NULL only when n is 0). */
static bool
strings_ok(const char *const *arr, size_t n)
{
	size_t i;

	if (n > 0 && !arr)
		return false;
	for (i = 0; i < n; i++)
		if (!arr[i])
			return false;
	return true;
}

static bool
samples_ok(const struct ps_pprof_desc *d)
{
	const struct ps_pprof_sample *s;
	size_t i, j, nlocs = d->locations ? d->nlocations : d->nfuncs;

	if (d->nsamples > 0 && !d->samples)
		return false;
	for (i = 0; i < d->nsamples; i++) {
		s = &d->samples[i];
		if (!s->values || (s->depth > 0 && !s->locs))
			return false;
		for (j = 0; j < s->depth; j++)
			if (s->locs[j] >= nlocs)
				return false;
	}
	return true;
}

static bool
locations_ok(const struct ps_pprof_desc *d)
{
	const struct ps_pprof_location *l;
	size_t i, j;

	if (d->nmappings > 0 && !d->mappings)
		return false;
	for (i = 0; i < d->nmappings; i++)
		if (!d->mappings[i].file)
			return false;
	for (i = 0; d->locations && i < d->nlocations; i++) {
		l = &d->locations[i];
		if (l->mapping > d->nmappings || (l->nlines > 0 && !l->lines))
			return false;
		for (j = 0; j < l->nlines; j++)
			if (l->lines[j].func >= d->nfuncs)
				return false;
	}
	return true;
}

static bool
label_list_ok(const struct ps_pprof_label *l, size_t n)
{
	size_t i;

	if (n > 0 && !l)
		return false;
	for (i = 0; i < n; i++)
		if (!l[i].key)
			return false;
	return true;
}

static bool
labels_ok(const struct ps_pprof_desc *d)
{
	size_t i;

	if (!label_list_ok(d->labels, d->nlabels) || (d->nsets > 0 && !d->sets))
		return false;
	for (i = 0; i < d->nsets; i++)
		if (!label_list_ok(d->sets[i].labels, d->sets[i].nlabels))
			return false;
	for (i = 0; i < d->nsamples; i++)
		if (d->samples[i].set > d->nsets)
			return false;
	return true;
}

static bool
default_type_ok(const struct ps_pprof_desc *d)
{
	size_t i;

	if (!d->default_sample_type)
		return true;
	for (i = 0; i < d->nvalues; i++)
		if (strcmp(d->type_names[i], d->default_sample_type) == 0)
			return true;
	return false;
}

static int
check_desc(const struct ps_pprof_desc *d)
{
	if (d->nvalues == 0 || !strings_ok(d->type_names, d->nvalues) ||
	    !strings_ok(d->type_units, d->nvalues))
		return -EINVAL;
	if (!d->period_type != !d->period_unit)
		return -EINVAL;
	if (!strings_ok(d->comments, d->ncomments) ||
	    !strings_ok(d->funcs, d->nfuncs))
		return -EINVAL;
	if (d->func_system_names && !strings_ok(d->func_system_names, d->nfuncs))
		return -EINVAL;
	if (d->func_files && !strings_ok(d->func_files, d->nfuncs))
		return -EINVAL;
	if (!samples_ok(d) || !locations_ok(d) || !labels_ok(d) || !default_type_ok(d))
		return -EINVAL;
	return 0;
}

/* ---- preparation: every string index, computed once ------------------ */

struct enc {
	const struct ps_pprof_desc *d;
	struct strtab st;
	perftools_profiles_ValueType *types;    /* nvalues */
	perftools_profiles_ValueType period;
	int64_t default_type;
	int64_t *comment;                       /* ncomments */
	int64_t *fname;                         /* nfuncs */
	int64_t *fsys;                          /* nfuncs */
	int64_t *ffile;                         /* nfuncs */
	int64_t *mfile, *mbuild;                /* nmappings */
	/* Every label: the desc's, then each set's from set_first[set]. */
	perftools_profiles_Label *labels;
	size_t *set_first;                      /* nsets + 1 */
	struct ps_gzip gz;
};

/* The desc's labels and its sets', together. */
static size_t
all_labels(const struct ps_pprof_desc *d)
{
	size_t n = d->nlabels, i;

	for (i = 0; i < d->nsets; i++)
		n += d->sets[i].nlabels;
	return n;
}

/* How many strings the table may need, or 0 if past the cap. */
static size_t
strings_needed(const struct ps_pprof_desc *d)
{
	size_t cap = PS_PPROF_MAX_STRINGS;

	/* Each term is checked first so that the sum cannot wrap. */
	if (d->nvalues > cap || d->ncomments > cap || d->nfuncs > cap ||
	    all_labels(d) > cap || d->nmappings > cap)
		return 0;
	cap = 1 + 2 * d->nvalues + 2 + 1 + d->ncomments + 3 * d->nfuncs +
	      2 * all_labels(d) + 2 * d->nmappings;
	return cap > PS_PPROF_MAX_STRINGS ? 0 : cap;
}

static int
intern_list(struct strtab *t, const char *const *arr, size_t n, int64_t *idx)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		rc = strtab_add(t, arr[i], &idx[i]);
		if (rc)
			return rc;
	}
	return 0;
}

static int
intern_types(struct enc *e)
{
	const struct ps_pprof_desc *d = e->d;
	size_t i;
	int rc = 0;

	for (i = 0; i < d->nvalues && !rc; i++) {
		rc = strtab_add(&e->st, d->type_names[i], &e->types[i].type);
		if (!rc)
			rc = strtab_add(&e->st, d->type_units[i], &e->types[i].unit);
	}
	if (!rc && d->period_type) {
		rc = strtab_add(&e->st, d->period_type, &e->period.type);
		if (!rc)
			rc = strtab_add(&e->st, d->period_unit, &e->period.unit);
	}
	if (!rc && d->default_sample_type)
		rc = strtab_add(&e->st, d->default_sample_type, &e->default_type);
	return rc;
}

/* Function system names and files, mapping files and build IDs: each
 * optional, "" when absent. */
static int
intern_details(struct enc *e)
{
	const struct ps_pprof_desc *d = e->d;
	const struct ps_pprof_mapping *m;
	size_t i;
	int rc = 0;

	for (i = 0; i < d->nfuncs && !rc; i++) {
		rc = strtab_add(&e->st, d->func_system_names ? d->func_system_names[i] : d->funcs[i],
				&e->fsys[i]);
		if (!rc)
			rc = strtab_add(&e->st, d->func_files ? d->func_files[i] : "", &e->ffile[i]);
	}
	for (i = 0; i < d->nmappings && !rc; i++) {
		m = &d->mappings[i];
		rc = strtab_add(&e->st, m->file, &e->mfile[i]);
		if (!rc)
			rc = strtab_add(&e->st, m->build_id ? m->build_id : "", &e->mbuild[i]);
	}
	return rc;
}

static int
intern_label(struct enc *e, const struct ps_pprof_label *l, perftools_profiles_Label *out)
{
	int rc = strtab_add(&e->st, l->key, &out->key);

	if (!rc && l->str)
		rc = strtab_add(&e->st, l->str, &out->str);
	else
		out->num = l->num;
	return rc;
}

static int
intern_labels(struct enc *e)
{
	const struct ps_pprof_desc *d = e->d;
	size_t i, k, n = 0;
	int rc = 0;

	for (i = 0; i < d->nlabels && !rc; i++)
		rc = intern_label(e, &d->labels[i], &e->labels[n++]);
	for (k = 0; k < d->nsets && !rc; k++) {
		e->set_first[k] = n;
		for (i = 0; i < d->sets[k].nlabels && !rc; i++)
			rc = intern_label(e, &d->sets[k].labels[i], &e->labels[n++]);
	}
	e->set_first[d->nsets] = n;
	return rc;
}

static int
enc_prepare(struct enc *e)
{
	const struct ps_pprof_desc *d = e->d;
	size_t max = strings_needed(d);
	int64_t zero;
	int rc;

	if (max == 0)
		return -E2BIG;
	rc = strtab_init(&e->st, max);
	if (rc)
		return rc;
	/* calloc(0) may return NULL: ask for at least one element. */
	e->types = calloc(d->nvalues, sizeof(*e->types));
	e->comment = calloc(d->ncomments + 1, sizeof(*e->comment));
	e->fname = calloc(d->nfuncs + 1, sizeof(*e->fname));
	e->fsys = calloc(d->nfuncs + 1, sizeof(*e->fsys));
	e->ffile = calloc(d->nfuncs + 1, sizeof(*e->ffile));
	e->mfile = calloc(d->nmappings + 1, sizeof(*e->mfile));
	e->mbuild = calloc(d->nmappings + 1, sizeof(*e->mbuild));
	e->labels = calloc(all_labels(d) + 1, sizeof(*e->labels));
	e->set_first = calloc(d->nsets + 1, sizeof(*e->set_first));
	if (!e->types || !e->comment || !e->fname || !e->fsys || !e->ffile || !e->mfile ||
	    !e->mbuild || !e->labels || !e->set_first)
		return -ENOMEM;
	rc = strtab_add(&e->st, "", &zero);     /* string_table[0] */
	if (!rc)
		rc = intern_types(e);
	if (!rc)
		rc = intern_list(&e->st, d->comments, d->ncomments, e->comment);
	if (!rc)
		rc = intern_list(&e->st, d->funcs, d->nfuncs, e->fname);
	if (!rc)
		rc = intern_details(e);
	if (!rc)
		rc = intern_labels(e);
	return rc;
}

static void
enc_free(struct enc *e)
{
	free(e->labels);
	free(e->set_first);
	free(e->mbuild);
	free(e->mfile);
	free(e->ffile);
	free(e->fsys);
	free(e->fname);
	free(e->comment);
	free(e->types);
	strtab_free(&e->st);
}

/* ---- nanopb encode callbacks ----------------------------------------- */

/* Arguments of one Sample's callbacks; lives on the stack of enc_samples
 * while nanopb sizes and writes that Sample. */
struct sample_arg {
	const struct enc *e;
	const struct ps_pprof_sample *s;
};

static bool
put_i64s(pb_ostream_t *os, const int64_t *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!pb_encode_varint(os, (uint64_t)v[i]))
			return false;
	return true;
}

/* A packed repeated int64 field: tag, byte length, varints. */
static bool
put_packed_i64s(pb_ostream_t *os, uint32_t tag, const int64_t *v, size_t n)
{
	pb_ostream_t sz = PB_OSTREAM_SIZING;

	if (n == 0)
		return true;
	if (!put_i64s(&sz, v, n))
		return false;
	return pb_encode_tag(os, PB_WT_STRING, tag) &&
	       pb_encode_varint(os, sz.bytes_written) &&
	       put_i64s(os, v, n);
}

static bool
put_locids(pb_ostream_t *os, const struct ps_pprof_sample *s)
{
	uint32_t i;

	for (i = 0; i < s->depth; i++)
		if (!pb_encode_varint(os, (uint64_t)s->locs[i] + 1))
			return false;
	return true;
}

static bool
cb_location_ids(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct sample_arg *a = *arg;
	pb_ostream_t sz = PB_OSTREAM_SIZING;

	if (a->s->depth == 0)
		return true;
	if (!put_locids(&sz, a->s))
		return false;
	return pb_encode_tag(os, PB_WT_STRING, field->tag) &&
	       pb_encode_varint(os, sz.bytes_written) &&
	       put_locids(os, a->s);
}

static bool
cb_values(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct sample_arg *a = *arg;

	return put_packed_i64s(os, field->tag, a->s->values, a->e->d->nvalues);
}

static bool
cb_labels(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct sample_arg *a = *arg;
	const struct enc *e = a->e;
	size_t i, set = a->s->set;

	for (i = 0; i < e->d->nlabels; i++)
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Label_fields, &e->labels[i]))
			return false;
	for (i = set ? e->set_first[set - 1] : 0; set && i < e->set_first[set]; i++)
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Label_fields, &e->labels[i]))
			return false;
	return true;
}

static bool
all_zero(const int64_t *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] != 0)
			return false;
	return true;
}

static bool
cb_samples(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct enc *e = *arg;
	perftools_profiles_Sample msg = perftools_profiles_Sample_init_zero;
	struct sample_arg a = { .e = e };
	size_t i;

	msg.location_id.funcs.encode = cb_location_ids;
	msg.location_id.arg = &a;
	msg.value.funcs.encode = cb_values;
	msg.value.arg = &a;
	msg.label.funcs.encode = cb_labels;
	msg.label.arg = &a;
	for (i = 0; i < e->d->nsamples; i++) {
		a.s = &e->d->samples[i];
		if (all_zero(a.s->values, e->d->nvalues))
			continue;
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Sample_fields, &msg))
			return false;
	}
	return true;
}

static bool
cb_sample_types(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct enc *e = *arg;
	size_t i;

	for (i = 0; i < e->d->nvalues; i++) {
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_ValueType_fields,
					  &e->types[i]))
			return false;
	}
	return true;
}

/* The mappings; without any, the one placeholder every location points
 * at: has_functions tells readers the names are already there. */
static bool
cb_mapping(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct enc *e = *arg;
	perftools_profiles_Mapping m = perftools_profiles_Mapping_init_zero;
	const struct ps_pprof_mapping *pm;
	size_t i;

	if (e->d->nmappings == 0) {
		m.id = MAPPING_ID;
		m.has_functions = true;
		return pb_encode_tag_for_field(os, field) &&
		       pb_encode_submessage(os, perftools_profiles_Mapping_fields, &m);
	}
	for (i = 0; i < e->d->nmappings; i++) {
		pm = &e->d->mappings[i];
		m.id = i + 1;
		m.memory_start = pm->start;
		m.memory_limit = pm->limit;
		m.file_offset = pm->offset;
		m.filename = e->mfile[i];
		m.build_id = e->mbuild[i];
		m.has_functions = pm->has_functions;
		m.has_filenames = pm->has_filenames;
		m.has_line_numbers = pm->has_line_numbers;
		m.has_inline_frames = pm->has_inline_frames;
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Mapping_fields, &m))
			return false;
	}
	return true;
}

/* A location's lines: arg is the location (NULL: function-level, whose
 * one line names the function with the location's own id). */
struct line_arg {
	const struct ps_pprof_location *loc;
	uint64_t func_id;
};

static bool
cb_line(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct line_arg *a = *arg;
	perftools_profiles_Line line = perftools_profiles_Line_init_zero;
	uint32_t i;

	if (!a->loc) {
		line.function_id = a->func_id;
		return pb_encode_tag_for_field(os, field) &&
		       pb_encode_submessage(os, perftools_profiles_Line_fields, &line);
	}
	for (i = 0; i < a->loc->nlines; i++) {
		line.function_id = (uint64_t)a->loc->lines[i].func + 1;
		line.line = a->loc->lines[i].line;
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Line_fields, &line))
			return false;
	}
	return true;
}

static bool
cb_locations(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct enc *e = *arg;
	perftools_profiles_Location loc = perftools_profiles_Location_init_zero;
	struct line_arg a = { NULL, 0 };
	size_t i, n = e->d->locations ? e->d->nlocations : e->d->nfuncs;

	loc.line.funcs.encode = cb_line;
	loc.line.arg = &a;
	for (i = 0; i < n; i++) {
		loc.id = i + 1;
		if (e->d->locations) {
			a.loc = &e->d->locations[i];
			loc.mapping_id = a.loc->mapping;
			loc.address = a.loc->address;
		} else {
			/* Function-level: Line.function_id == Location.id. */
			a.func_id = i + 1;
			loc.mapping_id = MAPPING_ID;
		}
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Location_fields, &loc))
			return false;
	}
	return true;
}

static bool
cb_functions(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct enc *e = *arg;
	perftools_profiles_Function fn = perftools_profiles_Function_init_zero;
	size_t i;

	for (i = 0; i < e->d->nfuncs; i++) {
		fn.id = i + 1;
		fn.name = e->fname[i];
		fn.system_name = e->fsys[i];
		fn.filename = e->ffile[i];
		fn.start_line = e->d->func_start_lines ? e->d->func_start_lines[i] : 0;
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Function_fields, &fn))
			return false;
	}
	return true;
}

static bool
cb_strings(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct enc *e = *arg;
	uint32_t i;

	for (i = 0; i < e->st.n; i++) {
		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_string(os, (const pb_byte_t *)e->st.v[i].s,
				      e->st.v[i].len))
			return false;
	}
	return true;
}

static bool
cb_comments(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct enc *e = *arg;

	return put_packed_i64s(os, field->tag, e->comment, e->d->ncomments);
}

/* ---- the entry point ------------------------------------------------- */

static bool
gz_stream_write(pb_ostream_t *os, const pb_byte_t *buf, size_t count)
{
	return ps_gzip_write(os->state, buf, count) == 0;
}

static void
fill_profile(perftools_profiles_Profile *p, struct enc *e)
{
	const struct ps_pprof_desc *d = e->d;

	p->sample_type.funcs.encode = cb_sample_types;
	p->sample.funcs.encode = cb_samples;
	p->mapping.funcs.encode = cb_mapping;
	p->location.funcs.encode = cb_locations;
	p->function.funcs.encode = cb_functions;
	p->string_table.funcs.encode = cb_strings;
	p->comment.funcs.encode = cb_comments;
	p->sample_type.arg = p->sample.arg = p->location.arg = p->mapping.arg = e;
	p->function.arg = p->string_table.arg = p->comment.arg = e;
	p->time_nanos = d->time_nanos;
	p->duration_nanos = d->duration_nanos;
	p->has_period_type = d->period_type != NULL;
	p->period_type = e->period;
	p->period = d->period;
	p->default_sample_type = e->default_type;
}

int
ps_pprof_encode(const struct ps_pprof_desc *d, struct ps_buf *out)
{
	perftools_profiles_Profile msg = perftools_profiles_Profile_init_zero;
	pb_ostream_t os = { .callback = gz_stream_write, .max_size = SIZE_MAX };
	struct enc e;
	int rc;

	if (!d || !out)
		return -EINVAL;
	rc = check_desc(d);
	if (rc)
		return rc;
	memset(&e, 0, sizeof(e));
	e.d = d;
	rc = enc_prepare(&e);
	if (rc)
		goto out_free;
	rc = ps_gzip_begin(&e.gz, out, Z_BEST_SPEED);
	if (rc)
		goto out_free;
	fill_profile(&msg, &e);
	os.state = &e.gz;
	if (!pb_encode(&os, perftools_profiles_Profile_fields, &msg)) {
		/* Our callbacks only fail when the stream does. */
		rc = e.gz.err ? e.gz.err : -EINVAL;
		ps_gzip_abort(&e.gz);
		goto out_free;
	}
	rc = ps_gzip_end(&e.gz);
out_free:
	enc_free(&e);
	return rc;
}
