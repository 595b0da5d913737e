/* dwarf.c -- source lines and inlined frames through libdwfl.  See dwarf.h.
 *
 * The inlined chain.  dwfl_module_addrdie gives the compilation unit of
 * the address, dwarf_getscopes the innermost scope that contains it.  Past
 * an inlined instance dwarf_getscopes continues into the scopes of the
 * abstract (out-of-line) definition, which is not the caller, so the chain
 * is read instead with dwarf_getscopes_die on the innermost scope: the
 * DIEs that physically enclose it, innermost first.  Each
 * DW_TAG_inlined_subroutine there is one frame, at the current line; its
 * DW_AT_call_file/DW_AT_call_line are the line of the next frame out; the
 * first DW_TAG_subprogram ends the chain.  This is what eu-addr2line -i
 * does, and what REFERENCES.md section 9 measured.
 *
 * Objects are reported as they are first needed, each to a Dwfl of its
 * own (so that one can be let go: ps_dwarf_drop), keyed by the file's
 * identity when the caller has one (elf.h ps_elf_file_id: any program that
 * maps the file, at any address), else by (path, bias).  An object is
 * reported at the load bias of its first caller; another caller's
 * addresses are moved by the difference (shift()).  An object whose DWARF
 * cannot be found is remembered as such, so it is asked only once.
 */
#include "symbolize/dwarf.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/dl.h"
#include "common/log.h"
#include "symbolize/elf.h"

#define MAX_OBJECTS   4096      /* objects reported; more stay function-level */
#define RSS_EVERY     256       /* look-ups between two checks of the cap */
#define MAX_FRAMES 32     /* frames of one look-up */
#define MAX_CU_RANGES (1u << 20) /* CU ranges indexed per object */
#define MAX_NESTED    65536     /* DIEs looked at for the extent of one answer */

/* libdw's entry points, resolved once by load_once(). */
static struct {
	Dwfl *(*begin)(const Dwfl_Callbacks *);
	void (*end)(Dwfl *);
	void (*report_begin_add)(Dwfl *);
	Dwfl_Module *(*report_elf)(Dwfl *, const char *, const char *, int, GElf_Addr, bool);
	int (*report_end)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *),
			  void *);
	Dwarf_Die *(*module_addrdie)(Dwfl_Module *, Dwarf_Addr, Dwarf_Addr *);
	int (*getscopes)(Dwarf_Die *, Dwarf_Addr, Dwarf_Die **);
	int (*getscopes_die)(Dwarf_Die *, Dwarf_Die **);
	int (*tag)(Dwarf_Die *);
	const char *(*diename)(Dwarf_Die *);
	Dwarf_Attribute *(*attr)(Dwarf_Die *, unsigned int, Dwarf_Attribute *);
	Dwarf_Attribute *(*attr_integrate)(Dwarf_Die *, unsigned int, Dwarf_Attribute *);
	const char *(*formstring)(Dwarf_Attribute *);
	int (*formudata)(Dwarf_Attribute *, Dwarf_Word *);
	int (*getsrcfiles)(Dwarf_Die *, Dwarf_Files **, size_t *);
	const char *(*filesrc)(Dwarf_Files *, size_t, Dwarf_Word *, Dwarf_Word *);
	int (*decl_line)(Dwarf_Die *, int *);
	Dwarf *(*module_getdwarf)(Dwfl_Module *, Dwarf_Addr *);
	int (*nextcu)(Dwarf *, Dwarf_Off, Dwarf_Off *, size_t *, Dwarf_Off *, uint8_t *, uint8_t *);
	Dwarf_Die *(*offdie)(Dwarf *, Dwarf_Off, Dwarf_Die *);
	ptrdiff_t (*ranges)(Dwarf_Die *, ptrdiff_t, Dwarf_Addr *, Dwarf_Addr *, Dwarf_Addr *);
	Dwarf_Line *(*getsrc_die)(Dwarf_Die *, Dwarf_Addr);
	int (*lineno)(Dwarf_Line *, int *);
	int (*getsrclines)(Dwarf_Die *, Dwarf_Lines **, size_t *);
	Dwarf_Line *(*onesrcline)(Dwarf_Lines *, size_t);
	int (*lineaddr)(Dwarf_Line *, Dwarf_Addr *);
	int (*lineendsequence)(Dwarf_Line *, bool *);
	int (*child)(Dwarf_Die *, Dwarf_Die *);
	int (*siblingof)(Dwarf_Die *, Dwarf_Die *);
	const char *(*linesrc)(Dwarf_Line *, Dwarf_Word *, Dwarf_Word *);
	int (*find_elf)(Dwfl_Module *, void **, const char *, Dwarf_Addr, char **, Elf **);
	int (*find_debuginfo)(Dwfl_Module *, void **, const char *, Dwarf_Addr, const char *,
			      const char *, GElf_Word, char **);
	int (*section_address)(Dwfl_Module *, void **, const char *, Dwarf_Addr, const char *,
			       GElf_Word, const GElf_Shdr *, Dwarf_Addr *);
} dw;

