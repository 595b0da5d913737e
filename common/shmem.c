/* shmem.c -- shared anonymous mappings.  See shmem.h. */
#include "common/shmem.h"

#include <errno.h>
#include <sys/mman.h>

PS_SIGSAFE void *
ps_shmem_new(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int
ps_shmem_renew(void *p, size_t len)
{
	void *q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED,
		       -1, 0);

	return q == MAP_FAILED ? -ENOMEM : 0;
}

PS_SIGSAFE void
ps_shmem_free(void *p, size_t len)
{
	if (p)
		(void)munmap(p, len);
}
