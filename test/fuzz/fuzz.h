/* fuzz.h -- helpers shared by the libFuzzer targets in test/fuzz/.
 *
 * Every target receives arbitrary bytes.  Parsers of outside input take C
 * strings, so the bytes are copied into a fresh heap block with a NUL after
 * them: ASan then reports any read past the terminator, which a fixed
 * buffer would hide.  Targets that need several strings split the input at
 * NUL bytes (a NUL can never be part of a C string, so nothing is lost).
 *
 * A broken invariant calls FUZZ_ASSERT, which prints the condition and
 * aborts; libFuzzer then saves the input as a crash artifact.
 */
#ifndef PS_FUZZ_H
#define PS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ASSERT(c)                                                     \
	do {                                                               \
		if (!(c)) {                                                \
			fprintf(stderr, "%s:%d: invariant broken: %s\n",   \
				__FILE__, __LINE__, #c);                   \
			abort();                                           \
		}                                                          \
	} while (0)

/* Guard bytes around output buffers: a write past the length the callee
 * was given changes them (ASan cannot see that inside one array). */
#define FUZZ_GUARD 16
#define FUZZ_GUARD_BYTE 0xa5

/* A heap copy of data[0..n) with a NUL after it; the caller frees it. */
static inline char *
fuzz_strdup(const uint8_t *data, size_t n)
{
	char *s = malloc(n + 1);

	if (!s)
		abort();
	memcpy(s, data, n);
	s[n] = '\0';
	return s;
}

/* Split data[0..n) at NUL bytes into at most max heap strings.  Missing
 * fields are NULL, so a target also sees "variable unset".  Returns the
 * number of fields present. */
static inline int
fuzz_split(const uint8_t *data, size_t n, char **out, int max)
{
	int k = 0;
	size_t start = 0;

	for (int i = 0; i < max; i++)
		out[i] = NULL;
	while (k < max && start <= n) {
		const uint8_t *z = memchr(data + start, 0, n - start);
		size_t end = z ? (size_t)(z - data) : n;

		out[k++] = fuzz_strdup(data + start, end - start);
		if (!z)
			break;
		start = end + 1;
	}
	return k;
}

static inline void
fuzz_free_all(char **v, int max)
{
	for (int i = 0; i < max; i++)
		free(v[i]);
}

/* Fill the guard zone after a buffer of len bytes (the array must hold
 * len + FUZZ_GUARD bytes) and check it later. */
static inline void
fuzz_guard_set(char *buf, size_t len)
{
	memset(buf + len, FUZZ_GUARD_BYTE, FUZZ_GUARD);
}

static inline int
fuzz_guard_ok(const char *buf, size_t len)
{
	for (size_t i = 0; i < FUZZ_GUARD; i++)
		if ((uint8_t)buf[len + i] != FUZZ_GUARD_BYTE)
			return 0;
	return 1;
}

/* Whether s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, at
 * most U+10FFFF), so targets can check that cutting keeps it so. */
static inline int
fuzz_utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], need, cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1; cp = c & 0x1f; min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2; cp = c & 0x0f; min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3; cp = c & 0x07; min = 0x10000;
		} else {
			return 0;
		}
		if (i + need >= n)
			return 0;   /* sequence cut short by the end */
		for (unsigned j = 1; j <= need; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += need + 1;
	}
	return 1;
}

#endif
