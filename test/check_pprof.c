/* check_pprof.c -- the pprof encoder and gzip, decoded independently.
 *
 * Profiles are written to a temporary file and read back with tools that
 * share no code with the encoder: `go tool pprof` (-raw, -tags, -top),
 * `gunzip | protoc --decode_raw`, and zlib's inflate for gzip alone.  The
 * go-based cases print a message and pass when `go` is not installed.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/buf.h"
#include "common/gzip.h"
#include "uploader/pprof.h"

/* Every go invocation: names are in the profile, never symbolize. */
#define PPROF "go tool pprof -symbolize=none "
#define SPAN_LABELS \
	"span_id:[00f067aa0ba902b7] trace_id:[4bf92f3577b34da6a3ce929d0e0e4736]"

static char tmpdir[] = "/tmp/check_pprof.XXXXXX";
static int have_go;

/* ---- helpers ---------------------------------------------------------- */

/* Write b to a fresh file in tmpdir; returns its path (static buffer). */
static const char *
save(const struct ps_buf *b, const char *name)
{
	static char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(b->data, 1, b->len, f), b->len);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* Run a shell command; return its stdout (malloc'd) and assert exit 0. */
static char *
run(const char *fmt, const char *arg)
{
	char cmd[1024], *out = NULL;
	size_t len = 0, n;
	char chunk[4096];
	FILE *p;

	snprintf(cmd, sizeof(cmd), fmt, arg);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0) {
		out = realloc(out, len + n + 1);
		ck_assert_ptr_nonnull(out);
		memcpy(out + len, chunk, n);
		len += n;
	}
	if (!out)
		out = calloc(1, 1);
	out[len] = '\0';
	ck_assert_msg(pclose(p) == 0, "command failed: %s\n%s", cmd, out);
	return out;
}

#define SKIP_WITHOUT_GO() do { \
	if (!have_go) { \
		fprintf(stderr, "%s: skipped, `go` is not installed\n", __func__); \
		return; \
	} } while (0)

/* Location names from the "Locations" section of `go tool pprof -raw`
 * ("     1: 0x0 M=1 leaf :0 s=0"). */
static void
raw_names(char *text, char names[][64], unsigned max)
{
	char *save = NULL, *l, name[64];
	unsigned id;
	int in = 0;

	for (l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (strcmp(l, "Locations") == 0 || strcmp(l, "Mappings") == 0)
			in = l[0] == 'L';
		else if (in && sscanf(l, "%u: %*s %*s %63s", &id, name) == 2 &&
			 id < max)
			memcpy(names[id], name, sizeof(name));
	}
}

static void
cat_word(char *dst, const char *w, const char *sep)
{
	strncat(dst, w, 255 - strlen(dst));
	strncat(dst, sep, 255 - strlen(dst));
}

