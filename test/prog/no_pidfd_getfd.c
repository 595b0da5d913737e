/* no_pidfd_getfd: run a command where pidfd_getfd(2) fails with EPERM, as
 * it does for a program that may not ptrace the tree's helper (Yama's
 * ptrace_scope 1: the helper is no descendant of it).  A seccomp filter,
 * inherited across exec, answers that one call so.
 *
 * usage: no_pidfd_getfd command [arg...] */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_getfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (argc < 2) {
		fprintf(stderr, "usage: no_pidfd_getfd command [arg...]\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("no_pidfd_getfd: seccomp");
		return 2;
	}
	execvp(argv[1], argv + 1);
	perror("no_pidfd_getfd: exec");
	return 127;
}
