/* config.c -- parse the environment into struct ps_config.  See config.h.
 *
 * Design: each variable is described once by a row of `vars` below (name,
 * kind, limits, where to store it, how to describe the default), so adding a
 * variable is one line and every variable gets the same error handling.
 */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/text.h"

static int
all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

int
ps_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !all_digits(s) || strlen(s) > 19)
		return -EINVAL;
	for (; *s; s++)
		v = v * 10 + (uint64_t)(*s - '0');
	if (v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Where s is in words[0..n), ignoring case; -1 if nowhere (or s NULL). */
static int
word_index(const char *s, const char *const *words, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		if (!strcasecmp(s, words[i]))
			return (int)i;
	return -1;
}

int
ps_parse_bool(const char *s, int *out)
{
	/* false, true, false, true, ... */
	static const char *const words[] = { "0", "1", "false", "true", "no", "yes",
					     "off", "on" };
	int i = word_index(s, words, PS_ARRAY_LEN(words));

	if (i < 0)
		return -EINVAL;
	*out = i % 2;
	return 0;
}

/* Split "123unit" into a number and a suffix; the number must be present. */
static int
split_number(const char *s, uint64_t *num, const char **suffix)
{
	uint64_t v = 0;
	int n = 0;

	while (isdigit((unsigned char)*s)) {
		if (++n > 15)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s++ - '0');
	}
	if (n == 0)
		return -EINVAL;
	*num = v;
	*suffix = s;
	return 0;
}

struct unit {
	const char *name;
	uint64_t mul;
};

/* "123unit" with unit one of units[0..n): the number times its multiplier,
 * or -EINVAL (no number, an unknown unit, an overflow). */
static int
scaled(const char *s, const struct unit *units, size_t n, uint64_t *out)
{
	const char *suffix;
	uint64_t v;

	if (!s || split_number(s, &v, &suffix))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(suffix, units[i].name))
			continue;
		if (v > UINT64_MAX / units[i].mul)
			return -EINVAL;
		*out = v * units[i].mul;
		return 0;
	}
	return -EINVAL;
}

int
ps_parse_duration(const char *s, uint64_t *out_ns)
{
	static const struct unit units[] = {
		{ "", 1000000000ull }, { "ns", 1ull }, { "us", 1000ull }, { "ms", 1000000ull },
		{ "s", 1000000000ull }, { "m", 60000000000ull }, { "h", 3600000000000ull },
	};
	uint64_t v;

	if (scaled(s, units, PS_ARRAY_LEN(units), &v) || v == 0)
		return -EINVAL;
	*out_ns = v;
	return 0;
}

int
ps_parse_size(const char *s, uint64_t *out)
{
	static const struct unit units[] = {
		{ "", 1 }, { "k", 1ull << 10 }, { "K", 1ull << 10 }, { "KiB", 1ull << 10 },
		{ "M", 1ull << 20 }, { "MiB", 1ull << 20 }, { "G", 1ull << 30 },
		{ "GiB", 1ull << 30 },
	};

	return scaled(s, units, PS_ARRAY_LEN(units), out);
}

int
ps_parse_level(const char *s, int *out)
{
	/* Indexed by PS_LOG_*, and "warning" for warn. */
	static const char *const names[] = { "error", "warn", "info", "debug", "warning" };
	int i = word_index(s, names, PS_ARRAY_LEN(names));

	if (i < 0)
		return -EINVAL;
	*out = i == 4 ? PS_LOG_WARN : i;
	return 0;
}

int
ps_parse_signal(const char *s, int *out)
{
	uint64_t n;
	int base = 0, sign = 1;

	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	if (!strncasecmp(s, "RTMIN", 5)) {
		base = 34;
		s += 5;
	} else if (!strncasecmp(s, "RTMAX", 5)) {
		base = 64;
		sign = -1;
		s += 5;
	}
	if (base && !*s) {
		n = 0;
	} else if (base) {
		if (*s != (sign > 0 ? '+' : '-') || ps_parse_uint(s + 1, 0, 64, &n))
			return -EINVAL;
	} else if (ps_parse_uint(s, 0, 64, &n)) {
		return -EINVAL;
	}
	n = base ? (uint64_t)(base + sign * (int)n) : n;
	if (n < 35 || n > 64)
		return -EINVAL;
	*out = (int)n;
	return 0;
}

