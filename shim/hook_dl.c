/* hook_dl.c -- the shim's dl_iterate_phdr.
 *
 * libunwind calls dl_iterate_phdr to find unwind tables, and glibc's takes
 * the loader lock.  During a capture (ps_unwind_active) this thread may be
 * inside a signal handler that interrupted dlopen, so the lock must not be
 * taken: the call is answered lock-free by ps_unwind_iterate_phdr.  Every
 * other caller gets glibc's function, unchanged.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>

#include "common/ps.h"
#include "shim/unwind.h"

typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);

/* Resolved on first use by whichever thread gets there; any thread may
 * store the same value, so a relaxed atomic suffices. */
static _Atomic(iterate_fn) real_iterate;

PS_EXPORT int
dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
	iterate_fn fn;

	if (ps_unwind_active())
		return ps_unwind_iterate_phdr(cb, data);
	fn = atomic_load_explicit(&real_iterate, memory_order_relaxed);
	if (!fn) {
		fn = (iterate_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr");
		if (!fn)
			return 0;
		atomic_store_explicit(&real_iterate, fn, memory_order_relaxed);
	}
	return fn(cb, data);
}