/* Objects given to libdw by every reader of the process: what sharing
 * saves shows here.  Owned as the readers are (the worker's lock). */
static uint32_t opened;

static pthread_once_t load_ctl = PTHREAD_ONCE_INIT;
static int load_rc = -ENOSYS;   /* written only inside load_once() */

static void
load_once(void)
{
	static const struct ps_dl_sym syms[] = {
#define SYM(n, f) { n, offsetof(__typeof__(dw), f) }
		SYM("dwfl_begin", begin), SYM("dwfl_end", end),
		SYM("dwfl_report_begin_add", report_begin_add), SYM("dwfl_report_elf", report_elf),
		SYM("dwfl_report_end", report_end), SYM("dwfl_module_addrdie", module_addrdie),
		SYM("dwfl_module_getdwarf", module_getdwarf), SYM("dwarf_nextcu", nextcu),
		SYM("dwarf_offdie", offdie), SYM("dwarf_ranges", ranges),
		SYM("dwarf_getsrc_die", getsrc_die), SYM("dwarf_lineno", lineno),
		SYM("dwarf_linesrc", linesrc), SYM("dwarf_getsrclines", getsrclines),
		SYM("dwarf_onesrcline", onesrcline), SYM("dwarf_lineaddr", lineaddr),
		SYM("dwarf_lineendsequence", lineendsequence),
		SYM("dwarf_child", child), SYM("dwarf_siblingof", siblingof),
		SYM("dwarf_getscopes", getscopes), SYM("dwarf_getscopes_die", getscopes_die),
		SYM("dwarf_tag", tag), SYM("dwarf_diename", diename), SYM("dwarf_attr", attr),
		SYM("dwarf_attr_integrate", attr_integrate), SYM("dwarf_formstring", formstring),
		SYM("dwarf_formudata", formudata), SYM("dwarf_getsrcfiles", getsrcfiles),
		SYM("dwarf_filesrc", filesrc), SYM("dwarf_decl_line", decl_line),
		SYM("dwfl_build_id_find_elf", find_elf),
		SYM("dwfl_standard_find_debuginfo", find_debuginfo),
		SYM("dwfl_offline_section_address", section_address),
#undef SYM
	};
	const char *why;

	if (!ps_dl_load("libdw.so.1", syms, PS_ARRAY_LEN(syms), &dw, sizeof(dw), &why)) {
		ps_info("libdw.so.1 not used (%s): profiles name functions, without source lines",
			why);
		return;
	}
	load_rc = 0;
}

/* One address range of a compilation unit (link-time addresses). */
struct cu_range {
	Dwarf_Addr lo, hi;
	Dwarf_Off die;          /* the CU's DIE */
};

struct object {
	char *path;             /* owned */
	uint64_t id;            /* the file's identity (elf.h), 0: none */
	uintptr_t bias;         /* the bias it was reported at */
	Dwfl *dwfl;             /* its own; NULL with mod */
	Dwfl_Module *mod;       /* NULL: no DWARF to find, or libdw could not report it */
	/* For objects without .debug_aranges (Go): every CU's ranges,
	 * sorted, built at the first address libdw cannot place. */
	struct cu_range *cus;   /* owned */
	uint32_t ncus;
	int cus_built;
};

struct ps_dwarf {
	char paths[MAX_FRAMES][PATH_MAX];  /* joined file names of the last look-up */
	int started;            /* libdw loaded, cb set: at the first object */
	Dwfl_Callbacks cb;      /* must outlive every object's dwfl */
	char *debuginfo_path;   /* cb's, owned */
	struct object *obj;     /* owned, nobj entries */
	uint32_t nobj, aobj;
	uint64_t mem_cap;
	uint64_t rss_base;      /* resident bytes before the first load */
	uint32_t since_check;
	int over_cap;
	int broken;             /* libdw missing or dwfl_begin failed */
	uint32_t no_debug;      /* objects known to have no DWARF (object()) */
	int debuginfod;         /* ps_dwarf_new's */
};

static uint64_t
rss_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

int
ps_dwarf_new(struct ps_dwarf **out, uint64_t mem_cap, int debuginfod)
{
	struct ps_dwarf *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->mem_cap = mem_cap;
	d->debuginfod = debuginfod;
	*out = d;
	return 0;
}

static void
object_free(struct object *o)
{
	if (o->dwfl)
		dw.end(o->dwfl);
	free(o->path);
	free(o->cus);
}

