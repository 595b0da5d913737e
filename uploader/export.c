/* export.c -- fold, encode, write and queue.  See export.h. */
#include "uploader/export.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* DWARF look-up time per pass: a large LTO binary costs ~1 ms per address
 * (REFERENCES.md section 9), so a first pass over thousands of new
 * addresses is spread over several passes instead of delaying this one. */
#define DWARF_PASS_NS 1000000000ull

#include "uploader/files.h"
#include "uploader/group.h"
#include "common/log.h"
#include "uploader/profiles.h"
#include "symbolize/symbols.h"

/* What a pass changes, reset; ps_export_abandon tells the same fields
 * untouched in a fork child: the two lists go together. */
void
ps_export_setup(struct ps_export *x)
{
	x->ready = 0;
	x->dirfd = -1;
	x->group = NULL;
	x->incomplete = 0;
	x->passes = x->fold_errors = 0;
	memset(&x->fold, 0, sizeof(x->fold));
	x->start_ns = ps_clock_ns(CLOCK_REALTIME);
}

void
ps_export_set_span(struct ps_export *x, struct ps_span *sp)
{
	x->span = sp;
	x->nlabels = 0;
	if (!sp || ps_span_trace_id_hex(sp, x->trace_hex, sizeof(x->trace_hex)) ||
	    ps_span_span_id_hex(sp, x->span_hex, sizeof(x->span_hex)))
		return;
	/* Pyroscope keeps these two pprof labels per sample: they are what
	 * Grafana's "Profiles for this span" looks up. */
	x->labels[0].key = "span_id";
	x->labels[0].str = x->span_hex;
	x->labels[1].key = "trace_id";
	x->labels[1].str = x->trace_hex;
	x->nlabels = 2;
}

void
ps_export_free(struct ps_export *x)
{
	ps_fold_free(&x->fold);
	x->ready = 0;
	ps_remote_free(&x->remote);
}

void
ps_export_abandon(struct ps_export *x)
{
	/* Each page of x written in a fork child is copied from its parent's
	 * (most of 15): a parent whose passes run in its helper left the pass
	 * state as set up, and then only the start moves, on the page the
	 * child's pid is written to anyway.  The server's state is the child's
	 * only if it ever uploads (its own helper).  The fields
	 * ps_export_setup resets: */
	if (x->ready || x->passes || x->fold_errors || x->incomplete || x->group ||
	    x->dirfd != -1) {
		ps_export_setup(x);
		ps_remote_abandon(&x->remote, x->start_ns);
		return;
	}
	x->start_ns = ps_clock_ns(CLOCK_REALTIME);
	if (x->remote.on)
		ps_remote_abandon(&x->remote, x->start_ns);
}

void
ps_export_refuse_dir(const char *dir, int rc)
{
	ps_log_config("PYROSCOPE_OUTPUT_DIR=%s: %s; local profiles are not written", dir,
		      strerror(-rc));
}

int
ps_export_check_dir(struct ps_export *x)
{
	int rc;

	if (!x->dir[0] || x->dirfd != -1 || (rc = ps_files_check_dir(x->dir)) == 0)
		return 0;
	x->dirfd = -2;
	return rc;
}

/* Make the fold at the first pass or scrape.  Returns 0 or -ENOMEM (the
 * next pass tries again). */
static int
fold_ready(struct ps_export *x, const struct ps_stacktab *st)
{
	int rc;

	if (x->ready)
		return 0;
	rc = ps_fold_init(&x->fold, ps_stacktab_size(st), x->skip_lo, x->skip_hi);
	if (rc) {
		x->fold_errors++;
		return rc;
	}
	if (x->watch)
		ps_symbols_watch(x->fold.syms, x->watch, x->watch_only,
				 x->watch_left.text ? &x->watch_left : NULL);
	/* In the watched program: a helper's own is that of the program it
	 * was copied from, not a joined one's (BENCHMARKS 14q). */
	if (x->entry && ps_fold_first_mapping(&x->fold, x->entry))
		x->fold_errors++;
	/* Without memory for the DWARF reader, names stay function-level. */
	if (ps_fold_configure(&x->fold, x->cfg->folded_lines, x->cfg->dwarf_memory,
			      x->cfg->debuginfod, DWARF_PASS_NS))
		ps_warn("no memory for source lines: profiles name functions only");
	else if (x->cfg->dwarf_memory &&
		 ps_symbolizer_use_cache(ps_symbols_symbolizer(x->fold.syms),
					 x->cfg->symbol_cache_dir, x->cfg->symbol_cache_size))
		ps_info("symbol cache not used: its directory's name is too long");
	x->ready = 1;
	return 0;
}

