/* log.h -- the shim's only way to say anything.
 *
 * pyroshim is silent by default: children inherit the shim, and a stray line
 * on a child's stderr breaks programs that parse it.  Only configuration
 * mistakes are printed unconditionally (ps_log_config); everything else is
 * printed only when PYROSCOPE_LOG_LEVEL asks for it.  Lines go to stderr, or
 * to PYROSCOPE_LOG_FILE when set, with one write(2) each, so concurrent
 * lines never interleave.
 *
 * Context: any thread, never the signal handler (vsnprintf is not
 * async-signal-safe).  Does not allocate.  errno is preserved.
 */
#ifndef PS_LOG_H
#define PS_LOG_H

#include "common/ps.h"

enum ps_log_level {
	PS_LOG_ERROR = 0,
	PS_LOG_WARN = 1,
	PS_LOG_INFO = 2,
	PS_LOG_DEBUG = 3,
};

/* Set the level and the destination (fd -1 means stderr).  Called once by
 * the constructor after configuration is parsed; before that only
 * ps_log_config prints. */
void ps_log_setup(int level, int fd);
/* The level in force, so callers can skip building expensive messages. */
int ps_log_level(void);

/* The log file's descriptor, or -1 for stderr. */
int ps_log_fd(void);

/* Name `pid` in every line instead of the caller's own (the uploader's
 * helper process logs for the program).  Context: one thread. */
void ps_log_set_pid(int pid);
/* One line "pyroshim[pid]: <level>: <message>" if level <= the configured
 * level. */
void ps_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line "pyroshim: <message>", always: configuration mistakes only. */
void ps_log_config(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Hold the configuration lines from now on (the constructor: a tree's
 * processes inherit one environment, and each would print its mistakes
 * again), until ps_log_config_release, which prints each unless its
 * digest (of its text and of the file it goes to) is one of the nsaid in
 * `said`: those the tree's processes printed (PYROSHIM_SAID).  The
 * digests of the lines it printed go to printed[], up to cap; returns how
 * many.  More than 8 KiB of lines are printed at once.  Context: the
 * constructor, before any other thread of the shim. */
void ps_log_config_hold(void);
size_t ps_log_config_release(const uint64_t *said, size_t nsaid, uint64_t *printed, size_t cap);

/* 1: ps_log_config prints nothing (the tree's helper reading the settings
 * of a program that printed their mistakes itself).  Context: one thread. */
void ps_log_config_quiet(int on);

#define ps_warn(...)  ps_log(PS_LOG_WARN, __VA_ARGS__)
#define ps_info(...)  ps_log(PS_LOG_INFO, __VA_ARGS__)
#define ps_debug(...) ps_log(PS_LOG_DEBUG, __VA_ARGS__)

#endif
