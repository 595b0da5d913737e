/* Unit tests of configuration parsing: every variable, every bad value. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"

static const char *vars[32][2];
static int nvars;

static const char *
fake_getenv(const char *name)
{
	for (int i = 0; i < nvars; i++)
		if (!strcmp(vars[i][0], name))
			return vars[i][1];
	return NULL;
}

static void
set(const char *k, const char *v)
{
	vars[nvars][0] = k;
	vars[nvars][1] = v;
	nvars++;
}

/* Load with stderr captured; returns the number of bad values and puts
 * what was printed into out. */
static int
load(struct ps_config *c, char *out, size_t len)
{
	int p[2], saved, bad;
	ssize_t n;

	memset(c, 0, sizeof(*c));   /* loading does not clear (config.h) */
	ck_assert_int_eq(pipe(p), 0);
	saved = dup(2);
	dup2(p[1], 2);
	bad = ps_config_load(c, fake_getenv, "/usr/bin/my-prog");
	dup2(saved, 2);
	close(saved);
	close(p[1]);
	n = read(p[0], out, len - 1);
	out[n > 0 ? n : 0] = '\0';
	close(p[0]);
	nvars = 0;
	return bad;
}

START_TEST(config_defaults_when_nothing_is_set)
{
	struct ps_config c;
	char err[256];

	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(c.enabled, 1);
	ck_assert_uint_eq(c.sample_rate, 100);
	ck_assert_int_eq(c.cpu_enabled, 1);
	ck_assert_int_eq(c.alloc_enabled, 1);
	ck_assert_uint_eq(c.alloc_sample_bytes, 524288);
	ck_assert_int_eq(c.block_enabled, 1);
	ck_assert_int_eq(c.mutex_enabled, 1);
	ck_assert_uint_eq(c.block_rate_ns, 1000000);
	ck_assert_uint_eq(c.upload_interval_ns, 10000000000ull);
	ck_assert_uint_eq(c.flush_timeout_ns, 3000000000ull);
	ck_assert_uint_eq(c.stack_memory, 8u << 20);
	ck_assert_uint_eq(c.symbol_cache_size, 64u << 20);
	ck_assert_str_eq(c.symbol_cache_dir, "");  /* no HOME either */
	ck_assert_int_eq(c.log_level, PS_LOG_ERROR);
	ck_assert_str_eq(c.app_name, "my-prog");
	ck_assert_str_eq(c.output_dir, "");
	ck_assert_str_eq(c.server, "");
}
END_TEST

/* The XDG base directory rules: XDG_CACHE_HOME when absolute, else
 * ~/.cache; neither (a scrubbed environment): no symbol cache. */
START_TEST(config_symbol_cache_dir_follows_xdg)
{
	struct ps_config c;
	char err[256];

	set("XDG_CACHE_HOME", "/var/cache/u");
	set("HOME", "/home/u");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.symbol_cache_dir, "/var/cache/u/pyroshim");
	set("XDG_CACHE_HOME", "relative");
	set("HOME", "/home/u");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.symbol_cache_dir, "/home/u/.cache/pyroshim");
	set("HOME", "");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.symbol_cache_dir, "");
	ck_assert_str_eq(err, "");
}
END_TEST

/* DEBUGINFOD_URLS: anything but blanks names a server. */
START_TEST(config_debuginfod_when_urls_are_set)
{
	static const struct { const char *v; int on; } cases[] = {
		{ NULL, 0 }, { "", 0 }, { " \t ", 0 }, { "https://debuginfod.debian.net", 1 },
		{ " x", 1 },
	};
	struct ps_config c;
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		set("DEBUGINFOD_URLS", cases[i].v);
		ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
		ck_assert_msg(c.debuginfod == cases[i].on, "DEBUGINFOD_URLS=%s", cases[i].v);
	}
}
END_TEST

/* PYROSHIM_HELPER: a helper's name as worker.c makes it, else one line and
 * none (the process then leads a tree of its own). */
