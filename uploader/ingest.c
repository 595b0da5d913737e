/* ingest.c -- URL splitting, the /ingest query string and the multipart
 * body.  See ingest.h.
 *
 * The address is validated strictly (a byte libcurl would reinterpret,
 * such as a space or a '#', is refused rather than fixed), because the
 * same string is later concatenated with "/ingest?..." and any surprise in
 * it would send the profile, or the credentials, somewhere unexpected.
 */
#include "uploader/ingest.h"
#include "common/text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define BOUNDARY_BYTES 16       /* 32 hex digits */
#define BOUNDARY_TRIES 8
#define MAX_NS_EXCL    10000000000000000000ULL  /* 10^19: 20 digits */
#define CT_PREFIX      "multipart/form-data; boundary="

static const char hexdig[] = "0123456789abcdef";

/* --- address ------------------------------------------------------------ */

/* A fixed-size output string being built; pos excludes the NUL. */
struct out {
	char *p;
	size_t len, pos;
};

static int
put(struct out *o, const char *s, size_t n)
{
	if (n >= o->len - o->pos)
		return -ENOSPC;
	memcpy(o->p + o->pos, s, n);
	o->pos += n;
	o->p[o->pos] = '\0';
	return 0;
}

/* Percent-decode s[0..n) onto o; control characters are refused. */
static int
decode(struct out *o, const char *s, size_t n)
{
	long got = ps_pct_decode(s, n, o->p + o->pos, o->len - o->pos, 0);

	if (got < 0)
		return (int)got;
	o->pos += (size_t)got;
	return 0;
}

static int
is_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
	       c == '~';
}

static int
port_ok(const char *s, size_t n)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return 0;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v >= 1 && v <= 65535;
}

/* host[:port] or [v6]:port, s[0..n). */
static int
hostport_ok(const char *s, size_t n)
{
	size_t i, h;

	if (n && s[0] == '[') {
		for (h = 1; h < n && s[h] != ']'; h++)
			if (ps_hexval(s[h]) < 0 && s[h] != ':' && s[h] != '.')
				return 0;
		if (h >= n || h == 1)
			return 0;
		h++;    /* past ']' */
	} else {
		for (h = 0; h < n && s[h] != ':'; h++)
			if (!is_host_char(s[h]))
				return 0;
		if (h == 0)
			return 0;
	}
	if (h == n)
		return 1;
	i = h + 1;
	return s[h] == ':' && port_ok(s + i, n - i);
}

/* Printable ASCII without space, and no query or fragment. */
static int
chars_ok(const char *s)
{
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f || *s == '?' || *s == '#')
			return 0;
	return 1;
}

/* Credentials from userinfo u[0..n). */
static int
split_userinfo(const char *u, size_t n, struct out *user, struct out *pass)
{
	const char *colon = memchr(u, ':', n);
	size_t un = colon ? (size_t)(colon - u) : n;
	int rc;

	rc = decode(user, u, un);
	if (!rc && colon)
		rc = decode(pass, colon + 1, n - un - 1);
	return rc;
}

static int
split(const char *server, struct out *base, struct out *user, struct out *pass)
{
	const char *auth, *path, *at;
	size_t slen, alen, plen;
	int rc;

	if (!strncasecmp(server, "http://", 7))
		slen = 7;
	else if (!strncasecmp(server, "https://", 8))
		slen = 8;
	else
		return -EINVAL;
	if (!chars_ok(server))
		return -EINVAL;
	auth = server + slen;
	path = auth + strcspn(auth, "/");
	alen = (size_t)(path - auth);
	at = memrchr(auth, '@', alen);
	if (at) {
		rc = split_userinfo(auth, (size_t)(at - auth), user, pass);
		if (rc)
			return rc;
		alen -= (size_t)(at + 1 - auth);
		auth = at + 1;
	}
	plen = strlen(path);
	while (plen && path[plen - 1] == '/')
		plen--;
	if (!hostport_ok(auth, alen) || !ps_pct_escapes_ok(path, plen))
		return -EINVAL;
	rc = put(base, slen == 7 ? "http://" : "https://", slen);
	if (!rc)
		rc = put(base, auth, alen);
	if (!rc)
		rc = put(base, path, plen);
	return rc;
}

