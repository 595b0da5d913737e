/* config.h -- all configuration, parsed once at start-up.
 *
 * ps_config_load() is the only place in pyroshim that reads the environment
 * (the constructor calls it once; nothing else calls getenv).  Every invalid
 * value is reported as one line
 *     pyroshim: <VARIABLE>=<value>: <why>; using <default>
 * and replaced by its default, so a typo never disables profiling silently
 * and never crashes the host.  Values of secret variables are not echoed.
 *
 * Strings are copied into fixed arrays: the struct owns everything and can
 * be read from any thread after start-up without synchronisation, because
 * it is written only before the shim's threads start (and in the fork child
 * handler, when the child has a single thread).
 */
#ifndef PS_CONFIG_H
#define PS_CONFIG_H

#include <limits.h>
#include <stdint.h>
#include "common/ps.h"

#define PS_CFG_STR 1024
/* How many digests of printed configuration lines PYROSHIM_SAID carries. */
#define PS_CONFIG_SAID_MAX 32
/* PYROSCOPE_STACK_MEMORY's least. */
#define PS_STACK_MEMORY_MIN (256u << 10)

struct ps_config {
	/* The numbers first, then the strings every process reads at its start,
	 * then the rest: each page of this struct a process touches costs it a
	 * fault (BENCHMARKS 14q). */
	int enabled;                   /* PYROSCOPE_ENABLED (default 1) */
	unsigned sample_rate;          /* PYROSCOPE_SAMPLE_RATE, Hz, 1..1000, default 100 */
	int cpu_enabled;               /* PYROSCOPE_PROFILING_CPU_ENABLED (default 1) */
	int cpu_timer;                 /* PYROSCOPE_CPU_TIMER: 0 thread (default), 1 process */
	int cpu_signal;                /* PYROSCOPE_CPU_SIGNAL: 35..64, default 61 (SIGRTMAX-3) */
	int alloc_enabled;             /* PYROSCOPE_PROFILING_ALLOC_ENABLED (default 1) */
	uint64_t alloc_sample_bytes;   /* PYROSCOPE_ALLOC_SAMPLE_BYTES, default 524288; 0/1 = every */
	int block_enabled;             /* PYROSCOPE_PROFILING_BLOCK_ENABLED (default 1) */
	int mutex_enabled;             /* PYROSCOPE_PROFILING_MUTEX_ENABLED (default 1) */
	uint64_t block_rate_ns;        /* PYROSCOPE_BLOCK_RATE: waits this long are all kept,
					* shorter ones sampled; 1us..10s, default 1ms */
	uint64_t stack_memory;         /* PYROSCOPE_STACK_MEMORY, bytes, default 8 MiB */
	uint64_t dwarf_memory;         /* PYROSCOPE_DWARF_MEMORY, bytes libdw may hold,
					* default 256 MiB; 0 = function names only */
	uint64_t symbol_cache_size;    /* PYROSCOPE_SYMBOL_CACHE_SIZE, bytes of source lines
					* kept per user across runs, default 64 MiB; 0 = none */
	int debuginfod;                /* DEBUGINFOD_URLS names a server: libdw may fetch
					* debug information missing on disk */
	int folded_lines;              /* PYROSCOPE_FOLDED_LINES (default 0) */
	uint64_t upload_interval_ns;   /* PYROSCOPE_UPLOAD_INTERVAL, default 10 s */
	uint64_t flush_timeout_ns;     /* PYROSCOPE_FLUSH_TIMEOUT, default 3 s */
	int log_level;                 /* PYROSCOPE_LOG_LEVEL, enum ps_log_level, default error */
	int ingest_folded;             /* PYROSCOPE_INGEST_FORMAT=folded (default pprof) */
	int upload_push;               /* PYROSCOPE_UPLOAD_API=push (default ingest) */
	int tls_insecure;              /* PYROSCOPE_TLS_INSECURE (default false) */
	int trace_correlation;         /* PYROSCOPE_TRACE_CORRELATION (default false) */
	int otlp_disabled;             /* OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none */
	unsigned nconfig_said;         /* PYROSHIM_SAID: the digests of the configuration
					* lines the tree's processes printed (common/log.h) */
	uint64_t config_said[PS_CONFIG_SAID_MAX];
	uint64_t tree_pprof;           /* PYROSHIM_PPROF: the digest (ps_config_digest) of
					* the PYROSCOPE_PPROF_ADDRESS of the program that
					* started this process's tree, which listens on
					* it; 0 = none */
	/* Strings.  Upload ones are validated by uploader/upload.c. */
	char tree_helper[64];          /* PYROSHIM_HELPER: the socket of the helper of the
					* process tree this process belongs to, set by the
					* tree's first process (uploader/worker.h); "" =
					* none, or not a helper's name */
	char app_name[256];            /* PYROSCOPE_APPLICATION_NAME, OTEL_SERVICE_NAME, basename(exe) */
	char pprof_address[256];       /* PYROSCOPE_PPROF_ADDRESS host:port; "" = no listener
					* (uploader/listen.c validates it) */
	char span_name[128];           /* PYROSCOPE_SPAN_NAME */
	char traceparent[256];         /* TRACEPARENT */
	char server[PS_CFG_STR];       /* PYROSCOPE_SERVER_ADDRESS; "" = local files only */
	char tags[PS_CFG_STR];         /* PYROSCOPE_TAGS, else PYROSCOPE_LABELS */
	char otlp_endpoint[PS_CFG_STR];  /* OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
					  * OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces */
	char symbol_cache_dir[PATH_MAX]; /* $XDG_CACHE_HOME/pyroshim or ~/.cache/pyroshim;
					  * "" = none */
	char output_dir[PATH_MAX];     /* PYROSCOPE_OUTPUT_DIR as given; "" = not set, and
					* init.c then uses ./pyroshim-profiles (made
					* absolute), or none when a server is set */
	char log_file[PATH_MAX];       /* PYROSCOPE_LOG_FILE; "" = stderr */
	char ca_file[PATH_MAX];        /* PYROSCOPE_CA_FILE */
	char tracestate[1024];         /* TRACESTATE */
	char auth_user[256];           /* PYROSCOPE_BASIC_AUTH_USER */
	char auth_password[256];       /* PYROSCOPE_BASIC_AUTH_PASSWORD (secret) */
	char auth_token[PS_CFG_STR];   /* PYROSCOPE_AUTH_TOKEN (secret) */
	char tenant[256];              /* PYROSCOPE_TENANT_ID */
	char http_headers[4096];       /* PYROSCOPE_HTTP_HEADERS, JSON (secret) */
	char otlp_headers[4096];       /* OTEL_EXPORTER_OTLP_HEADERS (secret) */
};

