/* group.c -- one set of local files per program name.  See group.h. */
#include "uploader/group.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "uploader/export.h"
#include "uploader/files.h"
#include "uploader/profiles.h"
#include "symbolize/symbols.h"

#define OUT_CAP (64u << 20)  /* the largest profile file we write */

/* A process whose samples are in a group's store: its labels. */
struct gone {
	pid_t pid;
	char span[17], trace[33];     /* "" without a span */
};

/* What ended processes left: their samples, each entry tagged with its
 * process (tag - 1 in gone[]). */
struct ended {
	struct ps_fold fold;
	struct gone *gone;
	uint32_t n, cap;
};

/* What the store's processes counted, for the comments. */
struct counts {
	uint64_t dropped, fold_dropped, live_dropped;
	uint64_t sent, failed, lost, retries, deferred;
	uint64_t unresolved;          /* live: until a later pass */
	uint64_t unresolved_kept;     /* ended: for good */
	int over_cap, incomplete, remote;
};

struct ps_group {
	struct ps_group *next;
	char app[256];
	char dir[PATH_MAX];           /* "": no files */
	pid_t tree;
	/* The uploads, NULL without a server: its members' series, less
	 * their root spans (ps_remote_same). */
	struct ps_remote *rem;
	int dirfd;                    /* -1 until opened; -2 after a refusal */
	int seq;                      /* -1 until the first write chooses */
	int seq_from;                 /* the lowest seq it may choose */
	int dirty;                    /* files due */
	int fresh;                    /* an upload due */
	int uploaded;                 /* an interval was queued */
	uint64_t start_ns;            /* the earliest member's */
	int on[PS_NFAMILIES];         /* any member's */
	/* The first member's settings that the files use. */
	unsigned sample_rate;
	uint64_t alloc_sample_bytes, dwarf_memory;
	struct ps_export **m;         /* the live members (not owned) */
	unsigned nm, m_cap;
	struct ended store;           /* the files': the ended members' runs */
	struct ended last;            /* the next upload's: their last intervals */
	struct counts kept;
	struct ps_buf out;
};

/* Owned by whoever holds the worker's lock (group.h). */
static struct ps_group *groups;
/* The span of the tree's first program: written by the worker before any
 * group exists (ps_group_tree_span). */
static const struct ps_span *tree_span;
size_t ps_group_store_bytes = PS_GROUP_STORE_BYTES;

/* ---- file names ------------------------------------------------------- */

