/* hook_fd.c -- pipe, pipe2 and syscall: libunwind's address validation
 * without a file descriptor; and futex waits made through syscall(), timed
 * for the block profile (wait.h).
 *
 * libunwind opens a pipe at its first use and keeps it for the life of the
 * process: it validates an address by write(2)-ing one byte from it into
 * the pipe (EFAULT means unreadable).  Two file descriptors the program
 * never opened are a change any program can see (CPython's subprocess
 * tests list every descriptor a child holds).  So while libunwind runs for
 * the shim (ps_unwind_active), pipe creation fails with EMFILE, and its
 * validating write -- syscall(SYS_write, -1, addr, 1) -- is answered by
 * process_vm_readv(2) on our own pid, which fails with EFAULT exactly where
 * the write would have.  Every other call is the C library's, unchanged.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/ps.h"
#include "shim/unwind.h"
#include "shim/next.h"
#include "shim/wait.h"

PS_SIGSAFE PS_EXPORT int
pipe2(int fds[2], int flags)
{
	PS_NEXT(pipe2);

	if (ps_unwind_active()) {
		errno = EMFILE;
		return -1;
	}
	if (!real_pipe2) {
		errno = ENOSYS;
		return -1;
	}
	return real_pipe2(fds, flags);
}

/* pipe2 with no flags, as the kernel defines it. */
PS_SIGSAFE PS_EXPORT int
pipe(int fds[2])
{
	return pipe2(fds, 0);
}

/* One readable byte at addr?  Returns 1 like the write it replaces, or -1
 * with errno EFAULT.  Async-signal-safe. */
PS_SIGSAFE static long
validate(const void *addr)
{
	char byte;
	struct iovec local = { &byte, 1 }, remote = { (void *)addr, 1 };

	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1)
		return 1;
	errno = EFAULT;
	return -1;
}

/* A futex operation that waits (for a value to change, or for a PI lock):
 * what Rust's std and other lock libraries call through syscall(). */
PS_SIGSAFE static int
futex_waits(long number, long op)
{
	switch (number == SYS_futex ? op & FUTEX_CMD_MASK : -1) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
	case FUTEX_LOCK_PI:
#ifdef FUTEX_LOCK_PI2
	case FUTEX_LOCK_PI2:
#endif
	case FUTEX_WAIT_REQUEUE_PI:
		return 1;
	default:
		return 0;
	}
}

PS_SIGSAFE PS_EXPORT long
syscall(long number, ...)
{
	long a[6];
	va_list ap;
	int i;

	va_start(ap, number);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	/* The descriptor is an int: only its low 32 bits are defined. */
	if (number == SYS_write && (int)a[0] == -1 && ps_unwind_active())
		return validate((const void *)a[1]);
	PS_NEXT(syscall);
	PS_NEXT_MISSING(syscall, -1);
	if (!futex_waits(number, a[1]))
		return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	PS_WAIT_TIMED(PS_WAIT_BLOCK, syscall, long,
		      real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]));
}