/* One "   3   30000000: 1 2 3" line -> "3 30000000|leaf,work,main,". */
static void
raw_sample_line(char *l, char *ids, char names[][64], char *out)
{
	char *save = NULL, *tok;
	unsigned long id;

	out[0] = '\0';
	for (tok = strtok_r(l, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		cat_word(out, tok, " ");
	if (out[0])
		out[strlen(out) - 1] = '|';
	for (tok = strtok_r(ids, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		id = strtoul(tok, NULL, 10);
		ck_assert_uint_lt(id, 16);
		cat_word(out, names[id], ",");
	}
}

/* From `go tool pprof -raw`, rebuild each sample as "v1 v2 ...|leaf,...,"
 * with names for location ids.  Returns how many samples were found. */
static int
raw_samples(const char *raw, char out[][256], int max)
{
	char names[16][64] = { { 0 } }, *text, *save = NULL, *l, *ids;
	int n = 0, in = 0;

	text = strdup(raw);
	ck_assert_ptr_nonnull(text);
	raw_names(text, names, 16);
	strcpy(text, raw);
	for (l = strtok_r(text, "\n", &save); l && n < max;
	     l = strtok_r(NULL, "\n", &save)) {
		if (strcmp(l, "Samples:") == 0 || strcmp(l, "Locations") == 0) {
			in = l[0] == 'S';
			continue;
		}
		if (!in || strchr(l, '[') || !(ids = strchr(l, ':')))
			continue;       /* the header or a label line */
		*ids++ = '\0';
		raw_sample_line(l, ids, names, out[n++]);
	}
	free(text);
	return n;
}

static int
has(char list[][256], int n, const char *want)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(list[i], want) == 0)
			return 1;
	return 0;
}

/* The flat column of function `name` in `go tool pprof -top` output. */
static const char *
top_flat(const char *top, const char *name)
{
	static char flat[64];
	char fn[256];
	const char *p;

	for (p = top; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (sscanf(p, "%63s %*s %*s %*s %*s %255s", flat, fn) == 2 &&
		    strcmp(fn, name) == 0)
			return flat;
	}
	return "(absent)";
}

/* ---- fixtures --------------------------------------------------------- */

/* A CPU profile as the uploader makes it: 3 stacks of depth 1-3, one
 * all-zero sample that must be left out, a comment and span labels. */
static const char *const cpu_types[] = { "samples", "cpu" };
static const char *const cpu_units[] = { "count", "nanoseconds" };
static const char *const cpu_funcs[] = { "main", "work", "leaf" };
static const uint32_t stk_main[] = { 0 };
static const uint32_t stk_work[] = { 1, 0 };
static const uint32_t stk_leaf[] = { 2, 1, 0 };
static const int64_t v_leaf[] = { 3, 30000000 };
static const int64_t v_work[] = { 2, 20000000 };
static const int64_t v_main[] = { 1, 10000000 };
static const int64_t v_zero[] = { 0, 0 };
static const struct ps_pprof_sample cpu_samples[] = {
	{ stk_leaf, 3, v_leaf, 0 },
	{ stk_work, 2, v_work, 0 },
	{ stk_main, 1, v_zero, 0 },
	{ stk_main, 1, v_main, 0 },
};
static const char *const cpu_comments[] = { "pyroshim test profile" };
static const struct ps_pprof_label span_labels[] = {
	{ "span_id", "00f067aa0ba902b7", 0 },
	{ "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736", 0 },
};

static struct ps_pprof_desc
cpu_desc(void)
{
	struct ps_pprof_desc d = {
		.type_names = cpu_types, .type_units = cpu_units, .nvalues = 2,
		.period_type = "cpu", .period_unit = "nanoseconds",
		.period = 10000000,
		.time_nanos = 1700000000123456789LL,
		.duration_nanos = 15000000000LL,
		.default_sample_type = "cpu",
		.comments = cpu_comments, .ncomments = 1,
		.funcs = cpu_funcs, .nfuncs = 3,
		.samples = cpu_samples, .nsamples = PS_ARRAY_LEN(cpu_samples),
		.labels = span_labels, .nlabels = 2,
	};
	return d;
}

/* Encode d into a fresh file; returns the path. */
static const char *
encode_to_file(const struct ps_pprof_desc *d, const char *name)
{
	struct ps_buf b = PS_BUF_INIT(1 << 20);
	const char *path;

	ck_assert_int_eq(ps_pprof_encode(d, &b), 0);
	ck_assert_uint_gt(b.len, 18);
	ck_assert_uint_eq(b.data[0], 0x1f);     /* gzip magic */
	ck_assert_uint_eq(b.data[1], 0x8b);
	path = save(&b, name);
	ps_buf_free(&b);
	return path;
}

/* ---- CPU profile, read by go tool pprof ------------------------------- */

START_TEST(pprof_cpu_profile_reads_back_with_go_pprof_raw)
{
	struct ps_pprof_desc d = cpu_desc();
	char samples[8][256], *raw;
	const char *path;
	int n;

	SKIP_WITHOUT_GO();
	path = encode_to_file(&d, "cpu.pb.gz");
	raw = run(PPROF "-raw %s 2>&1", path);
	ck_assert_ptr_nonnull(strstr(raw, "\nsamples/count cpu/nanoseconds[dflt]\n"));
	ck_assert_ptr_nonnull(strstr(raw, "PeriodType: cpu nanoseconds\n"));
	ck_assert_ptr_nonnull(strstr(raw, "Period: 10000000\n"));
	ck_assert_ptr_nonnull(strstr(raw, "Comment: pyroshim test profile\n"));
	ck_assert_ptr_nonnull(strstr(raw, "Duration: 15s\n"));
	n = raw_samples(raw, samples, 8);
	ck_assert_int_eq(n, 3);         /* the all-zero sample is left out */
	ck_assert_msg(has(samples, n, "3 30000000|leaf,work,main,"), "%s", raw);
	ck_assert_msg(has(samples, n, "2 20000000|work,main,"), "%s", raw);
	ck_assert_msg(has(samples, n, "1 10000000|main,"), "%s", raw);
	/* Every location has the placeholder mapping (M=1). */
	ck_assert_ptr_nonnull(strstr(raw, " M=1 leaf "));
	free(raw);
}
END_TEST

START_TEST(pprof_labels_are_on_every_sample)
{
	struct ps_pprof_desc d = cpu_desc();
	char *tags, *raw, *p;
	const char *path;
	int n = 0;

	SKIP_WITHOUT_GO();
	path = encode_to_file(&d, "tags.pb.gz");
	tags = run(PPROF "-tags %s 2>&1", path);
	ck_assert_msg(strstr(tags, "span_id: Total 60.0ms"), "%s", tags);
	ck_assert_ptr_nonnull(strstr(tags, "60.0ms (  100%): 00f067aa0ba902b7"));
	ck_assert_ptr_nonnull(strstr(tags, "trace_id: Total 60.0ms"));
	ck_assert_ptr_nonnull(strstr(tags, "100%): 4bf92f3577b34da6a3ce929d0e0e4736"));
	raw = run(PPROF "-raw %s 2>&1", path);
	for (p = raw; (p = strstr(p, SPAN_LABELS)); p++)
		n++;
	ck_assert_int_eq(n, 3);
	free(raw);
	free(tags);
}
END_TEST

START_TEST(pprof_top_shows_flat_cpu_per_function)
{
	struct ps_pprof_desc d = cpu_desc();
	const char *path;
	char *top;

	SKIP_WITHOUT_GO();
	path = encode_to_file(&d, "top.pb.gz");
	top = run(PPROF "-top -sample_index=cpu -unit=ns %s 2>&1", path);
	ck_assert_ptr_nonnull(strstr(top, "Type: cpu\n"));
	ck_assert_str_eq(top_flat(top, "leaf"), "30000000ns");
	ck_assert_str_eq(top_flat(top, "work"), "20000000ns");
	ck_assert_str_eq(top_flat(top, "main"), "10000000ns");
	free(top);
	top = run(PPROF "-top -sample_index=samples %s 2>&1", path);
	ck_assert_str_eq(top_flat(top, "leaf"), "3");
	ck_assert_str_eq(top_flat(top, "main"), "1");
	free(top);
}
END_TEST

/* ---- the wire format, read by protoc --------------------------------- */

START_TEST(pprof_string_table_starts_empty_and_times_are_set)
{
	struct ps_pprof_desc d = cpu_desc();
	const char *path, *first6;
	char *dump;

	path = encode_to_file(&d, "wire.pb.gz");
	dump = run("gunzip -c %s | protoc --decode_raw", path);
	first6 = strstr(dump, "\n6: ");
	ck_assert_msg(first6 && strncmp(first6, "\n6: \"\"\n", 7) == 0, "%s", dump);
	ck_assert_ptr_nonnull(strstr(dump, "\n9: 1700000000123456789\n"));
	ck_assert_ptr_nonnull(strstr(dump, "\n10: 15000000000\n"));
	ck_assert_ptr_nonnull(strstr(dump, "\n12: 10000000\n"));
	free(dump);
}
END_TEST

START_TEST(pprof_string_table_is_deduplicated)
{
	/* "cpu" is both a type and a function, "main" appears twice, and
	 * "nanoseconds" is a unit twice. */
	static const char *const funcs[] = { "main", "cpu", "main" };
	static const uint32_t stk[] = { 2, 1, 0 };
	static const int64_t v[] = { 1, 5 };
	static const struct ps_pprof_sample s = { stk, 3, v, 0 };
	struct ps_pprof_desc d = cpu_desc();
	const char *path, *p;
	char *dump;
	int n = 0;

	d.funcs = funcs;
	d.samples = &s;
	d.nsamples = 1;
	d.comments = NULL;
	d.ncomments = 0;
	d.labels = NULL;
	d.nlabels = 0;
	path = encode_to_file(&d, "dedup.pb.gz");
	dump = run("gunzip -c %s | protoc --decode_raw", path);
	for (p = dump; (p = strstr(p, "\n6: ")); p++)
		n++;
	/* "", samples, count, cpu, nanoseconds, main */
	ck_assert_msg(n == 6, "%d strings:\n%s", n, dump);
	free(dump);
}
END_TEST

START_TEST(pprof_all_zero_samples_are_left_out)
{
	struct ps_pprof_desc d = cpu_desc();
	const char *path, *p;
	char *dump;
	int n = 0;

	/* go tool pprof hides zero samples itself, so count on the wire. */
	path = encode_to_file(&d, "zero.pb.gz");
	dump = run("gunzip -c %s | protoc --decode_raw", path);
	for (p = dump; (p = strstr(p, "\n2 {\n")); p++)
		n++;
	ck_assert_msg(n == 3, "%d samples:\n%s", n, dump);
	free(dump);
}
END_TEST

/* ---- allocation profile ---------------------------------------------- */

START_TEST(pprof_alloc_profile_has_four_types)
{
	static const char *const types[] = { "alloc_objects", "alloc_space",
					     "inuse_objects", "inuse_space" };
	static const char *const units[] = { "count", "bytes", "count", "bytes" };
	static const char *const funcs[] = { "main", "make_buf", "grow" };
	static const uint32_t s1[] = { 1, 0 }, s2[] = { 2, 1, 0 };
	static const int64_t v1[] = { 4, 4096, 1, 1024 };
	static const int64_t v2[] = { 2, 1048576, 2, 1048576 };
	static const struct ps_pprof_sample samples[] = {
		{ s1, 2, v1, 0 }, { s2, 3, v2, 0 },
	};
	struct ps_pprof_desc d = {
		.type_names = types, .type_units = units, .nvalues = 4,
		.period_type = "space", .period_unit = "bytes",
		.period = 524288, .funcs = funcs, .nfuncs = 3,
		.samples = samples, .nsamples = 2,
	};
	const char *path;
	char *top;

	SKIP_WITHOUT_GO();
	path = encode_to_file(&d, "alloc.pb.gz");
	top = run(PPROF "-sample_index=alloc_space -unit=B -top %s 2>&1", path);
	ck_assert_msg(strstr(top, "Type: alloc_space\n"), "%s", top);
	ck_assert_str_eq(top_flat(top, "grow"), "1048576B");
	ck_assert_str_eq(top_flat(top, "make_buf"), "4096B");
	ck_assert_str_eq(top_flat(top, "main"), "0");
	free(top);
	top = run(PPROF "-sample_index=inuse_objects -top %s 2>&1", path);
	ck_assert_str_eq(top_flat(top, "grow"), "2");
	ck_assert_str_eq(top_flat(top, "make_buf"), "1");
	free(top);
}
END_TEST

START_TEST(pprof_many_functions_round_trip)
{
	enum { N = 3000 };
	static char names[N][16];
	static const char *funcs[N];
	static uint32_t stacks[N][2];
	static int64_t values[N][2];
	static struct ps_pprof_sample samples[N];
	struct ps_pprof_desc d = cpu_desc();
	const char *path;
	char *top;
	int i;

	for (i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i);
		funcs[i] = names[i];
		stacks[i][0] = (uint32_t)i;
		stacks[i][1] = (uint32_t)((i + 1) % N);
		values[i][0] = 1;
		values[i][1] = i + 1;
		samples[i] = (struct ps_pprof_sample){ stacks[i], 2, values[i], 0 };
	}
	d.funcs = funcs;
	d.nfuncs = N;
	d.samples = samples;
	d.nsamples = N;
	path = encode_to_file(&d, "many.pb.gz");
	SKIP_WITHOUT_GO();
	top = run(PPROF "-top -nodecount=4000 -nodefraction=0 "
		  "-sample_index=cpu -unit=ns %s 2>&1", path);
	ck_assert_str_eq(top_flat(top, "f0"), "1ns");
	ck_assert_str_eq(top_flat(top, "f1234"), "1235ns");
	ck_assert_str_eq(top_flat(top, "f2999"), "3000ns");
	free(top);
}
END_TEST