static int
file_name(const struct ps_group *g, int seq, const char *kind, char *name, size_t len)
{
	int n = seq ? snprintf(name, len, "%.200s.%d.%d.%s", g->app, (int)g->tree, seq, kind)
		    : snprintf(name, len, "%.200s.%d.%s", g->app, (int)g->tree, kind);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The pprof file's kind: "cpu.pb.gz", "alloc.pb.gz". */
static void
pprof_kind(const struct ps_family *fam, char *kind, size_t len)
{
	snprintf(kind, len, "%s.pb.gz", fam->kind);
}

static int
taken(const struct ps_group *g, int seq)
{
	char name[NAME_MAX + 1], kind[32];
	size_t i;

	for (i = 0; i < PS_NFAMILIES; i++) {
		pprof_kind(ps_families[i], kind, sizeof(kind));
		if (file_name(g, seq, kind, name, sizeof(name)) == 0 &&
		    faccessat(g->dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			return 1;
	}
	return 0;
}

/* Once per set of files: never overwrite the profile of an earlier tree
 * whose leader had the same pid, or of an earlier image of that leader
 * that wrote them itself (before an exec), or the group's own closed set. */
static void
choose_seq(struct ps_group *g)
{
	int seq = g->seq_from;

	while (seq < 1000 && taken(g, seq))
		seq++;
	g->seq = seq;
}

/* ---- members ---------------------------------------------------------- */

/* The group's uploads: x's settings, and the tree's root span, if x is
 * in its trace -- one series for every program of that name, whose
 * root_span_id is the one the run's caller knows (pyrorun prints it).
 * Its mistakes were said by x's program already. */
static struct ps_remote *
remote_of(const struct ps_export *x)
{
	const struct ps_span *sp = x->span;
	struct ps_remote *r;
	char a[40], b[40];

	if (!x->remote.on)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	if (sp && tree_span && ps_span_trace_id_hex(sp, a, sizeof(a)) == 0 &&
	    ps_span_trace_id_hex(tree_span, b, sizeof(b)) == 0 && !strcmp(a, b))
		sp = tree_span;
	ps_log_config_quiet(1);
	(void)ps_remote_setup(r, x->cfg, sp, x->start_ns);
	ps_log_config_quiet(0);
	if (!r->on) {
		free(r);
		return NULL;
	}
	r->up.post = x->remote.up.post;     /* the tests' seams */
	r->up.now = x->remote.up.now;
	return r;
}

static struct ps_group *
group_of(const struct ps_export *x)
{
	pid_t tree = x->tree ? x->tree : x->pid;
	struct ps_group *g;

	for (g = groups; g; g = g->next)
		if (g->tree == tree && !strcmp(g->app, x->app) && !strcmp(g->dir, x->dir) &&
		    (g->rem ? ps_remote_same(g->rem, &x->remote) : !x->remote.on))
			return g;
	g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->rem = remote_of(x);
	if (x->remote.on && !g->rem) {
		free(g);
		return NULL;
	}
	snprintf(g->app, sizeof(g->app), "%s", x->app);
	snprintf(g->dir, sizeof(g->dir), "%s", x->dir);
	g->tree = tree;
	g->dirfd = x->dirfd == -2 ? -2 : -1;  /* its program said the refusal */
	g->seq = -1;
	g->start_ns = x->start_ns;
	g->sample_rate = x->cfg->sample_rate;
	g->alloc_sample_bytes = x->cfg->alloc_sample_bytes;
	g->dwarf_memory = x->cfg->dwarf_memory;
	g->out.cap = OUT_CAP;
	g->next = groups;
	groups = g;
	return g;
}

void
ps_group_tree_span(const struct ps_span *sp)
{
	tree_span = sp;
}

int
ps_group_update(struct ps_export *x)
{
	struct ps_group *g = x->group;
	struct ps_export **v;
	unsigned cap;
	size_t i;

	if (!x->dir[0] && !x->remote.on)
		return 0;
	if (!g) {
		g = group_of(x);
		if (g && g->nm == g->m_cap) {
			cap = g->m_cap ? 2 * g->m_cap : 4;
			v = realloc(g->m, cap * sizeof(*v));
			if (!v)
				g = NULL;
			else {
				g->m = v;
				g->m_cap = cap;
			}
		}
		if (!g) {
			/* Its uploads of the interval go with the next one's. */
			x->remote.up.deferred += x->remote.on;
			ps_warn("out of memory: pid %d's profiles wait for the next pass", (int)x->pid);
			return -ENOMEM;
		}
		g->m[g->nm++] = x;
		x->group = g;
		if (x->start_ns < g->start_ns)
			g->start_ns = x->start_ns;
		/* The first upload covers every member's run from its start. */
		if (g->rem && !g->uploaded && x->start_ns < g->rem->last_until_ns)
			g->rem->last_until_ns = x->start_ns;
		for (i = 0; i < PS_NFAMILIES; i++)
			g->on[i] |= x->on[i];
	}
	g->dirty = 1;
	g->fresh = 1;
	return 0;
}

/* What a delivery queue counted, added to c. */
static void
count_queue(const struct ps_upload *u, struct counts *c)
{
	c->remote = 1;
	c->sent += u->sent;
	c->failed += u->failed;
	c->lost += u->dropped;
	c->retries += u->retries;
	c->deferred += u->deferred;
}

/* Every delivery counter of g added to t: its queue's, its live members'
 * own (their spans) and its ended members' (as kept). */
static void
upload_counts(const struct ps_group *g, struct counts *t)
{
	unsigned i;

	if (g->kept.remote) {
		t->remote = 1;
		t->sent += g->kept.sent;
		t->failed += g->kept.failed;
		t->lost += g->kept.lost;
		t->retries += g->kept.retries;
		t->deferred += g->kept.deferred;
	}
	for (i = 0; i < g->nm; i++)
		if (g->m[i]->remote.on)
			count_queue(&g->m[i]->remote.up, t);
	if (g->rem)
		count_queue(&g->rem->up, t);
}

/* What x counted, added to c. */
static void
count(const struct ps_export *x, struct counts *c)
{
	struct ps_symbols_stats ss;

	c->dropped += atomic_load(&x->st->c->dropped);
	c->fold_dropped += x->fold.dropped;
	c->live_dropped += x->lt ? atomic_load(&x->lt->c->dropped) : 0;
	if (x->remote.on)
		count_queue(&x->remote.up, c);
	ps_symbols_get_stats(x->fold.syms, &ss);
	c->over_cap |= ss.obj.dwarf_over_cap;
	c->unresolved += x->fold.unresolved;
	c->incomplete |= x->incomplete;
}

static int write_group(struct ps_group *g, int with_members);

/* x's samples, valued from vals (or its own), into e.  Returns 0, 1 (out
 * of memory: some of them are kept) or -ENOMEM (none is). */
static int
ended_add(struct ended *e, const struct ps_export *x, const int64_t (*vals)[PS_F_NVALUES])
{
	struct gone *v;
	uint32_t cap;

	if (e->n == e->cap) {
		cap = e->cap ? 2 * e->cap : 16;
		v = realloc(e->gone, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		e->gone = v;
		e->cap = cap;
	}
	v = &e->gone[e->n];
	v->pid = x->pid;
	snprintf(v->span, sizeof(v->span), "%s", x->nlabels ? x->span_hex : "");
	snprintf(v->trace, sizeof(v->trace), "%s", x->nlabels ? x->trace_hex : "");
	e->n++;
	return ps_fold_absorb(&e->fold, &x->fold, vals, e->n) ? 1 : 0;
}

static void
ended_free(struct ended *e)
{
	ps_fold_free(&e->fold);
	free(e->gone);
	memset(e, 0, sizeof(*e));
}

/* x's last interval, for the group's next upload: its heap is gone, so
 * the live heap it reports is none. */
static void
leave_upload(struct ps_group *g, struct ps_export *x)
{
	int64_t (*d)[PS_F_NVALUES] = ps_remote_interval(&x->remote, &x->fold);
	uint32_t i;
	int rc = -ENOMEM;

	if (d) {
		for (i = 0; i < x->fold.n; i++)
			d[i][PS_F_INUSE_OBJS] = d[i][PS_F_INUSE_BYTES] = 0;
		rc = ended_add(&g->last, x, (const int64_t(*)[PS_F_NVALUES])d);
		free(d);
	}
	g->fresh |= rc >= 0;
	if (rc) {
		g->rem->up.dropped++;
		ps_warn("out of memory: %s pid %d's last interval is not uploaded",
			rc < 0 ? "all of" : "some of", (int)x->pid);
	}
}

/* x's run, for the group's files. */
static void
leave_files(struct ps_group *g, struct ps_export *x)
{
	int rc = ended_add(&g->store, x, NULL);

	if (rc < 0)
		goto lost;
	if (rc) {
		g->kept.incomplete = 1;
		ps_warn("out of memory keeping pid %d's samples for %s's files: some are lost",
			(int)x->pid, g->app);
	}
	/* Not due again: its last pass made them due, and they say the same
	 * with it in the store. */
	if (ps_fold_bytes(&g->store.fold) <= ps_group_store_bytes)
		return;
	/* Closed: the store alone, one last time; the members live on in
	 * the next set.  A set that cannot be written is closed all the
	 * same (the memory stays bounded), and says what it lost. */
	if (write_group(g, 0))
		ps_warn("%s's files of %u ended processes could not be written: their samples "
			"are lost", g->app, g->store.n);
	ended_free(&g->store);
	memset(&g->kept, 0, sizeof(g->kept));
	g->seq_from = (g->seq < 0 ? g->seq_from : g->seq) + 1;
	g->seq = -1;
	g->dirty = g->nm > 0;
	return;
lost:
	ps_warn("out of memory keeping pid %d's samples for %s's files: they are lost",
		(int)x->pid, g->app);
}

void
ps_group_leave(struct ps_export *x)
{
	struct ps_group *g = x->group;
	unsigned i;

	if (!g)
		return;
	x->group = NULL;
	for (i = 0; i < g->nm; i++)
		if (g->m[i] == x) {
			g->m[i] = g->m[--g->nm];
			break;
		}
	/* What it counted stays in the comments (until its set closes). */
	count(x, &g->kept);
	g->kept.unresolved_kept += g->kept.unresolved;
	g->kept.unresolved = 0;
	if (g->rem)
		leave_upload(g, x);
	if (g->dir[0] && g->dirfd != -2)  /* else nothing is written: nothing to keep */
		leave_files(g, x);
}

/* ---- writing ---------------------------------------------------------- */

/* What one write or upload reads: the ended processes and the members, as
 * parts, with a label set per process. */
struct view {
	struct ps_profile_part *parts;
	size_t nparts;
	struct ps_pprof_label (*lab)[3];
	struct ps_pprof_labelset *sets;
	size_t nsets;
	char (*span)[17], (*trace)[33];
};

static void
view_free(struct view *v)
{
	free(v->parts);
	free(v->lab);
	free(v->sets);
	free(v->span);
	free(v->trace);
}

static void
set_labels(struct view *v, size_t k, pid_t pid, const char *span, const char *trace)
{
	struct ps_pprof_label *l = v->lab[k];

	v->sets[k].labels = l;
	v->sets[k].nlabels = 1;
	l[0] = (struct ps_pprof_label){ .key = "pid", .num = pid };
	if (!span[0])
		return;
	snprintf(v->span[k], sizeof(v->span[k]), "%s", span);
	snprintf(v->trace[k], sizeof(v->trace[k]), "%s", trace);
	l[1] = (struct ps_pprof_label){ .key = "span_id", .str = v->span[k] };
	l[2] = (struct ps_pprof_label){ .key = "trace_id", .str = v->trace[k] };
	v->sets[k].nlabels = 3;
}

/* The ended processes of e, then (with_members) the live members, valued
 * from vals[i] for member i (NULL: their own values). */
static int
view_make(const struct ps_group *g, const struct ended *e, int with_members,
	  int64_t (*const *vals)[PS_F_NVALUES], struct view *v)
{
	size_t n = e->n + g->nm + 1, k;
	unsigned i;
	const struct ps_export *x;

	memset(v, 0, sizeof(*v));
	v->parts = calloc(n, sizeof(*v->parts));
	v->lab = calloc(n, sizeof(*v->lab));
	v->sets = calloc(n, sizeof(*v->sets));
	v->span = calloc(n, sizeof(*v->span));
	v->trace = calloc(n, sizeof(*v->trace));
	if (!v->parts || !v->lab || !v->sets || !v->span || !v->trace)
		return -ENOMEM;
	for (k = 0; k < e->n; k++)
		set_labels(v, k, e->gone[k].pid, e->gone[k].span, e->gone[k].trace);
	v->nsets = e->n;
	if (e->fold.n)
		v->parts[v->nparts++] = (struct ps_profile_part){ &e->fold, NULL, 0 };
	for (i = 0; with_members && i < g->nm; i++) {
		x = g->m[i];
		if (!x->ready)
			continue;
		set_labels(v, v->nsets, x->pid, x->nlabels ? x->span_hex : "",
			   x->nlabels ? x->trace_hex : "");
		v->parts[v->nparts++] = (struct ps_profile_part){
			&x->fold, vals ? (const int64_t(*)[PS_F_NVALUES])vals[i] : NULL,
			(uint32_t)++v->nsets };
	}
	return 0;
}

/* Comments: what produced the profile (one process, or how many), the
 * trace a lone process belongs to, and every loss, summed, so that nothing
 * is lost silently.  pid: the one process's, or 0 for nprocs of them. */
static size_t
format(const struct counts *t, const char *app, pid_t pid, size_t nprocs, pid_t tree,
       const char *span, const char *trace, uint64_t dwarf_memory, char c[][200])
{
	size_t n = 0;

	if (pid)
		snprintf(c[n++], 200, "pyroshim %s, pid %d, app %.100s", PS_VERSION, (int)pid, app);
	else
		snprintf(c[n++], 200, "pyroshim %s, app %.100s, %zu processes of the tree led by "
			 "pid %d (label pid)", PS_VERSION, app, nprocs, (int)tree);
	if (pid && span && span[0])
		snprintf(c[n++], 200, "trace_id %s, span_id %s (this run's span)", trace, span);
	snprintf(c[n++], 200, "dropped: %llu stacks (table full), %llu stacks (fold full), "
		 "%llu live blocks (table full)", (unsigned long long)t->dropped,
		 (unsigned long long)t->fold_dropped, (unsigned long long)t->live_dropped);
	if (t->remote)
		snprintf(c[n++], 200, "uploads: %llu sent, %llu failed, %llu dropped, %llu retries, "
			 "%llu deferred", (unsigned long long)t->sent, (unsigned long long)t->failed,
			 (unsigned long long)t->lost, (unsigned long long)t->retries,
			 (unsigned long long)t->deferred);
	if (t->over_cap)
		snprintf(c[n++], 200, "source lines: PYROSCOPE_DWARF_MEMORY (%llu bytes) reached; "
			 "later locations are named by function only", (unsigned long long)dwarf_memory);
	else if (t->unresolved)
		snprintf(c[n++], 200, "source lines: %llu locations named by function only until "
			 "the next pass (look-up time budget)", (unsigned long long)t->unresolved);
	else if (t->unresolved_kept)
		snprintf(c[n++], 200, "source lines: %llu locations of ended processes named by "
			 "function only (look-up time budget)", (unsigned long long)t->unresolved_kept);
	if (t->incomplete)
		snprintf(c[n++], 200, "incomplete: out of memory while folding");
	return n;
}

size_t
ps_group_comments_of(const struct ps_export *x, char c[][200])
{
	struct counts t = { 0 };

	count(x, &t);
	if (x->group && x->group->rem)
		count_queue(&x->group->rem->up, &t);   /* its profiles' requests */
	return format(&t, x->app, x->pid, 1, 0, x->nlabels ? x->span_hex : NULL, x->trace_hex,
		      x->cfg->dwarf_memory, c);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* How many processes the sets label: images of one process (an exec that
 * kept the name) share a pid.  On no memory, the sets. */
static size_t
distinct_pids(const struct view *v)
{
	int64_t *p = calloc(v->nsets + 1, sizeof(*p));
	size_t i, n = 0;

	if (!p)
		return v->nsets;
	for (i = 0; i < v->nsets; i++)
		p[i] = v->sets[i].labels[0].num;
	qsort(p, v->nsets, sizeof(*p), cmp_i64);
	for (i = 0; i < v->nsets; i++)
		n += i == 0 || p[i] != p[i - 1];
	free(p);
	return n;
}

static size_t
comments(const struct ps_group *g, const struct view *v, int with_members, char c[][200])
{
	struct counts t = g->kept;
	size_t n = distinct_pids(v);
	const struct ps_pprof_labelset *one = n == 1 ? &v->sets[0] : NULL;
	unsigned i;

	for (i = 0; with_members && i < g->nm; i++)
		if (g->m[i]->ready)
			count(g->m[i], &t);
	if (g->rem)
		count_queue(&g->rem->up, &t);
	return format(&t, g->app, one ? (pid_t)one->labels[0].num : 0, n, g->tree,
		      one && one->nlabels == 3 ? one->labels[1].str : NULL,
		      one && one->nlabels == 3 ? one->labels[2].str : NULL, g->dwarf_memory, c);
}

static int
write_file(struct ps_group *g, const char *kind, const struct ps_buf *b)
{
	char name[NAME_MAX + 1];
	int rc;

	if (g->dirfd == -1) {
		g->dirfd = ps_files_open_dir(g->dir);
		if (g->dirfd < 0) {
			rc = g->dirfd;
			ps_export_refuse_dir(g->dir, rc);
			g->dirfd = -2;
			return rc;
		}
	}
	if (g->dirfd < 0)
		return -EBADF;          /* refused once, said once */
	if (g->seq < 0)
		choose_seq(g);
	if (file_name(g, g->seq, kind, name, sizeof(name)))
		return -ENAMETOOLONG;
	rc = ps_files_write(g->dirfd, name, b->data, b->len);
	if (rc)
		ps_warn("writing %s/%s: %s", g->dir, name, strerror(-rc));
	return rc;
}

/* The set's file of this kind, if an earlier pass wrote one, removed. */
static int
unlink_kind(struct ps_group *g, const char *kind)
{
	char name[NAME_MAX + 1];

	if (g->dirfd < 0 || g->seq < 0)
		return 0;       /* nothing was written */
	if (file_name(g, g->seq, kind, name, sizeof(name)) == 0 &&
	    unlinkat(g->dirfd, name, 0) && errno != ENOENT) {
		ps_warn("removing %s/%s: %s", g->dir, name, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* A closing set whose ended processes have no data of family fam: its
 * files, written earlier with the members' samples (which go on in the
 * next set), are removed, so that no sample is in two sets. */
static int
unlink_family(struct ps_group *g, const struct ps_family *fam)
{
	char kind[64];
	size_t k;
	int rc = 0;

	for (k = 0; k <= fam->nseries; k++) {
		if (k < fam->nseries)
			snprintf(kind, sizeof(kind), "%s.folded", fam->series[k].type);
		else
			pprof_kind(fam, kind, sizeof(kind));
		rc |= unlink_kind(g, kind);
	}
	return rc;
}

static int
write_family(struct ps_group *g, const struct view *v, const struct ps_family *fam,
	     struct ps_profile_meta *m, int closing)
{
	char kind[64];
	size_t k;
	int rc;

	if (!ps_profile_present(v->parts, v->nparts, fam))
		return closing ? unlink_family(g, fam) : 0;
	m->period = ps_family_period(fam, g->sample_rate, g->alloc_sample_bytes);
	rc = ps_profile_encode_parts(v->parts, v->nparts, fam, m, &g->out);
	if (rc)
		ps_warn("encoding the %s profile: %s", fam->kind, strerror(-rc));
	else {
		pprof_kind(fam, kind, sizeof(kind));
		rc = write_file(g, kind, &g->out);
	}
	for (k = 0; k < fam->nseries; k++) {
		if (ps_profile_folded(v->parts, v->nparts, &fam->series[k], &g->out)) {
			ps_warn("folding the %s profile: out of memory", fam->series[k].type);
			rc = -ENOMEM;
			continue;
		}
		snprintf(kind, sizeof(kind), "%s.folded", fam->series[k].type);
		/* A series with no sample (nothing live at the end: the
		 * in-use ones) has no file, as a profile with none has not;
		 * nor keeps one an earlier pass of the set wrote. */
		rc |= g->out.len ? write_file(g, kind, &g->out) : unlink_kind(g, kind);
	}
	return rc;
}

/* The profiles' comments and label sets of view v, into m. */
static void
meta_of(const struct ps_group *g, const struct view *v, int with_members,
	char c[][200], const char **cp, struct ps_profile_meta *m)
{
	size_t nc = comments(g, v, with_members, c), i;

	for (i = 0; i < nc; i++)
		cp[i] = c[i];
	memset(m, 0, sizeof(*m));
	m->comments = cp;
	m->ncomments = nc;
	m->sets = v->sets;
	m->nsets = v->nsets;
}

static int
write_group(struct ps_group *g, int with_members)
{
	char c[PS_GROUP_COMMENTS][200];
	const char *cp[PS_GROUP_COMMENTS];
	struct ps_profile_meta m;
	struct view v;
	size_t i;
	int rc = 0;

	g->dirty = 0;
	if (!g->dir[0] || g->dirfd == -2)
		return 0;
	if (view_make(g, &g->store, with_members, NULL, &v)) {
		g->dirty = 1;           /* the next interval tries again */
		view_free(&v);
		ps_warn("writing %s's files: out of memory", g->app);
		return -EIO;
	}
	if (!v.nparts) {
		view_free(&v);
		return 0;
	}
	meta_of(g, &v, with_members, c, cp, &m);
	ps_debug("local files of %s (tree %d, set %d): %zu processes; %s", g->app, (int)g->tree,
		 g->seq < 0 ? g->seq_from : g->seq, v.nsets, c[m.ncomments - 1]);
	m.time_nanos = (int64_t)g->start_ns;
	m.duration_nanos = (int64_t)(ps_clock_ns(CLOCK_REALTIME) - g->start_ns);
	for (i = 0; i < PS_NFAMILIES; i++)
		if (g->on[i])
			rc |= write_family(g, &v, ps_families[i], &m, !with_members);
	view_free(&v);
	/* Up to a profile's size: not kept between writes. */
	ps_buf_free(&g->out);
	g->out.cap = OUT_CAP;
	return rc ? -EIO : 0;
}

/* ---- uploads ---------------------------------------------------------- */

/* Queue the group's interval: each live member's values since its last
 * upload, and the ended members' last intervals, as one profile per family
 * (remote.h).  Without memory for a member's values, the whole interval
 * goes with the next one. */
static void
upload_group(struct ps_group *g, uint64_t now_ns)
{
	char c[PS_GROUP_COMMENTS][200];
	const char *cp[PS_GROUP_COMMENTS];
	int64_t (**d)[PS_F_NVALUES] = calloc(g->nm + 1, sizeof(*d));
	struct ps_profile_meta m;
	struct view v = { 0 };
	unsigned i;
	int ok = d != NULL;

	for (i = 0; ok && i < g->nm; i++)
		if (g->m[i]->ready && !(d[i] = ps_remote_interval(&g->m[i]->remote, &g->m[i]->fold)))
			ok = 0;
	if (ok && view_make(g, &g->last, 1, d, &v))
		ok = 0;
	if (!ok) {
		ps_remote_defer(g->rem);
	} else {
		g->fresh = 0;
		meta_of(g, &v, 1, c, cp, &m);
		ps_remote_queue_parts(g->rem, v.parts, v.nparts, g->on, &m, now_ns);
		g->uploaded = 1;
		/* What was queued (or could not be) belongs to this interval. */
		for (i = 0; i < g->nm; i++)
			if (d[i])
				ps_remote_commit(&g->m[i]->remote, &g->m[i]->fold);
		ended_free(&g->last);
	}
	view_free(&v);
	for (i = 0; d && i < g->nm; i++)
		free(d[i]);
	free(d);
}

int
ps_group_pass(void)
{
	uint64_t now = ps_clock_ns(CLOCK_REALTIME);
	struct ps_group *g;
	int rc = 0;

	for (g = groups; g; g = g->next) {
		if (g->dirty)
			rc |= write_group(g, 1);
		if (g->rem && g->fresh)
			upload_group(g, now);
	}
	return rc;
}

void
ps_group_send(int final, uint64_t deadline_ns, pthread_mutex_t *lock)
{
	struct counts t = { 0 };
	struct ps_group *g;
	int any = 0;

	/* Groups are never freed, and new ones go in front: the list stays
	 * walkable while a send releases the lock. */
	for (g = groups; g; g = g->next)
		if (g->rem && (g->rem->up.n || g->rem->up.flight)) {
			any |= g->rem->up.n > 0;
			ps_upload_send(&g->rem->up, ps_upload_now(&g->rem->up), 10000, final,
				       deadline_ns, lock);
		}
	if (!final || !any)
		return;
	/* The profiles' comments were written before this flush: its outcome
	 * is only here (once per flush that had something to send). */
	for (g = groups; g; g = g->next)
		upload_counts(g, &t);
	ps_debug("after the last flush: uploads: %llu sent, %llu failed, %llu dropped, "
		 "%llu retries, %llu deferred", (unsigned long long)t.sent,
		 (unsigned long long)t.failed, (unsigned long long)t.lost,
		 (unsigned long long)t.retries, (unsigned long long)t.deferred);
}

struct ps_remote *
ps_group_remote(const struct ps_export *x)
{
	return x->group ? x->group->rem : NULL;
}

uint64_t
ps_group_next_due(void)
{
	uint64_t t = UINT64_MAX, due;
	struct ps_group *g;

	for (g = groups; g; g = g->next)
		if (g->rem && (due = ps_upload_next_due(&g->rem->up)) < t)
			t = due;
	return t;
}

void
ps_group_forget(void)
{
	if (groups)   /* not written when it is: a fork child's page unshared */
		groups = NULL;
}

void
ps_group_free_all(void)
{
	struct ps_group *g;
	unsigned i;

	while ((g = groups)) {
		groups = g->next;
		for (i = 0; i < g->nm; i++)
			g->m[i]->group = NULL;
		free(g->m);
		ended_free(&g->store);
		ended_free(&g->last);
		if (g->rem) {
			ps_remote_free(g->rem);
			free(g->rem);
		}
		ps_buf_free(&g->out);
		if (g->dirfd >= 0)
			(void)close(g->dirfd);
		free(g);
	}
}
