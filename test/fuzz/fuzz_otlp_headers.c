/* fuzz_otlp_headers.c -- libFuzzer target for ps_otlp_parse_headers()
 * (OTEL_EXPORTER_OTLP_HEADERS, trace/otlp.c).
 *
 * Input: one byte choosing `max` (0..39) and a storage shortfall, then the
 * variable's value.  Invariants, from otlp.h:
 *   - rc >= 0; *n <= max; names are non-empty HTTP tokens; values are
 *     non-empty, free of control characters other than TAB and of
 *     surrounding spaces unless they came from a %-escape;
 *   - every pointer lies inside storage and its string ends there; nothing
 *     past storage_len is written (guard bytes);
 *   - with storage_len = strlen + 1 and max large, accepted + skipped ==
 *     non-empty members;
 *   - round trip: re-encoding the accepted headers (every value byte
 *     %-escaped) and parsing again gives the same list and no skip.
 */
#include <errno.h>

#include "fuzz.h"
#include "uploader/otlp.h"

#define MAXH 40

static int
tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void
check_one(const struct ps_otlp_header *h, const char *st, size_t st_len)
{
	size_t nn, vn;

	FUZZ_ASSERT(h->name >= st && h->name < st + st_len);
	FUZZ_ASSERT(h->value >= st && h->value < st + st_len);
	nn = strnlen(h->name, (size_t)(st + st_len - h->name));
	vn = strnlen(h->value, (size_t)(st + st_len - h->value));
	FUZZ_ASSERT(h->name + nn < st + st_len && h->value + vn < st + st_len);
	FUZZ_ASSERT(nn > 0 && vn > 0);
	for (size_t i = 0; i < nn; i++)
		FUZZ_ASSERT(tchar((unsigned char)h->name[i]));
	for (size_t i = 0; i < vn; i++) {
		unsigned char c = (unsigned char)h->value[i];

		FUZZ_ASSERT(c == '\t' || (c >= 0x20 && c != 0x7f));
	}
}

/* name=%XX%XX...,name2=... : every value byte escaped, so nothing is
 * trimmed or split on the way back. */
static char *
encode(const struct ps_otlp_header *h, size_t n)
{
	size_t len = 1;
	char *s, *p;

	for (size_t i = 0; i < n; i++)
		len += strlen(h[i].name) + 2 + 3 * strlen(h[i].value);
	s = p = malloc(len);
	if (!s)
		abort();
	for (size_t i = 0; i < n; i++) {
		const unsigned char *v = (const unsigned char *)h[i].value;

		p += sprintf(p, "%s%s=", i ? "," : "", h[i].name);
		for (; *v; v++)
			p += sprintf(p, "%%%02X", *v);
	}
	*p = '\0';
	return s;
}

static size_t
members(const char *s)
{
	size_t k = 0;

	for (const char *p = s;;) {
		const char *e = strchrnul(p, ',');
		const char *b = p;

		while (b < e && (*b == ' ' || *b == '\t'))
			b++;
		while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		k += e > b;
		p = strchrnul(p, ',');
		if (!*p)
			return k;
		p++;
	}
}

static void
round_trip(const struct ps_otlp_header *h, size_t n)
{
	struct ps_otlp_header h2[MAXH];
	char *enc = encode(h, n);
	size_t len = strlen(enc) + 1, n2 = 0;
	char *st = malloc(len);

	if (!st)
		abort();
	FUZZ_ASSERT(ps_otlp_parse_headers(enc, h2, MAXH, &n2, st, len) == 0);
	FUZZ_ASSERT(n2 == n);
	for (size_t i = 0; i < n; i++) {
		FUZZ_ASSERT(!strcmp(h2[i].name, h[i].name));
		FUZZ_ASSERT(!strcmp(h2[i].value, h[i].value));
	}
	free(st);
	free(enc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ps_otlp_header h[MAXH];
	size_t max, st_len, short_by, n = 12345;
	char *s, *st;
	int rc;

	if (size < 1)
		return 0;
	max = data[0] % MAXH;
	short_by = (data[0] & 0x80) ? (data[0] >> 3 & 0xf) : 0;
	s = fuzz_strdup(data + 1, size - 1);
	st_len = strlen(s) + 1;
	st_len = st_len > short_by ? st_len - short_by : 0;
	st = malloc(st_len + FUZZ_GUARD);
	if (!st)
		abort();
	fuzz_guard_set(st, st_len);
	rc = ps_otlp_parse_headers(s, h, max, &n, st, st_len);
	FUZZ_ASSERT(rc >= 0);
	FUZZ_ASSERT(n <= max);
	FUZZ_ASSERT(fuzz_guard_ok(st, st_len));
	for (size_t i = 0; i < n; i++)
		check_one(&h[i], st, st_len);
	if (short_by == 0 && n < max)
		FUZZ_ASSERT(n + (size_t)rc == members(s));
	round_trip(h, n);
	free(st);
	free(s);
	return 0;
}