enum kind { K_BOOL, K_UINT, K_DURATION, K_SIZE, K_LEVEL, K_STR, K_URL, K_PATH, K_SECRET,
	     K_FORMAT, K_TIMER, K_SIGNAL, K_API };

struct var {
	const char *name;
	enum kind kind;
	size_t off;          /* offset of the field in struct ps_config */
	uint64_t lo, hi;     /* accepted range for numbers */
	const char *why;     /* what a valid value looks like */
	const char *dflt;    /* the default, as printed */
};

#define OFF(f) offsetof(struct ps_config, f)
/* Strings are stored in char arrays of the field's own size (in `lo`). */
#define STR(f) OFF(f), sizeof(((struct ps_config *)0)->f), 0
#define NS(s) ((uint64_t)(s) * 1000000000ull)

static const struct var vars[] = {
	{ "PYROSCOPE_ENABLED", K_BOOL, OFF(enabled), 0, 1, "expected true or false", "true" },
	{ "PYROSCOPE_SAMPLE_RATE", K_UINT, OFF(sample_rate), 1, 1000,
	  "expected a whole number of Hz from 1 to 1000", "100" },
	{ "PYROSCOPE_PROFILING_CPU_ENABLED", K_BOOL, OFF(cpu_enabled), 0, 1,
	  "expected true or false", "true" },
	{ "PYROSCOPE_CPU_TIMER", K_TIMER, OFF(cpu_timer), 0, 1, "expected thread or process",
	  "thread" },
	{ "PYROSCOPE_CPU_SIGNAL", K_SIGNAL, OFF(cpu_signal), 0, 0,
	  "expected a real-time signal from 35 to 64, or SIGRTMIN+n / SIGRTMAX-n", "61 (SIGRTMAX-3)" },
	{ "PYROSCOPE_PROFILING_ALLOC_ENABLED", K_BOOL, OFF(alloc_enabled), 0, 1,
	  "expected true or false", "true" },
	{ "PYROSCOPE_ALLOC_SAMPLE_BYTES", K_SIZE, OFF(alloc_sample_bytes), 0, 1ull << 40,
	  "expected a size in bytes such as 524288 or 512KiB", "524288" },
	{ "PYROSCOPE_PROFILING_BLOCK_ENABLED", K_BOOL, OFF(block_enabled), 0, 1,
	  "expected true or false", "true" },
	{ "PYROSCOPE_PROFILING_MUTEX_ENABLED", K_BOOL, OFF(mutex_enabled), 0, 1,
	  "expected true or false", "true" },
	{ "PYROSCOPE_BLOCK_RATE", K_DURATION, OFF(block_rate_ns), 1000, NS(10),
	  "expected a duration from 1us to 10s such as 100us or 1ms", "1ms" },
	{ "PYROSCOPE_STACK_MEMORY", K_SIZE, OFF(stack_memory), PS_STACK_MEMORY_MIN, 1ull << 30,
	  "expected a size from 256KiB to 1GiB such as 8MiB", "8MiB" },
	{ "PYROSCOPE_DWARF_MEMORY", K_SIZE, OFF(dwarf_memory), 0, 1ull << 40,
	  "expected a size such as 256MiB, or 0 for function names only", "256MiB" },
	{ "PYROSCOPE_SYMBOL_CACHE_SIZE", K_SIZE, OFF(symbol_cache_size), 0, 1ull << 40,
	  "expected a size such as 64MiB, or 0 for no symbol cache", "64MiB" },
	{ "PYROSCOPE_FOLDED_LINES", K_BOOL, OFF(folded_lines), 0, 1, "expected true or false",
	  "false" },
	{ "PYROSCOPE_UPLOAD_INTERVAL", K_DURATION, OFF(upload_interval_ns), NS(1) / 10, NS(3600),
	  "expected a duration from 100ms to 1h such as 500ms, 10s or 1m", "10s" },
	{ "PYROSCOPE_FLUSH_TIMEOUT", K_DURATION, OFF(flush_timeout_ns), NS(1) / 10, NS(600),
	  "expected a duration from 100ms to 10m such as 3s", "3s" },
	{ "PYROSCOPE_OUTPUT_DIR", K_PATH, OFF(output_dir), 0, 0,
	  "expected a directory path", "./pyroshim-profiles" },
	{ "PYROSCOPE_SERVER_ADDRESS", K_URL, STR(server),
	  "expected a URL such as http://localhost:4040", "local files only" },
	{ "PYROSCOPE_LOG_LEVEL", K_LEVEL, OFF(log_level), 0, 0,
	  "expected error, warn, info or debug", "error" },
	{ "PYROSCOPE_LOG_FILE", K_PATH, OFF(log_file), 0, 0, "expected a file path", "stderr" },
	/* The alias first, so that PYROSCOPE_TAGS wins when both are set. */
	{ "PYROSCOPE_LABELS", K_STR, STR(tags), "expected k=v,k2=v2 shorter than 1024 bytes", "no tags" },
	{ "PYROSCOPE_TAGS", K_STR, STR(tags), "expected k=v,k2=v2 shorter than 1024 bytes", "no tags" },
	{ "PYROSCOPE_BASIC_AUTH_USER", K_STR, STR(auth_user), "expected a user name", "none" },
	{ "PYROSCOPE_BASIC_AUTH_PASSWORD", K_SECRET, STR(auth_password), "too long", "none" },
	{ "PYROSCOPE_AUTH_TOKEN", K_SECRET, STR(auth_token), "too long", "none" },
	{ "PYROSCOPE_TENANT_ID", K_STR, STR(tenant), "expected a tenant id", "none" },
	{ "PYROSCOPE_HTTP_HEADERS", K_SECRET, STR(http_headers), "too long", "none" },
	{ "PYROSCOPE_INGEST_FORMAT", K_FORMAT, OFF(ingest_folded), 0, 1, "expected pprof or folded",
	  "pprof" },
	{ "PYROSCOPE_UPLOAD_API", K_API, OFF(upload_push), 0, 1, "expected ingest or push",
	  "ingest" },
	{ "PYROSCOPE_PPROF_ADDRESS", K_STR, STR(pprof_address),
	  "expected host:port such as 127.0.0.1:6060", "no listener" },
	{ "PYROSCOPE_CA_FILE", K_PATH, OFF(ca_file), 0, 0, "expected a file path", "system CAs" },
	{ "PYROSCOPE_TLS_INSECURE", K_BOOL, OFF(tls_insecure), 0, 1, "expected true or false",
	  "false" },
	{ "PYROSCOPE_TRACE_CORRELATION", K_BOOL, OFF(trace_correlation), 0, 1,
	  "expected true or false", "false" },
	{ "PYROSCOPE_SPAN_NAME", K_STR, STR(span_name), "expected a name shorter than 128 bytes",
	  "<name>.run" },
	{ "TRACEPARENT", K_STR, STR(traceparent), "too long", "a new trace" },
	{ "TRACESTATE", K_STR, STR(tracestate), "too long", "none" },
	{ "OTEL_EXPORTER_OTLP_ENDPOINT", K_URL, STR(otlp_endpoint), "expected a URL", "none" },
	{ "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", K_URL, STR(otlp_endpoint), "expected a URL",
	  "none" },
	{ "OTEL_EXPORTER_OTLP_HEADERS", K_SECRET, STR(otlp_headers), "too long", "none" },
	{ "OTEL_SDK_DISABLED", K_BOOL, OFF(otlp_disabled), 0, 1, "expected true or false",
	  "false" },
};

