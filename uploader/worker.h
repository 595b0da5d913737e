/* worker.h -- the uploader thread.
 *
 * One thread per process runs an export pass every upload interval.  It
 * holds the reentrancy guard for its whole life (nothing it does is
 * profiled) and blocks every signal, so the host's signals -- SIGPROF
 * included -- are always delivered to the host's own threads.
 *
 * All export state is protected by one mutex.  The last pass, at exit or
 * before an exec, runs in the thread that is leaving, after taking that
 * mutex within the flush timeout: if the worker is stuck (a server that
 * never answers), the process leaves without the last pass instead of
 * hanging.
 */
#ifndef PS_WORKER_H
#define PS_WORKER_H

#include <stdint.h>
#include "uploader/export.h"
#include "common/ps.h"

/* Prepare the thread for export state x (not owned, must outlive it).
 * lazy 0: start it now.  lazy 1: start it at the first ps_worker_poke()
 * one interval from now -- the allocation hooks poke on their slow path,
 * pthread_create pokes at once -- so a short program never has a second
 * thread; except with a server or an OTLP endpoint, where the uploads of
 * every interval (and the span at _exit) need it from the start.  Returns 0 or -errno from pthread_create.  Context: constructor. */
int ps_worker_start(struct ps_export *x, uint64_t interval_ns, int lazy) PS_WUR;

/* Run the last pass in the calling thread, waiting at most timeout_ns for
 * the worker's lock, and stop the worker.  `final` 1: the process is
 * ending; 0: an exec is starting (the worker keeps going if it fails).
 * Context: any host thread (destructor, exec hooks); guard held. */
void ps_worker_flush(uint64_t timeout_ns, int final);

/* _exit is ending the process without exit handlers: ask the worker thread
 * (if there is one) for the last pass -- profiles and the run's span -- and
 * wait at most timeout_ns.  Nothing else is done in the calling thread,
 * which may be inside a signal handler or hold the C library's locks.
 * Context: any thread; async-signal-safe. */
void ps_worker_exit(uint64_t timeout_ns);

/* A thread of the program starts (+1) or ends (-1).  When none is left
 * the worker thread ends, so that it never keeps the process alive after
 * the program's last thread called pthread_exit.
 * Context: any host thread (thread start, thread-exit destructor). */
void ps_worker_host_thread(int delta);

/* Fork child: the worker thread does not exist here.  Reset the lock and
 * mark the thread as not running; it is started again by ps_worker_poke,
 * one interval later.
 * Context: fork child handler. */
void ps_worker_child(void);

/* Start the thread if it is due (`now`: due at once, because the program
 * is becoming multi-threaded anyway).  Cheap when running.
 * Context: any host thread outside signal context, guard held. */
void ps_worker_poke(int now);

#endif
