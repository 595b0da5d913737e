/* gostack.h -- walking Go code, inside the signal handler.
 *
 * Go functions have no .eh_frame, and Go on amd64 always keeps frame
 * pointers: each frame saves its caller's %rbp just below its return
 * address and points %rbp there.  So Go frames are walked here by frame
 * pointer, without libunwind, whose frame-pointer fallback cost ~170 us
 * per sample on a Go program (an unwind-table search that fails and a
 * validating system call for every frame; BENCHMARKS.md section 9b).
 * Here a frame costs two loads from the goroutine's stack, found once
 * (gostack.c: struct window).
 *
 * A frame-pointer walk is right in every frame but the leaf: a leaf
 * interrupted in its prologue or epilogue, or one that never sets up a
 * frame (Go gives none to a leaf with a zero-size frame; assembly helpers
 * such as memmove have none; some assembly uses %rbp as a general
 * register), still has its caller's %rbp or none, and the walk would skip
 * the caller.  The Go function table (.gopclntab, shim/gopclntab.h) gives
 * the SP delta at every pc, so the leaf's return address is at SP + delta
 * whether or not its frame is set up, and %rbp belongs to the leaf exactly
 * when it points just below that return address.  The same holds for the
 * frame under runtime.asyncPreempt and runtime.sigpanic, calls the Go
 * runtime injects into code it interrupted.
 *
 * The tables of the Go objects loaded at start-up are found and validated
 * by ps_gostack_init (it reads each Go object's section headers from its
 * file, and checks the table in memory: header, bounds, entry order);
 * afterwards they are read-only, so the handler's look-up takes no lock.
 * Go objects loaded later with dlopen (a Go c-shared library) are not
 * covered: libunwind walks them, as any code without .eh_frame.
 */
#ifndef PS_GOSTACK_H
#define PS_GOSTACK_H

#include "common/ps.h"
#include "shim/ehframe.h"

/* Find the function tables of the Go objects loaded now.  Returns the
 * number found (0: no Go code).  Context: constructor, before any timer
 * is armed; opens and reads files. */
int ps_gostack_init(void);

/* What ps_gostack_init found: the number of Go objects.  A Go program
 * ends by a raw exit_group, which no hook of the shim sees. */
int ps_gostack_objects(void);

/* Walk the Go frames from start into ips[0..max), leaf first.  exact:
 * start holds the interrupted registers, and ips[0] is start->ip; else
 * start is a frame that C code returns to (the .eh_frame walk stopped
 * there, shim/ehframe.h), whose BP may be on another stack, and ips[0] is
 * start->ip - 1.  The others are return addresses minus one (but the
 * exact pc under an injected call).  g: R14 at the interrupt (Go code
 * keeps its goroutine there; a hint, checked), or 0.  Each
 * frame's caller is read from its frame pointer ([BP] the caller's BP,
 * [BP + 8] the return address); the leaf's, when BP is not (yet) its own,
 * from SP + its SP delta.  Every stack read is checked (gostack.c: load),
 * never by faulting; every frame must lie above the one before; the walk
 * ends at a BP of 0, or at a return address into no known code.
 * When the walk reaches code that is not Go (cgo, libc), it stops there
 * and *rest holds that frame's registers (ip a return address, sp, bp) for
 * the caller to walk on by .eh_frame; otherwise rest->ip is 0.
 * Returns the depth, or 0 when start->ip is not Go code.
 * Context: signal handler; async-signal-safe, lock-free, allocation-free,
 * bounded (max frames; per frame a range check, for a leaf a binary
 * search and a bounded pc-value walk; a system call to check g, and one
 * per 2 KiB copied of any stack that is not the goroutine's). */
int ps_gostack_walk(const struct ps_frame_regs *start, int exact, uintptr_t g, uintptr_t *ips,
		    int max, struct ps_frame_regs *rest) PS_SIGSAFE;

#endif
