/* log.c -- formatted lines written with one write(2).  See log.h. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Written once by the constructor (ps_log_setup) before any other thread of
 * the shim exists, and by the fork child handler; read by every thread. */
static int log_level = PS_LOG_ERROR;
static int log_fd = -1;
static dev_t log_dev;  /* what log_fd is: the program may close the number */
static ino_t log_ino;  /* (closefrom) and open a file of its own there */
static int log_pid;   /* the pid lines name; 0 = getpid() */

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void
ps_log_setup(int level, int fd)
{
	struct stat st;

	log_level = level;
	log_fd = fd;
	if (fd >= 0 && fstat(fd, &st) == 0) {
		log_dev = st.st_dev;
		log_ino = st.st_ino;
	}
}

int
ps_log_level(void)
{
	return log_level;
}

int
ps_log_fd(void)
{
	return log_fd;
}

void
ps_log_set_pid(int pid)
{
	log_pid = pid;
}

/* Configuration lines held by the constructor (ps_log_config_hold) until
 * it knows which the tree's processes said already: each as its
 * destination (0 stderr, 1 the log file), its length and its text.
 * Written by the constructor alone, before any other thread exists. */
static int holding;
static PS_LARGE char held[8192];
static size_t nheld;

static void hold_or_write(int fd, const char *line, size_t n, int config);

/* One line, with one write(2); `config`: a configuration line, which the
 * constructor may hold. */
static void
emit(const char *prefix, const char *fmt, va_list ap, int config)
{
	char line[1024];
	int saved = errno;
	int n, m;

	n = snprintf(line, sizeof(line), "%s", prefix);
	if (n < 0 || (size_t)n >= sizeof(line))
		goto out;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		goto out;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	hold_or_write(log_fd, line, (size_t)n, config);
out:
	errno = saved;
}

static void
write_line(int fd, const char *line, size_t n)
{
	struct stat st;

	/* Never into a file of the program's that took the log's number. */
	if (fd >= 0 && (fstat(fd, &st) || st.st_dev != log_dev || st.st_ino != log_ino))
		return;
	/* A short or failed write of a log line is not worth reporting. */
	if (write(fd >= 0 ? fd : STDERR_FILENO, line, n) < 0)
		(void)0;
}

static void
hold_or_write(int fd, const char *line, size_t n, int config)
{
	if (!holding || !config) {
		write_line(fd, line, n);
		return;
	}
	if (nheld + 3 + n > sizeof(held)) {   /* more than fits: say them now */
		(void)ps_log_config_release(NULL, 0, NULL, 0);
		write_line(fd, line, n);
		return;
	}
	held[nheld] = (char)(fd >= 0);
	held[nheld + 1] = (char)(n >> 8);
	held[nheld + 2] = (char)(n & 0xff);
	memcpy(held + nheld + 3, line, n);
	nheld += 3 + n;
}

void
ps_log_config_hold(void)
{
	holding = 1;
	nheld = 0;
}

static uint64_t
fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n--) {
		h ^= *c++;
		h *= 1099511628211ull;
	}
	return h;
}

/* A held line's digest: its text and the file it goes to (its device and
 * inode: the same terminal, pipe or log file, whatever name or descriptor
 * reaches it). */
static uint64_t
line_digest(int fd, const char *line, size_t n)
{
	struct stat st;
	uint64_t h = 14695981039346656037ull, id[2] = { 0, 0 };

	if (fstat(fd >= 0 ? fd : STDERR_FILENO, &st) == 0) {
		id[0] = (uint64_t)st.st_dev;
		id[1] = (uint64_t)st.st_ino;
	}
	h = fnv1a(fnv1a(h, id, sizeof(id)), line, n);
	return h ? h : 1;
}

size_t
ps_log_config_release(const uint64_t *said, size_t nsaid, uint64_t *printed, size_t cap)
{
	size_t i, k, n, np = 0;
	uint64_t h;
	int fd;

	holding = 0;
	for (i = 0; i < nheld; i += 3 + n) {
		n = (size_t)(unsigned char)held[i + 1] << 8 | (unsigned char)held[i + 2];
		fd = held[i] ? log_fd : -1;
		h = line_digest(fd, held + i + 3, n);
		for (k = 0; k < nsaid && said[k] != h; k++)
			;
		if (k < nsaid)
			continue;     /* said there by the tree already */
		write_line(fd, held + i + 3, n);
		if (np < cap)
			printed[np++] = h;
	}
	nheld = 0;
	return np;
}

void
ps_log(int level, const char *fmt, ...)
{
	char prefix[64];
	va_list ap;

	if (level > log_level || level < 0)
		return;
	snprintf(prefix, sizeof(prefix), "pyroshim[%d]: %s: ", log_pid ? log_pid : (int)getpid(),
		 level_names[level]);
	va_start(ap, fmt);
	emit(prefix, fmt, ap, 0);
	va_end(ap);
}

/* Set by the tree's helper's loop while it reads a joined program's
 * settings again, whose mistakes that program printed already. */
static int config_quiet;

void
ps_log_config_quiet(int on)
{
	config_quiet = on;
}

void
ps_log_config(const char *fmt, ...)
{
	va_list ap;

	if (config_quiet)
		return;
	va_start(ap, fmt);
	emit("pyroshim: ", fmt, ap, 1);
	va_end(ap);
}
