/* gostack.h -- the Go leaf frame, from the Go function table.
 *
 * Go functions have no .eh_frame; their stacks are walked by frame
 * pointer (libunwind's fallback, shim/unwind.c).  A frame-pointer walk is
 * right in every frame but the leaf: a leaf interrupted in its prologue
 * or epilogue, or one that never sets up a frame (Go gives none to a leaf
 * with a zero-size frame, and assembly helpers such as memmove have
 * none), still has its caller's %rbp, and the walk then skips the caller.
 * The Go function table (.gopclntab, shim/gopclntab.h) gives the SP delta
 * at every pc, so the leaf's return address is at SP + delta whether or
 * not its frame is set up; and %rbp belongs to the leaf exactly when it
 * points just below that return address (Go's frame layout on amd64).
 *
 * The tables of the Go objects loaded at start-up are found and validated
 * by ps_gostack_init (it reads each Go object's section headers from its
 * file, and checks the table in memory: header, bounds, entry order);
 * afterwards they are read-only, so the handler's look-up takes no lock.
 * Go objects loaded later with dlopen (a Go c-shared library) are not
 * covered: their leaves are walked by frame pointer alone, as before.
 */
#ifndef PS_GOSTACK_H
#define PS_GOSTACK_H

#include "common/ps.h"
#include "shim/ehframe.h"

/* Find the function tables of the Go objects loaded now.  Returns the
 * number found (0: no Go code).  Context: constructor, before any timer
 * is armed; opens and reads files. */
int ps_gostack_init(void);

/* If r->ip is Go code whose own frame is not set up, step r to its caller:
 * r->ip = the return address (read from SP + delta, the read checked by
 * process_vm_readv, never by faulting), r->sp = the caller's SP, r->bp
 * unchanged (it is the caller's).  Returns 1 when stepped; 0 when r->ip is
 * not Go code, the leaf's frame is set up (the frame-pointer walk is then
 * right), or the table or the stack cannot be read.
 * Context: signal handler; async-signal-safe, lock-free, allocation-free,
 * bounded (binary search, a bounded pc-value walk, one system call). */
int ps_gostack_leaf(struct ps_frame_regs *r) PS_SIGSAFE;

#endif
