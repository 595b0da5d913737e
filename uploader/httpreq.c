/* httpreq.c -- the listener's request parser.  See httpreq.h. */
#include "uploader/httpreq.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static int
fail(struct ps_httpreq *rq, int status, const char *why)
{
	rq->why = why;
	return status;
}

/* RFC 9110 tchar. */
static int
is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The next line of buf[*pos..len): its start and length without the
 * line end.  Returns 0, or -EAGAIN when no line end is there yet. */
static int
next_line(const char *buf, size_t len, size_t *pos, const char **line, size_t *n)
{
	const char *nl = memchr(buf + *pos, '\n', len - *pos);
	size_t end;

	if (!nl)
		return -EAGAIN;
	end = (size_t)(nl - buf);
	*line = buf + *pos;
	*n = end - *pos;
	if (*n && (*line)[*n - 1] == '\r')
		(*n)--;
	*pos = end + 1;
	return 0;
}

static int
request_line(const char *l, size_t n, struct ps_httpreq *rq, int *http11)
{
	const char *sp1 = memchr(l, ' ', n), *sp2, *target, *q;
	size_t mlen, tlen, vlen, i;

	if (!sp1 || sp1 == l)
		return fail(rq, 400, "malformed request line");
	mlen = (size_t)(sp1 - l);
	for (i = 0; i < mlen; i++)
		if (!is_tchar((unsigned char)l[i]))
			return fail(rq, 400, "malformed method");
	target = sp1 + 1;
	sp2 = memchr(target, ' ', n - (size_t)(target - l));
	if (!sp2)
		return fail(rq, 400, "malformed request line");
	tlen = (size_t)(sp2 - target);
	vlen = n - (size_t)(sp2 + 1 - l);
	if (vlen < 5 || memcmp(sp2 + 1, "HTTP/", 5))
		return fail(rq, 400, "malformed HTTP version");
	if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) || (sp2[8] != '0' && sp2[8] != '1'))
		return fail(rq, 505, "only HTTP/1.0 and HTTP/1.1 are served");
	*http11 = sp2[8] == '1';
	if (tlen == 0 || target[0] != '/')
		return fail(rq, 400, "the request target must be a path starting with /");
	for (i = 0; i < tlen; i++)
		if ((unsigned char)target[i] <= ' ' || (unsigned char)target[i] >= 0x7f ||
		    target[i] == '#')
			return fail(rq, 400, "the request target holds a character it may not");
	q = memchr(target, '?', tlen);
	if ((size_t)((q ? q : sp2) - target) >= sizeof(rq->path) ||
	    (q && (size_t)(sp2 - q - 1) >= sizeof(rq->query)))
		return fail(rq, 414, "the request target is too long");
	memcpy(rq->path, target, (size_t)((q ? q : sp2) - target));
	rq->path[(q ? q : sp2) - target] = '\0';
	if (q) {
		memcpy(rq->query, q + 1, (size_t)(sp2 - q - 1));
		rq->query[sp2 - q - 1] = '\0';
	}
	if (mlen == 3 && !memcmp(l, "GET", 3))
		rq->head = 0;
	else if (mlen == 4 && !memcmp(l, "HEAD", 4))
		rq->head = 1;
	else
		return fail(rq, 405, "only GET and HEAD are served");
	return 0;
}

/* One header line: its name must be a token; Host, Content-Length and
 * Transfer-Encoding are looked at. */
