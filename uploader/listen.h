/* listen.h -- the /debug/pprof listener (PYROSCOPE_PPROF_ADDRESS): what Go's
 * net/http/pprof serves, as far as the shim's data allows, so that Grafana
 * Alloy's pyroscope.scrape and `go tool pprof http://...` work unchanged.
 *
 *   /debug/pprof/profile?seconds=N  blocks N s (default 30, at most
 *       PS_LISTEN_MAX_SECONDS) and answers the CPU samples of exactly that
 *       window: the difference of the fold's cumulative counters at its
 *       start and end, so overlapping scrapes neither share nor disturb
 *       anything, and the local files and uploads are untouched.
 *   /debug/pprof/heap, /debug/pprof/allocs  the allocation profile now:
 *       alloc_* cumulative since start, inuse_* live now (Go's semantics;
 *       the same four sample types; allocs defaults to alloc_space).  With
 *       seconds=N, the difference over N s, as Go's delta profiles.
 *   /debug/pprof/block, mutex  the off-CPU waits, since start or over
 *       seconds=N, as heap.
 *   /debug/pprof/goroutine, threadcreate  no such data in a native
 *       program: 200 and a valid, empty profile of Go's sample types --
 *       what a Go program whose runtime does not record them answers,
 *       which Alloy takes as a normal scrape and Pyroscope ignores (no
 *       samples), instead of an error every interval.
 *   /debug/pprof/delta_heap, delta_mutex, delta_block  not served (404):
 *       godeltaprof's per-process deltas would be a second state to keep;
 *       Alloy's default scrapes read allocs, mutex and block and make the
 *       deltas themselves.  (Empty answers would hide data that exists.)
 *   /debug/pprof/cmdline  the program's command line, NUL-separated.
 *   /debug/pprof/  an HTML index.
 * Anything else: 404 ("Unknown profile" under /debug/pprof/, as Go).
 * Stricter than Go: a malformed `seconds` is 400, not 30; more than
 * PS_LISTEN_MAX_SECONDS is 400; debug=N (Go's text formats) is 400; a
 * method other than GET and HEAD is 405; the request rules of httpreq.h.
 *
 * Guest rules: the listener runs in the uploader (threads of the helper
 * process, never the program's); at most PS_LISTEN_MAX_CONN connections
 * are served at once (more are answered 503 and closed at once); the
 * request head must arrive within PS_LISTEN_HEAD_MS (else 408) and fit
 * 8 KiB (else 431); an answer that cannot be delivered within
 * PS_LISTEN_SEND_MS is abandoned; connections are never kept alive.  In
 * thread mode (no helper) the socket is in the program's table: parked
 * near the top of its numbers, and never accepted on once the descriptor
 * is no longer it (the program closed it, and may have reused the number).
 *
 * Who listens: the process started with the variable.  Its constructor
 * binds the port (one socket(2), bind(2), listen(2), only when the
 * variable is set) before the program's main runs, so before any child of
 * it exists, and hands the socket to the helper (the program keeps no
 * descriptor of it).  A fork child never listens; an exec'd program that
 * finds the port taken (a child of the listening program, or any other
 * process) retries for PS_LISTEN_RETRY_MS -- so that an exec of the
 * listening process itself takes the port over once the old image's
 * helper lets go of it (ps_listen_stop, when it finds that image gone) --
 * then says so in one warn line and runs without a listener.  Any other
 * program of a tree joins it and does not listen (worker.c).
 */
#ifndef PS_LISTEN_H
#define PS_LISTEN_H

#include <pthread.h>
#include <sys/types.h>
#include "common/ps.h"
#include "uploader/export.h"

#define PS_LISTEN_MAX_CONN    8
#define PS_LISTEN_MAX_SECONDS 300
#define PS_LISTEN_HEAD_MS     5000
#define PS_LISTEN_SEND_MS     10000
#define PS_LISTEN_RETRY_MS    2000

/* Check PYROSCOPE_PPROF_ADDRESS: `host:port`, the host an IPv4 literal,
 * `localhost` (127.0.0.1) or a bracketed IPv6 literal, the port 1..65535.
 * A malformed address is a configuration line and no listener.  Returns
 * 0 (also for "": no listener), or -EINVAL.  Context: constructor. */
int ps_listen_configure(const char *addr);

/* 1 if an address was configured. */
int ps_listen_configured(void);

/* One attempt to bind the configured address (nothing without one).  The
 * socket is close-on-exec.  Context: constructor, before the uploader
 * starts. */
void ps_listen_bind(void);

/* The bound socket, or -1: the helper keeps it when it closes the
 * program's descriptors. */
int ps_listen_fd(void);
/* The constructor's bind error (-errno), 0 if none. */
int ps_listen_bind_err(void);
/* The exec'd helper: take the program's bound socket fd (or none: -1)
 * and its bind error, as ps_listen_bind left them in the program. */
void ps_listen_adopt(int fd, int err);

/* Close the socket in this process: in the program once the helper holds
 * it, and in a fork child (where, in thread mode, it was copied) -- if the
 * descriptor is still it.  Context: constructor after the helper is made;
 * fork child handler. */
void ps_listen_drop(void);

/* Start the listener in this process: a thread that accepts on the
 * constructor's socket (or, if that found the address in use, retries
 * PS_LISTEN_RETRY_MS at most first).
 * x and lock (the worker's, guarding x->fold) must outlive it; host is the
 * profiled process (for /cmdline).  Returns 0 or -errno (no thread).
 * Context: the uploader, helper process or worker thread; allocates. */
int ps_listen_start(struct ps_export *x, pthread_mutex_t *lock, pid_t host) PS_WUR;

/* Stop listening once the program that listened is gone: exec'd (the
 * port is free for the new image, which retries for it) or ended (the
 * helper may serve its tree for long).  The acceptor closes the port
 * within 100 ms; windows being waited end then, with what they have.
 * Context: the uploader's loop. */
void ps_listen_stop(void);

/* Before the helper ends: stop listening, end the windows being waited,
 * and wait at most timeout_ns for the connections being answered, which
 * need the worker's lock (the caller must not hold it).  Context: the
 * helper's loop, at its end. */
void ps_listen_finish(uint64_t timeout_ns);

#endif
