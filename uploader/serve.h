/* serve.h -- the answers of the /debug/pprof listener (listen.h says what
 * each path serves and how; this is the part that makes the answers).
 *
 * Context: the listener's connection threads; allocates; takes the
 * worker's lock to read the fold.
 */
#ifndef PS_SERVE_H
#define PS_SERVE_H

#include <pthread.h>
#include <sys/types.h>
#include "uploader/export.h"
#include "uploader/httpreq.h"

/* The export state whose fold is served, the lock that guards it (the
 * worker's), and the profiled process (for /cmdline).  Borrowed; must
 * outlive every connection.  Context: before the listener's threads. */
void ps_serve_setup(struct ps_export *x, pthread_mutex_t *lock, pid_t host);

/* Answer the parsed request rq on connection c (Connection: close; the
 * caller closes).  A window (seconds=N) blocks for its seconds, or less:
 * until the client closes its side, or ps_serve_end; its profile says how
 * long it was. */
void ps_serve_route(int c, const struct ps_httpreq *rq);

/* The program served is gone: windows being waited end now.  Context:
 * the listener's accepting thread, as it stops. */
void ps_serve_end(void);

/* An error as Go's serveError writes it: `why` and a newline, text/plain,
 * X-Go-Pprof: 1, plus `extra` header lines ("Name: value\r\n", may be
 * NULL).  No body after a HEAD request (head 1). */
void ps_serve_error(int c, int head, int status, const char *why, const char *extra);

#endif