/* ---- edges ------------------------------------------------------------ */

START_TEST(pprof_zero_samples_give_a_valid_empty_profile)
{
	struct ps_pprof_desc d = cpu_desc();
	char samples[4][256], *raw;
	const char *path;

	d.nsamples = 0;
	d.samples = NULL;
	path = encode_to_file(&d, "empty.pb.gz");
	SKIP_WITHOUT_GO();
	raw = run(PPROF "-raw %s 2>&1", path);
	ck_assert_ptr_nonnull(strstr(raw, "samples/count cpu/nanoseconds[dflt]"));
	ck_assert_int_eq(raw_samples(raw, samples, 4), 0);
	free(raw);
}
END_TEST

START_TEST(pprof_invalid_utf8_names_are_replaced)
{
	/* A stray byte, a truncated sequence, an overlong '/', a UTF-16
	 * surrogate, and a valid 2-byte and 4-byte character. */
	static const char *const funcs[] = {
		"bad\xff", "cut\xe2\x82", "over\xc0\xaf", "sur\xed\xa0\x80",
		"caf\xc3\xa9", "emoji\xf0\x9f\x94\xa5",
	};
	static const uint32_t stk[] = { 0, 1, 2, 3, 4, 5 };
	static const int64_t v[] = { 1, 7 };
	static const struct ps_pprof_sample s = { stk, 6, v, 0 };
	struct ps_pprof_desc d = cpu_desc();
	char samples[4][256], *raw;
	const char *path;

	d.funcs = funcs;
	d.nfuncs = 6;
	d.samples = &s;
	d.nsamples = 1;
	path = encode_to_file(&d, "utf8.pb.gz");
	SKIP_WITHOUT_GO();
	raw = run(PPROF "-raw %s 2>&1", path);
	ck_assert_int_eq(raw_samples(raw, samples, 4), 1);
	ck_assert_str_eq(samples[0], "1 7|bad?,cut??,over??,sur???,"
			 "caf\xc3\xa9,emoji\xf0\x9f\x94\xa5,");
	free(raw);
}
END_TEST