START_TEST(config_tree_helper_only_when_it_is_a_helpers_name)
{
	static const struct { const char *v; int ok; } cases[] = {
		{ "pyroshim-123-0123456789abcdef", 1 }, { "pyroshim-1-ffffffffffffffff", 1 },
		{ "pyroshim-123-0123456789abcde", 0 }, { "pyroshim-123-0123456789abcdef0", 0 },
		{ "pyroshim--0123456789abcdef", 0 }, { "pyroshim-12x-0123456789abcdef", 0 },
		{ "pyroshim-123-0123456789ABCDEF", 0 }, { "pyroshim-", 0 }, { "pyro", 0 },
		{ "", 1 } /* unset, as every empty variable */, { "pyroshim-12345678901-0123456789abcdef", 0 }, { "../etc/passwd", 0 },
		/* where the helper holds the bell */
		{ "pyroshim-123-0123456789abcdef-456-7", 1 },
		{ "pyroshim-4294967295-0123456789abcdef-4294967295-2147483647", 1 },
		{ "pyroshim-123-0123456789abcdef-456", 0 }, { "pyroshim-123-0123456789abcdef-", 0 },
		{ "pyroshim-123-0123456789abcdef-456-", 0 }, { "pyroshim-123-0123456789abcdef--7", 0 },
		{ "pyroshim-123-0123456789abcdef-456-7-8", 0 },
		{ "pyroshim-123-0123456789abcdef-456-7x", 0 },
		{ "pyroshim-123-0123456789abcdef-45678901234-7", 0 },
	};
	struct ps_config c;
	char err[256], want[256];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		set("PYROSHIM_HELPER", cases[i].v);
		ck_assert_int_eq(load(&c, err, sizeof(err)), !cases[i].ok);
		ck_assert_str_eq(c.tree_helper, cases[i].ok ? cases[i].v : "");
		snprintf(want, sizeof(want), "pyroshim: PYROSHIM_HELPER=%s: not a helper's name; "
			 "starting a helper of its own\n", cases[i].v);
		ck_assert_str_eq(err, cases[i].ok ? "" : want);
	}
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.tree_helper, "");
}
END_TEST

START_TEST(config_reads_every_valid_value)
{
	struct ps_config c;
	char err[256];

	set("PYROSCOPE_ENABLED", "yes");
	set("PYROSCOPE_SAMPLE_RATE", "1000");
	set("PYROSCOPE_PROFILING_CPU_ENABLED", "false");
	set("PYROSCOPE_PROFILING_ALLOC_ENABLED", "0");
	set("PYROSCOPE_ALLOC_SAMPLE_BYTES", "64KiB");
	set("PYROSCOPE_PROFILING_BLOCK_ENABLED", "false");
	set("PYROSCOPE_PROFILING_MUTEX_ENABLED", "no");
	set("PYROSCOPE_BLOCK_RATE", "250us");
	set("PYROSCOPE_STACK_MEMORY", "16M");
	set("PYROSCOPE_SYMBOL_CACHE_SIZE", "0");
	set("PYROSCOPE_UPLOAD_INTERVAL", "500ms");
	set("PYROSCOPE_FLUSH_TIMEOUT", "2");
	set("PYROSCOPE_OUTPUT_DIR", "/tmp/x");
	set("PYROSCOPE_SERVER_ADDRESS", "http://localhost:4040");
	set("PYROSCOPE_LOG_LEVEL", "DEBUG");
	set("PYROSCOPE_LOG_FILE", "/tmp/log");
	set("PYROSCOPE_APPLICATION_NAME", "shop.api");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(c.sample_rate, 1000);
	ck_assert_int_eq(c.cpu_enabled, 0);
	ck_assert_int_eq(c.alloc_enabled, 0);
	ck_assert_uint_eq(c.alloc_sample_bytes, 65536);
	ck_assert_int_eq(c.block_enabled, 0);
	ck_assert_int_eq(c.mutex_enabled, 0);
	ck_assert_uint_eq(c.block_rate_ns, 250000);
	ck_assert_uint_eq(c.stack_memory, 16u << 20);
	ck_assert_uint_eq(c.symbol_cache_size, 0);
	ck_assert_uint_eq(c.upload_interval_ns, 500000000ull);
	ck_assert_uint_eq(c.flush_timeout_ns, 2000000000ull);
	ck_assert_str_eq(c.output_dir, "/tmp/x");
	ck_assert_str_eq(c.server, "http://localhost:4040");
	ck_assert_int_eq(c.log_level, PS_LOG_DEBUG);
	ck_assert_str_eq(c.log_file, "/tmp/log");
	ck_assert_str_eq(c.app_name, "shop.api");
}
END_TEST