void
ps_dwarf_free(struct ps_dwarf *d)
{
	uint32_t i;

	if (!d)
		return;
	for (i = 0; i < d->nobj; i++)
		object_free(&d->obj[i]);
	free(d->obj);
	free(d->debuginfo_path);
	free(d);
}

int
ps_dwarf_over_cap(const struct ps_dwarf *d)
{
	return d->over_cap;
}

void
ps_dwarf_get_stats(const struct ps_dwarf *d, struct ps_dwarf_stats *st)
{
	st->loaded = d->started;
	st->objects = d->nobj;
	st->no_debug = d->no_debug;
	st->opened = opened;
}

/* Past the cap, say so once and stop.  Checked every RSS_EVERY calls. */
static int
check_cap(struct ps_dwarf *d, int now)
{
	uint64_t rss;

	if (d->over_cap)
		return -ENOSPC;
	if (!now && ++d->since_check < RSS_EVERY)
		return 0;
	d->since_check = 0;
	rss = rss_bytes();
	if (rss > d->rss_base && rss - d->rss_base > d->mem_cap) {
		d->over_cap = 1;
		ps_info("debug information passed PYROSCOPE_DWARF_MEMORY (%llu bytes): new "
			"locations are named by function only", (unsigned long long)d->mem_cap);
		return -ENOSPC;
	}
	return 0;
}

static int
start(struct ps_dwarf *d)
{
	if (d->started)
		return 0;
	if (d->broken || d->mem_cap == 0)
		return -ENOSYS;
	if (pthread_once(&load_ctl, load_once) || load_rc) {
		d->broken = 1;
		return -ENOSYS;
	}
	/* The default search path: the object's directory, its .debug/, and
	 * /usr/lib/debug (where build-id and debuglink files live). */
	d->debuginfo_path = strdup(PS_DEBUG_PATH);
	if (!d->debuginfo_path)
		return -ENOMEM;
	d->cb.find_elf = dw.find_elf;
	d->cb.find_debuginfo = dw.find_debuginfo;
	d->cb.section_address = dw.section_address;
	d->cb.debuginfo_path = &d->debuginfo_path;
	d->rss_base = rss_bytes();
	d->started = 1;
	return 0;
}

static struct object *
find_object(struct ps_dwarf *d, const char *path, uint64_t id, uintptr_t bias)
{
	uint32_t i;

	for (i = 0; i < d->nobj; i++)
		if (id ? d->obj[i].id == id :
			 d->obj[i].id == 0 && d->obj[i].bias == bias && strcmp(d->obj[i].path, path) == 0)
			return &d->obj[i];
	return NULL;
}

/* The object (path, bias), reported to the Dwfl when first asked, or
 * NULL (libdw missing, the cap reached).  An object for which libdw could
 * find no DWARF (elf.h, ps_elf_dwarf_possible) is known without loading
 * libdw and asking it: a failed search costs 4 ms, most of it loading
 * libdebuginfod and its 33 libraries, in every helper whose process has a
 * sample in a stripped program (cc1, as, sed) -- measured on Debian 12's
 * libdw 0.188.  Its mod stays NULL. */
static struct object *
object(struct ps_dwarf *d, const char *path, uint64_t id, uintptr_t bias)
{
	struct object *o = find_object(d, path, id, bias), *v;
	int possible;

	if (d->broken || d->mem_cap == 0)
		return NULL;
	if (o)
		return o->mod && check_cap(d, 0) ? NULL : o;
	if (d->nobj >= MAX_OBJECTS)
		return NULL;
	possible = d->debuginfod || ps_elf_dwarf_possible(path);
	/* What the objects loaded so far hold counts before another one. */
	if (possible && (start(d) || check_cap(d, 1)))
		return NULL;
	if (d->nobj == d->aobj) {
		v = realloc(d->obj, (d->aobj ? 2 * d->aobj : 16) * sizeof(*v));
		if (!v)
			return NULL;
		d->obj = v;
		d->aobj = d->aobj ? 2 * d->aobj : 16;
	}
	o = &d->obj[d->nobj];
	memset(o, 0, sizeof(*o));
	o->path = strdup(path);
	if (!o->path)
		return NULL;
	o->id = id;
	o->bias = bias;
	d->nobj++;
	if (!possible) {
		d->no_debug++;
		return o;
	}
	o->dwfl = dw.begin(&d->cb);
	if (!o->dwfl)
		return o;
	opened++;
	dw.report_begin_add(o->dwfl);
	/* add_p_vaddr false: `bias` is the load bias itself. */
	o->mod = dw.report_elf(o->dwfl, path, path, -1, bias, false);
	if (dw.report_end(o->dwfl, NULL, NULL) != 0)
		o->mod = NULL;
	if (!o->mod) {
		dw.end(o->dwfl);
		o->dwfl = NULL;
	}
	return o;
}