START_TEST(pprof_utf8_fix_replaces_only_bad_bytes)
{
	char s1[] = "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5";
	char s2[] = "\x80x\xf5\x80\x80\x80y\xf4\x90\x80\x80";
	char s3[] = "\xe0\x80\xaf";     /* overlong 3-byte */

	ck_assert_uint_eq(ps_pprof_utf8_fix(s1, strlen(s1)), 0);
	ck_assert_str_eq(s1, "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");
	ck_assert_uint_eq(ps_pprof_utf8_fix(s2, strlen(s2)), 9);
	ck_assert_str_eq(s2, "?x????y????");
	ck_assert_uint_eq(ps_pprof_utf8_fix(s3, 3), 3);
	ck_assert_str_eq(s3, "???");
}
END_TEST

START_TEST(pprof_over_cap_gives_e2big_and_keeps_buffer)
{
	struct ps_pprof_desc d = cpu_desc();
	struct ps_buf b = PS_BUF_INIT(64);

	ck_assert_int_eq(ps_buf_puts(&b, "keep"), 0);
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -E2BIG);
	ck_assert_uint_eq(b.len, 4);
	ck_assert_mem_eq(b.data, "keep", 4);
	b.cap = 1 << 16;
	ck_assert_int_eq(ps_pprof_encode(&d, &b), 0);
	ck_assert_uint_gt(b.len, 64);
	ck_assert_mem_eq(b.data, "keep\x1f\x8b", 6);
	ps_buf_free(&b);
}
END_TEST