/* Each bad value: one line naming the variable, the value and the default,
 * and the default is used. */
static const struct {
	const char *var, *value, *expect;
} bad[] = {
	{ "PYROSCOPE_ENABLED", "maybe", "pyroshim: PYROSCOPE_ENABLED=maybe: expected true or false; using true\n" },
	{ "PYROSCOPE_BLOCK_RATE", "500ns", "pyroshim: PYROSCOPE_BLOCK_RATE=500ns: expected a duration from 1us to 10s such as 100us or 1ms; using 1ms\n" },
	{ "PYROSCOPE_BLOCK_RATE", "11s", "using 1ms\n" },
	{ "PYROSCOPE_SAMPLE_RATE", "0", "pyroshim: PYROSCOPE_SAMPLE_RATE=0: expected a whole number of Hz from 1 to 1000; using 100\n" },
	{ "PYROSCOPE_SAMPLE_RATE", "1001", "using 100\n" },
	{ "PYROSCOPE_SAMPLE_RATE", "12x", "using 100\n" },
	{ "PYROSCOPE_SAMPLE_RATE", "-5", "using 100\n" },
	{ "PYROSCOPE_SAMPLE_RATE", "99999999999999999999999", "using 100\n" },
	{ "PYROSCOPE_PROFILING_CPU_ENABLED", "2", "using true\n" },
	{ "PYROSCOPE_PROFILING_ALLOC_ENABLED", "nope", "using true\n" },
	{ "PYROSCOPE_ALLOC_SAMPLE_BYTES", "1TB", "using 524288\n" },
	{ "PYROSCOPE_ALLOC_SAMPLE_BYTES", "2048GiB", "using 524288\n" },
	{ "PYROSCOPE_STACK_MEMORY", "1k", "using 8MiB\n" },
	{ "PYROSCOPE_SYMBOL_CACHE_SIZE", "lots", "pyroshim: PYROSCOPE_SYMBOL_CACHE_SIZE=lots: expected a size such as 64MiB, or 0 for no symbol cache; using 64MiB\n" },
	{ "PYROSCOPE_UPLOAD_INTERVAL", "10 s", "using 10s\n" },
	{ "PYROSCOPE_UPLOAD_INTERVAL", "0s", "using 10s\n" },
	{ "PYROSCOPE_UPLOAD_INTERVAL", "50ms", "using 10s\n" },
	{ "PYROSCOPE_UPLOAD_INTERVAL", "1d", "using 10s\n" },
	{ "PYROSCOPE_FLUSH_TIMEOUT", "forever", "using 3s\n" },
	{ "PYROSCOPE_LOG_LEVEL", "verbose", "pyroshim: PYROSCOPE_LOG_LEVEL=verbose: expected error, warn, info or debug; using error\n" },
	{ "PYROSCOPE_LOG_LEVEL", "de\nbug", "PYROSCOPE_LOG_LEVEL=de?bug: " },
	{ "PYROSCOPE_CPU_TIMER", "posix", "pyroshim: PYROSCOPE_CPU_TIMER=posix: expected thread or process; using thread\n" },
	{ "PYROSCOPE_INGEST_FORMAT", "json", "expected pprof or folded; using pprof\n" },
	{ "PYROSCOPE_UPLOAD_API", "grpc", "expected ingest or push; using ingest\n" },
	{ "PYROSCOPE_TLS_INSECURE", "sure", "using false\n" },
	{ "PYROSCOPE_TRACE_CORRELATION", "2", "using false\n" },
};

