/* fuzz_traceparent.c -- libFuzzer target for trace/traceparent.c.
 *
 * The input is one string, tried both as a traceparent and as a
 * tracestate.  Each answer is compared with a reference written here from
 * the W3C Trace Context Level 2 grammar (deliberately structured
 * differently from the module: whole-string checks and a member array
 * instead of one pass), so a disagreement is a bug in one of the two.
 * Invariants:
 *   - parse accepts exactly what the reference accepts;
 *   - a rejected traceparent leaves *out untouched;
 *   - format writes 55 characters and a NUL and nothing past them, and
 *     reproduces the input's fields (all of it for version 00);
 *   - parse(format(parse(s))) == parse(s);
 *   - format into 55 bytes fails with -ENOSPC and writes nothing.
 */
#include <errno.h>

#include "fuzz.h"
#include "trace/traceparent.h"

static int
lchex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int
hex_run(const char *s, size_t off, size_t n, int *nonzero)
{
	*nonzero = 0;
	for (size_t i = off; i < off + n; i++) {
		if (!lchex(s[i]))
			return 0;
		if (s[i] != '0')
			*nonzero = 1;
	}
	return 1;
}

static int
ref_traceparent(const char *s)
{
	size_t n = strlen(s);
	int nz;

	if (n < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-')
		return 0;
	if (!hex_run(s, 0, 2, &nz) || !strncmp(s, "ff", 2))
		return 0;
	if (!hex_run(s, 3, 32, &nz) || !nz)
		return 0;
	if (!hex_run(s, 36, 16, &nz) || !nz)
		return 0;
	if (!hex_run(s, 53, 2, &nz))
		return 0;
	if (!strncmp(s, "00", 2))
		return n == 55;
	return n == 55 || s[55] == '-';
}

/* ---- tracestate reference ------------------------------------------ */

struct member {
	const char *p;
	size_t n;
};

static int
keych(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || c == '*' || c == '/';
}

/* first: 'a' = lcalpha only, 'd' = lcalpha or digit */
static int
ref_key_part(const char *k, size_t n, size_t max, char first)
{
	if (n < 1 || n > max)
		return 0;
	if (!(k[0] >= 'a' && k[0] <= 'z') &&
	    !(first == 'd' && k[0] >= '0' && k[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!keych(k[i]))
			return 0;
	return 1;
}

static int
ref_key(const char *k, size_t n)
{
	size_t ats = 0, at = 0;

	for (size_t i = 0; i < n; i++)
		if (k[i] == '@') {
			ats++;
			at = i;
		}
	if (ats == 0)
		return ref_key_part(k, n, 256, 'a');
	if (ats > 1)
		return 0;
	return ref_key_part(k, at, 241, 'd') &&
	       ref_key_part(k + at + 1, n - at - 1, 14, 'a');
}

static int
ref_value(const char *v, size_t n)
{
	if (n < 1 || n > 256 || v[n - 1] == ' ')
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e ||
		    v[i] == ',' || v[i] == '=')
			return 0;
	return 1;
}

static int
ref_tracestate(const char *s)
{
	struct member m[64];
	size_t nm = 0, len = strlen(s);
	const char *p = s;

	if (len > PS_TRACESTATE_MAX)
		return 0;
	/* Collect the non-empty members, trimmed of spaces and tabs. */
	for (;;) {
		const char *c = strchr(p, ',');
		const char *e = c ? c : p + strlen(p);

		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e > p) {
			if (nm == PS_TRACESTATE_MAX_MEMBERS)
				return 0;
			m[nm].p = p;
			m[nm++].n = (size_t)(e - p);
		}
		if (!c)
			break;
		p = c + 1;
	}
	for (size_t i = 0; i < nm; i++) {
		const char *eq = memchr(m[i].p, '=', m[i].n);
		size_t kn;

		if (!eq)
			return 0;
		kn = (size_t)(eq - m[i].p);
		if (!ref_key(m[i].p, kn) || !ref_value(eq + 1, m[i].n - kn - 1))
			return 0;
		for (size_t j = 0; j < i; j++)
			if (m[j].n > kn && m[j].p[kn] == '=' &&
			    !memcmp(m[j].p, m[i].p, kn))
				return 0;
	}
	return 1;
}

/* ---- the target ----------------------------------------------------- */

static void
check_traceparent(const char *s)
{
	struct ps_traceparent tp, back, untouched;
	char buf[PS_TRACEPARENT_LEN + 1 + FUZZ_GUARD];
	int rc;

	memset(&tp, 0x5a, sizeof(tp));
	untouched = tp;
	rc = ps_traceparent_parse(s, &tp);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL);
	FUZZ_ASSERT((rc == 0) == ref_traceparent(s));
	if (rc) {
		FUZZ_ASSERT(!memcmp(&tp, &untouched, sizeof(tp)));
		return;
	}
	fuzz_guard_set(buf, PS_TRACEPARENT_LEN + 1);
	FUZZ_ASSERT(ps_traceparent_format(&tp, buf, PS_TRACEPARENT_LEN + 1) == 0);
	FUZZ_ASSERT(fuzz_guard_ok(buf, PS_TRACEPARENT_LEN + 1));
	FUZZ_ASSERT(strlen(buf) == PS_TRACEPARENT_LEN);
	FUZZ_ASSERT(!memcmp(buf, "00", 2));
	FUZZ_ASSERT(!memcmp(buf + 2, s + 2, PS_TRACEPARENT_LEN - 2));
	FUZZ_ASSERT(ps_traceparent_parse(buf, &back) == 0);
	FUZZ_ASSERT(!memcmp(&back, &tp, sizeof(tp)));

	/* Too small: nothing written. */
	memset(buf, FUZZ_GUARD_BYTE, sizeof(buf));
	FUZZ_ASSERT(ps_traceparent_format(&tp, buf, PS_TRACEPARENT_LEN) == -ENOSPC);
	for (size_t i = 0; i < sizeof(buf); i++)
		FUZZ_ASSERT((uint8_t)buf[i] == FUZZ_GUARD_BYTE);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_strdup(data, size);
	int v = ps_tracestate_valid(s);

	check_traceparent(s);
	FUZZ_ASSERT(v == 0 || v == 1);
	FUZZ_ASSERT(v == ref_tracestate(s));
	free(s);
	return 0;
}