/* The string members, for ps_config_copy: all of them, from tree_helper
 * to the end (checked below). */
#define SM(f) { OFF(f), sizeof(((struct ps_config *)0)->f) }
static const struct {
	size_t off, size;
} strings[] = {
	SM(tree_helper), SM(app_name), SM(pprof_address), SM(span_name), SM(traceparent),
	SM(server), SM(tags), SM(otlp_endpoint), SM(symbol_cache_dir), SM(output_dir),
	SM(log_file), SM(ca_file), SM(tracestate), SM(auth_user), SM(auth_password),
	SM(auth_token), SM(tenant), SM(http_headers), SM(otlp_headers),
};
_Static_assert(OFF(tree_helper) + 64 + 256 + 256 + 128 + 256 + 3 * PS_CFG_STR + 4 * PATH_MAX +
		       1024 + 256 + 256 + PS_CFG_STR + 256 + 2 * 4096 ==
		       sizeof(struct ps_config),
	       "a string member of struct ps_config is missing from strings[]");
_Static_assert(PS_ARRAY_LEN(strings) <= 32, "ps_config_copy's mask has 32 bits");

PS_SIGSAFE uint32_t
ps_config_copy(struct ps_config *dst, const struct ps_config *src, uint32_t only, uint32_t was)
{
	uint32_t set = 0, i;
	size_t n;
	char *d;

	memcpy(dst, src, OFF(tree_helper));
	for (i = 0; i < PS_ARRAY_LEN(strings); i++) {
		d = (char *)dst + strings[i].off;
		n = 0;
		if (only & (1u << i))
			n = strnlen((const char *)src + strings[i].off, strings[i].size - 1);
		if (n) {
			memcpy(d, (const char *)src + strings[i].off, n);
			d[n] = '\0';
			set |= 1u << i;
		} else if (was & (1u << i)) {
			d[0] = '\0';
		}
	}
	return set;
}