START_TEST(config_bad_value_prints_one_line_and_uses_default)
{
	struct ps_config c;
	char err[512];
	const char *nl;

	set(bad[_i].var, bad[_i].value);
	ck_assert_int_eq(load(&c, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, bad[_i].expect), "got: %s", err);
	ck_assert_msg(!strncmp(err, "pyroshim: ", 10), "got: %s", err);
	nl = strchr(err, '\n');
	ck_assert_ptr_nonnull(nl);
	ck_assert_str_eq(nl + 1, "");  /* exactly one line */
	ck_assert_uint_eq(c.sample_rate, 100);
	ck_assert_int_eq(c.enabled, 1);
	ck_assert_int_eq(c.cpu_enabled, 1);
	ck_assert_int_eq(c.alloc_enabled, 1);
	ck_assert_uint_eq(c.alloc_sample_bytes, 524288);
	ck_assert_uint_eq(c.upload_interval_ns, 10000000000ull);
	ck_assert_uint_eq(c.flush_timeout_ns, 3000000000ull);
	ck_assert_int_eq(c.log_level, PS_LOG_ERROR);
}
END_TEST

START_TEST(config_secret_values_are_never_printed)
{
	struct ps_config c;
	char err[512], big[400];

	memset(big, 's', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	set("PYROSCOPE_BASIC_AUTH_PASSWORD", big);
	ck_assert_int_eq(load(&c, err, sizeof(err)), 1);
	ck_assert_ptr_null(strstr(err, "sss"));
	ck_assert_ptr_nonnull(strstr(err, "PYROSCOPE_BASIC_AUTH_PASSWORD=(399 bytes, not shown)"));
	ck_assert_str_eq(c.auth_password, "");
}
END_TEST

START_TEST(config_reads_upload_and_trace_settings)
{
	struct ps_config c;
	char err[256];

	set("PYROSCOPE_LABELS", "a=1");
	set("PYROSCOPE_TAGS", "b=2");
	set("PYROSCOPE_CPU_TIMER", "process");
	set("PYROSCOPE_INGEST_FORMAT", "folded");
	set("PYROSCOPE_UPLOAD_API", "PUSH");
	set("PYROSCOPE_TRACE_CORRELATION", "yes");
	set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/");
	set("OTEL_TRACES_EXPORTER", "none");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.tags, "b=2");  /* PYROSCOPE_TAGS wins over its alias */
	ck_assert_int_eq(c.cpu_timer, 1);
	ck_assert_int_eq(c.ingest_folded, 1);
	ck_assert_int_eq(c.upload_push, 1);
	ck_assert_int_eq(c.trace_correlation, 1);
	ck_assert_str_eq(c.otlp_endpoint, "http://collector:4318/v1/traces");
	ck_assert_int_eq(c.otlp_disabled, 1);
	set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1");
	set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2/t");
	set("PYROSCOPE_LABELS", "a=1");
	load(&c, err, sizeof(err));
	ck_assert_str_eq(c.otlp_endpoint, "http://b:2/t");  /* used as it is */
	ck_assert_str_eq(c.tags, "a=1");
	ck_assert_int_eq(c.cpu_timer, 0);
}
END_TEST

START_TEST(config_long_value_is_shortened_in_the_message)
{
	struct ps_config c;
	char err[512], big[400];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	set("PYROSCOPE_SAMPLE_RATE", big);
	ck_assert_int_eq(load(&c, err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "xxx...: expected"));
	ck_assert_uint_lt(strlen(err), 250);
}
END_TEST

START_TEST(config_empty_value_means_unset)
{
	struct ps_config c;
	char err[256];

	set("PYROSCOPE_SAMPLE_RATE", "");
	set("PYROSCOPE_SERVER_ADDRESS", "");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(c.sample_rate, 100);
}
END_TEST

