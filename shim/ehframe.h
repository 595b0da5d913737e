/* ehframe.h -- the fast unwinder: x86-64 call-frame information read
 * straight from each object's .eh_frame, inside the signal handler.
 *
 * Why not libunwind for every frame: a sample whose leaf address libunwind
 * has not seen before costs a table search, a CIE/FDE parse and a CFI run
 * behind Debian's one global cache mutex, with the signal mask swapped
 * around it: 10-40 us, which is the p99 of the handler (BENCHMARKS.md
 * section 2).  Here the same work is a binary search in the object's
 * .eh_frame_hdr table (found with glibc's lock-free _dl_find_object) and a
 * short interpretation of the FDE that tracks only what a walk needs: the
 * CFA, the return address and %rbp.  No lock, no allocation, no system
 * call, no state shared between threads.
 *
 * It handles the frames the GNU toolchain emits for ordinary code, the
 * linker's PLT entries (their one DWARF expression) and glibc's signal
 * trampoline (an "S" CIE: the kernel's signal frame is read for the
 * interrupted registers).  Any frame it does not understand -- another
 * DWARF expression, a CFA in a register other than %rsp or %rbp, an
 * object without .eh_frame_hdr -- makes the walk report failure, and the
 * caller unwinds the whole stack with libunwind instead, so results are
 * never worse than libunwind's.
 *
 * Every stack read is checked against the bounds the caller gives (the
 * thread's stack, from the interrupted %rsp to its top) and every step
 * must move the CFA strictly upward, so corrupt frames end the walk
 * instead of faulting or looping.
 */
#ifndef PS_EHFRAME_H
#define PS_EHFRAME_H

#include <stdint.h>
#include "common/ps.h"

/* The registers a walk starts from. */
struct ps_frame_regs {
	uintptr_t ip, sp, bp;
};

/* Walk the stack described by r, writing ips[0..max), leaf first: ips[0]
 * is r->ip itself when exact_leaf, else r->ip - 1; the others are return
 * addresses minus one, but for a frame that a signal interrupted: its
 * instruction itself.  Stack reads must fall in [r->sp, stack_hi).
 * Returns the depth (>= 1) when the walk reached the outermost frame (a
 * frame whose return address the CFI marks undefined, or a zero return
 * address) or filled max; returns 0 when a frame could not be unwound.
 * Context: any, including signal handlers; async-signal-safe. */
int ps_ehframe_walk(const struct ps_frame_regs *r, uintptr_t stack_hi,
		    uintptr_t *ips, int max, int exact_leaf) PS_SIGSAFE;

/* Where a walk stopped for want of call-frame information. */
struct ps_frame_stop {
	struct ps_frame_regs regs;      /* the frame: ip is a return address */
	int depth;                      /* frames in ips before it; 0: none */
};

/* ps_ehframe_walk, and when it fails because a frame above the leaf has
 * no call-frame information (Go code under cgo), *stop says which frame:
 * ips[0..stop->depth) are good, and stop->regs are that frame's registers,
 * for another unwinder to go on from.  Otherwise stop->depth is 0.
 * Context: as ps_ehframe_walk. */
int ps_ehframe_walk_until(const struct ps_frame_regs *r, uintptr_t stack_hi, uintptr_t *ips,
			  int max, int exact_leaf, struct ps_frame_stop *stop) PS_SIGSAFE;

#endif