int
ps_ingest_split_url(const char *server, char *base, size_t blen,
		    char *user, size_t ulen, char *pass, size_t plen)
{
	struct out b = { base, blen, 0 };
	struct out u = { user, ulen, 0 };
	struct out p = { pass, plen, 0 };
	int rc;

	if (!base || !user || !pass)
		return -EINVAL;
	if (blen)
		base[0] = '\0';
	if (ulen)
		user[0] = '\0';
	if (plen)
		pass[0] = '\0';
	if (!server || !blen || !ulen || !plen)
		return -EINVAL;
	rc = split(server, &b, &u, &p);
	if (rc) {
		base[0] = '\0';
		user[0] = '\0';
		pass[0] = '\0';
	}
	return rc;
}

/* --- query -------------------------------------------------------------- */

static int
is_unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

/* Append s percent-encoded, through a small stack buffer. */
static int
put_encoded(struct ps_buf *b, const char *s)
{
	char tmp[192];
	size_t n = 0;
	unsigned char c;
	int rc;

	for (; *s; s++) {
		c = (unsigned char)*s;
		if (is_unreserved(c)) {
			tmp[n++] = (char)c;
		} else {
			tmp[n++] = '%';
			tmp[n++] = "0123456789ABCDEF"[c >> 4];
			tmp[n++] = "0123456789ABCDEF"[c & 15];
		}
		if (n > sizeof(tmp) - 3) {
			rc = ps_buf_append(b, tmp, n);
			if (rc)
				return rc;
			n = 0;
		}
	}
	return ps_buf_append(b, tmp, n);
}

/* Append "&key=value" (key includes the separator) unless value is NULL. */
static int
put_param(struct ps_buf *b, const char *key, const char *value)
{
	int rc;

	if (!value)
		return 0;
	rc = ps_buf_puts(b, key);
	if (!rc)
		rc = put_encoded(b, value);
	return rc;
}

static int
put_time(struct ps_buf *b, const char *key, uint64_t ns)
{
	if (!ns)
		return 0;
	return ps_buf_printf(b, "%s%019" PRIu64, key, ns);
}

static int
check_query(const char *base, const struct ps_ingest_query *q)
{
	if (!base || !*base || !q || !q->name || !*q->name)
		return -EINVAL;
	if (q->from_ns >= MAX_NS_EXCL || q->until_ns >= MAX_NS_EXCL)
		return -ERANGE;
	if (q->from_ns && q->until_ns && q->until_ns < q->from_ns)
		return -EINVAL;
	return 0;
}

int
ps_ingest_url(const char *base, const struct ps_ingest_query *q,
	      struct ps_buf *out)
{
	size_t start;
	int rc;

	if (!out)
		return -EINVAL;
	rc = check_query(base, q);
	if (rc)
		return rc;
	start = out->len;
	rc = ps_buf_puts(out, base);
	if (!rc)
		rc = put_param(out, "/ingest?name=", q->name);
	if (!rc)
		rc = put_time(out, "&from=", q->from_ns);
	if (!rc)
		rc = put_time(out, "&until=", q->until_ns);
	if (!rc)
		rc = put_param(out, "&format=", q->format);
	if (!rc)
		rc = put_param(out, "&spyName=", q->spy_name);
	if (!rc && q->sample_rate)
		rc = ps_buf_printf(out, "&sampleRate=%u", q->sample_rate);
	if (!rc)
		rc = put_param(out, "&units=", q->units);
	if (!rc)
		rc = put_param(out, "&aggregationType=", q->aggregation);
	if (!rc)
		rc = ps_buf_append(out, "", 1);
	if (rc) {
		out->len = start;
		return rc;
	}
	out->len--;     /* the NUL stays in place, uncounted */
	return 0;
}

