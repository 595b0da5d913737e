/* unwind.h -- stack capture, safe inside the signal handler.
 *
 * Two unwinders.  The fast one (shim/ehframe.c) reads .eh_frame itself,
 * with a per-thread cache of rows, no lock and no system call; it walks
 * ordinary frames on the thread's own stack.  When it meets anything else
 * (a signal trampoline, a DWARF expression other than a PLT's, an
 * alternate signal stack, code without unwind tables) the whole stack is
 * walked again with libunwind, as below.
 *
 * libunwind is loaded when the program starts its first thread (or in the
 * constructor of a Go program), not before: its dlopen, with liblzma, is
 * 200 us of every process's start-up, and a single-threaded program never
 * pays it.  Such a program's samples in the frames above are cut to their
 * leaf: a dlopen is safe neither in an allocation hook (the loader lock
 * against the program's own locks) nor in the handler.
 *
 * Go code, which has no .eh_frame, is walked by frame pointer by
 * shim/gostack.c; the C code under it (cgo, libc) by libunwind.
 *
 * Why libunwind is dlopen'ed, not linked: Debian's libunwind.so.8 exports
 * _Unwind_RaiseException and friends.  Linked into a preloaded library it
 * would enter the global symbol scope and take over C++ exception handling
 * in every host program.  Loaded with RTLD_LOCAL it serves only us.
 *
 * Why capture never deadlocks: libunwind finds unwind tables through
 * dl_iterate_phdr, which takes the loader lock; a signal that lands while a
 * thread holds that lock (dlopen, dlclose) deadlocks the process (measured:
 * 6 runs of 9, REFERENCES.md section 7).  While a capture runs on a thread,
 * the shim's dl_iterate_phdr (shim/hook_dl.c) does not call glibc's: it
 * describes only the object that contains the frame being unwound, found
 * with glibc's lock-free _dl_find_object.  No lock is taken, nothing is
 * allocated, and no snapshot of the object list needs publishing.
 *
 * libunwind keeps its per-thread cache in dynamic TLS, whose first use in a
 * thread allocates.  A thread is therefore unwound inside the handler only
 * after ps_unwind_warm_thread() ran on it outside signal context; until then
 * the handler records the interrupted instruction only.
 */
#ifndef PS_UNWIND_H
#define PS_UNWIND_H

#include <link.h>
#include "common/ps.h"

#define PS_MAX_DEPTH 128

/* Ready the calling (main) thread for captures: its stack's bounds, and
 * for a Go program libunwind (ps_unwind_load).  Context: constructor. */
void ps_unwind_init(void);

/* Load libunwind (once; the first failure is logged) and warm it up on the
 * calling thread.  Returns 0 or -ENOSYS (libunwind.so.8 missing or
 * incomplete).  Context: the constructor, or a thread about to start one:
 * never an allocation hook nor a signal handler (see unwind.c). */
int ps_unwind_load(void);

/* Learn this thread's stack, and make libunwind usable in its signal
 * handler once it is loaded (allocates its dynamic TLS).  Context: any
 * thread, not signal context; may allocate. */
void ps_unwind_warm_thread(void);

/* Capture the interrupted stack into ips[0..max), leaf first.  ips[0] is the
 * exact interrupted instruction; the others are return addresses minus one,
 * so that they fall inside the call instruction.  Returns the depth (>= 1).
 * Context: signal handler; async-signal-safe. */
int ps_unwind_signal(void *ucontext, uintptr_t *ips, int max);

/* Capture the caller's own stack, as ps_unwind_signal.  Frames of the shim
 * itself are included; symbolization drops them.
 * Context: any thread outside signal context (allocation hooks). */
int ps_unwind_here(uintptr_t *ips, int max);

/* 1 if ps_unwind_here may run on this thread even inside a signal
 * handler: the thread was warmed up and is not inside a capture.
 * Context: any; async-signal-safe. */
int ps_unwind_ready(void);

/* Non-zero while this thread is inside a capture. */
int ps_unwind_active(void);

/* pthread_atfork handlers: prepare waits until no thread is inside
 * libunwind (whose global cache lock would stay locked in the child), and
 * captures fail fast until parent/child run.  Context: fork only. */
void ps_unwind_fork_prepare(void);
void ps_unwind_fork_parent(void);
void ps_unwind_fork_child(void);

/* dl_iterate_phdr as seen by libunwind during a capture: calls cb once, for
 * the object containing the frame being unwound.  Async-signal-safe. */
int ps_unwind_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *),
			   void *data);

#endif