/* What to add to a caller's runtime addresses (at load bias `bias`) for
 * o's, which was reported at o->bias: the same file, moved. */
static uintptr_t
shift(const struct object *o, uintptr_t bias)
{
	return o->bias - bias;
}

void
ps_dwarf_drop(struct ps_dwarf *d, int (*alive)(uint64_t id))
{
	uint32_t i = 0;

	while (d && i < d->nobj) {
		if (d->obj[i].id && !alive(d->obj[i].id)) {
			object_free(&d->obj[i]);
			d->obj[i] = d->obj[--d->nobj];
		} else {
			i++;
		}
	}
}

static const char *
str_attr(Dwarf_Die *die, unsigned int name)
{
	Dwarf_Attribute a;

	return dw.attr_integrate(die, name, &a) ? dw.formstring(&a) : NULL;
}

/* file made absolute against the CU's compilation directory, with "."
 * and "dir/.." components removed, into out[PATH_MAX]: so that pprof -list
 * finds the source from any working directory.  Returns out, or file as
 * it is when it is absolute, unknown, or too long. */
static const char *
absolute(Dwarf_Die *cu, const char *file, char *out)
{
	const char *dir = file && file[0] && file[0] != '/' ? str_attr(cu, DW_AT_comp_dir) : NULL;
	char *p, *q;
	size_t n;

	if (!dir || dir[0] != '/' ||
	    (size_t)snprintf(out, PATH_MAX, "%s/%s", dir, file) >= PATH_MAX)
		return file;
	/* In place: drop "/./", fold "/x/../" into "/". */
	for (p = out; (p = strstr(p, "/./"));)
		memmove(p, p + 2, strlen(p + 2) + 1);
	while ((p = strstr(out, "/../")) && p > out) {
		for (q = p - 1; q > out && *q != '/'; q--)
			;
		n = strlen(p + 3);
		memmove(q, p + 3, n + 1);
	}
	return out;
}

/* Fill one frame from a subprogram or inlined-subroutine DIE. */
static void
fill_frame(Dwarf_Die *die, const char *file, int line, struct ps_dwarf_frame *f)
{
	const char *n = dw.diename(die);
	int decl = 0;

	f->name = n ? n : "";
	f->linkage = str_attr(die, DW_AT_linkage_name);
	if (!f->linkage)
		f->linkage = str_attr(die, DW_AT_MIPS_linkage_name);
	f->file = file ? file : "";
	f->line = line;
	f->decl_line = dw.decl_line(die, &decl) == 0 ? decl : 0;
}

/* ---- the extent of an answer ------------------------------------------- *
 *
 * Every address in [lo, hi) gets the same chain as `a` when the range lies
 * within one row of the line table (the innermost line), within the range
 * of each inlined subroutine and of the function that enclose `a` (the
 * frames), and holds neither end of an inlined subroutine nested in the
 * innermost scope (a frame more).  The call lines of the outer frames are
 * attributes of those scopes, so they do not change within it either.
 * Link-time addresses; where a part cannot be told, the range is `a`
 * alone. */

static void
exact(Dwarf_Addr a, Dwarf_Addr *lo, Dwarf_Addr *hi)
{
	*lo = a;
	*hi = a + 1;
}

/* Cut [*lo, *hi) to die's range that holds a. */
static void
cut_to(Dwarf_Die *die, Dwarf_Addr a, Dwarf_Addr *lo, Dwarf_Addr *hi)
{
	Dwarf_Addr base, rlo, rhi;
	ptrdiff_t r;

	for (r = 0; (r = dw.ranges(die, r, &base, &rlo, &rhi)) > 0;)
		if (rlo <= a && a < rhi) {
			*lo = rlo > *lo ? rlo : *lo;
			*hi = rhi < *hi ? rhi : *hi;
			return;
		}
	exact(a, lo, hi);
}

/* Cut [*lo, *hi) where an inlined subroutine nested in die (directly or
 * through lexical blocks) begins or ends.  At most *budget DIEs. */
