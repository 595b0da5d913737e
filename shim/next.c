/* next.c -- the next definition of an interposed function.  See next.h. */
#include "shim/next.h"

#include <dlfcn.h>
#include <stdatomic.h>

void *
ps_next(const char *name)
{
	/* RTLD_NEXT is relative to the object that calls dlsym: this file is
	 * linked into libpyroshim.so with every interposer. */
	return dlsym(RTLD_NEXT, name);
}

void *
ps_next_lookup(void *_Atomic *slot, const char *name)
{
	void *p = ps_next(name);

	/* Threads racing here all store the same value. */
	atomic_store_explicit(slot, p ? p : PS_NEXT_ABSENT, memory_order_relaxed);
	return p ? p : PS_NEXT_ABSENT;
}
