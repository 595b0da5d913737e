/* serve.c -- the /debug/pprof answers: routes, profiles, Go's headers.
 * See serve.h (and listen.h for what each path serves).
 *
 * A CPU window, or a delta of the allocation profile, is the difference
 * of the fold's cumulative values at its start and end: both read under
 * the worker's lock, each request with its own copy, so overlapping
 * requests and the export passes never see each other.
 */
#include "uploader/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "uploader/listen.h"
#include "uploader/profiles.h"

#define BODY_CAP (64u << 20)

/* Written by ps_serve_setup before the listener's threads exist,
 * read-only after. */
static struct ps_export *x;
static pthread_mutex_t *lock;
static pid_t host;

void
ps_serve_setup(struct ps_export *e, pthread_mutex_t *l, pid_t h)
{
	x = e;
	lock = l;
	host = h;
}

/* ---- answers ---------------------------------------------------------- */

static const char *
reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 301: return "Moved Permanently";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

/* Send all n bytes, each send bounded by SO_SNDTIMEO and the whole by
 * `deadline` (CLOCK_MONOTONIC).  Returns 0 or -1 (the client is gone or
 * too slow: the answer is abandoned). */
static int
send_all(int c, const void *p, size_t n, uint64_t deadline)
{
	const char *b = p;
	ssize_t w;

	while (n) {
		if (ps_clock_ns(CLOCK_MONOTONIC) > deadline)
			return -1;
		w = send(c, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One answer: status line, Go's headers, `extra` ("Name: value\r\n"
 * lines, may be NULL), and the body unless the request was HEAD.  A body
 * of length (size_t)-1 means "no Content-Length" (HEAD of a profile that
 * would take seconds to make). */
static void
answer(int c, int head, int status, const char *ctype, const char *extra, const void *body,
       size_t len)
{
	char h[1024], date[64];
	struct tm tm;
	time_t now = time(NULL);
	uint64_t deadline = ps_clock_ns(CLOCK_MONOTONIC) + PS_LISTEN_SEND_MS * 1000000ull;
	int n;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	n = snprintf(h, sizeof(h), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		     "X-Content-Type-Options: nosniff\r\nDate: %s\r\n%s", status, reason(status),
		     ctype, date, extra ? extra : "");
	if (len != (size_t)-1 && n > 0 && (size_t)n < sizeof(h))
		n += snprintf(h + n, sizeof(h) - (size_t)n, "Content-Length: %zu\r\n", len);
	if (n > 0 && (size_t)n < sizeof(h))
		n += snprintf(h + n, sizeof(h) - (size_t)n, "Connection: close\r\n\r\n");
	if (n <= 0 || (size_t)n >= sizeof(h) || send_all(c, h, (size_t)n, deadline))
		return;
	if (!head && body && len && len != (size_t)-1)
		(void)send_all(c, body, len, deadline);
}

/* An error as Go's serveError writes it: one line of text. */
void
ps_serve_error(int c, int head, int status, const char *why, const char *extra)
{
	char line[256];
	char hdrs[128];
	int n = snprintf(line, sizeof(line), "%s\n", why);

	snprintf(hdrs, sizeof(hdrs), "X-Go-Pprof: 1\r\n%s", extra ? extra : "");
	answer(c, head, status, "text/plain; charset=utf-8", hdrs, line,
	       n > 0 ? (size_t)n : 0);
}

static void
pprof_answer(int c, int head, const char *filename, const struct ps_buf *b)
{
	char extra[128];

	snprintf(extra, sizeof(extra), "Content-Disposition: attachment; filename=\"%s\"\r\n",
		 filename);
	answer(c, head, 200, "application/octet-stream", extra, b ? b->data : NULL,
	       b ? b->len : (size_t)-1);
}

/* ---- profiles --------------------------------------------------------- */

/* Go's names for the types a native program has no data for. */
static const char *const goroutine_types[] = { "goroutine" };
static const char *const thread_types[] = { "threadcreate" };
static const char *const count_units[] = { "count" };
static const int zero_vals[] = { 0 };
static const int64_t one_div[] = { 1 };

/* Encoded only (never written or uploaded): the fields that say where a
 * family goes stay empty. */
static const struct ps_family fam_goroutine = {
	.kind = "goroutine", .types = goroutine_types, .units = count_units,
	.fold_values = zero_vals, .div = one_div, .nvalues = 1,
	.period_type = "goroutine", .period_unit = "count",
};
static const struct ps_family fam_thread = {
	.kind = "threadcreate", .types = thread_types, .units = count_units,
	.fold_values = zero_vals, .div = one_div, .nvalues = 1,
	.period_type = "threadcreate", .period_unit = "count",
};

static const struct {
	const char *name;
	const struct ps_family *fam;
} empty_types[] = {
	{ "goroutine", &fam_goroutine }, { "threadcreate", &fam_thread },
};

static void
meta_init(struct ps_profile_meta *m, const char **comment, char *text, size_t len,
	  const char *what)
{
	memset(m, 0, sizeof(*m));
	snprintf(text, len, "pyroshim %s, pid %d, app %.100s, %s", PS_VERSION, (int)host, x->app,
		 what);
	*comment = text;
	m->comments = comment;
	m->ncomments = 1;
	m->labels = x->labels;
	m->nlabels = x->nlabels;
	m->time_nanos = (int64_t)ps_clock_ns(CLOCK_REALTIME);
}

static void
serve_empty(int c, int head, const struct ps_family *fam, const char *name)
{
	struct ps_buf out = PS_BUF_INIT(1 << 20);
	struct ps_profile_meta m;
	struct ps_fold none;
	const char *cm;
	char text[200];

	memset(&none, 0, sizeof(none));
	meta_init(&m, &cm, text, sizeof(text), "no such data in a native program");
	m.period = 1;
	if (ps_profile_encode(&none, fam, NULL, &m, &out))
		ps_serve_error(c, head, 500, "could not encode the profile", NULL);
	else
		pprof_answer(c, head, name, &out);
	ps_buf_free(&out);
}

/* The fold's values now (copied, n rows), under the lock. */
static int64_t (*snapshot(uint32_t *n))[PS_F_NVALUES]
{
	int64_t (*v)[PS_F_NVALUES] = NULL;
	uint32_t i;

	pthread_mutex_lock(lock);
	if (ps_export_refresh(x) == 0 || x->ready) {
		*n = x->fold.n;
		v = calloc(*n ? *n : 1, sizeof(*v));
		for (i = 0; v && i < *n; i++)
			memcpy(v[i], x->fold.e[i].v, sizeof(v[i]));
	}
	pthread_mutex_unlock(lock);
	return v;
}

/* Set once the program served is gone (ps_serve_end): windows end. */
static _Atomic int ended;

void
ps_serve_end(void)
{
	atomic_store(&ended, 1);
}

/* Wait until the deadline, or less: until the client closes its side
 * (Go's handlers stop then too, and answer what they have: a client that
 * shut its sending side after the request still reads it), or the
 * program served is gone (exec'd or ended: what comes after is not its). */
static void
wait_window(int c, uint64_t until)
{
	struct pollfd p = { .fd = c, .events = POLLRDHUP };
	uint64_t now, left;
	int r;

	while (!atomic_load(&ended) && (now = ps_clock_ns(CLOCK_MONOTONIC)) < until) {
		left = (until - now) / 1000000ull + 1;
		r = poll(&p, 1, left < 100 ? (int)left : 100);
		if (r > 0 || (r < 0 && errno != EINTR))
			return;
	}
}

/* The profile of family fam: the fold's values now (prev NULL), or their
 * change since prev (n0 rows).  Encoded under the lock. */
static int
encode_now(const struct ps_family *fam, const int64_t (*prev)[PS_F_NVALUES], uint32_t n0,
	   struct ps_profile_meta *m, struct ps_buf *out)
{
	int64_t (*d)[PS_F_NVALUES] = NULL;
	uint32_t i;
	int rc, k;

	pthread_mutex_lock(lock);
	rc = ps_export_refresh(x);
	if (rc && !x->ready)
		goto out;
	if (prev) {
		rc = -ENOMEM;
		d = calloc(x->fold.n ? x->fold.n : 1, sizeof(*d));
		if (!d)
			goto out;
		for (i = 0; i < x->fold.n; i++)
			for (k = 0; k < PS_F_NVALUES; k++)
				d[i][k] = x->fold.e[i].v[k] - (i < n0 ? prev[i][k] : 0);
	}
	rc = ps_profile_encode(&x->fold, fam, (const int64_t(*)[PS_F_NVALUES])d, m, out);
out:
	pthread_mutex_unlock(lock);
	free(d);
	return rc;
}

/* CPU for `seconds`; or the allocation, block or mutex profile: since
 * start (seconds 0, as Go serves them) or its change over `seconds`. */
static void
serve_profile(int c, int head, const struct ps_family *fam, unsigned seconds, const char *name)
{
	int cpu = fam->id == PS_FAMILY_CPU;
	struct ps_family allocs_fam;
	struct ps_buf out = PS_BUF_INIT(BODY_CAP);
	int64_t (*prev)[PS_F_NVALUES] = NULL;
	struct ps_profile_meta m;
	uint64_t t0;
	uint32_t n0 = 0;
	const char *cm;
	char what[64], text[200], fname[32];
	int rc;

	if (head) {
		pprof_answer(c, head, name, NULL);
		return;
	}
	if (!cpu && !strcmp(name, "allocs")) {
		allocs_fam = ps_family_alloc;     /* Go's allocs: the same profile, */
		allocs_fam.default_type = "alloc_space";  /* shown as alloc_space */
		fam = &allocs_fam;
	}
	snprintf(what, sizeof(what), "/debug/pprof/%s%s", name, seconds ? " (window)" : "");
	meta_init(&m, &cm, text, sizeof(text), what);
	if (seconds) {
		/* The window starts when the counters are read. */
		prev = snapshot(&n0);
		t0 = ps_clock_ns(CLOCK_MONOTONIC);
		if (!prev) {
			ps_serve_error(c, head, 500, "failed to collect profile", NULL);
			return;
		}
		m.time_nanos = (int64_t)ps_clock_ns(CLOCK_REALTIME);
		wait_window(c, t0 + seconds * 1000000000ull);
		m.duration_nanos = (int64_t)(ps_clock_ns(CLOCK_MONOTONIC) - t0);
	} else {
		m.duration_nanos = (int64_t)(ps_clock_ns(CLOCK_REALTIME) - x->start_ns);
		m.time_nanos = (int64_t)x->start_ns;
	}
	m.period = ps_family_period(fam, x->cfg->sample_rate ? x->cfg->sample_rate : 100,
				    x->cfg->alloc_sample_bytes);
	rc = encode_now(fam, (const int64_t(*)[PS_F_NVALUES])prev, n0, &m, &out);
	free(prev);
	snprintf(fname, sizeof(fname), "%s%s", name, seconds && !cpu ? "-delta" : "");
	if (rc)
		ps_serve_error(c, head, 500, "failed to collect profile", NULL);
	else
		pprof_answer(c, head, fname, &out);
	ps_buf_free(&out);
}

/* The whole command line (the kernel gives it a page at a time). */
static void
serve_cmdline(int c, int head)
{
	struct ps_buf b = PS_BUF_INIT(64u << 20);   /* past any ARG_MAX */
	char path[64], chunk[4096];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)host);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd >= 0 && ((n = read(fd, chunk, sizeof(chunk))) > 0 || (n < 0 && errno == EINTR)))
		if (n > 0 && ps_buf_append(&b, chunk, (size_t)n)) {
			n = -1;
			break;
		}
	if (fd >= 0)
		close(fd);
	if (n < 0)
		ps_serve_error(c, head, 500, "the command line could not be read", NULL);
	else   /* Go writes no trailing NUL */
		answer(c, head, 200, "text/plain; charset=utf-8", NULL, b.data,
		       b.len && ((char *)b.data)[b.len - 1] == '\0' ? b.len - 1 : b.len);
	ps_buf_free(&b);
}