/* Print the value as given, but never more than 80 bytes or a control
 * character: the value is untrusted and goes to a terminal. */
static void
printable(const char *in, char *out, size_t len)
{
	size_t i;

	for (i = 0; in[i] && i + 4 < len && i < 80; i++)
		out[i] = isprint((unsigned char)in[i]) ? in[i] : '?';
	out[i] = '\0';
	if (in[i])
		memcpy(out + i, "...", 4);
}

void
ps_config_url_shown(const char *url, char *out, size_t len)
{
	char tmp[PS_CFG_STR + 8];
	const char *auth = strstr(url, "://"), *end, *at;

	auth = auth ? auth + 3 : url;
	end = auth + strcspn(auth, "/?#");
	at = memrchr(auth, '@', (size_t)(end - auth));
	if (at)
		snprintf(tmp, sizeof(tmp), "%.*s***%s", (int)(auth - url), url, at);
	else
		snprintf(tmp, sizeof(tmp), "%s", url);
	printable(tmp, out, len);
}

static int
parse_number(const struct var *v, const char *s, uint64_t *out)
{
	uint64_t x = 0;
	int rc;

	switch (v->kind) {
	case K_UINT:
		return ps_parse_uint(s, v->lo, v->hi, out);
	case K_DURATION:
		rc = ps_parse_duration(s, &x);
		break;
	default:
		rc = ps_parse_size(s, &x);
		break;
	}
	if (rc || x < v->lo || x > v->hi)
		return -EINVAL;
	*out = x;
	return 0;
}

/* The words of a two-word enum, value 0 first. */
static const char *const *
two_words(enum kind k)
{
	static const char *const format[2] = { "pprof", "folded" };
	static const char *const timer[2] = { "thread", "process" };
	static const char *const api[2] = { "ingest", "push" };

	return k == K_FORMAT ? format : k == K_TIMER ? timer : api;
}

