/* log.c -- formatted lines written with one write(2).  See log.h. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Written once by the constructor (ps_log_setup) before any other thread of
 * the shim exists, and by the fork child handler; read by every thread. */
static int log_level = PS_LOG_ERROR;
static int log_fd = -1;
static int log_pid;   /* the pid lines name; 0 = getpid() */

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void
ps_log_setup(int level, int fd)
{
	log_level = level;
	log_fd = fd;
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

static void
emit(const char *prefix, const char *fmt, va_list ap)
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
	/* A short or failed write of a log line is not worth reporting. */
	if (write(log_fd >= 0 ? log_fd : STDERR_FILENO, line, (size_t)n) < 0)
		(void)0;
out:
	errno = saved;
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
	emit(prefix, fmt, ap);
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
	emit("pyroshim: ", fmt, ap);
	va_end(ap);
}
