/* traceparent.c -- W3C Trace Context Level 2 parsing and formatting.
 *
 * A traceparent is four dash-separated fields of fixed width, so it is read
 * by position: version at 0, trace-id at 3, parent-id at 36, flags at 53,
 * and whatever follows at 55.  Each character is checked before the next is
 * read, so a short string stops at its NUL and nothing past it is touched.
 *
 * A tracestate is a comma-separated list; it is validated member by member
 * in place (pointer + length pairs into the caller's string), which keeps
 * the module free of allocation.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "trace/traceparent.h"
#include "common/text.h"

#define TP_TRACE_OFF  3
#define TP_PARENT_OFF 36
#define TP_FLAGS_OFF  53

static const char hexdig[] = "0123456789abcdef";

/* Value of a lowercase hex digit, or -1.  Uppercase is rejected on purpose:
 * the spec allows only lowercase. */
static int
hexval(char c)
{
	return c >= 'A' && c <= 'F' ? -1 : ps_hexval(c);
}

/* Decode 2n lowercase hex digits at p into out[0..n). */
static int
unhex(const char *p, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(p[2 * i]);
		int lo = hi < 0 ? -1 : hexval(p[2 * i + 1]);

		if (lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static int
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

void
ps_hex_encode(const uint8_t *in, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexdig[in[i] >> 4];
		out[2 * i + 1] = hexdig[in[i] & 0x0f];
	}
	out[2 * n] = '\0';
}

int
ps_traceparent_parse(const char *s, struct ps_traceparent *out)
{
	struct ps_traceparent tp;
	uint8_t version;

	if (!s || !out)
		return -EINVAL;
	if (unhex(s, 1, &version) || s[2] != '-' || version == 0xff)
		return -EINVAL;
	if (unhex(s + TP_TRACE_OFF, 16, tp.trace_id) || s[35] != '-')
		return -EINVAL;
	if (unhex(s + TP_PARENT_OFF, 8, tp.span_id) || s[52] != '-')
		return -EINVAL;
	if (unhex(s + TP_FLAGS_OFF, 1, &tp.flags))
		return -EINVAL;
	/* Version 00 is exactly 55 characters.  A later version may append
	 * fields, but only after another dash. */
	if (s[PS_TRACEPARENT_LEN] != '\0' &&
	    (version == 0 || s[PS_TRACEPARENT_LEN] != '-'))
		return -EINVAL;
	if (all_zero(tp.trace_id, 16) || all_zero(tp.span_id, 8))
		return -EINVAL;
	*out = tp;
	return 0;
}

int
ps_traceparent_format(const struct ps_traceparent *tp, char *buf, size_t len)
{
	if (!tp || !buf)
		return -EINVAL;
	if (len < PS_TRACEPARENT_LEN + 1)
		return -ENOSPC;
	buf[0] = '0';
	buf[1] = '0';
	buf[2] = '-';
	ps_hex_encode(tp->trace_id, 16, buf + TP_TRACE_OFF);
	buf[35] = '-';
	ps_hex_encode(tp->span_id, 8, buf + TP_PARENT_OFF);
	buf[52] = '-';
	ps_hex_encode(&tp->flags, 1, buf + TP_FLAGS_OFF);
	return 0;
}

/* ---- tracestate ---------------------------------------------------- */

static int
is_lcalpha(char c)
{
	return c >= 'a' && c <= 'z';
}

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The characters allowed after the first one of a key part. */
static int
is_keychar(char c)
{
	return is_lcalpha(c) || is_digit(c) || c == '_' || c == '-' ||
	       c == '*' || c == '/';
}

/* Whether k[0..n) is lcalpha-or-digit-first (digit_ok) key part of 1..max
 * characters. */
static int
key_part_ok(const char *k, size_t n, size_t max, int digit_ok)
{
	if (n == 0 || n > max)
		return 0;
	if (!is_lcalpha(k[0]) && !(digit_ok && is_digit(k[0])))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!is_keychar(k[i]))
			return 0;
	return 1;
}

/* simple-key = lcalpha 0*255(keychar)
 * multi-tenant-key = tenant-id "@" system-id
 * tenant-id = (lcalpha / DIGIT) 0*240(keychar)
 * system-id = lcalpha 0*13(keychar) */
static int
key_ok(const char *k, size_t n)
{
	const char *at = memchr(k, '@', n);
	size_t tn;

	if (!at)
		return key_part_ok(k, n, 256, 0);
	tn = (size_t)(at - k);
	return key_part_ok(k, tn, 241, 1) &&
	       key_part_ok(at + 1, n - tn - 1, 14, 0);
}

/* value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr;
 * nblk-chr = %x21-2B / %x2D-3C / %x3E-7E (printable ASCII but ',' and '='). */
static int
value_ok(const char *v, size_t n)
{
	if (n == 0 || n > 256 || v[n - 1] == ' ')
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c < 0x20 || c > 0x7e || c == ',' || c == '=')
			return 0;
	}
	return 1;
}

/* Whether the member starting at p (up to the next ',' or NUL) has the same
 * key as k[0..kn). */
static int
member_has_key(const char *p, const char *k, size_t kn)
{
	while (ps_is_ows(*p))
		p++;
	return strncmp(p, k, kn) == 0 && p[kn] == '=';
}

/* Whether key k[0..kn), found in the member at `self`, already appeared in
 * an earlier member of the list starting at `list`. */
static int
key_seen_before(const char *list, const char *self, const char *k, size_t kn)
{
	const char *p = list;
	const char *comma;

	/* Earlier members are exactly those ended by a comma before self. */
	while ((comma = strchr(p, ',')) && comma < self) {
		if (member_has_key(p, k, kn))
			return 1;
		p = comma + 1;
	}
	return 0;
}

/* Check one member m[0..n) (surrounding OWS already trimmed, n > 0). */
static int
member_ok(const char *list, const char *m, size_t n)
{
	const char *eq = memchr(m, '=', n);
	size_t kn;

	if (!eq)
		return 0;
	kn = (size_t)(eq - m);
	if (!key_ok(m, kn) || !value_ok(eq + 1, n - kn - 1))
		return 0;
	return !key_seen_before(list, m, m, kn);
}

int
ps_tracestate_valid(const char *s)
{
	const char *p = s;
	int members = 0;

	if (!s || strnlen(s, PS_TRACESTATE_MAX + 1) > PS_TRACESTATE_MAX)
		return 0;
	for (;;) {
		const char *end = strchrnul(p, ',');
		const char *b = p;
		size_t n = (size_t)(end - p);

		ps_trim(&b, &n, ps_is_ows);
		if (n > 0) {
			if (++members > PS_TRACESTATE_MAX_MEMBERS)
				return 0;
			if (!member_ok(s, b, n))
				return 0;
		}
		if (*end == '\0')
			return 1;
		p = end + 1;
	}
}

/* ---- random ids ---------------------------------------------------- */

/* One full draw of n bytes, looping over short reads and EINTR. */
static int
draw(uint8_t *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = getrandom(buf + got, n - got, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)r;
	}
	return 0;
}

int
ps_trace_random(uint8_t *buf, size_t n)
{
	int saved = errno;
	int rc;

	if (!buf || n == 0)
		return -EINVAL;
	/* An all-zero id is invalid on the wire.  With 8 or more random bytes
	 * a second draw practically never happens; the loop makes it certain. */
	do {
		rc = draw(buf, n);
	} while (rc == 0 && all_zero(buf, n));
	errno = saved;
	return rc;
}