START_TEST(pprof_bad_description_is_einval)
{
	static const uint32_t bad_stk[] = { 3 };
	static const int64_t v[] = { 1, 1 };
	static const struct ps_pprof_sample bad = { bad_stk, 1, v, 0 };
	struct ps_buf b = PS_BUF_INIT(1 << 16);
	struct ps_pprof_desc d;

	d = cpu_desc();
	d.nvalues = 0;
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	d = cpu_desc();
	d.samples = &bad;                       /* index 3 of 3 functions */
	d.nsamples = 1;
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	d = cpu_desc();
	d.default_sample_type = "wall";
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	d = cpu_desc();
	d.period_unit = NULL;
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	ck_assert_int_eq(ps_pprof_encode(NULL, &b), -EINVAL);
	ck_assert_uint_eq(b.len, 0);
	ps_buf_free(&b);
}
END_TEST

/* A location-level profile: two mappings, an inlined frame (two Lines in
 * one Location), system names, files and first lines. */
static const char *const ll_funcs[] = { "main", "hot", "inl" };
static const char *const ll_sys[] = { "main", "_Z3hotv", "inl" };
static const char *const ll_files[] = { "/src/m.c", "/src/m.c", "/src/i.h" };
static const int64_t ll_start[] = { 10, 20, 30 };
static const struct ps_pprof_line ll_lines[] = {
	{ 2, 31 }, { 1, 22 },           /* inl:31 inlined into hot:22 */
	{ 0, 12 },                      /* main:12 */
};
static const struct ps_pprof_location ll_locs[] = {
	{ 0x401234, 1, &ll_lines[0], 2 },
	{ 0x7f0000001000, 2, &ll_lines[2], 1 },
};
static const struct ps_pprof_mapping ll_maps[] = {
	{ 0x400000, 0x402000, 0x1000, "/bin/prog", "abcdef01", 1, 1, 1, 1 },
	{ 0x7f0000000000, 0x7f0000002000, 0, "/lib/libx.so", NULL, 1, 0, 0, 0 },
};

