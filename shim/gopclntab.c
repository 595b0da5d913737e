/* gopclntab.c -- the Go function table, read in place.  See gopclntab.h.
 *
 * Every multi-byte field is read with memcpy (the table may sit at any
 * alignment in a file or a fuzzer's buffer) after a bounds check against
 * t->size; offsets are compared by subtraction so that no sum overflows.
 */
#include "shim/gopclntab.h"

#include <errno.h>
#include <string.h>

#define HEADER_SIZE   72             /* 8 bytes, then 8 uintptr words */
#define MAX_FUNCS     (1u << 22)     /* Go binaries hold tens of thousands */
#define FUNC_MIN      20             /* _func bytes read: up to pcsp */
#define MAX_STEPS     (1u << 14)     /* pc-value pairs walked per look-up */

PS_SIGSAFE static uint32_t
u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The header's words: read at start-up only. */
static uint64_t
u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Is [off, off + len) inside the table? */
PS_SIGSAFE static int
within(const struct ps_gopcln *t, uint64_t off, uint64_t len)
{
	return off <= t->size && len <= t->size - off;
}

/* Entry offset (from t->text) of function-table row i (0 <= i <= nfunc). */
PS_SIGSAFE static uint32_t
entry_off(const struct ps_gopcln *t, uint32_t i)
{
	return u32(t->p + t->functab + (size_t)i * 8);
}

int
ps_gopcln_open(struct ps_gopcln *t, const void *p, size_t size, uint64_t text)
{
	const uint8_t *b = p;
	uint32_t magic, i, prev, cur;
	uint64_t nfunc, names, pctab, functab;

	memset(t, 0, sizeof(*t));
	if (size < HEADER_SIZE)
		return -ENOEXEC;
	magic = u32(b);
	if ((magic != PS_GOPCLN_MAGIC_118 && magic != PS_GOPCLN_MAGIC_120) || b[4] || b[5] ||
	    (b[6] != 1 && b[6] != 2 && b[6] != 4) || b[7] != 8)
		return -ENOEXEC;
	nfunc = u64(b + 8);
	names = u64(b + 8 + 3 * 8);
	pctab = u64(b + 8 + 6 * 8);
	functab = u64(b + 8 + 7 * 8);
	t->p = b;
	t->size = size;
	if (nfunc == 0 || nfunc > MAX_FUNCS || names >= size || pctab >= size ||
	    !within(t, functab, (2 * nfunc + 1) * 4))
		return -ENOEXEC;
	t->nfunc = (uint32_t)nfunc;
	t->quantum = b[6];
	t->names = (size_t)names;
	t->pctab = (size_t)pctab;
	t->functab = (size_t)functab;
	t->text = text;
	/* Ascending entries make the binary search well defined, and bound
	 * every function's extent by the next entry. */
	for (i = 0, prev = 0; i <= t->nfunc; i++) {
		cur = entry_off(t, i);
		if (cur < prev)
			return -ENOEXEC;
		prev = cur;
	}
	return 0;
}

uint64_t
ps_gopcln_header_text(const void *p, size_t size)
{
	return size >= HEADER_SIZE ? u64((const uint8_t *)p + 8 + 2 * 8) : 0;
}

PS_SIGSAFE int
ps_gopcln_find(const struct ps_gopcln *t, uint64_t pc)
{
	uint32_t lo = 0, hi, mid;
	uint64_t off;

	if (!t->nfunc || pc < t->text)
		return -1;
	off = pc - t->text;
	if (off >= entry_off(t, t->nfunc))
		return -1;
	/* The last row whose entry is <= off. */
	hi = t->nfunc;
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (entry_off(t, mid) <= off)
			lo = mid;
		else
			hi = mid;
	}
	return off >= entry_off(t, lo) ? (int)lo : -1;
}

void
ps_gopcln_range(const struct ps_gopcln *t, uint32_t i, uint64_t *lo, uint64_t *len)
{
	*lo = t->text + entry_off(t, i);
	*len = entry_off(t, i + 1) - entry_off(t, i);
}

/* Offset of function i's _func, or 0 when it does not fit the table. */
PS_SIGSAFE static size_t
func_at(const struct ps_gopcln *t, uint32_t i)
{
	uint64_t off = u32(t->p + t->functab + (size_t)i * 8 + 4);

	if (off > t->size - t->functab || !within(t, t->functab + off, FUNC_MIN))
		return 0;
	return t->functab + (size_t)off;
}

const char *
ps_gopcln_name(const struct ps_gopcln *t, uint32_t i)
{
	size_t f = func_at(t, i);
	int32_t nameoff;
	const char *s;

	if (!f)
		return NULL;
	memcpy(&nameoff, t->p + f + 4, sizeof(nameoff));
	if (nameoff < 0 || (uint64_t)nameoff >= t->size - t->names)
		return NULL;
	s = (const char *)t->p + t->names + nameoff;
	return memchr(s, 0, t->size - t->names - (size_t)nameoff) ? s : NULL;
}

/* A varint of at most 5 bytes at *off, advancing it.  0 or -1. */
PS_SIGSAFE static int
varint(const struct ps_gopcln *t, size_t *off, uint32_t *v)
{
	uint32_t shift, b;

	*v = 0;
	for (shift = 0; shift < 35; shift += 7) {
		if (*off >= t->size)
			return -1;
		b = t->p[(*off)++];
		*v |= (b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

PS_SIGSAFE int
ps_gopcln_spdelta(const struct ps_gopcln *t, uint32_t i, uint64_t pc, int32_t *delta)
{
	size_t f = func_at(t, i), off;
	uint64_t entry, cur, len;
	uint32_t pcsp, uv, pd, steps;
	int32_t val = -1;

	if (!f || i >= t->nfunc)
		return -ENOENT;
	entry = t->text + entry_off(t, i);
	len = entry_off(t, i + 1) - entry_off(t, i);
	if (pc < entry || pc - entry >= len)
		return -ENOENT;
	pcsp = u32(t->p + f + 16);
	if (pcsp == 0 || pcsp >= t->size - t->pctab)
		return -ENOENT;
	off = t->pctab + pcsp;
	cur = entry;
	for (steps = 0; steps < MAX_STEPS; steps++) {
		if (varint(t, &off, &uv))
			return -ENOENT;
		if (uv == 0 && cur != entry)
			return -ENOENT;         /* the end: pc not covered */
		/* Zig-zag; unsigned, so a hostile table cannot overflow. */
		val = (int32_t)((uint32_t)val + (-(uv & 1) ^ (uv >> 1)));
		if (varint(t, &off, &pd))
			return -ENOENT;
		cur += (uint64_t)pd * t->quantum;
		if (pc < cur) {
			if (val < 0)
				return -ENOENT;
			*delta = val;
			return 0;
		}
	}
	return -ENOENT;
}
