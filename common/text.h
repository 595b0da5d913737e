/* text.h -- the character classes and small parsers that several layers
 * need: hex digits, HTTP token characters, whitespace trimming and
 * percent-decoding.  Said once here, so that a fix reaches every parser.
 *
 * Context: any thread; async-signal-safe (no allocation, no locale: the
 * classes are ASCII, whatever setlocale(3) the program made).
 */
#ifndef PS_TEXT_H
#define PS_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"

/* The value of a hex digit, either case, or -1. */
int ps_hexval(char c);

/* Append src to the string of `at` bytes in dst (len bytes), cut to fit,
 * and return at + strlen(src): like snprintf, what the whole would take,
 * so that a result >= len says it did not fit.  dst ends within len
 * whenever at < len; nothing is written otherwise.  A chain of these
 * builds "%s/%s".  Not snprintf: a process that never prints would page
 * in the C library's formatting (4 to 5 page faults) for the shim's start
 * alone (BENCHMARKS 14u). */
size_t ps_cat(char *dst, size_t len, size_t at, const char *src) PS_SIGSAFE;

/* The same for v in decimal. */
size_t ps_cat_u(char *dst, size_t len, size_t at, unsigned long v) PS_SIGSAFE;

/* The same for v as 16 lowercase hex digits (a digest in PYROSHIM_SAID
 * and PYROSHIM_PPROF). */
size_t ps_cat_x64(char *dst, size_t len, size_t at, uint64_t v);

/* RFC 9110 tchar: the characters of an HTTP token (a header name). */
int ps_is_tchar(char c);

/* RFC 9110 OWS: space or horizontal tab. */
int ps_is_ows(char c);

/* The C locale's isspace: space, \t, \n, \v, \f, \r. */
int ps_is_space(char c);

/* Narrow s[0..*n) so that it neither starts nor ends with a character for
 * which is_ws() is true (ps_is_ows or ps_is_space). */
void ps_trim(const char **s, size_t *n, int (*is_ws)(char));

/* Percent-decode s[0..n) into dst (room for cap bytes, NUL included).
 * A decoded control character (below 0x20, or 0x7f) is refused, except a
 * tab when tab_ok.  Returns the decoded length, -EINVAL (an incomplete
 * escape or a refused character) or -ENOSPC; dst is NUL-terminated
 * whenever cap > 0. */
long ps_pct_decode(const char *s, size_t n, char *dst, size_t cap, int tab_ok);

/* 1 if every %-escape in s[0..n) is complete ('%' and two hex digits). */
int ps_pct_escapes_ok(const char *s, size_t n);

/* The length of the well-formed UTF-8 sequence at s, of the n bytes
 * there: 1 for ASCII (a NUL included), 2-4, or 0 (truncated, overlong,
 * a surrogate, beyond U+10FFFF, or n == 0). */
size_t ps_utf8_seq(const char *s, size_t n);

#define PS_REPORT_ITEMS 4
#define PS_REPORT_NAME  32

/* What a parser of a list (tags, headers) dropped, so that the caller can
 * print one warning: how many, and why for the first few, by name only --
 * never a value, which may be a credential.  A zeroed struct is empty. */
struct ps_report {
	unsigned dropped;               /* members dropped in total */
	unsigned listed;                /* entries used in item[] */
	struct {
		int why;                /* the parser's reason (its enum) */
		/* the name, cut to fit, every byte outside printable ASCII
		 * replaced by '?' */
		char name[PS_REPORT_NAME];
	} item[PS_REPORT_ITEMS];
};

/* Count one dropped member, and list it while there is room.  rep may be
 * NULL (nothing is recorded). */
void ps_report_drop(struct ps_report *rep, int why, const char *name, size_t n);

#endif