static int
header_line(const char *l, size_t n, struct ps_httpreq *rq, int *hosts)
{
	const char *colon = memchr(l, ':', n), *v;
	size_t name, i, vlen;

	if (l[0] == ' ' || l[0] == '\t')
		return fail(rq, 400, "folded header lines are not accepted");
	if (!colon || colon == l)
		return fail(rq, 400, "malformed header line");
	name = (size_t)(colon - l);
	for (i = 0; i < name; i++)
		if (!is_tchar((unsigned char)l[i]))
			return fail(rq, 400, "malformed header name");
	for (i = name + 1; i < n; i++)
		if (((unsigned char)l[i] < ' ' && l[i] != '\t') || l[i] == 0x7f)
			return fail(rq, 400, "a control character in a header value");
	v = colon + 1;
	vlen = n - name - 1;
	while (vlen && (*v == ' ' || *v == '\t')) {
		v++;
		vlen--;
	}
	while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	if (name == 4 && !strncasecmp(l, "Host", 4))
		(*hosts)++;
	else if (name == 17 && !strncasecmp(l, "Transfer-Encoding", 17))
		return fail(rq, 400, "a GET has no body");
	else if (name == 14 && !strncasecmp(l, "Content-Length", 14) && !(vlen == 1 && *v == '0'))
		return fail(rq, 400, "a GET has no body");
	return 0;
}

int
ps_httpreq_parse(const char *buf, size_t len, struct ps_httpreq *rq)
{
	size_t pos = 0, n;
	const char *l;
	int http11 = 0, hosts = 0, rc;

	memset(rq, 0, sizeof(*rq));
	/* Tolerated, as RFC 9112 2.2 allows: empty lines before the request. */
	while (pos < len && (buf[pos] == '\r' || buf[pos] == '\n') && pos < 4)
		pos++;
	if (next_line(buf, len, &pos, &l, &n))
		goto more;
	rc = request_line(l, n, rq, &http11);
	if (rc)
		return rc;
	for (;;) {
		if (next_line(buf, len, &pos, &l, &n))
			goto more;
		if (n == 0)
			break;
		rc = header_line(l, n, rq, &hosts);
		if (rc)
			return rc;
	}
	if (pos > PS_HTTPREQ_MAX)
		return fail(rq, 431, "the request head is larger than 8 KiB");
	if (http11 && hosts != 1)
		return fail(rq, 400, "an HTTP/1.1 request needs exactly one Host header");
	return 0;
more:
	if (len >= PS_HTTPREQ_MAX)
		return fail(rq, 431, "the request head is larger than 8 KiB");
	return -EAGAIN;
}

static int
hex(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decode s[0..n) into out; -1 if malformed or too long. */
static int
decode(const char *s, size_t n, char *out, size_t outlen)
{
	size_t i, o = 0;
	int c;

	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			if (i + 2 >= n)
				return -1;
			if (hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0)
				return -1;
			c = hex(s[i + 1]) * 16 + hex(s[i + 2]);
			i += 2;
		}
		if (c == 0 || o + 1 >= outlen)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}

int
ps_httpreq_query(const char *query, const char *key, char *out, size_t outlen)
{
	char name[64];
	const char *p = query, *amp, *eq;
	size_t seg;
	int found = 0;

	if (!outlen)
		return -1;
	out[0] = '\0';
	while (*p) {
		amp = strchr(p, '&');
		seg = amp ? (size_t)(amp - p) : strlen(p);
		eq = memchr(p, '=', seg);
		if (decode(p, eq ? (size_t)(eq - p) : seg, name, sizeof(name)) == 0 &&
		    !strcmp(name, key)) {
			if (found)
				return -1;
			found = 1;
			if (decode(eq ? eq + 1 : p + seg, eq ? seg - (size_t)(eq + 1 - p) : 0, out,
				   outlen))
				return -1;
		}
		p += seg + (amp ? 1 : 0);
	}
	return found;
}

int
ps_httpreq_seconds(const char *s, unsigned max, unsigned *out)
{
	unsigned long v = 0;
	size_t i;

	if (!s[0] || s[0] == '0')
		return -EINVAL;  /* empty, zero, or a leading zero */
	for (i = 0; s[i]; i++)
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
	if (i > 9)
		return -ERANGE;
	for (i = 0; s[i]; i++)
		v = v * 10 + (unsigned long)(s[i] - '0');
	if (v > max)
		return -ERANGE;
	*out = (unsigned)v;
	return 0;
}
