/* listen.c -- the /debug/pprof listener.  See listen.h.
 *
 * One accepting thread, and one short-lived thread per connection (a CPU
 * scrape blocks for its whole window, and Alloy scrapes several profile
 * types of a target at once).  Everything a connection needs lives on its
 * thread's stack or in buffers it frees; the only shared state is the
 * export state's fold, read under the worker's lock, and the count of
 * connections being served.
 */
#include "uploader/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/guard.h"
#include "common/log.h"
#include "common/shmem.h"
#include "uploader/httpreq.h"
#include "uploader/serve.h"

/* The configured address: written by the constructor, read-only after. */
static struct sockaddr_storage addr;
static socklen_t addr_len;
static char addr_text[256];

/* The listening socket: bound by the constructor (ps_listen_bind), so
 * the process started with the variable holds the port before any child
 * of it exists; handed to the helper, closed in the program.  Its device
 * and inode say whether the descriptor lfd is still it: in thread mode
 * (no helper: pid 1, a subreaper) it is in the program's table, where the
 * program may close it and get the number back for a socket of its own
 * (closefrom(3), then listen), which the acceptor must never accept on. */
static int lfd = -1;
static dev_t lfd_dev;
static ino_t lfd_ino;
static int bind_err;               /* -errno of the constructor's attempt */
/* Set once by the helper's loop (ps_listen_stop); the acceptor, which
 * owns lfd once it runs, then closes it within STOP_POLL_MS. */
static _Atomic int stopping;
#define STOP_POLL_MS 100
/* Connections being served (acceptor increments, connection threads
 * decrement). */
static _Atomic int active;

/* ---- the address ------------------------------------------------------ */

static int
parse_port(const char *s, in_port_t *port)
{
	unsigned long v = 0;
	size_t i;

	if (!s[0] || strlen(s) > 5)
		return -EINVAL;
	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*port = htons((in_port_t)v);
	return 0;
}

static int
parse_addr(const char *a)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)&addr;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&addr;
	char host_part[64];
	const char *colon;
	size_t n;

	memset(&addr, 0, sizeof(addr));
	if (a[0] == '[') {
		colon = strstr(a, "]:");
		n = colon ? (size_t)(colon - a - 1) : 0;
		if (!colon || n == 0 || n >= sizeof(host_part))
			return -EINVAL;
		memcpy(host_part, a + 1, n);
		host_part[n] = '\0';
		v6->sin6_family = AF_INET6;
		addr_len = sizeof(*v6);
		return inet_pton(AF_INET6, host_part, &v6->sin6_addr) == 1 ?
		       parse_port(colon + 2, &v6->sin6_port) : -EINVAL;
	}
	colon = strrchr(a, ':');
	n = colon ? (size_t)(colon - a) : 0;
	if (!colon || n == 0 || n >= sizeof(host_part))
		return -EINVAL;
	memcpy(host_part, a, n);
	host_part[n] = '\0';
	v4->sin_family = AF_INET;
	addr_len = sizeof(*v4);
	if (!strcmp(host_part, "localhost"))
		snprintf(host_part, sizeof(host_part), "127.0.0.1");
	return inet_pton(AF_INET, host_part, &v4->sin_addr) == 1 ?
	       parse_port(colon + 1, &v4->sin_port) : -EINVAL;
}

int
ps_listen_configure(const char *a)
{
	addr_len = 0;
	if (!a || !a[0])
		return 0;
	if (strlen(a) >= sizeof(addr_text) || parse_addr(a)) {
		addr_len = 0;
		ps_log_config("PYROSCOPE_PPROF_ADDRESS=%.80s: expected host:port such as "
			      "127.0.0.1:6060 (an IP address, localhost or [IPv6]); no listener", a);
		return -EINVAL;
	}
	snprintf(addr_text, sizeof(addr_text), "%s", a);
	return 0;
}

int
ps_listen_configured(void)
{
	return addr_len != 0;
}

/* ---- connections ------------------------------------------------------ */

/* Read the request head within PS_LISTEN_HEAD_MS.  Returns 0 (rq
 * filled), or -1 after answering or when the client left. */
static int
read_request(int c, struct ps_httpreq *rq)
{
	char buf[PS_HTTPREQ_MAX + 1];
	uint64_t deadline = ps_clock_ns(CLOCK_MONOTONIC) + PS_LISTEN_HEAD_MS * 1000000ull, now;
	struct pollfd p = { .fd = c, .events = POLLIN };
	size_t len = 0;
	ssize_t n;
	int rc;

	for (;;) {
		now = ps_clock_ns(CLOCK_MONOTONIC);
		if (now >= deadline || poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1) == 0) {
			ps_serve_error(c, 0, 408, "the request did not arrive within 5 s", NULL);
			return -1;
		}
		n = recv(c, buf + len, PS_HTTPREQ_MAX - len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		len += (size_t)n;
		rc = ps_httpreq_parse(buf, len, rq);
		if (rc == 0)
			return 0;
		if (rc > 0) {
			ps_serve_error(c, rq->head, rc, rq->why, rc == 405 ? "Allow: GET, HEAD\r\n" : NULL);
			return -1;
		}
	}
}

