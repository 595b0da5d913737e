/* shmem.c -- shared mappings.  See shmem.h. */
#include "common/shmem.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_OPEN 8

/* The descriptors of the mappings made since the last ps_shmem_close_fds,
 * for ps_shmem_fd.  Written by the thread that maps (the constructor, a
 * fork child's first allocation sample or exit; one at a time, as
 * worker.h says) and by the fork child handler, while it has one thread. */
static struct {
	void *p;
	int fd;
} open_fds[MAX_OPEN];
static int nopen;

PS_SIGSAFE static void
forget(int i)
{
	(void)close(open_fds[i].fd);
	open_fds[i] = open_fds[--nopen];
}

/* A memfd of len bytes, or -1. */
PS_SIGSAFE static int
memfd_of(size_t len)
{
	struct rlimit fsize;
	int fd;

	/* A memfd's size counts against RLIMIT_FSIZE: sizing it past the
	 * program's limit would raise SIGXFSZ in the program. */
	if (nopen >= MAX_OPEN || getrlimit(RLIMIT_FSIZE, &fsize) ||
	    (fsize.rlim_cur != RLIM_INFINITY && fsize.rlim_cur < len))
		return -1;
	/* Sealed at its size: the process it is handed to (the helper, or a
	 * program of the tree mapping the bell) checks that no one, not even
	 * a process of the same user through /proc, can shrink it under its
	 * mapping, which would kill it with SIGBUS (ps_shmem_sealed). */
	fd = (int)syscall(SYS_memfd_create, "pyroshim", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd >= 0 && (ftruncate(fd, (off_t)len) ||
			fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))) {
		(void)close(fd);
		fd = -1;
	}
	return fd;
}

PS_SIGSAFE void *
ps_shmem_map(void *p, size_t len, int fd)
{
	void *q = mmap(p, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0) | (p ? MAP_FIXED : 0), fd, 0);

	if (q == MAP_FAILED)
		return NULL;
	/* The program's core dump is the same as without the shim: not 10
	 * MiB larger, nor its stack cut off by RLIMIT_CORE behind our
	 * tables. */
	(void)madvise(q, len, MADV_DONTDUMP);
	return q;
}

/* ps_shmem_map, and fd (if any) kept for ps_shmem_fd. */
PS_SIGSAFE static void *
map(void *p, size_t len, int fd)
{
	void *q = ps_shmem_map(p, len, fd);

	if (!q) {
		if (fd >= 0)
			(void)close(fd);
		return NULL;
	}
	if (fd >= 0) {
		open_fds[nopen].p = q;
		open_fds[nopen++].fd = fd;
	}
	return q;
}

/* Without a memfd (a seccomp filter, an old kernel, the size limit): anonymous
 * shared memory, which only a forked helper can share. */
PS_SIGSAFE void *
ps_shmem_new(size_t len)
{
	return map(NULL, len, memfd_of(len));
}

int
ps_shmem_renew(void *p, size_t len)
{
	int i;

	for (i = 0; i < nopen; i++)
		if (open_fds[i].p == p)
			forget(i);
	return map(p, len, memfd_of(len)) ? 0 : -ENOMEM;
}

PS_SIGSAFE void
ps_shmem_free(void *p, size_t len)
{
	int i;

	if (!p)
		return;
	for (i = 0; i < nopen; i++)
		if (open_fds[i].p == p)
			forget(i);
	(void)munmap(p, len);
}

PS_SIGSAFE int
ps_shmem_fd(const void *p)
{
	int i;

	for (i = 0; i < nopen; i++)
		if (open_fds[i].p == p)
			return open_fds[i].fd;
	return -1;
}

int
ps_shmem_sealed(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	return seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_SEAL);
}

PS_SIGSAFE void
ps_shmem_close_fds(void)
{
	while (nopen)
		forget(nopen - 1);
}

/* Where parked descriptors go: 16 numbers below the top. */
#define PARK_TOP 1024
#define PARK_ROOM 16

PS_SIGSAFE int
ps_fd_park(int fd)
{
	struct rlimit nofile;
	rlim_t top = PARK_TOP;
	int to;

	if (getrlimit(RLIMIT_NOFILE, &nofile))
		return fd;
	if (nofile.rlim_cur != RLIM_INFINITY && nofile.rlim_cur < top)
		top = nofile.rlim_cur;
	if (top < 4 * PARK_ROOM || fd >= (int)(top - PARK_ROOM))
		return fd;   /* no room that is not the program's, or there */
	to = fcntl(fd, F_DUPFD_CLOEXEC, (int)(top - PARK_ROOM));
	if (to < 0)
		return fd;
	(void)close(fd);
	return to;
}

PS_SIGSAFE void
ps_shmem_park_fds(void)
{
	int i;

	for (i = 0; i < nopen; i++)
		open_fds[i].fd = ps_fd_park(open_fds[i].fd);
}