START_TEST(config_bad_tags_fall_back_to_no_tags_not_to_the_alias)
{
	struct ps_config c;
	char err[256], big[1100];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[0] = 'k';
	big[1] = '=';
	set("PYROSCOPE_LABELS", "from=labels");
	set("PYROSCOPE_TAGS", big);
	ck_assert_int_eq(load(&c, err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "PYROSCOPE_TAGS=k=xxx"));
	ck_assert_ptr_nonnull(strstr(err, "; using no tags\n"));
	ck_assert_str_eq(c.tags, "");
}
END_TEST

START_TEST(config_disabled_reads_and_prints_nothing_else)
{
	struct ps_config c;
	char err[256];

	set("PYROSCOPE_ENABLED", "false");
	set("PYROSCOPE_SAMPLE_RATE", "0");
	set("PYROSHIM_HELPER", "x");
	set("PYROSCOPE_LOG_LEVEL", "loud");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(c.enabled, 0);
	/* A bad PYROSCOPE_ENABLED is a mistake like any other: on. */
	set("PYROSCOPE_ENABLED", "nope");
	set("PYROSCOPE_SAMPLE_RATE", "0");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 2);
	ck_assert_int_eq(c.enabled, 1);
	ck_assert_ptr_nonnull(strstr(err, "PYROSCOPE_ENABLED=nope"));
	ck_assert_ptr_nonnull(strstr(err, "PYROSCOPE_SAMPLE_RATE=0"));
}
END_TEST

/* A copy into zero bytes equals the original, string by string; a copy
 * over an earlier one clears the strings no longer set; a mask from the
 * writer limits what is read; a string without its end in src still ends
 * in dst. */
START_TEST(config_copy_is_the_configuration_and_writes_only_its_strings)
{
	static struct ps_config c, d, e;
	char err[256];
	uint32_t m, m2;

	set("PYROSCOPE_OUTPUT_DIR", "/tmp/out");
	set("PYROSCOPE_SERVER_ADDRESS", "http://localhost:4040");
	set("PYROSCOPE_TAGS", "a=b");
	set("PYROSCOPE_SAMPLE_RATE", "250");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	memset(&d, 0, sizeof(d));
	m = ps_config_copy(&d, &c, PS_CONFIG_ALL, 0);
	ck_assert_uint_eq(d.sample_rate, 250);
	ck_assert_str_eq(d.output_dir, "/tmp/out");
	ck_assert_str_eq(d.server, "http://localhost:4040");
	ck_assert_str_eq(d.tags, "a=b");
	ck_assert_str_eq(d.app_name, c.app_name);
	ck_assert_str_eq(d.symbol_cache_dir, c.symbol_cache_dir);
	ck_assert_int_eq(memcmp(&d, &c, sizeof(c)), 0);
	/* Over the copy: the server and tags unset, the directory shorter. */
	c.server[0] = c.tags[0] = '\0';
	strcpy(c.output_dir, "/t");
	m2 = ps_config_copy(&d, &c, PS_CONFIG_ALL, m);
	ck_assert_uint_ne(m2, m);
	ck_assert_str_eq(d.server, "");
	ck_assert_str_eq(d.tags, "");
	ck_assert_str_eq(d.output_dir, "/t");
	/* What the mask does not name is not read. */
	memset(&e, 0, sizeof(e));
	(void)ps_config_copy(&e, &d, 0, 0);
	ck_assert_str_eq(e.output_dir, "");
	ck_assert_uint_eq(e.sample_rate, 250);
	/* An unterminated string ends within its member. */
	memset(c.tenant, 'x', sizeof(c.tenant));
	memset(&e, 0, sizeof(e));
	(void)ps_config_copy(&e, &c, PS_CONFIG_ALL, 0);
	ck_assert_uint_eq(strlen(e.tenant), sizeof(e.tenant) - 1);
}
END_TEST

START_TEST(config_app_name_falls_back_to_otel_then_executable)
{
	struct ps_config c;
	char err[256];

	set("OTEL_SERVICE_NAME", "checkout");
	load(&c, err, sizeof(err));
	ck_assert_str_eq(c.app_name, "checkout");
	set("PYROSCOPE_APPLICATION_NAME", "a/b");
	set("OTEL_SERVICE_NAME", "checkout");
	load(&c, err, sizeof(err));
	ck_assert_str_eq(c.app_name, "a_b");  /* safe in a file name */
}
END_TEST

