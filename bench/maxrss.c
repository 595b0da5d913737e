/* maxrss: run a program and print its peak resident set size.
 *
 * usage: maxrss PROGRAM [ARGS...]   prints "maxrss_kb N" on stderr
 *
 * Why not wait4 from the Python driver: Python starts children with vfork,
 * so the child's ru_maxrss starts from the driver's own resident size (the
 * kernel carries the high-water mark across exec) and every program would
 * read at least ~17 MiB.  This process is small, and fork gives the child
 * a fresh high-water mark.
 */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct rusage ru;
	int status;
	pid_t pid;

	if (argc < 2)
		return 2;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0)
		return 1;
	fprintf(stderr, "maxrss_kb %ld\n", ru.ru_maxrss);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
