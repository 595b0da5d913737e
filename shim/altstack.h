/* altstack.h -- an alternate signal stack for every sampled thread.
 *
 * The handler runs with SA_ONSTACK: the Go runtime aborts on a handler
 * without it, and runs its own handlers on 32 KiB signal stacks with no
 * guard page.  A sample that falls back to libunwind needs more than that,
 * so every thread the shim samples gets a stack of its own, PS_ALTSTACK_SIZE
 * bytes above a guard page, unless the thread already has one at least that
 * large.  The Go runtime adopts an alternate stack it finds installed on a
 * thread made by cgo's pthread_create (and on the main thread of a cgo
 * binary), so Go's handlers then run on it too.
 *
 * Each stack is freed when its thread ends, after it is switched off.
 */
#ifndef PS_ALTSTACK_H
#define PS_ALTSTACK_H

#include <stddef.h>
#include "common/ps.h"

#define PS_ALTSTACK_SIZE (128u << 10)

/* Give the calling thread the shim's alternate signal stack, unless it has
 * a large enough one.
 * Context: the thread itself, outside signal context. */
void ps_altstack_thread_start(void);

/* Switch the calling thread's stack from this module off and free it,
 * unless the program has put its own in its place.  Called at the end of
 * each of the program's threads by the destructor that counts them
 * (hook_thread.c), whose key the constructor makes: a second key, made
 * later, could find the program's 1024 taken, and each thread's 132 KiB
 * would then stay mapped.  The main thread's is freed by the process's
 * end, or at its pthread_exit.
 * Context: the thread itself, outside signal context. */
void ps_altstack_thread_end(void);

/* The most bytes any of the shim's signal stacks has had written: the
 * stacks of threads that ended, and of the live ones (read through the
 * kernel, since their threads run on; up to 1024 of them, counted only
 * when the debug log is on).  The handler's worst stack use, for the
 * debug log and the tests.
 * Context: any thread outside signal context; reads 128 KiB per live
 * stack at most. */
size_t ps_altstack_max_used(void);

#endif