void
ps_export_learn(struct ps_export *x)
{
	if (x->watch && fold_ready(x, x->st) == 0)
		ps_symbols_learn(x->fold.syms);
}

int
ps_export_run(struct ps_export *x, int final)
{
	char c[PS_GROUP_COMMENTS][200];
	const struct ps_stacktab *st = x->st;
	size_t nc;
	int rc, folded;

	if (!st)
		return 0;
	/* Most children of a shell or of make never record anything: skip
	 * the fold, which would touch megabytes of untouched table pages. */
	if (!x->ready && ps_stacktab_empty(st) &&
	    (!x->lt || atomic_load_explicit(&x->lt->c->live, memory_order_relaxed) == 0))
		return 0;
	rc = fold_ready(x, st);
	if (rc)
		return rc;
	x->passes++;
	folded = ps_fold_update(&x->fold, st, x->on[PS_FAMILY_ALLOC] ? x->lt : NULL);
	if (folded)
		x->fold_errors++;       /* the next pass folds what is missing */
	x->incomplete = folded != 0;
	/* The comments feed only this line now (the groups write their
	 * own): not made, nor the samples summed, unless it is logged. */
	if (ps_log_level() >= PS_LOG_DEBUG) {
		nc = ps_group_comments_of(x, c);
		ps_debug("export pass %llu%s: %u stacks, %lld cpu samples; %s",
			 (unsigned long long)x->passes, final ? " (final)" : "", x->fold.n,
			 (long long)ps_fold_total(&x->fold, NULL, PS_F_CPU_SAMPLES), c[nc - 1]);
	}
	return ps_group_update(x);
}

void
ps_export_save_symbols(struct ps_export *x, int final, uint64_t fill_ns, int (*busy)(void))
{
	struct ps_symbols_stats ss;

	if (!x->ready)
		return;
	ps_symbols_save(x->fold.syms, fill_ns, busy);
	if (!final)
		return;
	ps_symbols_get_stats(x->fold.syms, &ss);
	ps_debug("symbols: %llu objects read, %llu already read for another program; "
		 "source lines: %llu looked up in DWARF (libdw %s, %u objects without debug "
		 "information, %u opened by this process), %llu answered by the symbol "
		 "cache (%u files read, %u already open, %u not used%s), %llu ranges added "
		 "to complete its functions",
		 (unsigned long long)ss.files, (unsigned long long)ss.shared,
		 (unsigned long long)ss.obj.src_lookups, ss.obj.dwarf_loaded ? "loaded" : "not loaded",
		 ss.obj.dwarf_no_debug, ss.obj.dwarf_opened, (unsigned long long)ss.obj.src_cached,
		 ss.obj.cache_files, ss.obj.cache_shared, ss.obj.cache_rejected, ss.obj.cache_full ? ", full" : "",
		 (unsigned long long)ss.obj.src_filled);
}

int
ps_export_refresh(struct ps_export *x)
{
	const struct ps_stacktab *st = x->st;
	int rc;

	if (!st)
		return -ENODATA;
	rc = fold_ready(x, st);
	return rc ? rc : ps_fold_update(&x->fold, st, x->on[PS_FAMILY_ALLOC] ? x->lt : NULL);
}

void
ps_export_send(struct ps_export *x, int final, uint64_t deadline_ns, pthread_mutex_t *lock)
{
	ps_upload_send(&x->remote.up, ps_clock_ns(CLOCK_MONOTONIC), 10000, final, deadline_ns, lock);
}

uint64_t
ps_export_next_due(const struct ps_export *x)
{
	return ps_upload_next_due(&x->remote.up);
}

void
ps_export_end_span(struct ps_export *x)
{
	const char *const *argv = x->argv;
	int exit_code = x->exit_code, argc = x->argc;
	struct ps_otlp_resource res;
	const char *exe = x->app, *slash;
	static char exe_buf[256];

	if (!x->span)
		return;
	ps_span_end(x->span, ps_clock_ns(CLOCK_REALTIME), exit_code);
	if (argc > 0 && argv && argv[0]) {
		slash = strrchr(argv[0], '/');
		snprintf(exe_buf, sizeof(exe_buf), "%s", slash ? slash + 1 : argv[0]);
		exe = exe_buf;
	}
	memset(&res, 0, sizeof(res));
	/* Grafana matches the span's service.name with Pyroscope's
	 * service_name: the service_name tag if given, else the app name. */
	res.service_name = ps_tags_get(&x->remote.tags, "service_name");
	if (!res.service_name)
		res.service_name = x->remote.app[0] ? x->remote.app : x->app;
	res.pid = (int)x->pid;
	res.executable_name = exe;
	res.argv = argv;
	res.argc = argv ? argc : 0;
	ps_remote_queue_span(&x->remote, x->span, &res);
}
