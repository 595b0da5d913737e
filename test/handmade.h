/* handmade.h -- hand-built sample tables for the uploader's unit tests
 * (check_fold, check_export, check_remote, check_nomem, check_worker): stacks of a few
 * functions of the test binary itself, whose names the symbolizer reads
 * from its symbol table, with known values.  Not a module: included by
 * the tests only. */
#ifndef PS_TEST_HANDMADE_H
#define PS_TEST_HANDMADE_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/livetab.h"
#include "shim/stacktab.h"
#include "uploader/export.h"

static volatile int hm_sink;

/* Each is a few instructions long, so that ip + 1 lies inside it. */
__attribute__((noinline, used)) static void hm_main(void) { hm_sink++; hm_sink++; }
__attribute__((noinline, used)) static void hm_work(void) { hm_sink++; hm_sink++; }
__attribute__((noinline, used)) static void hm_leaf_a(void) { hm_sink++; hm_sink++; }
__attribute__((noinline, used)) static void hm_leaf_b(void) { hm_sink++; hm_sink++; }
__attribute__((noinline, used)) static void hm_alloc(void) { hm_sink++; hm_sink++; }

#define HM_IP(f) ((uintptr_t)(f) + 1)
#define HM_MS 1000000ull

/* A table of about 4 MiB, published as the process's. */
__attribute__((unused)) static void
hm_table(struct ps_stacktab *st)
{
	ck_assert_int_eq(ps_stacktab_init(st, 4u << 20), 0);
	ps_stacktab_publish(st);
}

/* CPU: `samples` samples of `ms` each on main;work;leaf. */
__attribute__((unused)) static void
hm_cpu(struct ps_stacktab *st, void (*leaf)(void), uint64_t samples, uint64_t ms)
{
	uintptr_t ips[] = { HM_IP(leaf), HM_IP(hm_work), HM_IP(hm_main) };
	uint64_t v[PS_NVALUES] = { 0 };

	v[PS_V_CPU_SAMPLES] = samples;
	v[PS_V_CPU_NS] = samples * ms * HM_MS;
	ck_assert_uint_lt(ps_stacktab_add(st, ips, 3, 0, v), ps_stacktab_size(st));
}

/* Allocations: `objs` sampled blocks of `bytes` each on main;alloc, the
 * first `live` of them still live in lt (lt may be NULL). */
__attribute__((unused)) static void
hm_alloc_samples(struct ps_stacktab *st, struct ps_livetab *lt, uint64_t objs, uint64_t bytes,
		 uint64_t live)
{
	uintptr_t ips[] = { HM_IP(hm_alloc), HM_IP(hm_main) };
	uint64_t v[PS_NVALUES] = { 0 };
	uint32_t slot;

	v[PS_V_ALLOC_OBJS] = objs * PS_FIXED_ONE;
	v[PS_V_ALLOC_BYTES] = objs * bytes;
	slot = ps_stacktab_add(st, ips, 2, 0, v);
	for (uint64_t i = 0; lt && i < live; i++)
		ck_assert_int_eq(ps_livetab_insert(lt, (void *)(uintptr_t)(0x100000 + 64 * i), bytes,
						   PS_FIXED_ONE, slot), 0);
}

static const char *
hm_no_env(const char *name)
{
	(void)name;
	return NULL;
}

/* The configuration of an empty environment, for program `app`. */
__attribute__((unused)) static void
hm_config(struct ps_config *cfg, const char *app)
{
	ck_assert_int_ge(ps_config_load(cfg, hm_no_env, app), 0);
}

/* A fresh export state for app "app", process `pid`, writing into dir:
 * CPU, and allocations when lt is given. */
__attribute__((unused)) static void
hm_export(struct ps_export *x, const struct ps_config *cfg, struct ps_livetab *lt,
	  const char *dir, int pid)
{
	memset(x, 0, sizeof(*x));
	x->cfg = cfg;
	x->st = ps_stacktab_current();
	x->lt = lt;
	x->on[PS_FAMILY_CPU] = 1;
	x->on[PS_FAMILY_ALLOC] = lt != NULL;
	x->pid = pid;
	snprintf(x->app, sizeof(x->app), "app");
	snprintf(x->dir, sizeof(x->dir), "%s", dir);
	ps_export_setup(x);
}

/* A new directory /tmp/<name>.XXXXXX into dir[64], and its removal. */
__attribute__((unused)) static void
hm_tmpdir(char *dir, const char *name)
{
	snprintf(dir, 64, "/tmp/%s.XXXXXX", name);
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

__attribute__((unused)) static void
hm_rmdir(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* dir/name into buf[0..len), NUL-terminated; 0 if there is no such file. */
__attribute__((unused)) static int
hm_read(const char *dir, const char *name, char *buf, size_t len)
{
	char path[256];
	size_t n;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	buf[0] = '\0';
	fp = fopen(path, "r");
	if (!fp)
		return 0;
	n = fread(buf, 1, len - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	return 1;
}

#endif
