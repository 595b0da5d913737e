/* ps.h -- conventions shared by every pyroshim source file.
 *
 * Error convention: functions return int, 0 on success and a negative errno
 * value on failure; the possible codes are listed next to each prototype.
 * Fallible functions are marked PS_WUR so that a caller cannot ignore them.
 *
 * Context: every function comment says where it may run.  Definitions that
 * a signal handler can reach are marked PS_SIGSAFE -- from the shim's own
 * handler, or from a program's handler through the async-signal-safe C
 * library functions the shim defines (_exit, sigaction, sigprocmask...)
 * -- and no others, so that `grep -n PS_SIGSAFE` lists exactly what must
 * stay async-signal-safe: no malloc, no stdio, no lock another thread may
 * hold, errno preserved.  `make sigsafe` (test/sigsafe.py) checks the marks
 * against the call graph.
 */
#ifndef PS_H
#define PS_H

#include <stddef.h>
#include <stdint.h>

#define PS_SIGSAFE              /* reachable from the signal handler */
#define PS_EXPORT   __attribute__((visibility("default")))
/* On an extern declaration: defined in this library, so reached without a
 * GOT load (-fvisibility=hidden covers definitions only). */
#define PS_HIDDEN   __attribute__((visibility("hidden")))
#define PS_WUR      __attribute__((warn_unused_result))
#define PS_TLS      __thread __attribute__((tls_model("initial-exec")))
#define PS_LIKELY(x)   __builtin_expect(!!(x), 1)
#define PS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* PS_VERSION comes from the file VERSION, through the Makefile. */
#ifndef PS_VERSION
#error "PS_VERSION is not defined: build with the Makefile (it reads VERSION)"
#endif

#endif