/* A function that reads one variable; ps_env_get in production, a table
 * in tests.  Returns NULL when the variable is unset. */
typedef const char *(*ps_getenv_fn)(const char *name);

/* The variables ps_config_load may ask for, out of an environment read in
 * one pass.  It asks for some sixty names, and getenv() compares each
 * with every variable: 20 k instructions, a quarter of what a preloaded
 * process's start-up ran (BENCHMARKS 14z).  `n` is -1 when more of them
 * were set than `kept` holds: ps_env_get is then getenv. */
struct ps_env {
	const char *kept[48];   /* "NAME=VALUE", in the environment's order */
	unsigned char len[48];  /* NAME's length */
	int n;
};

/* Keep the variables of envp (NULL-terminated) that ps_config_load may ask
 * for: PYROSCOPE_*, PYROSHIM_*, OTEL_*, and DEBUGINFOD_URLS, HOME,
 * XDG_CACHE_HOME, TRACEPARENT, TRACESTATE.  Context: constructor; does
 * not allocate. */
void ps_env_scan(struct ps_env *e, char *const *envp);

/* name's value in the environment e was scanned from, as getenv() would
 * find it there (the first definition); NULL when it is unset.  A name
 * ps_env_scan does not keep is read with getenv(). */
const char *ps_env_get(const struct ps_env *e, const char *name);

/* Fill *c with defaults, then with the environment read through get.
 * `exe` is the executable's path (for the default application name).
 * `c` must be zeroed (static storage, or `= { 0 }`): it is not cleared
 * here, so that a process's start-up touches only the pages of the fields
 * set (the struct is 31 KB; every preloaded process loads it).
 * Returns the number of invalid values that were reported and replaced.
 * Context: constructor (single thread); does not allocate. */
int ps_config_load(struct ps_config *c, ps_getenv_fn get, const char *exe);

/* A string's digest, never 0: what PYROSHIM_PPROF holds of an address.
 * Context: any thread. */
uint64_t ps_config_digest(const char *s);

/* url as it may be printed: user-info ("user:password@") replaced by
 * "***@", control characters by '?', at most 80 bytes and "...".
 * Context: any thread; does not allocate. */
void ps_config_url_shown(const char *url, char *out, size_t len);

/* Copy src into dst, where dst holds zero bytes but for the strings in
 * `was` (the mask this function returned for dst before; 0 for zero
 * bytes): the numbers, and of the strings only the bytes of those that
 * are not empty, and in `only` (the mask src's writer returned for it,
 * when src is another process's memory; PS_CONFIG_ALL otherwise).  Each
 * string of dst ends within its member, whatever src holds.  Returns
 * dst's mask.  A page of dst that holds only strings nobody set is never
 * touched: in fresh shared memory each page written, or read, is a page
 * fault, in the program that joins a tree and in the helper that reads
 * its settings (BENCHMARKS 14u).  Context: any thread, or the first
 * record's signal handler; async-signal-safe. */
#define PS_CONFIG_ALL 0xffffffffu
PS_SIGSAFE uint32_t ps_config_copy(struct ps_config *dst, const struct ps_config *src,
				   uint32_t only, uint32_t was);

/* Parsers, exposed for the unit tests and for other modules.  Each returns
 * 0 and stores the value, or -EINVAL and leaves *out untouched. */
int ps_parse_bool(const char *s, int *out) PS_WUR;
int ps_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) PS_WUR;
/* "100us", "500ms", "10s", "1m", "2h" (also "ns") or plain seconds ("15");
 * result in ns; > 0. */
int ps_parse_duration(const char *s, uint64_t *out_ns) PS_WUR;
/* "524288", "512k", "512KiB", "8M", "8MiB", "1G" (binary multiples). */
int ps_parse_size(const char *s, uint64_t *out) PS_WUR;
/* "error", "warn", "info", "debug" (case-insensitive). */
int ps_parse_level(const char *s, int *out) PS_WUR;
/* A real-time signal the shim may use: a number from 35 to 64, or
 * "SIGRTMIN+n" / "SIGRTMAX-n" (also without "SIG"), as glibc numbers them
 * (SIGRTMIN 34, SIGRTMAX 64); 32-34 are glibc's own and refused. */
int ps_parse_signal(const char *s, int *out) PS_WUR;

#endif