static struct ps_pprof_desc
lines_desc(void)
{
	static const uint32_t stk[] = { 0, 1 };
	static const int64_t v[] = { 5, 50000000 };
	static const struct ps_pprof_sample s = { stk, 2, v, 0 };
	struct ps_pprof_desc d = cpu_desc();

	d.funcs = ll_funcs;
	d.nfuncs = 3;
	d.func_system_names = ll_sys;
	d.func_files = ll_files;
	d.func_start_lines = ll_start;
	d.locations = ll_locs;
	d.nlocations = 2;
	d.mappings = ll_maps;
	d.nmappings = 2;
	d.samples = &s;
	d.nsamples = 1;
	d.labels = NULL;
	d.nlabels = 0;
	return d;
}

START_TEST(pprof_locations_carry_addresses_inlined_lines_and_mappings)
{
	struct ps_buf b = PS_BUF_INIT(1 << 16);
	struct ps_pprof_desc d = lines_desc();
	const char *path;
	char *raw;

	SKIP_WITHOUT_GO();
	ck_assert_int_eq(ps_pprof_encode(&d, &b), 0);
	path = save(&b, "lines.pb.gz");
	raw = run(PPROF "-raw %s 2>&1", path);
	/* Innermost inlined function first, its caller on the next line. */
	ck_assert_msg(strstr(raw, "1: 0x401234 M=1 inl /src/i.h:31 s=30\n"), "%s", raw);
	ck_assert_msg(strstr(raw, "hot /src/m.c:22 s=20(_Z3hotv)\n"), "%s", raw);
	ck_assert_msg(strstr(raw, "2: 0x7f0000001000 M=2 main /src/m.c:12 s=10\n"), "%s", raw);
	ck_assert_msg(strstr(raw, "1: 0x400000/0x402000/0x1000 /bin/prog abcdef01 [FN][FL][LN][IN]"),
		      "%s", raw);
	ck_assert_msg(strstr(raw, "2: 0x7f0000000000/0x7f0000002000/0x0 /lib/libx.so  [FN]"), "%s",
		      raw);
	free(raw);
	ps_buf_free(&b);
}
END_TEST

