/* headers.c -- PYROSCOPE_HTTP_HEADERS: a strict JSON object of strings
 * turned into libcurl header lines.  See headers.h.
 *
 * The parser is a single pass with no recursion: the grammar has no
 * nesting to recurse into.  Each member is decoded straight into the next
 * free bytes of h->text as `Name: value\0`; if it is then judged
 * unacceptable, the write position simply moves back.  When text is full
 * the parser keeps going without storing, so that a syntax error late in
 * the input is still found and the variable rejected as a whole.
 */
#include "uploader/headers.h"
#include "common/text.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static const char *const drop_words[] = {
	[PS_HEADERS_DROP_BAD_NAME] = "bad name",
	[PS_HEADERS_DROP_BAD_VALUE] = "bad value",
	[PS_HEADERS_DROP_RESERVED] = "reserved name",
	[PS_HEADERS_DROP_DUPLICATE] = "duplicate",
	[PS_HEADERS_DROP_FULL] = "too many headers",
};

static const char *const reserved[] = {
	"Content-Type", "Content-Length", "Transfer-Encoding",
};

struct parser {
	const unsigned char *s;         /* next input byte */
	struct ps_headers *h;
	size_t pos;                     /* next free byte in h->text */
	int overflow;                   /* this member did not fit */
};

static void
skip_ws(struct parser *p)
{
	while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
		p->s++;
}

static void
emit(struct parser *p, const void *b, size_t n)
{
	if (p->overflow || n > sizeof(p->h->text) - p->pos) {
		p->overflow = 1;
		return;
	}
	memcpy(p->h->text + p->pos, b, n);
	p->pos += n;
}

static void
emit_utf8(struct parser *p, unsigned cp)
{
	unsigned char b[4];
	size_t n, i;

	if (cp < 0x80) {
		b[0] = (unsigned char)cp, n = 1;
	} else if (cp < 0x800) {
		b[0] = (unsigned char)(0xc0 | cp >> 6), n = 2;
	} else if (cp < 0x10000) {
		b[0] = (unsigned char)(0xe0 | cp >> 12), n = 3;
	} else {
		b[0] = (unsigned char)(0xf0 | cp >> 18), n = 4;
	}
	for (i = 1; i < n; i++)
		b[i] = (unsigned char)(0x80 | ((cp >> (6 * (n - 1 - i))) & 0x3f));
	emit(p, b, n);
}

/* Four hex digits after "\u"; -1 if malformed. */
static long
hex4(const unsigned char *s)
{
	long v = 0;
	int i, d;

	for (i = 0; i < 4; i++) {
		d = ps_hexval((char)s[i]);
		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	return v;
}

/* p->s is just past "\u".  Decodes one code point, or a surrogate pair. */
static int
unicode_escape(struct parser *p)
{
	long hi = hex4(p->s), lo;

	if (hi < 0 || (hi >= 0xdc00 && hi <= 0xdfff))
		return -EINVAL;
	p->s += 4;
	if (hi < 0xd800 || hi > 0xdbff) {
		emit_utf8(p, (unsigned)hi);
		return 0;
	}
	if (p->s[0] != '\\' || p->s[1] != 'u')
		return -EINVAL;
	lo = hex4(p->s + 2);
	if (lo < 0xdc00 || lo > 0xdfff)
		return -EINVAL;
	p->s += 6;
	emit_utf8(p, 0x10000 + (unsigned)((hi - 0xd800) << 10 | (lo - 0xdc00)));
	return 0;
}

/* p->s is just past a backslash. */
static int
escape(struct parser *p)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *e;
	unsigned char c = *p->s++;

	if (c == 'u')
		return unicode_escape(p);
	e = c ? strchr(from, c) : NULL;
	if (!e)
		return -EINVAL;
	emit(p, &to[e - from], 1);
	return 0;
}

/* A JSON string at p->s, decoded into the text. */
static int
string(struct parser *p)
{
	size_t n;
	int rc;

	if (*p->s++ != '"')
		return -EINVAL;
	while (*p->s != '"') {
		if (*p->s < 0x20)       /* raw control char, or end of input */
			return -EINVAL;
		if (*p->s == '\\') {
			p->s++;
			rc = escape(p);
			if (rc)
				return rc;
			continue;
		}
		n = ps_utf8_seq((const char *)p->s, strnlen((const char *)p->s, 4));
		if (!n)
			return -EINVAL;
		emit(p, p->s, n);
		p->s += n;
	}
	p->s++;
	return 0;
}

