/* guard.h -- the per-thread reentrancy guard.
 *
 * While a thread's guard is held, the allocation hooks forward straight to
 * the C library (nothing is sampled, nothing recurses) and the signal
 * handler does not unwind (the thread is inside shim code, possibly inside
 * libunwind).  The uploader thread holds it for its whole life, so
 * everything the shim's own thread allocates -- libcurl, zlib,
 * symbolization -- passes through unprofiled.
 *
 * Initial-exec TLS: reading it never allocates, so the malloc hooks and the
 * signal handler may use it.  Context: any thread, async-signal-safe.
 */
#ifndef PS_GUARD_H
#define PS_GUARD_H

#include "common/ps.h"

extern PS_TLS int ps_guard_depth;

PS_SIGSAFE static inline void
ps_guard_enter(void)
{
	ps_guard_depth++;
}

PS_SIGSAFE static inline void
ps_guard_leave(void)
{
	ps_guard_depth--;
}

PS_SIGSAFE static inline int
ps_guard_held(void)
{
	return ps_guard_depth != 0;
}

#endif
