/* fuzz_ingest_url.c -- libFuzzer target for uploader/ingest.c:
 * ps_ingest_split_url (PYROSCOPE_SERVER_ADDRESS) and ps_ingest_url.
 *
 * Input: 3 bytes of output-buffer lengths, 16 bytes of from/until times,
 * then NUL-separated strings: the server address and a series name.
 * Invariants, from ingest.h:
 *   - rc is 0, -EINVAL or -ENOSPC; on failure all three outputs are "";
 *     nothing is written past the lengths given (guard bytes);
 *   - a base is http:// or https://, printable ASCII without space, '?',
 *     '#' or '@' before the path, no trailing '/'; credentials have no
 *     control characters;
 *   - round trip: the base splits to itself with no credentials, and
 *     base + %-encoded credentials splits to the same three strings;
 *   - the ingest URL is base + "/ingest?" + key=value pairs whose values
 *     are only unreserved characters and %XX, the name decodes back to
 *     the input, and times are 19 digits; bad times give -EINVAL/-ERANGE.
 */
#include <errno.h>

#include "common/buf.h"
#include "fuzz.h"
#include "uploader/ingest.h"

#define BIG 2048
#define MAX_NS 10000000000000000000ull   /* 10^19: 20 digits */

static int
unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
}

static void
pct(char *out, const char *s)
{
	for (; *s; s++)
		out += sprintf(out, "%%%02X", (unsigned char)*s);
	*out = '\0';
}

static void
check_base(const char *base, const char *user, const char *pass)
{
	size_t n = strlen(base);
	const char *auth = strstr(base, "://") + 3;

	FUZZ_ASSERT(!strncmp(base, "http://", 7) || !strncmp(base, "https://", 8));
	FUZZ_ASSERT(n > 0 && base[n - 1] != '/');
	for (const char *p = base; *p; p++)
		FUZZ_ASSERT(*p > 0x20 && *p < 0x7f && *p != '?' && *p != '#');
	FUZZ_ASSERT(*auth && *auth != '/');
	FUZZ_ASSERT(!memchr(auth, '@', strcspn(auth, "/")));
	for (const char *p = user; *p; p++)
		FUZZ_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
	for (const char *p = pass; *p; p++)
		FUZZ_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
}

static void
round_trip(const char *base, const char *user, const char *pass)
{
	static char b2[BIG], u2[BIG], p2[BIG], url[4 * BIG];
	const char *auth = strstr(base, "://") + 3;
	int scheme = (int)(auth - base);
	char *q;

	FUZZ_ASSERT(ps_ingest_split_url(base, b2, BIG, u2, BIG, p2, BIG) == 0);
	FUZZ_ASSERT(!strcmp(b2, base) && !u2[0] && !p2[0]);
	if (!user[0] && !pass[0])
		return;
	q = url + sprintf(url, "%.*s", scheme, base);
	pct(q, user);
	q += strlen(q);
	*q++ = ':';
	pct(q, pass);
	q += strlen(q);
	sprintf(q, "@%s", auth);
	FUZZ_ASSERT(ps_ingest_split_url(url, b2, BIG, u2, BIG, p2, BIG) == 0);
	FUZZ_ASSERT(!strcmp(b2, base) && !strcmp(u2, user) && !strcmp(p2, pass));
}

static int
hexv(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Check one `key=value` of the query; decode value into out. */
static void
check_param(const char *p, size_t n, char *out)
{
	const char *eq = memchr(p, '=', n);

	FUZZ_ASSERT(eq);
	for (const char *v = eq + 1; v < p + n; v++) {
		if (*v == '%') {
			FUZZ_ASSERT(v + 2 < p + n && hexv(v[1]) >= 0 && hexv(v[2]) >= 0);
			*out++ = (char)(hexv(v[1]) << 4 | hexv(v[2]));
			v += 2;
			continue;
		}
		FUZZ_ASSERT(unreserved((unsigned char)*v));
		*out++ = *v;
	}
	*out = '\0';
}

static void
check_url(const char *base, const char *name, uint64_t from, uint64_t until)
{
	static char dec[4 * BIG];
	struct ps_buf b = PS_BUF_INIT(1 << 20);
	struct ps_ingest_query q = { name, from, until, "pyroshim", 100,
				     "samples", "sum", NULL };
	const char *s, *amp;
	int rc = ps_ingest_url(base, &q, &b);

	int range = from >= MAX_NS || until >= MAX_NS;
	int order = from && until && until < from;

	/* ingest.h does not rank the two errors, so either may win. */
	if (!name[0]) {
		FUZZ_ASSERT(rc == -EINVAL);
	} else if (range || order) {
		FUZZ_ASSERT((range && rc == -ERANGE) || (order && rc == -EINVAL));
	} else {
		FUZZ_ASSERT(rc == 0 && b.data[b.len] == '\0' && strlen((char *)b.data) == b.len);
		s = (const char *)b.data;
		FUZZ_ASSERT(!strncmp(s, base, strlen(base)));
		s += strlen(base);
		FUZZ_ASSERT(!strncmp(s, "/ingest?", 8));
		for (s += 8;; s = amp + 1) {
			amp = strchrnul(s, '&');
			check_param(s, (size_t)(amp - s), dec);
			if (!strncmp(s, "name=", 5))
				FUZZ_ASSERT(!strcmp(dec, name));
			if (!strncmp(s, "from=", 5) || !strncmp(s, "until=", 6))
				FUZZ_ASSERT(strlen(dec) == 19 &&
					    strtoull(dec, NULL, 10) ==
						    (s[0] == 'f' ? from : until));
			if (!*amp)
				break;
		}
	}
	if (rc)
		FUZZ_ASSERT(b.len == 0);
	ps_buf_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char base[256 + FUZZ_GUARD], user[256 + FUZZ_GUARD], pass[256 + FUZZ_GUARD];
	size_t bl, ul, pl;
	uint64_t from, until;
	char *f[2];
	int rc;

	if (size < 19)
		return 0;
	bl = data[0], ul = data[1], pl = data[2];
	memcpy(&from, data + 3, 8);
	memcpy(&until, data + 11, 8);
	/* Realistic times most of the time, huge ones sometimes. */
	if (!(data[3] & 1))
		from %= MAX_NS;
	if (!(data[11] & 1))
		until %= MAX_NS;
	fuzz_split(data + 19, size - 19, f, 2);
	fuzz_guard_set(base, bl);
	fuzz_guard_set(user, ul);
	fuzz_guard_set(pass, pl);
	rc = ps_ingest_split_url(f[0], base, bl, user, ul, pass, pl);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ENOSPC);
	FUZZ_ASSERT(fuzz_guard_ok(base, bl) && fuzz_guard_ok(user, ul) &&
		    fuzz_guard_ok(pass, pl));
	if (rc) {
		FUZZ_ASSERT((!bl || !base[0]) && (!ul || !user[0]) && (!pl || !pass[0]));
	} else {
		FUZZ_ASSERT(strnlen(base, bl) < bl && strnlen(user, ul) < ul &&
			    strnlen(pass, pl) < pl);
		check_base(base, user, pass);
		round_trip(base, user, pass);
	}
	if (f[1])
		check_url(rc == 0 ? base : "http://h", f[1], from, until);
	fuzz_free_all(f, 2);
	return 0;
}
