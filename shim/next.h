/* next.h -- the definition of a C library function that the shim's own
 * definition hides: the one mechanism every interposer uses.
 *
 * PS_NEXT(fn), at the top of an interposer of fn, declares `real_fn`: a
 * pointer of fn's own type to the next definition of fn in the lookup
 * order (dlsym(RTLD_NEXT), that is the C library's, or the program's
 * allocator's), or NULL if there is none.  The lookup is made at the first
 * call and kept; threads racing there store the same value, through a
 * relaxed atomic.
 *
 * The first lookup is not async-signal-safe (dlsym may take the loader's
 * lock and allocate); every later call is.  The interposers a signal
 * handler may call (_exit, sigaction, sigprocmask...) are, in practice,
 * first called outside one: a program installs its handlers with them.
 */
#ifndef PS_NEXT_H
#define PS_NEXT_H

#include <stdatomic.h>
#include "common/ps.h"

/* The next definition of `name` after libpyroshim.so, or NULL.
 * Context: any thread outside signal context; may allocate (dlsym). */
void *ps_next(const char *name);

/* ps_next(name), stored in *slot (PS_NEXT_ABSENT for NULL).  Context: as
 * ps_next. */
void *ps_next_lookup(void *_Atomic *slot, const char *name);

/* What a slot holds once the lookup found nothing: not looked up again
 * (a fork prepare handler asks for execveat, which glibc before 2.34 does
 * not have, at every fork). */
#define PS_NEXT_ABSENT ((void *)-1)

/* *slot, looked up by name on first use: one relaxed load afterwards;
 * NULL if there is no next definition.
 * Context: as ps_next the first time, async-signal-safe afterwards. */
PS_SIGSAFE static inline void *
ps_next_cached(void *_Atomic *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_relaxed);

	if (!p)
		p = ps_next_lookup(slot, name);
	return p == PS_NEXT_ABSENT ? NULL : p;
}

/* real_<fn> of type `type`, for a function without a declaration in the
 * C library's headers (__libc_start_main). */
#define PS_NEXT_AS(type, fn)                                          \
	static void *_Atomic ps_next_slot_##fn;                         \
	type real_##fn = (type)ps_next_cached(&ps_next_slot_##fn, #fn)

#define PS_NEXT(fn) PS_NEXT_AS(__typeof__(fn) *, fn)

/* After PS_NEXT(fn), in a function that sets errno on failure: the answer
 * to "there is no next definition" (a C library without fn). */
#define PS_NEXT_MISSING(fn, ret)                                        \
	do {                                                            \
		if (!real_##fn) {                                       \
			errno = ENOSYS;                                 \
			return ret;                                     \
		}                                                       \
	} while (0)

#endif
