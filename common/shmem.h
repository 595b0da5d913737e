/* shmem.h -- memory shared with the uploader's helper process: MAP_SHARED
 * pages of a memfd, mapped before the helper is forked so that both see
 * the same tables, or handed to the tree's helper by their descriptor
 * (worker.h); renewed (fresh zeroed pages at the same address) in a fork
 * child so that its tables are its own.  The one way the shim maps such
 * memory (stack and live tables, the worker's control block).
 *
 * A mapping's descriptor stays open, close-on-exec, until
 * ps_shmem_close_fds: the program holds none once its uploader started.
 * Where memfd_create is refused, the pages are anonymous (MAP_SHARED |
 * MAP_ANONYMOUS) and have no descriptor: only a forked helper shares them.
 *
 * Context: any thread outside signal context; no malloc.  new, free and
 * close_fds are async-signal-safe (a fork child's _exit).
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

/* Map len bytes of fd (-1: anonymous memory) shared, at p (NULL:
 * anywhere), left out of core dumps as every mapping of these is; or
 * NULL.  Keeps nothing of fd: for a descriptor another process handed
 * over (and for ps_shmem_new). */
void *ps_shmem_map(void *p, size_t len, int fd);

/* Unmap a mapping made by ps_shmem_new. */
void ps_shmem_free(void *p, size_t len);

/* The descriptor of mapping p while it is open, else -1. */
int ps_shmem_fd(const void *p);

/* 1 if fd is one of these memfds, sealed so that it cannot shrink: a
 * mapping of it up to its size never faults with SIGBUS, whatever any
 * other process does.  For descriptors another process hands over. */
int ps_shmem_sealed(int fd);

/* Close every mapping's descriptor (the mappings stay). */
void ps_shmem_close_fds(void);

/* Move fd (close-on-exec) near the top of the first 1024 numbers (or of
 * RLIMIT_NOFILE, if lower), where a program that keeps it open for a
 * while does not see it: its own open(2) still gets the lowest free
 * number, as without the shim.  Returns the new number, or fd where it
 * cannot move.  Async-signal-safe. */
int ps_fd_park(int fd);

/* ps_fd_park every open mapping's descriptor. */
void ps_shmem_park_fds(void);

#endif