static int
name_ok(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!ps_is_tchar(s[i]))
			return 0;
	return n > 0;
}

static int
value_ok(const char *s, size_t n)
{
	size_t i;
	int blank = 1;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return 0;
		if (c != ' ' && c != '\t')
			blank = 0;
	}
	return !blank;
}

static int
name_eq(const char *a, const char *b, size_t n)
{
	return strlen(b) > n && b[n] == ':' && !strncasecmp(a, b, n);
}

/* 0 if the member at text[start..] (name of nlen bytes, value vlen bytes
 * after ": ") may be kept, else the reason to drop it. */
static int
judge(const struct parser *p, size_t start, size_t nlen, size_t vlen)
{
	const char *name = p->h->text + start;
	unsigned i;

	if (p->overflow || p->h->n >= PS_HEADERS_MAX)
		return PS_HEADERS_DROP_FULL;
	if (!name_ok(name, nlen))
		return PS_HEADERS_DROP_BAD_NAME;
	if (!value_ok(name + nlen + 2, vlen))
		return PS_HEADERS_DROP_BAD_VALUE;
	for (i = 0; i < PS_ARRAY_LEN(reserved); i++)
		if (strlen(reserved[i]) == nlen &&
		    !strncasecmp(name, reserved[i], nlen))
			return PS_HEADERS_DROP_RESERVED;
	for (i = 0; i < p->h->n; i++)
		if (name_eq(name, p->h->text + p->h->off[i], nlen))
			return PS_HEADERS_DROP_DUPLICATE;
	return 0;
}

/* One `"name" : "value"` member, stored or dropped. */
static int
member(struct parser *p, struct ps_report *rep)
{
	size_t start = p->pos, nlen, vstart;
	int rc, why;

	p->overflow = 0;
	rc = string(p);
	if (rc)
		return rc;
	nlen = p->pos - start;
	skip_ws(p);
	if (*p->s++ != ':')
		return -EINVAL;
	skip_ws(p);
	emit(p, ": ", 2);
	vstart = p->pos;
	rc = string(p);
	if (rc)
		return rc;
	emit(p, "", 1);
	why = judge(p, start, nlen, p->overflow ? 0 : p->pos - vstart - 1);
	if (why) {
		ps_report_drop(rep, why, p->h->text + start, nlen);
		p->pos = start;
		return 0;
	}
	p->h->off[p->h->n++] = (uint16_t)start;
	return 0;
}

/* The object: '{' [member (',' member)*] '}' then only whitespace. */
static int
object(struct parser *p, struct ps_report *rep)
{
	int rc;

	if (*p->s++ != '{')
		return -EINVAL;
	skip_ws(p);
	if (*p->s == '}') {
		p->s++;
	} else {
		for (;;) {
			rc = member(p, rep);
			if (rc)
				return rc;
			skip_ws(p);
			if (*p->s == '}')
				break;
			if (*p->s++ != ',')
				return -EINVAL;
			skip_ws(p);
		}
		p->s++;
	}
	skip_ws(p);
	return *p->s ? -EINVAL : 0;
}

int
ps_headers_parse_json(const char *json, struct ps_headers *h,
		      struct ps_report *rep)
{
	struct parser p;
	int rc;

	if (!h)
		return -EINVAL;
	h->n = 0;
	if (rep)
		memset(rep, 0, sizeof(*rep));
	if (!json)
		return 0;
	p.s = (const unsigned char *)json;
	p.h = h;
	p.pos = 0;
	p.overflow = 0;
	skip_ws(&p);
	if (!*p.s)
		return 0;
	rc = object(&p, rep);
	if (rc) {
		h->n = 0;
		if (rep)
			memset(rep, 0, sizeof(*rep));
		return rc;
	}
	return (int)h->n;
}

const char *
ps_headers_line(const struct ps_headers *h, unsigned i)
{
	if (!h || i >= h->n)
		return NULL;
	return h->text + h->off[i];
}

unsigned
ps_headers_vector(const struct ps_headers *h, const char *v[PS_HEADERS_MAX])
{
	unsigned i;

	if (!h)
		return 0;
	for (i = 0; i < h->n; i++)
		v[i] = h->text + h->off[i];
	return h->n;
}

const char *
ps_headers_drop_str(enum ps_headers_drop why)
{
	if ((unsigned)why >= PS_ARRAY_LEN(drop_words) || !drop_words[why])
		return "dropped";
	return drop_words[why];
}