static const char index_html[] =
	"<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n/debug/pprof/ "
	"(pyroshim)\n<br>\n<p>Profiles of this native program:</p>\n<ul>\n"
	"<li><a href='profile'>profile</a>: CPU profile. You can specify the duration in the "
	"seconds GET parameter (default 30, at most 300).</li>\n"
	"<li><a href='heap'>heap</a>: A sampling of memory allocations of live objects "
	"(inuse_*), and of all past allocations (alloc_*).</li>\n"
	"<li><a href='allocs'>allocs</a>: A sampling of all past memory allocations "
	"(the heap profile, shown as alloc_space).</li>\n"
	"<li><a href='block'>block</a>: Time spent waiting in the C library's blocking "
	"calls (locks, condition variables, I/O, sleeps), since start.</li>\n"
	"<li><a href='mutex'>mutex</a>: Time spent waiting for contended pthread mutexes "
	"and rwlocks, since start.</li>\n"
	"<li><a href='cmdline'>cmdline</a>: The command line invocation of the current "
	"program.</li>\n</ul>\n<p>goroutine and threadcreate answer valid empty "
	"profiles: a native program has no such data.  godeltaprof's delta_heap, "
	"delta_mutex and delta_block are not served: scrape allocs, mutex and block, "
	"whose changes Alloy computes itself.  "
	"debug=N (text formats) is not served: use go tool pprof.</p>\n</body>\n</html>\n";

