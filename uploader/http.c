/* http.c -- blocking HTTP POST over a lazily loaded libcurl.  See http.h.
 *
 * Design: the library is opened once (pthread_once) and its entry points
 * kept in one table, `api`, that is written only by load_once() and read
 * afterwards without locks (pthread_once orders the writes before any
 * reader that called ps_http_load()).  Each request gets its own easy
 * handle, header list and response state on the caller's stack, so
 * concurrent posts share nothing.  libcurl's CURLcode is translated to a
 * negative errno here and nowhere else.
 */
#include "uploader/http.h"
#include "common/buf.h"
#include "common/dl.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define USER_AGENT "pyroshim/" PS_VERSION
#define MAX_AUTH_HEADER 8192    /* cap on "Authorization: Bearer <token>" */
#define MIN_SECRET_MASKED 4     /* shorter secrets would mask ordinary words */

/* libcurl's entry points; written once by load_once(), then read-only. */
static struct {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_perform)(CURL *h);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	void (*easy_cleanup)(CURL *h);
	const char *(*easy_strerror)(CURLcode rc);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
	time_t (*getdate)(const char *s, const time_t *unused);
} api;

static pthread_once_t load_once_ctl = PTHREAD_ONCE_INIT;
static int load_rc = -ENOSYS;   /* written only inside load_once() */

/* Per-request state the callbacks write into; lives on the caller's stack. */
struct xfer {
	struct ps_buf body;     /* first PS_HTTP_MAX_BODY_KEPT bytes of the body */
	long retry_after_s;     /* -1 until a valid Retry-After is seen */
};

static void
load_once(void)
{
	static const struct ps_dl_sym syms[] = {
		{ "curl_global_init", offsetof(__typeof__(api), global_init) },
		{ "curl_easy_init", offsetof(__typeof__(api), easy_init) },
		{ "curl_easy_setopt", offsetof(__typeof__(api), easy_setopt) },
		{ "curl_easy_perform", offsetof(__typeof__(api), easy_perform) },
		{ "curl_easy_getinfo", offsetof(__typeof__(api), easy_getinfo) },
		{ "curl_easy_cleanup", offsetof(__typeof__(api), easy_cleanup) },
		{ "curl_easy_strerror", offsetof(__typeof__(api), easy_strerror) },
		{ "curl_slist_append", offsetof(__typeof__(api), slist_append) },
		{ "curl_slist_free_all", offsetof(__typeof__(api), slist_free_all) },
		{ "curl_getdate", offsetof(__typeof__(api), getdate) },
	};
	/* libcurl-gnutls has the same ABI and is what many desktops carry. */
	static const char *const names[] = { "libcurl.so.4", "libcurl-gnutls.so.4" };
	const char *why;
	void *dl = NULL;
	size_t i;

	for (i = 0; i < PS_ARRAY_LEN(names) && !dl; i++)
		dl = ps_dl_load(names[i], syms, PS_ARRAY_LEN(syms), &api, sizeof(api), &why);
	if (!dl)
		return;
	if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		memset(&api, 0, sizeof(api));
		dlclose(dl);
		return;
	}
	load_rc = 0;
}

int
ps_http_load(void)
{
	if (pthread_once(&load_once_ctl, load_once))
		return -ENOSYS;
	return load_rc;
}