static int
store(struct ps_config *c, const struct var *v, const char *s)
{
	const char *const *w;
	char *field = (char *)c + v->off;
	uint64_t num;
	size_t n;
	int iv;

	switch (v->kind) {
	case K_BOOL:
	case K_LEVEL:
	case K_SIGNAL:
		if ((v->kind == K_BOOL ? ps_parse_bool(s, &iv) :
		     v->kind == K_LEVEL ? ps_parse_level(s, &iv) : ps_parse_signal(s, &iv)))
			return -EINVAL;
		memcpy(field, &iv, sizeof(iv));
		return 0;
	case K_STR:
	case K_URL:
	case K_PATH:
	case K_SECRET:
		n = strlen(s);
		if (n == 0 || n >= (v->kind == K_PATH ? PATH_MAX : v->lo))
			return -EINVAL;
		memcpy(field, s, n + 1);
		return 0;
	case K_FORMAT:
	case K_TIMER:
	case K_API:
		/* Two-word enums: the second word is value 1. */
		w = two_words(v->kind);
		if (strcasecmp(s, w[0]) && strcasecmp(s, w[1]))
			return -EINVAL;
		iv = !strcasecmp(s, w[1]);
		memcpy(field, &iv, sizeof(iv));
		return 0;
	default:
		if (parse_number(v, s, &num))
			return -EINVAL;
		if (v->kind == K_UINT) {
			unsigned u = (unsigned)num;
			memcpy(field, &u, sizeof(u));
		} else {
			memcpy(field, &num, sizeof(num));
		}
		return 0;
	}
}

static void
defaults(struct ps_config *c)
{
	c->enabled = 1;
	c->sample_rate = 100;
	c->cpu_enabled = 1;
	c->cpu_signal = 61;
	c->alloc_enabled = 1;
	c->alloc_sample_bytes = 524288;
	c->block_enabled = 1;
	c->mutex_enabled = 1;
	c->block_rate_ns = 1000000;
	c->stack_memory = 8ull << 20;
	c->upload_interval_ns = NS(10);
	c->flush_timeout_ns = NS(3);
	c->dwarf_memory = 256ull << 20;
	c->symbol_cache_size = 64ull << 20;
	c->log_level = PS_LOG_ERROR;
}

/* Application name: PYROSCOPE_APPLICATION_NAME, else OTEL_SERVICE_NAME,
 * else the executable's basename.  Sanitising for the server's grammar is
 * the uploader's job; here it only has to be a usable file-name part, so
 * '/' and control characters are replaced. */
static void
app_name(struct ps_config *c, ps_getenv_fn get, const char *exe)
{
	const char *s = get("PYROSCOPE_APPLICATION_NAME");
	const char *slash;
	size_t i;

	if (!s || !*s)
		s = get("OTEL_SERVICE_NAME");
	if (!s || !*s) {
		s = exe ? exe : "";
		slash = strrchr(s, '/');
		if (slash)
			s = slash + 1;
	}
	if (!*s)
		s = "unknown";
	(void)ps_cat(c->app_name, sizeof(c->app_name), 0, s);
	for (i = 0; c->app_name[i]; i++)
		if (c->app_name[i] == '/' || !isprint((unsigned char)c->app_name[i]))
			c->app_name[i] = '_';
}

/* DEBUGINFOD_URLS, read by elfutils' libdebuginfod when libdw finds no
 * debug file on disk: anything but blanks names a server. */
static void
debuginfod(struct ps_config *c, ps_getenv_fn get)
{
	const char *urls = get("DEBUGINFOD_URLS");

	c->debuginfod = urls && urls[strspn(urls, " \t")] != '\0';
}

/* n > 0 decimal digits, fewer than 11, then `end`: the length, or 0. */
static size_t
number(const char *p, char end)
{
	size_t n = strspn(p, "0123456789");

	return n && n < 11 && p[n] == end ? n : 0;
}

/* PYROSHIM_HELPER: "pyroshim-<pid>-<16 hex digits>", the tree's socket,
 * then "-<helper pid>-<descriptor>", where the helper holds the tree's
 * bell; made by the tree's first process (uploader/worker.c).  Anything
 * else is not ours to use. */
static int
tree_helper(struct ps_config *c, ps_getenv_fn get)
{
	const char *v = get("PYROSHIM_HELPER"), *p;
	size_t n;

	if (!v || !*v)
		return 0;
	if (strncmp(v, "pyroshim-", 9) == 0 && (n = number(v + 9, '-')) &&
	    strspn(p = v + 9 + n + 1, "0123456789abcdef") == 16) {
		p += 16;
		if (*p == '-' && (n = number(p + 1, '-')) && number(p + 1 + n + 1, '\0'))
			p += strlen(p);
		if (!*p && (size_t)(p - v) < sizeof(c->tree_helper)) {
			memcpy(c->tree_helper, v, (size_t)(p - v) + 1);
			return 0;
		}
	}
	ps_log_config("PYROSHIM_HELPER=%.80s: not a helper's name; starting a helper of its own",
		      v);
	return 1;
}