START_TEST(parsers_accept_documented_forms)
{
	uint64_t v;
	int b, l;

	ck_assert_int_eq(ps_parse_duration("1m", &v), 0);
	ck_assert_uint_eq(v, 60000000000ull);
	ck_assert_int_eq(ps_parse_duration("15", &v), 0);
	ck_assert_uint_eq(v, 15000000000ull);
	ck_assert_int_eq(ps_parse_duration("", &v), -EINVAL);
	ck_assert_int_eq(ps_parse_duration("ms", &v), -EINVAL);
	ck_assert_int_eq(ps_parse_duration("100us", &v), 0);
	ck_assert_uint_eq(v, 100000);
	ck_assert_int_eq(ps_parse_duration("7ns", &v), 0);
	ck_assert_uint_eq(v, 7);
	ck_assert_int_eq(ps_parse_size("512KiB", &v), 0);
	ck_assert_uint_eq(v, 524288);
	ck_assert_int_eq(ps_parse_size("1G", &v), 0);
	ck_assert_uint_eq(v, 1u << 30);
	ck_assert_int_eq(ps_parse_size("1.5M", &v), -EINVAL);
	ck_assert_int_eq(ps_parse_bool("ON", &b), 0);
	ck_assert_int_eq(b, 1);
	ck_assert_int_eq(ps_parse_bool("", &b), -EINVAL);
	ck_assert_int_eq(ps_parse_level("warning", &l), 0);
	ck_assert_int_eq(l, PS_LOG_WARN);
	ck_assert_int_eq(ps_parse_uint("007", 1, 10, &v), 0);
	ck_assert_uint_eq(v, 7);
}
END_TEST

START_TEST(cpu_signal_accepts_rt_numbers_and_refuses_glibcs)
{
	int sig = 0;

	ck_assert_int_eq(ps_parse_signal("61", &sig), 0);
	ck_assert_int_eq(sig, 61);
	ck_assert_int_eq(ps_parse_signal("SIGRTMIN+5", &sig), 0);
	ck_assert_int_eq(sig, 39);
	ck_assert_int_eq(ps_parse_signal("rtmax-3", &sig), 0);
	ck_assert_int_eq(sig, 61);
	ck_assert_int_eq(ps_parse_signal("SIGRTMAX", &sig), 0);
	ck_assert_int_eq(sig, 64);
	sig = 0;
	/* glibc's own (32-34), below the range, past it, and junk. */
	ck_assert_int_eq(ps_parse_signal("34", &sig), -EINVAL);
	ck_assert_int_eq(ps_parse_signal("SIGRTMIN", &sig), -EINVAL);
	ck_assert_int_eq(ps_parse_signal("SIGRTMIN+0", &sig), -EINVAL);
	ck_assert_int_eq(ps_parse_signal("27", &sig), -EINVAL);
	ck_assert_int_eq(ps_parse_signal("65", &sig), -EINVAL);
	ck_assert_int_eq(ps_parse_signal("SIGRTMAX+1", &sig), -EINVAL);
	ck_assert_int_eq(ps_parse_signal("SIGRTMIN-1", &sig), -EINVAL);
	ck_assert_int_eq(ps_parse_signal("SIGPROF", &sig), -EINVAL);
	ck_assert_int_eq(sig, 0);
}
END_TEST