/* Retry-After: delta-seconds or an HTTP-date (RFC 9110 10.2.3). */
static long
parse_retry_after(const char *v)
{
	char *end;
	long s;
	time_t t;

	if (isdigit((unsigned char)*v)) {
		errno = 0;
		s = strtol(v, &end, 10);
		if (*end != '\0' || errno == ERANGE)
			return errno == ERANGE ? PS_HTTP_MAX_RETRY_AFTER_S : -1;
	} else {
		/* curl_getdate is locale-independent, unlike strptime. */
		t = api.getdate(v, NULL);
		if (t == (time_t)-1)
			return -1;
		s = t > time(NULL) ? (long)(t - time(NULL)) : 0;
	}
	return s > PS_HTTP_MAX_RETRY_AFTER_S ? PS_HTTP_MAX_RETRY_AFTER_S : s;
}

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	static const char name[] = "retry-after:";
	struct xfer *x = arg;
	size_t len = size * n, vlen;
	char v[128];

	/* A new status line starts a new response (after a 1xx). */
	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0)
		x->retry_after_s = -1;
	if (len < sizeof(name) - 1 || strncasecmp(p, name, sizeof(name) - 1))
		return len;
	p += sizeof(name) - 1;
	vlen = len - (sizeof(name) - 1);
	while (vlen && (*p == ' ' || *p == '\t'))
		p++, vlen--;
	while (vlen && isspace((unsigned char)p[vlen - 1]))
		vlen--;
	if (vlen == 0 || vlen >= sizeof(v))
		return len;
	memcpy(v, p, vlen);
	v[vlen] = '\0';
	x->retry_after_s = parse_retry_after(v);
	return len;
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n, room = x->body.cap - x->body.len;

	/* Keep the head of the body, drop the rest; never abort the transfer.
	 * A failed append (ENOMEM) only costs the error message. */
	if (room)
		(void)!ps_buf_append(&x->body, p, len < room ? len : room);
	return len;
}

/* Copy the JSON string value after `"message"` into out.  Returns 1 if
 * found.  Escapes are simplified: control escapes become a space, \uXXXX
 * becomes '?'; the result is sanitised by the caller anyway. */
static int
json_message(const char *p, const char *end, char *out, size_t outsz)
{
	static const char key[] = "\"message\"";
	const char *k = memmem(p, (size_t)(end - p), key, sizeof(key) - 1);
	size_t o = 0;

	if (!k)
		return 0;
	for (p = k + sizeof(key) - 1; p < end && isspace((unsigned char)*p); p++)
		;
	if (p >= end || *p++ != ':')
		return 0;
	while (p < end && isspace((unsigned char)*p))
		p++;
	if (p >= end || *p++ != '"')
		return 0;
	for (; p < end && *p != '"' && o + 1 < outsz; p++) {
		if (*p != '\\' || p + 1 >= end) {
			out[o++] = *p;
			continue;
		}
		p++;
		if (*p == 'u') {
			out[o++] = '?';
			p += (end - p > 4) ? 4 : end - p - 1;
		} else {
			out[o++] = strchr("nrtbf", *p) ? ' ' : *p;
		}
	}
	out[o] = '\0';
	return 1;
}

/* Overwrite every occurrence of secret in s with '*'. */
static void
mask(char *s, const char *secret)
{
	size_t n = secret ? strlen(secret) : 0;
	char *hit;

	if (n < MIN_SECRET_MASKED)
		return;
	while ((hit = strstr(s, secret)) != NULL)
		memset(hit, '*', n);
}

static void
set_message(struct ps_http_response *rs, const struct ps_buf *body,
	    const struct ps_http_request *rq)
{
	const char *q = (const char *)body->data, *end;
	size_t i, n;

	if (body->len == 0)
		return;
	end = q + body->len;
	while (q < end && isspace((unsigned char)*q))
		q++;
	if (q == end || *q != '{' ||
	    !json_message(q, end, rs->message, sizeof(rs->message))) {
		for (n = 0; q + n < end && q[n] != '\n' && q[n] != '\r'; n++)
			;
		if (n >= sizeof(rs->message))
			n = sizeof(rs->message) - 1;
		if (n)
			memcpy(rs->message, q, n);
		rs->message[n] = '\0';
	}
	for (i = 0; rs->message[i]; i++)
		if (rs->message[i] < 0x20 || rs->message[i] > 0x7e)
			rs->message[i] = '?';
	while (i && rs->message[i - 1] == ' ')
		rs->message[--i] = '\0';
	mask(rs->message, rq->password);
	mask(rs->message, rq->bearer_token);
	/* Header values are secrets too (API keys, OTLP headers). */
	for (i = 0; i < rq->nheaders; i++) {
		const char *v = strchr(rq->headers[i], ':');

		if (v)
			mask(rs->message, v + 1 + strspn(v + 1, " \t"));
	}
}

