/* shmem.h -- memory shared with the uploader's helper process: anonymous
 * MAP_SHARED pages, mapped before the helper is forked so that both see
 * the same tables, and renewed (fresh zeroed pages at the same address) in
 * a fork child so that its tables are its own.  The one way the shim maps
 * such memory (stack and live tables, the tables' structs, the worker's
 * control block).
 *
 * Context: any thread outside signal context; no malloc.
 */
#ifndef PS_SHMEM_H
#define PS_SHMEM_H

#include <stddef.h>
#include "common/ps.h"

/* len bytes of zeroed shared memory, or NULL. */
void *ps_shmem_new(size_t len);

/* Replace [p, p + len) -- a mapping made by ps_shmem_new -- with fresh
 * zeroed shared pages at the same address, no longer shared with any other
 * process.  Returns 0 or -ENOMEM (the old pages then stay). */
int ps_shmem_renew(void *p, size_t len) PS_WUR;

/* Unmap a mapping made by ps_shmem_new. */
void ps_shmem_free(void *p, size_t len);

#endif