static void
cut_nested(Dwarf_Die *die, Dwarf_Addr a, Dwarf_Addr *lo, Dwarf_Addr *hi, int depth,
	   unsigned *budget)
{
	Dwarf_Addr base, rlo, rhi;
	Dwarf_Die k;
	ptrdiff_t r;
	int tag;

	if (dw.child(die, &k) != 0)
		return;
	do {
		if (*budget == 0 || depth > MAX_FRAMES) {
			exact(a, lo, hi);
			return;
		}
		(*budget)--;
		tag = dw.tag(&k);
		if (tag == DW_TAG_inlined_subroutine) {
			for (r = 0; (r = dw.ranges(&k, r, &base, &rlo, &rhi)) > 0;) {
				if (rlo <= a && a < rhi)
					exact(a, lo, hi);  /* not innermost after all */
				else if (rlo > a && rlo < *hi)
					*hi = rlo;
				else if (rhi <= a && rhi > *lo)
					*lo = rhi;
			}
		} else if (tag == DW_TAG_lexical_block) {
			cut_nested(&k, a, lo, hi, depth + 1, budget);
		}
	} while (dw.siblingof(&k, &k) == 0);
}

static int
row_ends(Dwarf_Line *l)
{
	bool end = false;

	return dw.lineendsequence(l, &end) == 0 && end;
}

/* Cut [*lo, *hi) to the line-table row that holds a: from the last row at
 * or before a to the first row after it. */
static void
cut_row(Dwarf_Die *cu, Dwarf_Addr a, Dwarf_Addr *lo, Dwarf_Addr *hi)
{
	Dwarf_Addr at, from = 0, to = *hi;
	Dwarf_Lines *lines;
	Dwarf_Line *l;
	size_t n, i;
	int found = 0;

	if (dw.getsrclines(cu, &lines, &n) != 0) {
		exact(a, lo, hi);
		return;
	}
	for (i = 0; i < n; i++) {
		l = dw.onesrcline(lines, i);
		if (!l || dw.lineaddr(l, &at) != 0)
			continue;
		if (at <= a && (!found || at > from)) {
			from = at;
			found = 1;
		} else if (at > a && at < to) {
			to = at;
		}
	}
	if (!found) {
		exact(a, lo, hi);
		return;
	}
	*lo = from > *lo ? from : *lo;
	*hi = to;
	/* At the very address that ends a sequence, libdw answers with that
	 * row, and past it with none. */
	l = dw.getsrc_die(cu, a);
	if (l && row_ends(l))
		exact(a, lo, hi);
}

/* Walk the DIEs enclosing `inner` outwards (see the top of the file), and
 * cut [*lo, *hi) to the addresses that get the same answer as pc. */
static int
chain(struct ps_dwarf *d, Dwarf_Die *cu, Dwarf_Die *inner, const char *file, int line,
      Dwarf_Addr pc, Dwarf_Addr *lo, Dwarf_Addr *hi, struct ps_dwarf_frame *out, int max)
{
	unsigned budget = MAX_NESTED;
	Dwarf_Die *sc = NULL;
	Dwarf_Files *files = NULL;
	Dwarf_Attribute a;
	Dwarf_Word v;
	int n, i, k = 0, tag, last;

	n = dw.getscopes_die(inner, &sc);
	if (n <= 0)
		return 0;
	if (dw.getsrcfiles(cu, &files, NULL) != 0)
		files = NULL;
	cut_row(cu, pc, lo, hi);
	cut_nested(inner, pc, lo, hi, 0, &budget);
	for (i = 0; i < n; i++) {
		tag = dw.tag(&sc[i]);
		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		last = tag == DW_TAG_subprogram;
		cut_to(&sc[i], pc, lo, hi);
		/* Past `max`, the innermost frames are kept and the outer
		 * inlined ones dropped; the real function is always last. */
		if (last || k < max - 1) {
			k = k < max - 1 ? k : max - 1;
			fill_frame(&sc[i], absolute(cu, file, d->paths[k]), line, &out[k]);
			k++;
		}
		if (last)
			break;
		file = files && dw.formudata(dw.attr(&sc[i], DW_AT_call_file, &a), &v) == 0 ?
			dw.filesrc(files, v, NULL, NULL) : NULL;
		line = dw.formudata(dw.attr(&sc[i], DW_AT_call_line, &a), &v) == 0 ? (int)v : 0;
	}
	free(sc);
	return k;
}