/* 1 if v begins with a digest (16 lowercase hex digits, as ps_cat_x64
 * writes it), then in *out. */
static int
digest_at(const char *v, uint64_t *out)
{
	if (!v || strspn(v, "0123456789abcdef") < 16)
		return 0;
	*out = 0;
	for (int i = 0; i < 16; i++)
		*out = *out << 4 | (uint64_t)ps_hexval(v[i]);
	return 1;
}

/* PYROSHIM_SAID: up to PS_CONFIG_SAID_MAX digests of 16 hex digits,
 * separated by commas, set by the processes of the tree that printed
 * configuration lines (init.c).  Read up to the first that is not one:
 * it is ours, and printing again is the safe side. */
static void
config_said(struct ps_config *c, ps_getenv_fn get)
{
	const char *v = get("PYROSHIM_SAID");

	c->nconfig_said = 0;
	while (c->nconfig_said < PS_CONFIG_SAID_MAX &&
	       digest_at(v, &c->config_said[c->nconfig_said]) && (v[16] == ',' || !v[16])) {
		c->nconfig_said++;
		v = v[16] ? v + 17 : NULL;
	}
}

/* PYROSHIM_PPROF: 16 hex digits, set by the program that started the
 * tree (init.c).  Anything else is none: it is ours, and the old way
 * (listen if the port is free) is the safe side. */
static void
tree_pprof(struct ps_config *c, ps_getenv_fn get)
{
	const char *v = get("PYROSHIM_PPROF");

	if (!digest_at(v, &c->tree_pprof) || v[16])
		c->tree_pprof = 0;
}

/* name_is: 1 if the name s (ended by '\0' or '=') is lit; name_under: 1
 * if it is lit followed by more. */
static inline int
name_is(const char *s, const char *lit)
{
	size_t n = strlen(lit);

	return !strncmp(s, lit, n) && (s[n] == '\0' || s[n] == '=');
}

static inline int
name_under(const char *s, const char *lit)
{
	size_t n = strlen(lit);

	return !strncmp(s, lit, n) && s[n] != '\0' && s[n] != '=';
}

/* 1 if s, a variable's name ended by '\0' or '=', is one that
 * ps_config_load may ask for (config.h).  Most are told apart by their
 * first letter. */
static int
env_wanted(const char *s)
{
	switch (*s) {
	case 'P':
		return name_under(s, "PYROSCOPE_") || name_under(s, "PYROSHIM_");
	case 'O':
		return name_under(s, "OTEL_");
	case 'D':
		return name_is(s, "DEBUGINFOD_URLS");
	case 'H':
		return name_is(s, "HOME");
	case 'X':
		return name_is(s, "XDG_CACHE_HOME");
	case 'T':
		return name_is(s, "TRACEPARENT") || name_is(s, "TRACESTATE");
	}
	return 0;
}

void
ps_env_scan(struct ps_env *e, char *const *envp)
{
	const char *eq;
	size_t n;

	e->n = 0;
	for (; envp && *envp; envp++) {
		if (!env_wanted(*envp) || !(eq = strchr(*envp, '=')))
			continue;
		n = (size_t)(eq - *envp);
		if (e->n == (int)PS_ARRAY_LEN(e->kept) || n > UCHAR_MAX) {
			e->n = -1;
			return;
		}
		e->len[e->n] = (unsigned char)n;
		e->kept[e->n++] = *envp;
	}
}

const char *
ps_env_get(const struct ps_env *e, const char *name)
{
	size_t n = strlen(name);
	int i;

	if (e->n < 0 || !env_wanted(name))
		return getenv(name);
	for (i = 0; i < e->n; i++)
		if (e->len[i] == n && !memcmp(e->kept[i], name, n))
			return e->kept[i] + n + 1;
	return NULL;
}