START_TEST(pprof_bad_location_or_mapping_is_einval)
{
	static const struct ps_pprof_line bad_line[] = { { 3, 1 } };
	static const struct ps_pprof_location bad_map[] = { { 1, 3, &ll_lines[2], 1 } };
	static const struct ps_pprof_location bad_fn[] = { { 1, 1, bad_line, 1 } };
	static const struct ps_pprof_location no_lines[] = { { 1, 1, NULL, 1 } };
	static const struct ps_pprof_mapping no_file[] = { { 0, 1, 0, NULL, NULL, 1, 0, 0, 0 } };
	static const char *const null_sys[] = { "main", NULL, "inl" };
	static const uint32_t stk[] = { 2 };
	static const int64_t v[] = { 1, 1 };
	static const struct ps_pprof_sample past_locs = { stk, 1, v, 0 };
	struct ps_buf b = PS_BUF_INIT(1 << 16);
	struct ps_pprof_desc d;

	d = lines_desc();
	d.locations = bad_map;                  /* mapping 3 of 2 */
	d.nlocations = 1;
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	d.locations = bad_fn;                   /* function index 3 of 3 */
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	d.locations = no_lines;
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	d = lines_desc();
	d.samples = &past_locs;                 /* location index 2 of 2 */
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	d = lines_desc();
	d.mappings = no_file;
	d.nmappings = 1;
	d.locations = &ll_locs[0];
	d.nlocations = 1;
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	d = lines_desc();
	d.func_system_names = null_sys;
	ck_assert_int_eq(ps_pprof_encode(&d, &b), -EINVAL);
	ck_assert_uint_eq(b.len, 0);
	ps_buf_free(&b);
}
END_TEST

/* ---- gzip ------------------------------------------------------------- */