static int
cmp_range(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int
add_range(struct object *o, uint32_t *cap, Dwarf_Addr lo, Dwarf_Addr hi, Dwarf_Off die)
{
	struct cu_range *v;

	if (hi <= lo || o->ncus >= MAX_CU_RANGES)
		return 0;
	if (o->ncus == *cap) {
		v = realloc(o->cus, (*cap ? 2 * *cap : 256) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		o->cus = v;
		*cap = *cap ? 2 * *cap : 256;
	}
	o->cus[o->ncus++] = (struct cu_range){ lo, hi, die };
	return 0;
}

/* Index the ranges of every CU of o (see struct object). */
static void
index_cus(struct object *o)
{
	Dwarf_Off off = 0, next;
	Dwarf_Addr bias, base, lo, hi;
	Dwarf_Die cu;
	ptrdiff_t r;
	uint32_t cap = 0;
	size_t hsize;
	Dwarf *dbg;

	o->cus_built = 1;
	dbg = dw.module_getdwarf(o->mod, &bias);
	if (!dbg)
		return;
	while (dw.nextcu(dbg, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		if (dw.offdie(dbg, off + hsize, &cu))
			for (r = 0; (r = dw.ranges(&cu, r, &base, &lo, &hi)) > 0;)
				if (add_range(o, &cap, lo, hi, off + hsize))
					return;
		off = next;
	}
	qsort(o->cus, o->ncus, sizeof(*o->cus), cmp_range);
}

/* The CU that holds runtime address addr into *out, and the module's
 * bias.  libdw places it through .debug_aranges; objects without them
 * (Go's linker writes none) through index_cus. */
static Dwarf_Die *
cu_of(struct object *o, Dwarf_Addr addr, Dwarf_Die *out, Dwarf_Addr *bias)
{
	Dwarf_Die *cu = dw.module_addrdie(o->mod, addr, bias);
	uint32_t lo = 0, hi, mid;
	Dwarf *dbg;

	if (cu)
		return cu;
	if (!o->cus_built)
		index_cus(o);
	dbg = o->ncus ? dw.module_getdwarf(o->mod, bias) : NULL;
	if (!dbg)
		return NULL;
	addr -= *bias;
	for (hi = o->ncus; lo < hi;) {
		mid = lo + (hi - lo) / 2;
		if (o->cus[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= o->cus[lo - 1].hi)
		return NULL;
	return dw.offdie(dbg, o->cus[lo - 1].die, out);
}

/* ps_dwarf_lookup in o, at o's runtime address addr. */
static int
lookup(struct ps_dwarf *d, struct object *o, uintptr_t addr, struct ps_dwarf_frame *out,
       int max, uintptr_t valid[2])
{
	Dwarf_Die *cu, *sc = NULL, inner, cubuf;
	Dwarf_Addr b, lo = 0, hi = UINT64_MAX;
	Dwarf_Line *l;
	const char *file = NULL;
	int line = 0, n;

	cu = cu_of(o, addr, &cubuf, &b);
	if (!cu) {
		/* DWARF that covers no code here (assembly without lines):
		 * so it stays, for this address. */
		if (dw.module_getdwarf(o->mod, &b)) {
			valid[0] = addr;
			valid[1] = addr + 1;
		}
		return 0;
	}
	l = dw.getsrc_die(cu, addr - b);
	if (l && dw.lineno(l, &line) == 0)
		file = dw.linesrc(l, NULL, NULL);
	n = dw.getscopes(cu, addr - b, &sc);
	if (n <= 0) {
		free(sc);
		valid[0] = addr;
		valid[1] = addr + 1;
		return 0;
	}
	inner = sc[0];
	free(sc);
	n = chain(d, cu, &inner, file, line, addr - b, &lo, &hi, out,
		  max < MAX_FRAMES ? max : MAX_FRAMES);
	if (n > 0 && lo <= addr - b && addr - b < hi) {
		valid[0] = (uintptr_t)(lo + b);
		valid[1] = (uintptr_t)(hi + b);
	}
	return n;
}

int
ps_dwarf_lookup(struct ps_dwarf *d, const char *path, uint64_t id, uintptr_t bias,
		uintptr_t addr, struct ps_dwarf_frame *out, int max, uintptr_t valid[2])
{
	struct object *o;
	int n;

	if (!d || !path || !out || max <= 0 || !valid)
		return -EINVAL;
	valid[0] = valid[1] = 0;
	o = object(d, path, id, bias);
	if (!o || !o->mod || d->over_cap)
		return 0;
	/* In o's addresses here; valid[] is moved back at the end. */
	addr += shift(o, bias);
	n = lookup(d, o, addr, out, max, valid);
	if (valid[1] > valid[0]) {
		valid[0] -= shift(o, bias);
		valid[1] -= shift(o, bias);
	}
	return n;
}

/* ---- a whole function at once -------------------------------------------- *
 *
 * What ps_dwarf_lookup answers address by address, for every address of
 * one function, in one walk: the inlined subroutines of the function's
 * subtree (with their ranges and call sites) are collected once, the
 * boundaries of the answers are the line table's rows and those ranges'
 * ends, and each piece between two boundaries gets the chain that
 * chain() would build there.  One dwarf_getscopes and one walk of the
 * subtree instead of one of each per piece: the symbol cache completes a
 * function with this (symbols.c). */

#define MAX_INLINED 8192        /* inlined subroutines of one function */
#define MAX_PIECES  65536       /* boundaries in one function */

struct inl {
	Dwarf_Die die;
	int parent;             /* index of the enclosing inlined subroutine, -1 */
};

struct walk {
	struct inl *v;
	uint32_t n, cap;
	Dwarf_Addr *cut;        /* boundaries */
	uint32_t ncut, capcut;
	Dwarf_Addr lo, hi;      /* the function's range */
	int failed;
};

static void
add_cut(struct walk *w, Dwarf_Addr a)
{
	if (a <= w->lo || a >= w->hi || w->failed)
		return;
	if (ps_grow(&w->cut, &w->capcut, w->ncut + 1, MAX_PIECES, sizeof(*w->cut))) {
		w->failed = 1;
		return;
	}
	w->cut[w->ncut++] = a;
}

/* The inlined subroutines under die (through lexical blocks), their
 * ranges' ends as boundaries. */
static void
collect(struct walk *w, Dwarf_Die *die, int parent, int depth)
{
	Dwarf_Addr base, rlo, rhi;
	Dwarf_Die k;
	ptrdiff_t r;
	int tag;

	if (dw.child(die, &k) != 0)
		return;
	do {
		if (w->failed || depth > MAX_FRAMES)
			return;
		tag = dw.tag(&k);
		if (tag == DW_TAG_inlined_subroutine) {
			if (ps_grow(&w->v, &w->cap, w->n + 1, MAX_INLINED, sizeof(*w->v))) {
				w->failed = 1;
				return;
			}
			w->v[w->n] = (struct inl){ k, parent };
			for (r = 0; (r = dw.ranges(&k, r, &base, &rlo, &rhi)) > 0;) {
				add_cut(w, rlo);
				add_cut(w, rhi);
			}
			w->n++;
			collect(w, &k, (int)w->n - 1, depth + 1);
		} else if (tag == DW_TAG_lexical_block) {
			collect(w, &k, parent, depth + 1);
		}
	} while (dw.siblingof(&k, &k) == 0);
}

static int
has_pc(Dwarf_Die *die, Dwarf_Addr a)
{
	Dwarf_Addr base, rlo, rhi;
	ptrdiff_t r;

	for (r = 0; (r = dw.ranges(die, r, &base, &rlo, &rhi)) > 0;)
		if (rlo <= a && a < rhi)
			return 1;
	return 0;
}

static int
cmp_addr(const void *a, const void *b)
{
	Dwarf_Addr x = *(const Dwarf_Addr *)a, y = *(const Dwarf_Addr *)b;

	return x < y ? -1 : x > y;
}

/* The chain at a, as chain() builds it: the innermost inlined subroutine
 * that holds a, its callers, the function last. */
static int
chain_at(struct ps_dwarf *d, Dwarf_Die *cu, Dwarf_Die *fn, const struct walk *w,
	 Dwarf_Files *files, Dwarf_Addr a, struct ps_dwarf_frame *out, int max)
{
	Dwarf_Line *l = dw.getsrc_die(cu, a);
	const char *file = NULL;
	Dwarf_Attribute at;
	Dwarf_Word v;
	int line = 0, i, k = 0, inner = -1;

	if (l && dw.lineno(l, &line) == 0)
		file = dw.linesrc(l, NULL, NULL);
	/* The deepest holds a: later in the walk means deeper or a sibling. */
	for (i = 0; i < (int)w->n; i++)
		if (has_pc((Dwarf_Die *)&w->v[i].die, a))
			inner = i;
	for (i = inner; i >= 0; i = w->v[i].parent) {
		if (k < max - 1) {
			fill_frame((Dwarf_Die *)&w->v[i].die, absolute(cu, file, d->paths[k]), line,
				   &out[k]);
			k++;
		}
		file = files && dw.formudata(dw.attr((Dwarf_Die *)&w->v[i].die, DW_AT_call_file, &at),
					     &v) == 0 ? dw.filesrc(files, v, NULL, NULL) : NULL;
		line = dw.formudata(dw.attr((Dwarf_Die *)&w->v[i].die, DW_AT_call_line, &at), &v) == 0 ?
		       (int)v : 0;
	}
	k = k < max - 1 ? k : max - 1;
	fill_frame(fn, absolute(cu, file, d->paths[k]), line, &out[k]);
	return k + 1;
}

/* ps_dwarf_function where DWARF has no subprogram: assembly (libc's
 * memmove variants, a hot function of every program that copies) or code
 * of no compilation unit (_start).  Their look-ups answer one line-table
 * row, or one byte without a line, at a time, so without this every run
 * that samples another address of them opened DWARF again.  Each answer
 * is ps_dwarf_lookup's own, for the range it says it holds; bytes without
 * a line are joined into one range.  Stops where the look-up gives no
 * range (libdw missing, the cap), at MAX_PIECES steps, or when emit says. */
static int
walk_lookups(struct ps_dwarf *d, const char *path, uint64_t id, uintptr_t bias, uintptr_t lo,
	     uintptr_t hi,
	     int max, int (*emit)(void *, uintptr_t, uintptr_t, const struct ps_dwarf_frame *, int),
	     void *arg)
{
	struct ps_dwarf_frame f[MAX_FRAMES];
	uintptr_t a = lo, end, v[2], run = 0;
	int n, pieces = 0, steps;

	for (steps = 0; a < hi && steps < MAX_PIECES; steps++, a = end) {
		n = ps_dwarf_lookup(d, path, id, bias, a, f, max, v);
		if (n < 0 || v[1] <= a || v[0] > a)
			break;
		end = v[1] < hi ? v[1] : hi;
		if (n == 0) {
			if (!run)
				run = a;
			continue;
		}
		if (run && emit(arg, run, a, f, 0))
			return pieces;
		pieces += run != 0;
		run = 0;
		if (emit(arg, a, end, f, n))
			return pieces;
		pieces++;
	}
	if (run && !emit(arg, run, a, f, 0))
		pieces++;
	return pieces;
}

int
ps_dwarf_function(struct ps_dwarf *d, const char *path, uint64_t id, uintptr_t bias, uintptr_t addr,
		  uintptr_t sym_lo, uintptr_t sym_hi, int max,
		  int (*emit)(void *arg, uintptr_t lo, uintptr_t hi, const struct ps_dwarf_frame *f,
			      int n),
		  void *arg)
{
	struct ps_dwarf_frame f[MAX_FRAMES];
	Dwarf_Die *cu, *sc = NULL, *up = NULL, cubuf, fn;
	Dwarf_Files *files = NULL;
	Dwarf_Lines *lines;
	struct walk w;
	Dwarf_Addr b, a, at, base, rlo, rhi;
	uintptr_t moved;
	struct object *o;
	Dwarf_Line *l;
	size_t nl, i;
	ptrdiff_t r;
	int n, j, found = 0, pieces = 0;

	if (!d || !path || !emit || max <= 0)
		return -EINVAL;
	o = object(d, path, id, bias);
	if (!o || !o->mod || d->over_cap)
		return 0;
	/* The walk is in o's addresses; the pieces are moved back. */
	moved = shift(o, bias);
	cu = cu_of(o, addr + moved, &cubuf, &b);
	if (!cu)
		return walk_lookups(d, path, id, bias, sym_lo, sym_hi, max, emit, arg);
	a = addr + moved - b;
	/* The function: the first subprogram enclosing the innermost scope. */
	n = dw.getscopes(cu, a, &sc);
	if (n > 0)
		n = dw.getscopes_die(&sc[0], &up);
	for (j = 0; j < n && !found; j++)
		if (dw.tag(&up[j]) == DW_TAG_subprogram) {
			fn = up[j];
			found = 1;
		}
	free(sc);
	free(up);
	if (!found)
		return walk_lookups(d, path, id, bias, sym_lo, sym_hi, max, emit, arg);
	memset(&w, 0, sizeof(w));
	for (r = 0; (r = dw.ranges(&fn, r, &base, &rlo, &rhi)) > 0;)
		if (rlo <= a && a < rhi) {
			w.lo = rlo;
			w.hi = rhi;
		}
	if (w.hi <= w.lo)
		return 0;
	max = max < MAX_FRAMES ? max : MAX_FRAMES;
	if (dw.getsrcfiles(cu, &files, NULL) != 0)
		files = NULL;
	collect(&w, &fn, -1, 0);
	if (dw.getsrclines(cu, &lines, &nl) == 0)
		for (i = 0; i < nl && !w.failed; i++) {
			l = dw.onesrcline(lines, i);
			if (l && dw.lineaddr(l, &at) == 0)
				add_cut(&w, at);
		}
	if (!w.failed) {
		if (w.ncut)
			qsort(w.cut, w.ncut, sizeof(*w.cut), cmp_addr);
		for (a = w.lo, i = 0; a < w.hi; a = at) {
			while (i < w.ncut && w.cut[i] <= a)
				i++;
			at = i < w.ncut ? w.cut[i] : w.hi;
			l = dw.getsrc_die(cu, a);
			if (l && row_ends(l))
				at = a + 1;     /* see cut_row */
			n = chain_at(d, cu, &fn, &w, files, a, f, max);
			if (emit(arg, (uintptr_t)(a + b) - moved, (uintptr_t)(at + b) - moved, f, n))
				break;
			pieces++;
		}
	}
	free(w.v);
	free(w.cut);
	return pieces;
}