/* `seconds` of the query: 0 absent, else the value; -1 after answering
 * 400. */
static long
query_seconds(int c, const struct ps_httpreq *rq)
{
	char v[32];
	unsigned s;
	int rc = ps_httpreq_query(rq->query, "seconds", v, sizeof(v));

	if (rc == 0)
		return 0;
	if (rc > 0)
		rc = ps_httpreq_seconds(v, PS_LISTEN_MAX_SECONDS, &s);
	if (rc == -ERANGE) {
		ps_serve_error(c, rq->head, 400, "invalid value for \"seconds\" - at most 300 here",
			     NULL);
		return -1;
	}
	if (rc) {
		ps_serve_error(c, rq->head, 400, "invalid value for \"seconds\" - must be a positive "
			     "integer", NULL);
		return -1;
	}
	return (long)s;
}

/* debug=N asks Go's text formats, which are not made here. */
static int
query_ok(int c, const struct ps_httpreq *rq)
{
	char v[32];
	int rc = ps_httpreq_query(rq->query, "debug", v, sizeof(v));

	if (rc < 0 || ps_httpreq_query(rq->query, "gc", v + 16, 16) < 0) {
		ps_serve_error(c, rq->head, 400, "malformed query", NULL);
		return 0;
	}
	if (rc > 0 && strcmp(v, "0")) {
		ps_serve_error(c, rq->head, 400, "debug=N (text output) is not served here: use "
			     "go tool pprof on the binary profile", NULL);
		return 0;
	}
	return 1;
}

