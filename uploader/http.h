/* http.h -- a small blocking HTTP POST client on top of libcurl.
 *
 * libcurl is not linked: a preloaded library that links it pulls some 35
 * shared objects into every process and adds ~5 ms to every start, even in
 * processes that never upload.  ps_http_load() opens "libcurl.so.4" with
 * dlopen the first time the uploader needs it and resolves the handful of
 * entry points used here; only <curl/curl.h> is used at build time, for
 * its constants.  Once loaded, libcurl stays loaded for the life of the
 * process (libcurl and its TLS library do not survive being unloaded).
 *
 * One call is one request on a fresh easy handle: no connection reuse, no
 * redirects followed, no signals (CURLOPT_NOSIGNAL: the host owns its
 * signal handlers and alarms), TLS verified unless the user explicitly asked
 * otherwise.  The response body is read into a 4 KiB buffer only to extract
 * the server's error message; anything beyond is discarded.  Nothing is ever
 * printed.
 */
#ifndef PS_HTTP_H
#define PS_HTTP_H

#include <stddef.h>
#include "common/ps.h"

/* Everything is borrowed from the caller for the duration of the call;
 * nothing is kept afterwards. */
struct ps_http_request {
	const char *url;                /* full URL incl. query; required */
	const char *content_type;       /* e.g. "multipart/form-data; boundary=..."; may be NULL */
	const void *body;               /* may be NULL when body_len is 0 */
	size_t body_len;
	const char *const *headers;     /* "Name: value" lines, sent last */
	size_t nheaders;                /* at most PS_HTTP_MAX_HEADERS */
	const char *user, *password;    /* HTTP Basic: both or neither (may be NULL) */
	const char *bearer_token;       /* "Authorization: Bearer ..."; may be NULL */
	const char *ca_file;            /* may be NULL: system default CA store */
	int insecure;                   /* 1: do not verify TLS (explicit user choice) */
	long connect_timeout_ms;        /* <= 0: libcurl's default (300 s) */
	long total_timeout_ms;          /* <= 0: none; callers should always set one */
};

/* Filled by ps_http_post(); owned by the caller. */
struct ps_http_response {
	long status;            /* HTTP status, 0 if none arrived */
	long retry_after_s;     /* Retry-After in seconds (delta or HTTP-date,
	                         * clamped to 0..PS_HTTP_MAX_RETRY_AFTER_S),
	                         * -1 if absent or unparseable */
	char message[256];      /* see ps_http_post(); always NUL-terminated */
};

#define PS_HTTP_MAX_HEADERS       64
#define PS_HTTP_MAX_BODY_KEPT     4096          /* response bytes kept */
#define PS_HTTP_MAX_RETRY_AFTER_S (24L * 3600)

/* Open libcurl.so.4 and resolve the entry points, then curl_global_init().
 * Done once per process; later calls return the first call's result.
 *
 * Returns 0, or -ENOSYS if libcurl.so.4 is missing, lacks a symbol, or
 * its global initialisation fails.
 *
 * Context: uploader thread (any thread outside signal context); may
 * allocate and take the dynamic loader's lock.  Thread-safe (pthread_once),
 * but curl_global_init() is not safe against other threads of the host
 * initialising the same TLS library at the same moment, so call it from the
 * uploader thread only. */
int ps_http_load(void) PS_WUR;

/* Send one POST and wait for the answer (bounded by the timeouts).
 * Follows no redirect: a 3xx is returned like any other status.
 *
 * rs is always fully initialised: status 0, retry_after_s -1, message "".
 * When a response arrives, rs->status holds its status and rs->message the
 * server's explanation: the JSON "message" field if the body has one, else
 * the body's first line, sanitised to printable ASCII, truncated to fit.
 * On a transport error rs->message holds libcurl's fixed description of the
 * error (curl_easy_strerror).  Credentials are never copied into message:
 * if the server echoes the password or bearer token, it is masked.
 *
 * Returns 0 when an HTTP response arrived (any status: check rs->status),
 *  -EINVAL       rq or rs NULL, a NULL/empty url, only one of user/password,
 *                more than PS_HTTP_MAX_HEADERS headers, a CR or LF in the url,
 *                content type, token or a header (header injection), or a
 *                malformed url,
 *  -ECONNREFUSED the peer refused the connection,
 *  -ETIMEDOUT    connect or total timeout expired,
 *  -EHOSTUNREACH name resolution failed or no route to the host,
 *  -EPROTO       TLS failure (handshake, verification) or a reply that is not HTTP,
 *  -EIO          any other transport error (e.g. connection closed with no reply),
 *  -ENOMEM       out of memory,
 *  -ENOSYS       libcurl could not be loaded (see ps_http_load).
 *
 * Context: uploader thread only (any thread outside signal context); may
 * allocate; blocks for up to the timeouts.  Reentrant: concurrent calls
 * share no state besides the loaded library. */
int ps_http_post(const struct ps_http_request *rq,
		 struct ps_http_response *rs) PS_WUR;

#endif
