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
/* On a large zero-initialized static (a buffer, a table): placed after
 * every other one (x86-64's large-data section, which the linker puts
 * after .bss), so that the few bytes of small state that every process
 * touches share two or three pages, not one page per file that has a
 * large array (each page a process touches is a page fault: 2-3 us here,
 * and a fork child copies each one it writes; BENCHMARKS 14u). */
#if defined(__x86_64__)
#define PS_LARGE    __attribute__((section(".lbss")))
#else
#define PS_LARGE
#endif
#define PS_LIKELY(x)   __builtin_expect(!!(x), 1)
#define PS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* PS_VERSION comes from the file VERSION, through the Makefile. */
#ifndef PS_VERSION
#error "PS_VERSION is not defined: build with the Makefile (it reads VERSION)"
#endif

#endif