/* Close after the answer without an RST for unread bytes: shut the
 * sending side, drain briefly, close. */
static void
finish(int c)
{
	char sink[512];
	struct pollfd p = { .fd = c, .events = POLLIN };
	int i;

	(void)shutdown(c, SHUT_WR);
	for (i = 0; i < 4 && poll(&p, 1, 100) > 0; i++)
		if (recv(c, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
			break;
	close(c);
}

static void *
conn_main(void *arg)
{
	struct ps_httpreq rq;
	int c = (int)(intptr_t)arg;

	ps_guard_enter();  /* the shim's own thread: never sampled */
	if (read_request(c, &rq) == 0)
		ps_serve_route(c, &rq);
	finish(c);
	atomic_fetch_sub(&active, 1);
	return NULL;
}

/* Connections told 503, their request still to be read before they are
 * closed (closing with it unread would reset the connection, and the
 * client could lose the answer): drained by the acceptor's poll, each for
 * REFUSED_MS at most.  Waiting for one in turn held the acceptor 100 ms
 * per client that sent nothing, and every connection behind it.  The
 * acceptor's alone. */
#define NREFUSED 16
#define REFUSED_MS 100
static struct {
	int fd;
	uint64_t until;
} refused[NREFUSED];
static int nrefused;

/* Close refused connection i; the last takes its place. */
static void
refused_close(int i)
{
	close(refused[i].fd);
	refused[i] = refused[--nrefused];
}

/* Read what refused connection i sent (its request); close it once the
 * client sent it all, left, or its time is up. */
static void
refused_drain(int i, uint64_t now)
{
	char sink[1024];
	ssize_t n;

	while ((n = recv(refused[i].fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
		;
	if (n == 0 || (errno != EAGAIN && errno != EINTR) || now >= refused[i].until)
		refused_close(i);
}

/* Over the connection bound: a short 503 without a thread; closed once
 * its request is read (refused_drain).  With every place taken, the
 * oldest is closed now. */
static void
refuse(int c)
{
	static const char busy[] =
		"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
		"X-Content-Type-Options: nosniff\r\nRetry-After: 1\r\nContent-Length: 24\r\n"
		"Connection: close\r\n\r\ntoo many connections: 8\n";
	int i, old;

	(void)send(c, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)shutdown(c, SHUT_WR);
	if (nrefused == NREFUSED) {
		/* The oldest: the places are not in order (refused_close). */
		for (i = 1, old = 0; i < nrefused; i++)
			if (refused[i].until < refused[old].until)
				old = i;
		refused_close(old);
	}
	refused[nrefused].fd = c;
	refused[nrefused].until = ps_clock_ns(CLOCK_MONOTONIC) + REFUSED_MS * 1000000ull;
	nrefused++;
	/* On loopback the request is there already. */
	refused_drain(nrefused - 1, 0);
}

static void
spawn_conn(int c, pthread_attr_t *attr)
{
	struct timeval tv = { PS_LISTEN_SEND_MS / 1000, 0 };
	pthread_t t;

	if (atomic_fetch_add(&active, 1) >= PS_LISTEN_MAX_CONN) {
		atomic_fetch_sub(&active, 1);
		refuse(c);
		return;
	}
	(void)setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (pthread_create(&t, attr, conn_main, (void *)(intptr_t)c)) {
		atomic_fetch_sub(&active, 1);
		refuse(c);
	}
}

/* 1 if the configured address is a loopback one (127/8, ::1). */
static int
loopback(void)
{
	const struct sockaddr_in *v4 = (const struct sockaddr_in *)&addr;
	const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&addr;

	if (addr.ss_family == AF_INET)
		return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
}

/* 1 if descriptor lfd is still the listening socket. */
static int
ours(void)
{
	struct stat st;

	return lfd >= 0 && fstat(lfd, &st) == 0 && st.st_dev == lfd_dev && st.st_ino == lfd_ino;
}

/* One attempt: a listening socket (non-blocking: the acceptor polls), or
 * -errno. */
static int
try_bind(void)
{
	int one = 1, s, err;
	struct stat st;

	s = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&addr, addr_len) == 0 && listen(s, 64) == 0 &&
	    fstat(s, &st) == 0) {
		lfd_dev = st.st_dev;
		lfd_ino = st.st_ino;
		return s;
	}
	err = errno;
	close(s);
	return -err;
}

void
ps_listen_bind(void)
{
	if (addr_len && lfd < 0) {
		lfd = try_bind();
		if (lfd < 0) {
			bind_err = lfd;
			lfd = -1;
		} else {
			/* Out of the numbers the program uses, before its main
			 * runs (in thread mode the socket stays in its table;
			 * later, the move would race its own closefrom). */
			lfd = ps_fd_park(lfd);
		}
	}
}

int
ps_listen_fd(void)
{
	return lfd;
}

int
ps_listen_bind_err(void)
{
	return bind_err;
}

void
ps_listen_adopt(int fd, int err)
{
	struct stat st;

	bind_err = err;
	if (fd >= 0 && fstat(fd, &st) == 0) {
		lfd = fd;
		lfd_dev = st.st_dev;
		lfd_ino = st.st_ino;
	}
}

void
ps_listen_drop(void)
{
	if (ours())
		close(lfd);
	lfd = -1;
}

/* The constructor's attempt found the address in use: retry for a while
 * (an exec'd image of the same process waits for the old one's helper). */
static void
bind_retry(void)
{
	uint64_t until = ps_clock_ns(CLOCK_MONOTONIC) + PS_LISTEN_RETRY_MS * 1000000ull;
	struct timespec ts = { 0, 100 * 1000000L };
	int s = bind_err;

	while (s == -EADDRINUSE && ps_clock_ns(CLOCK_MONOTONIC) < until) {
		nanosleep(&ts, NULL);
		s = try_bind();
	}
	if (s >= 0)
		lfd = s;
	else
		bind_err = s;
}

static void *
acceptor(void *arg)
{
	struct timespec pause = { 0, 100 * 1000000L };
	struct pollfd p[1 + NREFUSED];
	pthread_attr_t attr;
	const char *why = "the program that listened is gone";
	uint64_t now;
	int c, i, n;

	(void)arg;
	ps_guard_enter();
	if (lfd < 0)
		bind_retry();
	if (lfd < 0) {
		ps_warn("PYROSCOPE_PPROF_ADDRESS=%s: %s; no /debug/pprof listener", addr_text,
			strerror(-bind_err));
		return NULL;
	}
	ps_info("serving /debug/pprof/ on %s%s", addr_text, loopback() ? "" :
		" (not a loopback address: whoever reaches it reads the profiles)");
	if (pthread_attr_init(&attr))
		return NULL;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	/* Polled, never a blocking accept: the stop is a flag (no descriptor
	 * another thread could have closed and reused is touched), and a
	 * descriptor that is no longer the listening socket is seen before
	 * anything is accepted on it. */
	while (!atomic_load(&stopping)) {
		p[0].fd = lfd;
		p[0].events = POLLIN;
		p[0].revents = 0;
		for (i = 0; i < nrefused; i++) {
			p[1 + i].fd = refused[i].fd;
			p[1 + i].events = POLLIN;
			p[1 + i].revents = 0;   /* as they are if poll fails */
		}
		n = nrefused;
		c = poll(p, (nfds_t)(1 + n), nrefused ? REFUSED_MS / 4 : STOP_POLL_MS);
		/* From the last: draining one moves the last into its place. */
		now = ps_clock_ns(CLOCK_MONOTONIC);
		for (i = n - 1; i >= 0; i--)
			if (p[1 + i].revents || now >= refused[i].until)
				refused_drain(i, now);
		if (c <= 0 || !p[0].revents)
			continue;
		if (!ours()) {
			why = "the program closed its descriptor";
			lfd = -1;       /* not ours to close */
			break;
		}
		c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0)
			spawn_conn(c, &attr);
		else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			nanosleep(&pause, NULL);  /* out of descriptors or memory: later */
	}
	/* Connections being answered go on (a CPU window ends now, with what
	 * it has); the port is free now. */
	if (lfd >= 0)
		close(lfd);
	lfd = -1;
	while (nrefused > 0)
		refused_close(nrefused - 1);
	pthread_attr_destroy(&attr);
	ps_serve_end();
	ps_info("no longer serving /debug/pprof/ on %s: %s", addr_text, why);
	return NULL;
}

void
ps_listen_stop(void)
{
	atomic_store(&stopping, 1);
}

void
ps_listen_finish(uint64_t timeout_ns)
{
	uint64_t until = ps_clock_ns(CLOCK_MONOTONIC) + timeout_ns;
	struct timespec ts = { 0, 10 * 1000000L };

	if (!addr_len)
		return;
	ps_listen_stop();
	ps_serve_end();
	while (atomic_load(&active) > 0 && ps_clock_ns(CLOCK_MONOTONIC) < until)
		nanosleep(&ts, NULL);
}

int
ps_listen_start(struct ps_export *e, pthread_mutex_t *l, pid_t h)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!addr_len)
		return 0;
	ps_serve_setup(e, l, h);
	if (pthread_attr_init(&attr))
		return -ENOMEM;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 128 * 1024);
	ps_guard_enter();  /* made by the shim: never a host thread */
	rc = pthread_create(&t, &attr, acceptor, NULL);
	ps_guard_leave();
	pthread_attr_destroy(&attr);
	if (rc)
		ps_warn("no /debug/pprof listener: %s", strerror(rc));
	return -rc;
}
