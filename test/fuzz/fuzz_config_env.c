/* fuzz_config_env.c -- libFuzzer target for ps_config_load() with a
 * fuzzed environment (shim/config.c).
 *
 * Input: NUL-separated records.  The first is the executable path; each
 * other is `NAME=value` and is what the fake getenv answers for NAME (the
 * first record wins, as in a real environment lookup).  The dictionary
 * test/fuzz/config_env.dict lists the variable names.
 * Invariants:
 *   - the return value is >= 0 and at most the number of records;
 *   - every field is in its documented range whatever the input; strings
 *     are NUL-terminated inside their arrays; app_name is non-empty and
 *     has no '/' or control character;
 *   - a value the single parser accepts (and that is in range) is stored;
 *     one it rejects leaves the default;
 *   - loading twice gives the same struct (no hidden state).
 * Warnings go to /dev/null: ps_log_config() prints every rejected value.
 */
#include <errno.h>
#include <fcntl.h>

#include "common/config.h"
#include "fuzz.h"
#include "common/log.h"

#define MAXREC 64

static char *rec[MAXREC];

static const char *
fake_getenv(const char *name)
{
	size_t n = strlen(name);

	for (int i = 1; i < MAXREC && rec[i]; i++)
		if (!strncmp(rec[i], name, n) && rec[i][n] == '=')
			return rec[i] + n + 1;
	return NULL;
}

static void
check_ranges(const struct ps_config *c)
{
	FUZZ_ASSERT(c->enabled == 0 || c->enabled == 1);
	FUZZ_ASSERT(c->cpu_enabled == 0 || c->cpu_enabled == 1);
	FUZZ_ASSERT(c->alloc_enabled == 0 || c->alloc_enabled == 1);
	FUZZ_ASSERT(c->block_enabled == 0 || c->block_enabled == 1);
	FUZZ_ASSERT(c->mutex_enabled == 0 || c->mutex_enabled == 1);
	FUZZ_ASSERT(c->block_rate_ns >= 1000 && c->block_rate_ns <= 10000000000ull);
	FUZZ_ASSERT(c->sample_rate >= 1 && c->sample_rate <= 1000);
	FUZZ_ASSERT(c->alloc_sample_bytes <= (1ull << 40));
	FUZZ_ASSERT(c->stack_memory >= (256u << 10) && c->stack_memory <= (1ull << 30));
	FUZZ_ASSERT(c->upload_interval_ns >= 100000000ull &&
		    c->upload_interval_ns <= 3600000000000ull);
	FUZZ_ASSERT(c->flush_timeout_ns >= 100000000ull &&
		    c->flush_timeout_ns <= 600000000000ull);
	FUZZ_ASSERT(c->log_level >= PS_LOG_ERROR && c->log_level <= PS_LOG_DEBUG);
	FUZZ_ASSERT(strnlen(c->output_dir, sizeof(c->output_dir)) < sizeof(c->output_dir));
	FUZZ_ASSERT(strnlen(c->server, sizeof(c->server)) < sizeof(c->server));
	FUZZ_ASSERT(strnlen(c->log_file, sizeof(c->log_file)) < sizeof(c->log_file));
	FUZZ_ASSERT(strnlen(c->app_name, sizeof(c->app_name)) < sizeof(c->app_name));
	/* Off: nothing else is read (a name not made either). */
	FUZZ_ASSERT(c->app_name[0] != '\0' || !c->enabled);
	for (const char *p = c->app_name; *p; p++)
		FUZZ_ASSERT(*p != '/' && (unsigned char)*p >= 0x20 &&
			    (unsigned char)*p < 0x7f);
}

/* Spot checks that the table wires each variable to its parser. */
static void
check_stored(const struct ps_config *c)
{
	const char *s;
	uint64_t v;
	int b;

	if (!c->enabled) {
		/* Off is read first, and then nothing else. */
		s = fake_getenv("PYROSCOPE_ENABLED");
		FUZZ_ASSERT(s && ps_parse_bool(s, &b) == 0 && b == 0);
		FUZZ_ASSERT(c->sample_rate == 100 && c->log_level == PS_LOG_ERROR);
		return;
	}

	s = fake_getenv("PYROSCOPE_SAMPLE_RATE");
	if (s && *s && ps_parse_uint(s, 1, 1000, &v) == 0)
		FUZZ_ASSERT(c->sample_rate == v);
	else
		FUZZ_ASSERT(c->sample_rate == 100);
	s = fake_getenv("PYROSCOPE_UPLOAD_INTERVAL");
	if (s && *s && ps_parse_duration(s, &v) == 0 && v >= 100000000ull &&
	    v <= 3600000000000ull)
		FUZZ_ASSERT(c->upload_interval_ns == v);
	else
		FUZZ_ASSERT(c->upload_interval_ns == 10000000000ull);
	s = fake_getenv("PYROSCOPE_BLOCK_RATE");
	if (s && *s && ps_parse_duration(s, &v) == 0 && v >= 1000 && v <= 10000000000ull)
		FUZZ_ASSERT(c->block_rate_ns == v);
	else
		FUZZ_ASSERT(c->block_rate_ns == 1000000);
	s = fake_getenv("PYROSCOPE_ALLOC_SAMPLE_BYTES");
	if (s && *s && ps_parse_size(s, &v) == 0 && v <= (1ull << 40))
		FUZZ_ASSERT(c->alloc_sample_bytes == v);
	else
		FUZZ_ASSERT(c->alloc_sample_bytes == 524288);
	s = fake_getenv("PYROSCOPE_SYMBOL_CACHE_SIZE");
	if (s && *s && ps_parse_size(s, &v) == 0 && v <= (1ull << 40))
		FUZZ_ASSERT(c->symbol_cache_size == v);
	else
		FUZZ_ASSERT(c->symbol_cache_size == 64ull << 20);
	/* The cache directory is absolute or none. */
	FUZZ_ASSERT(c->symbol_cache_dir[0] == '\0' || c->symbol_cache_dir[0] == '/');
	FUZZ_ASSERT(strnlen(c->symbol_cache_dir, sizeof(c->symbol_cache_dir)) <
		    sizeof(c->symbol_cache_dir));
	s = fake_getenv("PYROSCOPE_ENABLED");
	if (s && *s && ps_parse_bool(s, &b) == 0)
		FUZZ_ASSERT(c->enabled == b);
	else
		FUZZ_ASSERT(c->enabled == 1);
	s = fake_getenv("PYROSCOPE_LOG_LEVEL");
	if (s && *s && ps_parse_level(s, &b) == 0)
		FUZZ_ASSERT(c->log_level == b);
	else
		FUZZ_ASSERT(c->log_level == PS_LOG_ERROR);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	(void)argc;
	(void)argv;
	if (fd < 0)
		abort();
	ps_log_setup(PS_LOG_ERROR, fd);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ps_config a, b;
	int n = fuzz_split(data, size, rec, MAXREC);
	int bad;

	/* Loading does not clear (config.h). */
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	bad = ps_config_load(&a, fake_getenv, n > 0 ? rec[0] : NULL);
	FUZZ_ASSERT(bad >= 0 && bad <= (n > 0 ? n - 1 : 0));
	FUZZ_ASSERT(a.enabled || bad == 0);
	check_ranges(&a);
	check_stored(&a);
	FUZZ_ASSERT(ps_config_load(&b, fake_getenv, n > 0 ? rec[0] : NULL) == bad);
	FUZZ_ASSERT(!memcmp(&a, &b, sizeof(a)));
	fuzz_free_all(rec, MAXREC);
	return 0;
}