static int
map_error(CURLcode cc, long os_errno)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
		if (os_errno == ETIMEDOUT)
			return -ETIMEDOUT;
		if (os_errno == EHOSTUNREACH || os_errno == ENETUNREACH ||
		    os_errno == ENETDOWN)
			return -EHOSTUNREACH;
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_URL_MALFORMAT:
		return -EINVAL;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_USE_SSL_FAILED:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_HTTP3:
		return -EPROTO;
	default:
		return -EIO;
	}
}

static int
has_crlf(const char *s)
{
	return s && strpbrk(s, "\r\n") != NULL;
}

static int
check_request(const struct ps_http_request *rq)
{
	size_t i;

	if (!rq || !rq->url || !*rq->url || has_crlf(rq->url))
		return -EINVAL;
	if (!rq->user != !rq->password || rq->nheaders > PS_HTTP_MAX_HEADERS)
		return -EINVAL;
	if (rq->nheaders && !rq->headers)
		return -EINVAL;
	if (!rq->body && rq->body_len)
		return -EINVAL;
	/* A CR or LF would let a value inject extra header lines. */
	if (has_crlf(rq->content_type) || has_crlf(rq->bearer_token))
		return -EINVAL;
	for (i = 0; i < rq->nheaders; i++)
		if (!rq->headers[i] || has_crlf(rq->headers[i]))
			return -EINVAL;
	return 0;
}

/* Append s to *l; on failure the list built so far is freed. */
static int
add_header(struct curl_slist **l, const char *s)
{
	struct curl_slist *n = api.slist_append(*l, s);

	if (!n) {
		api.slist_free_all(*l);
		*l = NULL;
		return -ENOMEM;
	}
	*l = n;
	return 0;
}

/* Order: protocol headers, then auth, then the user's headers last. */
static int
build_headers(const struct ps_http_request *rq, struct curl_slist **out)
{
	struct ps_buf line = PS_BUF_INIT(MAX_AUTH_HEADER);
	struct curl_slist *l = NULL;
	size_t i;
	int rc;

	/* No "Expect: 100-continue" round trip before the body. */
	rc = add_header(&l, "Expect:");
	if (!rc && rq->content_type) {
		rc = ps_buf_printf(&line, "Content-Type: %s", rq->content_type);
		rc = rc ? rc : ps_buf_append(&line, "", 1);
		rc = rc ? rc : add_header(&l, (char *)line.data);
		ps_buf_reset(&line);
	}
	if (!rc && rq->bearer_token) {
		rc = ps_buf_printf(&line, "Authorization: Bearer %s",
				   rq->bearer_token);
		rc = rc ? rc : ps_buf_append(&line, "", 1);
		rc = rc ? rc : add_header(&l, (char *)line.data);
	}
	for (i = 0; !rc && i < rq->nheaders; i++)
		rc = add_header(&l, rq->headers[i]);
	/* Scrub the token copy before giving the memory back. */
	if (line.data)
		memset(line.data, 0, line.alloc);
	ps_buf_free(&line);
	if (rc && l)
		api.slist_free_all(l);
	*out = rc ? NULL : l;
	return rc == -E2BIG ? -EINVAL : rc;
}

#define SETOPT(h, opt, val)                                            \
	do {                                                           \
		CURLcode cc_ = api.easy_setopt((h), (opt), (val));     \
		if (cc_ != CURLE_OK)                                   \
			return cc_;                                    \
	} while (0)

static CURLcode
set_transfer(CURL *h, const struct ps_http_request *rq,
	     struct curl_slist *hdrs, struct xfer *x)
{
	static const char empty[] = "";

