/* hook_dl.c -- the shim's dl_iterate_phdr.
 *
 * libunwind calls dl_iterate_phdr to find unwind tables, and glibc's takes
 * the loader lock.  During a capture (ps_unwind_active) this thread may be
 * inside a signal handler that interrupted dlopen, so the lock must not be
 * taken: the call is answered lock-free by ps_unwind_iterate_phdr.  Every
 * other caller gets glibc's function, unchanged.
 */
#include <link.h>

#include "common/ps.h"
#include "shim/unwind.h"
#include "shim/next.h"

PS_SIGSAFE PS_EXPORT int
dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
	if (ps_unwind_active())
		return ps_unwind_iterate_phdr(cb, data);
	PS_NEXT(dl_iterate_phdr);
	return real_dl_iterate_phdr ? real_dl_iterate_phdr(cb, data) : 0;
}