/* --- multipart ---------------------------------------------------------- */

static int (*random_fill)(void *p, size_t n);    /* test seam; NULL: getrandom */

void
ps_ingest_set_random(int (*fill)(void *p, size_t n))
{
	random_fill = fill;
}

static int
os_random(void *p, size_t n)
{
	ssize_t got;

	got = getrandom(p, n, GRND_NONBLOCK);
	return got == (ssize_t)n ? 0 : -1;
}

/* When no randomness is at hand: the boundary only has to be absent from
 * the data, which is checked, so a distinct value per call is enough. */
static void
fallback_random(uint8_t *p, size_t n)
{
	static uint64_t counter;
	struct timespec ts;
	uint64_t x;
	size_t i;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	x ^= (uint64_t)getpid() << 32;
	x += __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) *
	     0x9e3779b97f4a7c15ULL;
	for (i = 0; i < n; i++) {
		/* splitmix64 step */
		x += 0x9e3779b97f4a7c15ULL;
		p[i] = (uint8_t)((x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL >> 56);
	}
}

static void
make_boundary(char out[2 * BOUNDARY_BYTES + 1])
{
	uint8_t r[BOUNDARY_BYTES];
	int (*fill)(void *, size_t) = random_fill ? random_fill : os_random;
	size_t i;

	if (fill(r, sizeof(r)))
		fallback_random(r, sizeof(r));
	for (i = 0; i < sizeof(r); i++) {
		out[2 * i] = hexdig[r[i] >> 4];
		out[2 * i + 1] = hexdig[r[i] & 15];
	}
	out[2 * BOUNDARY_BYTES] = '\0';
}

static int
boundary_free(const char *bnd, const void *data, size_t n, const char *json)
{
	size_t blen = strlen(bnd);

	if (memmem(data, n, bnd, blen))
		return 0;
	return !json || !memmem(json, strlen(json), bnd, blen);
}

static int
put_part(struct ps_buf *b, const char *bnd, const char *field,
	 const char *file, const void *p, size_t n)
{
	int rc;

	rc = ps_buf_printf(b, "--%s\r\n"
			   "Content-Disposition: form-data; name=\"%s\"; "
			   "filename=\"%s\"\r\n"
			   "Content-Type: application/octet-stream\r\n\r\n",
			   bnd, field, file);
	if (!rc)
		rc = ps_buf_append(b, p, n);
	if (!rc)
		rc = ps_buf_puts(b, "\r\n");
	return rc;
}

int
ps_ingest_multipart(const void *pprof_gz, size_t n,
		    const char *sample_type_config_json, struct ps_buf *body,
		    char *content_type, size_t ctlen)
{
	const char *json = sample_type_config_json;
	char bnd[2 * BOUNDARY_BYTES + 1];
	size_t start;
	int i, rc;

	if (!pprof_gz || !n || !body || !content_type)
		return -EINVAL;
	if (ctlen < sizeof(CT_PREFIX) + 2 * BOUNDARY_BYTES)
		return -ENOSPC;
	for (i = 0; i < BOUNDARY_TRIES; i++) {
		make_boundary(bnd);
		if (boundary_free(bnd, pprof_gz, n, json))
			break;
	}
	if (i == BOUNDARY_TRIES)
		return -EAGAIN;
	start = body->len;
	rc = put_part(body, bnd, "profile", "profile.pprof", pprof_gz, n);
	if (!rc && json)
		rc = put_part(body, bnd, "sample_type_config",
			      "sample_type_config.json", json, strlen(json));
	if (!rc)
		rc = ps_buf_printf(body, "--%s--\r\n", bnd);
	if (rc) {
		body->len = start;
		return rc;
	}
	snprintf(content_type, ctlen, CT_PREFIX "%s", bnd);
	return 0;
}