	SETOPT(h, CURLOPT_URL, rq->url);
	SETOPT(h, CURLOPT_NOSIGNAL, 1L);
	SETOPT(h, CURLOPT_POST, 1L);
	/* Never NULL: libcurl would then read the body from stdin. */
	SETOPT(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
	SETOPT(h, CURLOPT_POSTFIELDS, rq->body ? rq->body : (const void *)empty);
	SETOPT(h, CURLOPT_HTTPHEADER, hdrs);
	SETOPT(h, CURLOPT_USERAGENT, USER_AGENT);
	SETOPT(h, CURLOPT_FOLLOWLOCATION, 0L);
	SETOPT(h, CURLOPT_WRITEFUNCTION, on_body);
	SETOPT(h, CURLOPT_WRITEDATA, x);
	SETOPT(h, CURLOPT_HEADERFUNCTION, on_header);
	SETOPT(h, CURLOPT_HEADERDATA, x);
	if (rq->connect_timeout_ms > 0)
		SETOPT(h, CURLOPT_CONNECTTIMEOUT_MS, rq->connect_timeout_ms);
	if (rq->total_timeout_ms > 0)
		SETOPT(h, CURLOPT_TIMEOUT_MS, rq->total_timeout_ms);
	return CURLE_OK;
}

static CURLcode
set_security(CURL *h, const struct ps_http_request *rq)
{
	CURLcode cc;

	/* Refuse file://, ftp:// and friends; an older libcurl without the
	 * option still only gets the URL the user configured. */
	cc = api.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (cc != CURLE_OK && cc != CURLE_UNKNOWN_OPTION)
		return cc;
	SETOPT(h, CURLOPT_SSL_VERIFYPEER, rq->insecure ? 0L : 1L);
	SETOPT(h, CURLOPT_SSL_VERIFYHOST, rq->insecure ? 0L : 2L);
	if (rq->ca_file)
		SETOPT(h, CURLOPT_CAINFO, rq->ca_file);
	if (rq->user) {
		SETOPT(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		SETOPT(h, CURLOPT_USERNAME, rq->user);
		SETOPT(h, CURLOPT_PASSWORD, rq->password);
	}
	return CURLE_OK;
}

#undef SETOPT

static int
perform(CURL *h, const struct ps_http_request *rq,
	struct ps_http_response *rs, struct xfer *x)
{
	CURLcode cc;
	long os_errno = 0;
	const char *why;

	cc = api.easy_perform(h);
	if (cc != CURLE_OK) {
		if (api.easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno) != CURLE_OK)
			os_errno = 0;
		why = api.easy_strerror(cc);
		if (why)
			snprintf(rs->message, sizeof(rs->message), "%s", why);
		return map_error(cc, os_errno);
	}
	if (api.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rs->status) != CURLE_OK)
		rs->status = 0;
	rs->retry_after_s = x->retry_after_s;
	set_message(rs, &x->body, rq);
	return 0;
}

int
ps_http_post(const struct ps_http_request *rq, struct ps_http_response *rs)
{
	struct xfer x = { PS_BUF_INIT(PS_HTTP_MAX_BODY_KEPT), -1 };
	struct curl_slist *hdrs = NULL;
	CURLcode cc;
	CURL *h;
	int rc;

	if (!rs)
		return -EINVAL;
	rs->status = 0;
	rs->retry_after_s = -1;
	rs->message[0] = '\0';
	rc = check_request(rq);
	if (rc)
		return rc;
	rc = ps_http_load();
	if (rc)
		return rc;
	h = api.easy_init();
	if (!h)
		return -ENOMEM;
	rc = build_headers(rq, &hdrs);
	if (rc)
		goto out_cleanup;
	cc = set_transfer(h, rq, hdrs, &x);
	if (cc == CURLE_OK)
		cc = set_security(h, rq);
	if (cc != CURLE_OK) {
		rc = cc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
		goto out_free_headers;
	}
	rc = perform(h, rq, rs, &x);
out_free_headers:
	api.slist_free_all(hdrs);
out_cleanup:
	/* The handle holds copies of the password; cleanup frees them. */
	api.easy_cleanup(h);
	ps_buf_free(&x.body);
	return rc;
}
