/* fuzz_config_values.c -- libFuzzer target for the value parsers of
 * shim/config.c: ps_parse_bool, ps_parse_uint, ps_parse_duration,
 * ps_parse_size, ps_parse_level.
 *
 * Input: 16 bytes giving lo and hi for ps_parse_uint (when present), then
 * the value.  Each parser is compared with a reference written here from
 * config.h's contract, using strtoull and an explicit unit table; on
 * rejection the output must be untouched.
 */
#include <ctype.h>
#include <errno.h>
#include <strings.h>

#include "common/config.h"
#include "fuzz.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aull

/* Digits then a unit from `units`; the number has 1..15 digits (what
 * config.c accepts), so it never overflows before the multiplication. */
static int
ref_scaled(const char *s, const char *const *units, const uint64_t *mul,
	   size_t nunits, int zero_ok, uint64_t *out)
{
	size_t nd = 0;
	uint64_t v;

	while (isdigit((unsigned char)s[nd]))
		nd++;
	if (nd == 0 || nd > 15)
		return -EINVAL;
	v = strtoull(s, NULL, 10);
	for (size_t i = 0; i < nunits; i++) {
		if (strcmp(s + nd, units[i]))
			continue;
		if ((!zero_ok && v == 0) || (v && mul[i] > UINT64_MAX / v))
			return -EINVAL;
		*out = v * mul[i];
		return 0;
	}
	return -EINVAL;
}

static void
check_duration(const char *s)
{
	static const char *const u[] = { "", "ns", "us", "ms", "s", "m", "h" };
	static const uint64_t m[] = { 1000000000ull, 1ull, 1000ull, 1000000ull, 1000000000ull,
				      60000000000ull, 3600000000000ull };
	uint64_t got = SENTINEL, want = SENTINEL;
	int rc = ps_parse_duration(s, &got);

	FUZZ_ASSERT(rc == ref_scaled(s, u, m, PS_ARRAY_LEN(u), 0, &want));
	FUZZ_ASSERT(got == want);
	FUZZ_ASSERT(rc || got > 0);
}

static void
check_size(const char *s)
{
	static const char *const u[] = { "", "k", "K", "KiB", "M", "MiB", "G", "GiB" };
	static const uint64_t m[] = { 1, 1 << 10, 1 << 10, 1 << 10, 1 << 20,
				      1 << 20, 1 << 30, 1 << 30 };
	uint64_t got = SENTINEL, want = SENTINEL;

	FUZZ_ASSERT(ps_parse_size(s, &got) == ref_scaled(s, u, m, 8, 1, &want));
	FUZZ_ASSERT(got == want);
}

static void
check_uint(const char *s, uint64_t lo, uint64_t hi)
{
	uint64_t got = SENTINEL, want = SENTINEL;
	size_t n = strlen(s);
	int ok = n >= 1 && n <= 19 && strspn(s, "0123456789") == n;
	int rc = ps_parse_uint(s, lo, hi, &got);

	if (ok) {
		uint64_t v = strtoull(s, NULL, 10);

		ok = v >= lo && v <= hi;
		if (ok)
			want = v;
	}
	FUZZ_ASSERT(rc == (ok ? 0 : -EINVAL));
	FUZZ_ASSERT(got == want);
}

static void
check_words(const char *s)
{
	static const char *const lv[] = { "error", "warn", "info", "debug" };
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	int got = 77, want = 77, rc;

	for (int i = 0; i < 4; i++)
		if (!strcasecmp(s, lv[i]))
			want = i;
	if (!strcasecmp(s, "warning"))
		want = 1;
	rc = ps_parse_level(s, &got);
	FUZZ_ASSERT(rc == (want == 77 ? -EINVAL : 0) && got == want);

	got = want = 77;
	for (int i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i]))
			want = 1;
		if (!strcasecmp(s, no[i]))
			want = 0;
	}
	rc = ps_parse_bool(s, &got);
	FUZZ_ASSERT(rc == (want == 77 ? -EINVAL : 0) && got == want);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t lo = 0, hi = UINT64_MAX;
	char *s;

	if (size >= 16) {
		memcpy(&lo, data, 8);
		memcpy(&hi, data + 8, 8);
		/* Small bounds are the interesting ones; keep them reachable. */
		if (data[0] & 1)
			lo >>= 40;
		if (data[8] & 1)
			hi >>= 40;
	}
	s = fuzz_strdup(data, size);
	check_duration(s);
	check_size(s);
	check_words(s);
	free(s);
	if (size >= 16) {
		s = fuzz_strdup(data + 16, size - 16);
		check_uint(s, lo, hi);
		free(s);
	}
	return 0;
}
