/* fuzz_gopclntab.c -- libFuzzer target for the Go function-table reader
 * (shim/gopclntab.c), which reads .gopclntab from files on disk and, in
 * the signal handler, from the program's memory.
 *
 * Input: the table itself, copied into a heap block of exactly its size
 * (ASan reports any read past it).  Invariants, from gopclntab.h:
 *   - a table that opens has 1..2^22 functions, and every look-up reads
 *     inside it;
 *   - ps_gopcln_find(pc) returns a function whose range contains pc, or -1
 *     for a pc before the text or past its end;
 *   - a name is NUL-terminated inside the table;
 *   - an SP delta is never negative, and only pcs inside the function ask.
 */
#include <errno.h>

#include "fuzz.h"
#include "shim/gopclntab.h"

#define TEXT     0x400000u
#define MAX_FUNC 4096   /* functions checked per input */

static void
check_func(const struct ps_gopcln *t, const uint8_t *tab, size_t size, uint32_t i)
{
	const char *name = ps_gopcln_name(t, i);
	uint64_t lo, len, flo, flen, pcs[3];
	int32_t d;
	int k, f;

	if (name) {
		FUZZ_ASSERT((const uint8_t *)name >= tab && (const uint8_t *)name < tab + size);
		FUZZ_ASSERT(memchr(name, 0, size - (size_t)((const uint8_t *)name - tab)) != NULL);
	}
	ps_gopcln_range(t, i, &lo, &len);
	FUZZ_ASSERT(lo >= TEXT);
	pcs[0] = lo;
	pcs[1] = lo + len / 2;
	pcs[2] = lo + len - 1;
	for (k = 0; k < 3 && len; k++) {
		f = ps_gopcln_find(t, pcs[k]);
		FUZZ_ASSERT(f >= 0);
		ps_gopcln_range(t, (uint32_t)f, &flo, &flen);
		FUZZ_ASSERT(pcs[k] >= flo && pcs[k] - flo < flen);
		if (ps_gopcln_spdelta(t, (uint32_t)f, pcs[k], &d) == 0)
			FUZZ_ASSERT(d >= 0);
	}
	/* A pc outside the function is refused. */
	FUZZ_ASSERT(ps_gopcln_spdelta(t, i, lo + len, &d) == -ENOENT);
	FUZZ_ASSERT(ps_gopcln_spdelta(t, i, lo - 1, &d) == -ENOENT);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ps_gopcln t;
	uint8_t *tab = malloc(size ? size : 1);
	uint64_t end_lo, end_len;
	uint32_t i;

	if (!tab)
		abort();
	memcpy(tab, data, size);
	FUZZ_ASSERT(size >= 72 || ps_gopcln_header_text(tab, size) == 0);
	if (ps_gopcln_open(&t, tab, size, TEXT) == 0) {
		FUZZ_ASSERT(t.nfunc >= 1 && t.nfunc <= (1u << 22));
		FUZZ_ASSERT(ps_gopcln_find(&t, TEXT - 1) == -1);
		ps_gopcln_range(&t, t.nfunc - 1, &end_lo, &end_len);
		FUZZ_ASSERT(ps_gopcln_find(&t, end_lo + end_len) == -1);
		for (i = 0; i < t.nfunc && i < MAX_FUNC; i++)
			check_func(&t, tab, size, i);
	}
	free(tab);
	return 0;
}