void
ps_serve_route(int c, const struct ps_httpreq *rq)
{
	static const char prefix[] = "/debug/pprof/";
	const char *name;
	long secs;
	size_t i;

	if (!strcmp(rq->path, "/debug/pprof")) {
		answer(c, rq->head, 301, "text/html; charset=utf-8", "Location: /debug/pprof/\r\n",
		       "<a href=\"/debug/pprof/\">Moved Permanently</a>.\n\n", 48);
		return;
	}
	if (strncmp(rq->path, prefix, sizeof(prefix) - 1)) {
		answer(c, rq->head, 404, "text/plain; charset=utf-8", NULL, "404 page not found\n",
		       19);
		return;
	}
	name = rq->path + sizeof(prefix) - 1;
	if (!*name) {
		answer(c, rq->head, 200, "text/html; charset=utf-8", NULL, index_html,
		       sizeof(index_html) - 1);
		return;
	}
	if (!query_ok(c, rq) || (secs = query_seconds(c, rq)) < 0)
		return;
	if (!strcmp(name, "profile")) {
		serve_profile(c, rq->head, &ps_family_cpu, secs ? (unsigned)secs : 30, name);
		return;
	}
	if (!strcmp(name, "heap") || !strcmp(name, "allocs")) {
		serve_profile(c, rq->head, &ps_family_alloc, (unsigned)secs, name);
		return;
	}
	if (!strcmp(name, "block") || !strcmp(name, "mutex")) {
		serve_profile(c, rq->head, *name == 'b' ? &ps_family_block : &ps_family_mutex,
			      (unsigned)secs, name);
		return;
	}
	if (!strcmp(name, "cmdline")) {
		serve_cmdline(c, rq->head);
		return;
	}
	for (i = 0; i < PS_ARRAY_LEN(empty_types); i++) {
		if (!strcmp(name, empty_types[i].name)) {
			serve_empty(c, rq->head, empty_types[i].fam, name);
			return;
		}
	}
	ps_serve_error(c, rq->head, 404, "Unknown profile", NULL);
}