/* Inflate a gzip member with zlib (windowBits 15 + 16: gzip only). */
static size_t
gunzip(const struct ps_buf *b, unsigned char *out, size_t cap)
{
	z_stream zs;
	size_t n;

	memset(&zs, 0, sizeof(zs));
	ck_assert_int_eq(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = b->data;
	zs.avail_in = (uInt)b->len;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	ck_assert_int_eq(inflate(&zs, Z_FINISH), Z_STREAM_END);
	ck_assert_uint_eq(zs.avail_in, 0);      /* nothing after the trailer */
	n = cap - zs.avail_out;
	inflateEnd(&zs);
	return n;
}

START_TEST(gzip_streamed_bytes_inflate_to_the_input)
{
	static unsigned char in[100000], back[100001];
	struct ps_buf one = PS_BUF_INIT(1 << 20), many = PS_BUF_INIT(1 << 20);
	struct ps_gzip g;
	size_t i, step;

	for (i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 7 + i / 100);
	ck_assert_int_eq(ps_gzip(in, sizeof(in), &one, 6), 0);
	ck_assert_uint_eq(gunzip(&one, back, sizeof(back)), sizeof(in));
	ck_assert_mem_eq(back, in, sizeof(in));
	/* Crumbs and blocks bigger than the stage, mixed. */
	ck_assert_int_eq(ps_gzip_begin(&g, &many, 1), 0);
	for (i = 0; i < sizeof(in); i += step) {
		step = (i / 1000) % 2 ? 1 : 9000;
		if (step > sizeof(in) - i)
			step = sizeof(in) - i;
		ck_assert_int_eq(ps_gzip_write(&g, in + i, step), 0);
	}
	ck_assert_int_eq(ps_gzip_end(&g), 0);
	ps_gzip_abort(&g);                       /* harmless after end */
	ck_assert_uint_eq(gunzip(&many, back, sizeof(back)), sizeof(in));
	ck_assert_mem_eq(back, in, sizeof(in));
	ps_buf_free(&one);
	ps_buf_free(&many);
}
END_TEST

START_TEST(gzip_over_cap_is_e2big_and_rolls_back)
{
	static unsigned char noise[50000];
	struct ps_buf b = PS_BUF_INIT(1000);
	uint32_t x = 12345;
	size_t i;

	for (i = 0; i < sizeof(noise); i++) {
		x = x * 1103515245u + 12345u;   /* incompressible enough */
		noise[i] = (unsigned char)(x >> 24);
	}
	ck_assert_int_eq(ps_buf_puts(&b, "head"), 0);
	ck_assert_int_eq(ps_gzip(noise, sizeof(noise), &b, 1), -E2BIG);
	ck_assert_uint_eq(b.len, 4);
	ck_assert_int_eq(ps_gzip("x", 1, &b, 42), -EINVAL);
	ck_assert_uint_eq(b.len, 4);
	ps_buf_free(&b);
}
END_TEST

START_TEST(gzip_empty_input_is_a_valid_member)
{
	struct ps_buf b = PS_BUF_INIT(1 << 10);
	unsigned char back[16];

	ck_assert_int_eq(ps_gzip(NULL, 0, &b, -1), 0);
	ck_assert_uint_ge(b.len, 18);           /* 10 header + 8 trailer */
	ck_assert_uint_eq(gunzip(&b, back, sizeof(back)), 0);
	ps_buf_free(&b);
}
END_TEST

/* ---- runner ----------------------------------------------------------- */

static Suite *
pprof_suite(void)
{
	Suite *s = suite_create("pprof");
	TCase *go = tcase_create("go_pprof");
	TCase *local = tcase_create("local");

	/* go tool pprof takes a while to start on a busy machine. */
	tcase_set_timeout(go, 240);
	tcase_add_test(go, pprof_cpu_profile_reads_back_with_go_pprof_raw);
	tcase_add_test(go, pprof_labels_are_on_every_sample);
	tcase_add_test(go, pprof_top_shows_flat_cpu_per_function);
	tcase_add_test(go, pprof_alloc_profile_has_four_types);
	tcase_add_test(go, pprof_many_functions_round_trip);
	tcase_add_test(go, pprof_zero_samples_give_a_valid_empty_profile);
	tcase_add_test(go, pprof_invalid_utf8_names_are_replaced);
	tcase_add_test(go, pprof_locations_carry_addresses_inlined_lines_and_mappings);
	suite_add_tcase(s, go);
	tcase_set_timeout(local, 60);
	tcase_add_test(local, pprof_string_table_starts_empty_and_times_are_set);
	tcase_add_test(local, pprof_string_table_is_deduplicated);
	tcase_add_test(local, pprof_all_zero_samples_are_left_out);
	tcase_add_test(local, pprof_utf8_fix_replaces_only_bad_bytes);
	tcase_add_test(local, pprof_over_cap_gives_e2big_and_keeps_buffer);
	tcase_add_test(local, pprof_bad_description_is_einval);
	tcase_add_test(local, pprof_bad_location_or_mapping_is_einval);
	tcase_add_test(local, gzip_streamed_bytes_inflate_to_the_input);
	tcase_add_test(local, gzip_over_cap_is_e2big_and_rolls_back);
	tcase_add_test(local, gzip_empty_input_is_a_valid_member);
	suite_add_tcase(s, local);
	return s;
}

int
main(void)
{
	SRunner *sr;
	char cmd[600];
	int failed;

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	/* go tool pprof wants a HOME and a place for its own files. */
	setenv("PPROF_TMPDIR", tmpdir, 1);
	setenv("HOME", tmpdir, 0);
	have_go = system("go version >/dev/null 2>&1") == 0;
	if (!have_go)
		fprintf(stderr, "check_pprof: `go` not found; "
			"the go tool pprof cases are skipped\n");
	sr = srunner_create(pprof_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "check_pprof: could not remove %s\n", tmpdir);
	return failed ? 1 : 0;
}
