/* files.c -- atomic, link-safe profile files.  See files.h. */
#include "uploader/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p with mode 0700 for the components it creates. */
static int
make_dirs(const char *path)
{
	char tmp[PATH_MAX];
	size_t i, n = strlen(path);

	if (n == 0 || n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (tmp[i] != '/' && tmp[i] != '\0')
			continue;
		tmp[i] = '\0';
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -errno;
		tmp[i] = path[i];
	}
	return 0;
}

int
ps_files_open_dir(const char *path)
{
	struct stat st;
	int fd, rc;

	rc = make_dirs(path);
	if (rc)
		return rc;
	if (lstat(path, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid())
		return -EPERM;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return fd;
}

int
ps_files_check_dir(const char *path)
{
	char tmp[PATH_MAX];
	struct stat st;
	size_t n = strlen(path);
	char *slash;

	if (n == 0 || n >= sizeof(tmp))
		return -ENAMETOOLONG;
	if (lstat(path, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		return st.st_uid != geteuid() ? -EPERM : 0;
	}
	if (errno != ENOENT)
		return -errno;
	/* To be made: the nearest existing ancestor must take it. */
	memcpy(tmp, path, n + 1);
	while ((slash = strrchr(tmp, '/')) != NULL) {
		*slash = '\0';
		if (stat(tmp[0] ? tmp : "/", &st) == 0) {
			if (!S_ISDIR(st.st_mode))
				return -ENOTDIR;
			return access(tmp[0] ? tmp : "/", W_OK | X_OK) ? -errno : 0;
		}
		if (errno != ENOENT)
			return -errno;
	}
	return access(".", W_OK | X_OK) ? -errno : 0;
}

static int
write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* write_all with SIGXFSZ held off.  Past RLIMIT_FSIZE, write(2) fails
 * with EFBIG and raises SIGXFSZ in the calling thread, and its default
 * action kills the process.  The last pass runs in the host's exiting
 * thread (and before an exec in the thread calling it), so the signal is
 * blocked around the write and the one our write raised is taken back; a
 * SIGXFSZ that was pending already (the host's own) is left alone. */
static int
write_all_quiet(int fd, const void *data, size_t len)
{
	static const struct timespec zero = { 0, 0 };
	sigset_t xfsz, old, pending;
	int rc, had;

	sigemptyset(&xfsz);
	sigaddset(&xfsz, SIGXFSZ);
	if (pthread_sigmask(SIG_BLOCK, &xfsz, &old))
		return -EAGAIN;
	had = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
	rc = write_all(fd, data, len);
	if (rc == -EFBIG && !had)
		while (sigtimedwait(&xfsz, NULL, &zero) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int
ps_files_write(int dirfd, const char *name, const void *data, size_t len)
{
	char tmp[NAME_MAX + 1];
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), ".%s.tmp", name) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	/* Something at the temporary name -- left by an interrupted write, or
	 * planted in a directory others can write -- is removed, never
	 * reused: the file renamed into place is always one we created. */
	if (fd < 0 && errno == EEXIST && unlinkat(dirfd, tmp, 0) == 0)
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write_all_quiet(fd, data, len);
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && renameat(dirfd, tmp, dirfd, name))
		rc = -errno;
	if (rc)
		(void)unlinkat(dirfd, tmp, 0);
	return rc;
}