uint64_t
ps_config_digest(const char *s)
{
	uint64_t h = ps_hash_bytes(s, strlen(s));

	return h ? h : 1;   /* 0 is none */
}

/* The symbol cache's directory: $XDG_CACHE_HOME/pyroshim, else
 * $HOME/.cache/pyroshim (the XDG base directory rules: a relative
 * XDG_CACHE_HOME is ignored); none without either. */
static void
cache_dir(struct ps_config *c, ps_getenv_fn get)
{
	const char *xdg = get("XDG_CACHE_HOME"), *home = get("HOME");
	char *d = c->symbol_cache_dir;
	size_t len = sizeof(c->symbol_cache_dir), n = len;   /* none: "" */

	if (xdg && xdg[0] == '/')
		n = ps_cat(d, len, ps_cat(d, len, 0, xdg), "/pyroshim");
	else if (home && home[0] == '/')
		n = ps_cat(d, len, ps_cat(d, len, 0, home), "/.cache/pyroshim");
	if (n >= len)
		d[0] = '\0';
}

/* Rules between variables: the traces endpoint is used as it is, the base
 * endpoint gets /v1/traces; OTEL_TRACES_EXPORTER=none turns export off. */
static int
otel_rules(struct ps_config *c, ps_getenv_fn get)
{
	const char *traces = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
	const char *base = get("OTEL_EXPORTER_OTLP_ENDPOINT");
	const char *exporter = get("OTEL_TRACES_EXPORTER");
	size_t n;

	if ((!traces || !*traces) && base && *base && c->otlp_endpoint[0]) {
		n = strlen(c->otlp_endpoint);
		while (n > 0 && c->otlp_endpoint[n - 1] == '/')
			c->otlp_endpoint[--n] = '\0';
		if (n + sizeof("/v1/traces") > sizeof(c->otlp_endpoint)) {
			ps_log_config("OTEL_EXPORTER_OTLP_ENDPOINT: too long; using none");
			c->otlp_endpoint[0] = '\0';
			return 1;
		}
		memcpy(c->otlp_endpoint + n, "/v1/traces", sizeof("/v1/traces"));
	}
	if (exporter && !strcasecmp(exporter, "none"))
		c->otlp_disabled = 1;
	return 0;
}

int
ps_config_load(struct ps_config *c, ps_getenv_fn get, const char *exe)
{
	char shown[96];
	const char *s;
	size_t i;
	int bad = 0;

	defaults(c);
	/* Off means nothing at all: not a word about the other variables. */
	s = get("PYROSCOPE_ENABLED");
	if (s && ps_parse_bool(s, &c->enabled) == 0 && !c->enabled)
		return 0;
	c->enabled = 1;
	for (i = 0; i < PS_ARRAY_LEN(vars); i++) {
		s = get(vars[i].name);
		if (!s || !*s || store(c, &vars[i], s) == 0)
			continue;
		/* The default the message names, even where an alias set
		 * the field first (PYROSCOPE_LABELS, then a bad
		 * PYROSCOPE_TAGS: no tags). */
		if (vars[i].kind == K_STR || vars[i].kind == K_URL || vars[i].kind == K_PATH ||
		    vars[i].kind == K_SECRET)
			((char *)c + vars[i].off)[0] = '\0';
		if (vars[i].kind == K_SECRET)
			snprintf(shown, sizeof(shown), "(%zu bytes, not shown)", strlen(s));
		else if (vars[i].kind == K_URL)
			ps_config_url_shown(s, shown, sizeof(shown));
		else
			printable(s, shown, sizeof(shown));
		ps_log_config("%s=%s: %s; using %s", vars[i].name, shown, vars[i].why,
			      vars[i].dflt);
		bad++;
	}
	app_name(c, get, exe);
	cache_dir(c, get);
	debuginfod(c, get);
	bad += tree_helper(c, get);
	config_said(c, get);
	tree_pprof(c, get);
	bad += otel_rules(c, get);
	return bad;
}