START_TEST(log_is_silent_below_its_level)
{
	int p[2];
	char buf[256];
	ssize_t n;

	ck_assert_int_eq(pipe(p), 0);
	ps_log_setup(PS_LOG_ERROR, p[1]);
	ps_warn("hidden %d", 1);
	ps_log(PS_LOG_ERROR, "shown %d", 2);
	ps_log_setup(PS_LOG_DEBUG, p[1]);
	ps_debug("also shown");
	close(p[1]);
	n = read(p[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(p[0]);
	ck_assert_ptr_null(strstr(buf, "hidden"));
	ck_assert_ptr_nonnull(strstr(buf, ": error: shown 2\n"));
	ck_assert_ptr_nonnull(strstr(buf, ": debug: also shown\n"));
	ps_log_setup(PS_LOG_ERROR, -1);
}
END_TEST

/* What was written to the pipe p since the last look. */
static void
drain(int p, char *buf, size_t len)
{
	ssize_t n = read(p, buf, len - 1);

	buf[n > 0 ? n : 0] = '\0';
}

START_TEST(log_config_lines_said_by_the_tree_are_not_said_again)
{
	int p[2], q[2];
	char buf[512];
	uint64_t said[8], again[8];

	ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
	ck_assert_int_eq(pipe2(q, O_NONBLOCK), 0);
	ps_log_setup(PS_LOG_ERROR, p[1]);
	ps_log_config_hold();
	ps_log_config("A=%d: bad", 1);
	ps_log(PS_LOG_ERROR, "not a configuration line");   /* never held */
	ps_log_config("B=%d: bad", 2);
	ck_assert_uint_eq(ps_log_config_release(NULL, 0, said, 8), 2);
	drain(p[0], buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, "not a configuration line\npyroshim: A=1: bad\n"
					 "pyroshim: B=2: bad\n"));
	/* A child with the same mistakes, to the same file: nothing. */
	ps_log_config_hold();
	ps_log_config("B=%d: bad", 2);
	ps_log_config("A=%d: bad", 1);
	ck_assert_uint_eq(ps_log_config_release(said, 2, again, 8), 0);
	drain(p[0], buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	/* One more of its own: that one only. */
	ps_log_config_hold();
	ps_log_config("A=%d: bad", 1);
	ps_log_config("C=%d: bad", 3);
	ck_assert_uint_eq(ps_log_config_release(said, 2, again, 8), 1);
	drain(p[0], buf, sizeof(buf));
	ck_assert_str_eq(buf, "pyroshim: C=3: bad\n");
	/* The same line to another file is said there. */
	ps_log_setup(PS_LOG_ERROR, q[1]);
	ps_log_config_hold();
	ps_log_config("A=%d: bad", 1);
	ck_assert_uint_eq(ps_log_config_release(said, 2, again, 8), 1);
	drain(q[0], buf, sizeof(buf));
	ck_assert_str_eq(buf, "pyroshim: A=1: bad\n");
	ps_log_setup(PS_LOG_ERROR, -1);
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
}
END_TEST

START_TEST(config_said_reads_the_digests_up_to_the_first_that_is_not_one)
{
	struct ps_config c;
	char err[256];

	set("PYROSHIM_SAID", "00000000000000ff,0123456789abcdef,xyz,0000000000000001");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(c.nconfig_said, 2);
	ck_assert_uint_eq(c.config_said[0], 0xff);
	ck_assert_uint_eq(c.config_said[1], 0x0123456789abcdefull);
	set("PYROSHIM_SAID", "0123456789ABCDEF");
	load(&c, err, sizeof(err));
	ck_assert_uint_eq(c.nconfig_said, 0);
}
END_TEST

START_TEST(config_tree_pprof_is_a_digest_or_none)
{
	struct ps_config c;
	char err[256];

	set("PYROSHIM_PPROF", "0123456789abcdef");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(c.tree_pprof, 0x0123456789abcdefull);
	/* Ours: anything else is none, silently. */
	set("PYROSHIM_PPROF", "0123456789ABCDEF");
	ck_assert_int_eq(load(&c, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(c.tree_pprof, 0);
	set("PYROSHIM_PPROF", "0123456789abcdef0");
	load(&c, err, sizeof(err));
	ck_assert_uint_eq(c.tree_pprof, 0);
	/* The digest of an address is never none, and tells addresses apart. */
	ck_assert_uint_ne(ps_config_digest("127.0.0.1:6060"), 0);
	ck_assert_uint_ne(ps_config_digest("127.0.0.1:6060"), ps_config_digest("127.0.0.1:6061"));
	ck_assert_uint_eq(ps_config_digest("127.0.0.1:6060"), ps_config_digest("127.0.0.1:6060"));
}
END_TEST

START_TEST(env_scan_finds_what_getenv_would)
{
	static char *envp[] = {
		"PATH=/bin", "PYROSCOPE_TAGS=a=1", "HOMEX=1", "HOME=/h", "PYROSCOPE_TAGS=second",
		"PYROSCOPE_NOVALUE", "", "OTEL_SERVICE_NAME=", "TRACESTATE=k=v", NULL
	};
	static char names[60][32], *many[61];
	struct ps_env e;
	int i;

	ps_env_scan(&e, envp);
	/* The first definition, its value whole. */
	ck_assert_str_eq(ps_env_get(&e, "PYROSCOPE_TAGS"), "a=1");
	/* A name, not a prefix of one. */
	ck_assert_str_eq(ps_env_get(&e, "HOME"), "/h");
	ck_assert_str_eq(ps_env_get(&e, "OTEL_SERVICE_NAME"), "");
	ck_assert_str_eq(ps_env_get(&e, "TRACESTATE"), "k=v");
	ck_assert_ptr_null(ps_env_get(&e, "PYROSCOPE_NOVALUE"));
	ck_assert_ptr_null(ps_env_get(&e, "PYROSCOPE_LABELS"));
	ck_assert_ptr_null(ps_env_get(&e, "XDG_CACHE_HOME"));
	/* A name it does not keep is getenv's. */
	ck_assert_int_eq(setenv("PS_CHECK_OTHER", "x", 1), 0);
	ck_assert_str_eq(ps_env_get(&e, "PS_CHECK_OTHER"), "x");
	/* More of ours than it keeps: getenv for all. */
	for (i = 0; i < 60; i++) {
		snprintf(names[i], sizeof(names[i]), "PYROSCOPE_V%d=scanned", i);
		many[i] = names[i];
	}
	many[60] = NULL;
	ps_env_scan(&e, many);
	ck_assert_int_eq(e.n, -1);
	ck_assert_int_eq(setenv("PYROSCOPE_V1", "real", 1), 0);
	ck_assert_str_eq(ps_env_get(&e, "PYROSCOPE_V1"), "real");
	ck_assert_ptr_null(ps_env_get(&e, "PYROSCOPE_V2"));
	unsetenv("PS_CHECK_OTHER");
	unsetenv("PYROSCOPE_V1");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, config_defaults_when_nothing_is_set);
	tcase_add_test(tc, config_reads_every_valid_value);
	tcase_add_test(tc, config_symbol_cache_dir_follows_xdg);
	tcase_add_test(tc, config_debuginfod_when_urls_are_set);
	tcase_add_test(tc, config_tree_helper_only_when_it_is_a_helpers_name);
	tcase_add_loop_test(tc, config_bad_value_prints_one_line_and_uses_default, 0,
			    (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, config_long_value_is_shortened_in_the_message);
	tcase_add_test(tc, config_secret_values_are_never_printed);
	tcase_add_test(tc, config_reads_upload_and_trace_settings);
	tcase_add_test(tc, config_empty_value_means_unset);
	tcase_add_test(tc, config_bad_tags_fall_back_to_no_tags_not_to_the_alias);
	tcase_add_test(tc, config_disabled_reads_and_prints_nothing_else);
	tcase_add_test(tc, config_app_name_falls_back_to_otel_then_executable);
	tcase_add_test(tc, config_copy_is_the_configuration_and_writes_only_its_strings);
	tcase_add_test(tc, parsers_accept_documented_forms);
	tcase_add_test(tc, cpu_signal_accepts_rt_numbers_and_refuses_glibcs);
	tcase_add_test(tc, log_is_silent_below_its_level);
	tcase_add_test(tc, log_config_lines_said_by_the_tree_are_not_said_again);
	tcase_add_test(tc, config_said_reads_the_digests_up_to_the_first_that_is_not_one);
	tcase_add_test(tc, config_tree_pprof_is_a_digest_or_none);
	tcase_add_test(tc, env_scan_finds_what_getenv_would);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
