/* ehframe.c -- x86-64 CFI unwinding from .eh_frame.  See ehframe.h.
 *
 * References: the System V x86-64 psABI (DWARF register numbers: 6 %rbp,
 * 7 %rsp, 16 the return address), LSB "Exception Frames" (.eh_frame,
 * .eh_frame_hdr, pointer encodings, CIE augmentations) and DWARF 4
 * section 6.4 (the call frame instructions). */
#include "shim/ehframe.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <ucontext.h>

#define REG_BP 6
#define REG_SP 7
#define REG_RA 16

/* Where the kernel's signal frame keeps interrupted register r (REG_RIP,
 * ...): glibc's ucontext_t is laid out as the kernel's. */
#define UC_REG(r) (offsetof(ucontext_t, uc_mcontext.gregs) + (uintptr_t)(r) * sizeof(greg_t))

/* Pointer encodings (DW_EH_PE_*). */
#define PE_OMIT    0xff
#define PE_ABSPTR  0x00
#define PE_UDATA2  0x02
#define PE_UDATA4  0x03
#define PE_UDATA8  0x04
#define PE_SDATA2  0x0a
#define PE_SDATA4  0x0b
#define PE_SDATA8  0x0c
#define PE_PCREL   0x10
#define PE_DATAREL 0x30

/* How a register is recovered in the caller: unchanged, or loaded from
 * CFA + off.  Anything else fails the walk. */
enum { R_SAME, R_AT_CFA, R_UNDEF };

struct rule {
	int32_t off;
	unsigned char how;
};

/* The state CFI instructions build for one pc: the CFA as register+offset,
 * and the rules for %rbp and the return address.  Offsets are frame sizes:
 * anything beyond 32 bits fails the walk.  plt_k: the linker's expression
 * for its PLT entries (plt_cfa), which adds 8 to the CFA from byte plt_k
 * of each 16-byte entry on (after its push); 0 for every other row. */
struct row {
	int32_t cfa_reg, cfa_off;
	struct rule bp, ra;
	int32_t plt_k;
	int32_t signal;         /* a signal trampoline: its CFI is not run */
};

/* A bounded reader over CFI bytes: every read checks the end, so a corrupt
 * table stops the walk. */
struct rd {
	const unsigned char *p, *end;
	int bad;
};

PS_SIGSAFE static unsigned
u8(struct rd *r)
{
	if (r->p >= r->end) {
		r->bad = 1;
		return 0;
	}
	return *r->p++;
}

/* LEB128: the value's bits, how many were read, and the last byte (whose
 * bit 6 is the sign of a signed number). */
PS_SIGSAFE static uint64_t
leb(struct rd *r, unsigned *shift, unsigned *last)
{
	uint64_t v = 0;
	unsigned b;

	*shift = 0;
	do {
		b = u8(r);
		if (*shift < 64)
			v |= (uint64_t)(b & 0x7f) << *shift;
		*shift += 7;
	} while ((b & 0x80) && !r->bad);
	*last = b;
	return v;
}

PS_SIGSAFE static uint64_t
uleb(struct rd *r)
{
	unsigned shift, last;

	return leb(r, &shift, &last);
}

PS_SIGSAFE static int64_t
sleb(struct rd *r)
{
	unsigned shift, last;
	uint64_t v = leb(r, &shift, &last);

	if (shift < 64 && (last & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

PS_SIGSAFE static uint64_t
fixed(struct rd *r, size_t n)
{
	uint64_t v = 0;

	if ((size_t)(r->end - r->p) < n) {
		r->bad = 1;
		return 0;
	}
	memcpy(&v, r->p, n); /* little-endian */
	r->p += n;
	return v;
}

/* Read a pointer in encoding enc.  datarel is the .eh_frame_hdr address;
 * with value_only the application bits are ignored (FDE pc_range). */
PS_SIGSAFE static uintptr_t
encoded(struct rd *r, unsigned enc, uintptr_t datarel, int value_only)
{
	uintptr_t at = (uintptr_t)r->p, v;

	switch (enc & 0x0f) {
	case PE_ABSPTR: v = (uintptr_t)fixed(r, 8); break;
	case PE_UDATA2: v = (uintptr_t)fixed(r, 2); break;
	case PE_UDATA4: v = (uintptr_t)fixed(r, 4); break;
	case PE_UDATA8: v = (uintptr_t)fixed(r, 8); break;
	case PE_SDATA2: v = (uintptr_t)(int64_t)(int16_t)fixed(r, 2); break;
	case PE_SDATA4: v = (uintptr_t)(int64_t)(int32_t)fixed(r, 4); break;
	case PE_SDATA8: v = (uintptr_t)fixed(r, 8); break;
	default: r->bad = 1; return 0;
	}
	if (value_only)
		return v;
	switch (enc & 0x70) {
	case 0: break;
	case PE_PCREL: v += at; break;
	case PE_DATAREL: v += datarel; break;
	default: r->bad = 1; return 0;
	}
	if (enc & 0x80) /* indirect: would read memory we have not checked */
		r->bad = 1;
	return v;
}

/* The FDE for pc, from the binary search table of .eh_frame_hdr.  Returns
 * the FDE's address, or NULL. */
PS_SIGSAFE static const unsigned char *
find_fde(const unsigned char *hdr, uintptr_t pc)
{
	struct rd r = { hdr, hdr + 4 + 8 + 8, 0 };
	unsigned version = u8(&r), frame_enc = u8(&r), count_enc = u8(&r), table_enc = u8(&r);
	const int32_t *table;
	uintptr_t count, lo, hi;

	/* Every GNU linker writes a sorted table of (sdata4, sdata4) pairs
	 * relative to the header; anything else is left to libunwind. */
	if (version != 1 || table_enc != (PE_DATAREL | PE_SDATA4) || count_enc == PE_OMIT)
		return NULL;
	(void)encoded(&r, frame_enc, (uintptr_t)hdr, 0);
	count = encoded(&r, count_enc, (uintptr_t)hdr, 0);
	if (r.bad || count == 0)
		return NULL;
	table = (const int32_t *)r.p;
	/* The last entry whose start is <= pc. */
	if (pc < (uintptr_t)hdr + (intptr_t)table[0])
		return NULL;
	lo = 0;
	hi = count;
	while (hi - lo > 1) {
		uintptr_t mid = lo + (hi - lo) / 2;

		if ((uintptr_t)hdr + (intptr_t)table[2 * mid] <= pc)
			lo = mid;
		else
			hi = mid;
	}
	return hdr + (intptr_t)table[2 * lo + 1];
}

/* What a CIE tells the FDEs that use it. */
struct cie {
	uint64_t code_align;
	int64_t data_align;
	unsigned fde_enc;
	int has_aug;
	int signal;             /* 'S': the FDEs are signal trampolines */
	struct rd insns;
};

PS_SIGSAFE static int
parse_cie(const unsigned char *p, struct cie *c)
{
	uint32_t len;
	struct rd r;
	const char *aug;
	unsigned version, ra;

	memcpy(&len, p, 4);
	if (len == 0 || len == 0xffffffffu)
		return -1;
	r.p = p + 4;
	r.end = p + 4 + len;
	r.bad = 0;
	if (fixed(&r, 4) != 0) /* CIE id */
		return -1;
	version = u8(&r);
	if (version != 1 && version != 3)
		return -1;
	aug = (const char *)r.p;
	while (u8(&r) != 0 && !r.bad)
		;
	c->code_align = uleb(&r);
	c->data_align = sleb(&r);
	ra = version == 1 ? u8(&r) : (unsigned)uleb(&r);
	if (ra != REG_RA)
		return -1;
	c->fde_enc = PE_ABSPTR;
	c->signal = 0;
	c->has_aug = aug[0] == 'z';
	if (c->has_aug) {
		uint64_t alen = uleb(&r);
		struct rd a = { r.p, r.p + alen, 0 };

		if (alen > (uint64_t)(r.end - r.p))
			return -1;
		for (const char *s = aug + 1; *s; s++) {
			if (*s == 'R') {
				c->fde_enc = u8(&a);
			} else if (*s == 'L') {
				(void)u8(&a);
			} else if (*s == 'P') {
				unsigned enc = u8(&a);

				(void)encoded(&a, enc & 0x7f, 0, 1);
			} else if (*s == 'S') {
				c->signal = 1;
			} else {
				return -1;   /* an unknown letter */
			}
		}
		if (a.bad)
			return -1;
		r.p += alen;
	} else if (aug[0] != 0) {
		return -1;
	}
	if (r.bad)
		return -1;
	c->insns = r;
	return 0;
}

/* A DW_CFA_def_cfa_expression of `len` bytes at r: the one expression the
 * GNU linker writes for a .plt (and, with lit10, an IBT .plt), which the
 * walk computes itself: CFA = %rsp + a + 8 * ((%rip & 15) >= k), that is
 * DW_OP_breg7 a, DW_OP_breg16 0, DW_OP_lit15, DW_OP_and, DW_OP_litK,
 * DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus.  Any other expression
 * fails the walk.  Returns 0 with the row set, or -1. */
PS_SIGSAFE static int
plt_cfa(struct rd *r, uint64_t len, struct row *row)
{
	static const unsigned char tail[] = { 0x80, 0x00, 0x3f, 0x1a, 0, 0x2a, 0x33, 0x24, 0x22 };
	const unsigned char *end;
	int64_t a;
	unsigned k;

	if (r->bad || len > (uint64_t)(r->end - r->p))
		return -1;
	end = r->p + len;
	if (u8(r) != 0x77)
		return -1;
	a = sleb(r);
	if (r->bad || a < 0 || a > INT32_MAX || end - r->p != (ptrdiff_t)sizeof(tail))
		return -1;
	for (k = 0; k < sizeof(tail); k++)
		if (k != 4 && r->p[k] != tail[k])
			return -1;
	k = r->p[4];
	if (k < 0x30 + 1 || k > 0x30 + 15)   /* DW_OP_lit1 .. DW_OP_lit15 */
		return -1;
	r->p = end;
	row->cfa_reg = REG_SP;
	row->cfa_off = (int32_t)a;
	row->plt_k = (int32_t)(k - 0x30);
	return 0;
}

/* Run CFI instructions until the location passes pc.  init holds the CIE's
 * initial rules (for DW_CFA_restore), or NULL while running the CIE. */
PS_SIGSAFE static int
run_cfi(struct rd r, const struct cie *c, uintptr_t loc, uintptr_t pc,
	struct row *row, const struct row *init)
{
	struct row saved[8];
	int nsaved = 0;

	while (r.p < r.end) {
		unsigned op = u8(&r), lo6 = op & 0x3f;
		uint64_t reg = 0, delta = 0;
		int64_t off = 0;
		struct rule *rule = NULL;

		switch (op >> 6) {
		case 1: /* DW_CFA_advance_loc */
			loc += lo6 * c->code_align;
			if (loc > pc)
				return 0;
			continue;
		case 2: /* DW_CFA_offset */
			reg = lo6;
			off = (int64_t)uleb(&r) * c->data_align;
			goto offset;
		case 3: /* DW_CFA_restore */
			reg = lo6;
			goto restore;
		}
		switch (op) {
		case 0x00: /* nop */
			break;
		case 0x02: delta = u8(&r); goto advance;
		case 0x03: delta = fixed(&r, 2); goto advance;
		case 0x04: delta = fixed(&r, 4); goto advance;
		case 0x05: /* offset_extended */
			reg = uleb(&r);
			off = (int64_t)uleb(&r) * c->data_align;
			goto offset;
		case 0x11: /* offset_extended_sf */
			reg = uleb(&r);
			off = sleb(&r) * c->data_align;
			goto offset;
		case 0x06: /* restore_extended */
			reg = uleb(&r);
			goto restore;
		case 0x07: /* undefined */
			reg = uleb(&r);
			if (reg == REG_RA)
				row->ra.how = R_UNDEF;
			else if (reg == REG_BP)
				row->bp.how = R_UNDEF;
			break;
		case 0x08: /* same_value */
			reg = uleb(&r);
			if (reg == REG_BP)
				row->bp.how = R_SAME;
			else if (reg == REG_RA)
				return -1;
			break;
		case 0x09: /* register: a value moved to another register */
			reg = uleb(&r);
			(void)uleb(&r);
			if (reg == REG_BP || reg == REG_RA)
				return -1;
			break;
		case 0x0a: /* remember_state */
			if (nsaved == (int)PS_ARRAY_LEN(saved))
				return -1;
			saved[nsaved++] = *row;
			break;
		case 0x0b: /* restore_state: the CFA comes back too, as
			    * in libgcc, which GCC's output is written for. */
			if (nsaved == 0)
				return -1;
			nsaved--;
			row->bp = saved[nsaved].bp;
			row->ra = saved[nsaved].ra;
			row->cfa_reg = saved[nsaved].cfa_reg;
			row->cfa_off = saved[nsaved].cfa_off;
			row->plt_k = saved[nsaved].plt_k;
			break;
		case 0x0f: /* def_cfa_expression: a PLT's, or none */
			if (plt_cfa(&r, uleb(&r), row))
				return -1;
			break;
		case 0x0c: /* def_cfa */
			reg = uleb(&r);
			off = (int64_t)uleb(&r);
			goto def_cfa;
		case 0x12: /* def_cfa_sf */
			reg = uleb(&r);
			off = sleb(&r) * c->data_align;
			goto def_cfa;
		case 0x0d: /* def_cfa_register */
			reg = uleb(&r);
			off = row->cfa_off;
			goto def_cfa;
		case 0x0e: /* def_cfa_offset */
			reg = (uint64_t)row->cfa_reg;
			off = (int64_t)uleb(&r);
			goto def_cfa;
		case 0x13: /* def_cfa_offset_sf */
			reg = (uint64_t)row->cfa_reg;
			off = sleb(&r) * c->data_align;
			goto def_cfa;
		case 0x2e: /* GNU_args_size */
			(void)uleb(&r);
			break;
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			reg = uleb(&r);
			delta = uleb(&r);
			if (reg == REG_BP || reg == REG_RA || delta > (uint64_t)(r.end - r.p))
				return -1;
			r.p += delta;
			break;
		case 0x14: /* val_offset */
		case 0x15: /* val_offset_sf */
			reg = uleb(&r);
			if (op == 0x14)
				(void)uleb(&r);
			else
				(void)sleb(&r);
			if (reg == REG_BP || reg == REG_RA)
				return -1;
			break;
		default:
			/* set_loc, def_cfa_expression, GNU extensions for other
			 * machines: not for this walk. */
			return -1;
		}
		if (r.bad)
			return -1;
		continue;
def_cfa:
		if (r.bad)
			return -1;
		/* Only %rsp- and %rbp-based CFAs are walked; the register is
		 * checked when the row is used. */
		if (off < INT32_MIN || off > INT32_MAX || reg > 64)
			return -1;
		row->cfa_reg = (int32_t)reg;
		row->cfa_off = (int32_t)off;
		row->plt_k = 0;
		continue;
advance:
		loc += delta * c->code_align;
		if (loc > pc)
			return 0;
		continue;
offset:
		if (reg == REG_BP)
			rule = &row->bp;
		else if (reg == REG_RA)
			rule = &row->ra;
		if (rule) {
			if (off < INT32_MIN || off > INT32_MAX)
				return -1;
			rule->how = R_AT_CFA;
			rule->off = (int32_t)off;
		}
		continue;
restore:
		if (!init)
			return -1;
		if (reg == REG_BP)
			row->bp = init->bp;
		else if (reg == REG_RA)
			row->ra = init->ra;
		continue;
	}
	return r.bad ? -1 : 0;
}

/* The unwind row for pc in the object whose .eh_frame_hdr is hdr.
 * Returns 0, or -1 when pc has no usable CFI. */
PS_SIGSAFE static int
compute_row(const unsigned char *hdr, uintptr_t pc, struct row *row)
{
	const unsigned char *fde;
	struct cie cie;
	struct row init;
	uint32_t len, cie_off;
	uintptr_t start, range;
	struct rd r;

	fde = find_fde(hdr, pc);
	if (!fde)
		return -1;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffffu)
		return -1;
	memcpy(&cie_off, fde + 4, 4);
	if (cie_off == 0 || parse_cie(fde + 4 - cie_off, &cie))
		return -1;
	r.p = fde + 8;
	r.end = fde + 4 + len;
	r.bad = 0;
	start = encoded(&r, cie.fde_enc, 0, 0);
	range = encoded(&r, cie.fde_enc, 0, 1);
	if (r.bad || pc < start || pc - start >= range)
		return -1;
	if (cie.has_aug) {
		uint64_t alen = uleb(&r);

		if (r.bad || alen > (uint64_t)(r.end - r.p))
			return -1;
		r.p += alen;
	}
	memset(row, 0, sizeof(*row));
	/* glibc's __restore_rt describes the kernel's signal frame with DWARF
	 * expressions; the walk reads that frame itself.  Its FDE starts one
	 * byte early (a nop, so that a return address minus one falls in it)
	 * and covers `mov $15, %rax; syscall` (rt_sigreturn), as libunwind
	 * checks; any other signal frame is left to libunwind. */
	if (cie.signal) {
		static const unsigned char restore_rt[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00,
							    0x00, 0x0f, 0x05 };

		if (range != 1 + sizeof(restore_rt) ||
		    memcmp((const void *)(start + 1), restore_rt, sizeof(restore_rt)))
			return -1;
		row->signal = 1;
		return 0;
	}
	row->cfa_reg = -1;
	row->bp.how = R_SAME;
	row->ra.how = R_UNDEF;
	if (run_cfi(cie.insns, &cie, start, (uintptr_t)-1, row, NULL))
		return -1;
	init = *row;
	return run_cfi(r, &cie, start, pc, row, &init);
}

/* Rows already computed, per thread, so that no lock or atomic is needed:
 * a sampled thread sees the same few hundred return addresses again and
 * again, and a hit skips the table search and the CFI run.  An entry is
 * keyed by the pc and by the identity of the object that held it (its
 * .eh_frame_hdr and mapping end), so a library unloaded and replaced by
 * another at the same address does not reuse rows it never had.
 * Owner: the thread itself, including its signal handler (a handler that
 * interrupts a walk on the same thread never walks: see unwind.c). */
#define CACHE_SIZE 128
static PS_TLS struct cached {
	uintptr_t pc, obj;
	struct row row;
} cache[CACHE_SIZE];

/* The object a walk last looked in: consecutive frames are mostly in the
 * same object, and it cannot be unmapped under a walk any more than the
 * frames themselves can. */
struct object {
	uintptr_t start, end;
	const unsigned char *hdr;
};

PS_SIGSAFE static int
row_for(uintptr_t pc, struct object *o, struct row *row)
{
	struct dl_find_object f;
	struct cached *c;
	uintptr_t obj;

	if (pc < o->start || pc >= o->end) {
		if (_dl_find_object((void *)pc, &f) != 0 || !f.dlfo_eh_frame)
			return -1;
		o->start = (uintptr_t)f.dlfo_map_start;
		o->end = (uintptr_t)f.dlfo_map_end;
		o->hdr = f.dlfo_eh_frame;
	}
	obj = (uintptr_t)o->hdr ^ (o->end << 17);
	c = &cache[(pc ^ (pc >> 7) ^ (pc >> 14)) & (CACHE_SIZE - 1)];
	if (c->pc == pc && c->obj == obj) {
		*row = c->row;
		return 0;
	}
	if (compute_row(o->hdr, pc, row))
		return -1;
	/* Invalidate, fill, publish: a handler on this thread that saw the
	 * entry midway would find it invalid (today none walks while this
	 * thread is walking, but the order costs nothing). */
	c->pc = 0;
	atomic_signal_fence(memory_order_seq_cst);
	c->row = *row;
	c->obj = obj;
	atomic_signal_fence(memory_order_seq_cst);
	c->pc = pc;
	return 0;
}

PS_SIGSAFE static int
load(uintptr_t at, uintptr_t lo, uintptr_t hi, uintptr_t *out)
{
	if (at < lo || at > hi - sizeof(uintptr_t) || (at & 7))
		return -1;
	*out = *(const uintptr_t *)at;
	return 0;
}

/* Not reached by the handler (it calls ps_ehframe_walk_until), so not
 * PS_SIGSAFE-marked, though as safe. */
int
ps_ehframe_walk(const struct ps_frame_regs *regs, uintptr_t stack_hi,
		uintptr_t *ips, int max, int exact_leaf)
{
	return ps_ehframe_walk_until(regs, stack_hi, ips, max, exact_leaf, NULL);
}

PS_SIGSAFE int
ps_ehframe_walk_until(const struct ps_frame_regs *regs, uintptr_t stack_hi, uintptr_t *ips,
		      int max, int exact_leaf, struct ps_frame_stop *stop)
{
	uintptr_t ip = regs->ip, sp = regs->sp, bp = regs->bp, lo = regs->sp;
	struct object o = { 0, 0, NULL };
	int n = 0, exact = exact_leaf;

	if (stop)
		stop->depth = 0;
	if (stack_hi <= lo || max < 1)
		return 0;
	for (;;) {
		struct row row;
		uintptr_t pc = exact ? ip : ip - 1, cfa, bp_at;

		exact = 0;
		ips[n++] = pc;
		if (n == max)
			return n;
		if (row_for(pc, &o, &row)) {
			/* No CFI for this frame (Go code, for one): say where. */
			if (stop && n > 1) {
				stop->regs.ip = ip;
				stop->regs.sp = sp;
				stop->regs.bp = bp;
				stop->depth = n - 1;
			}
			return 0;
		}
		if (row.signal) {
			/* The handler returned here, popping its return address:
			 * the kernel's ucontext_t is at the stack pointer, with
			 * the interrupted registers.  That frame is above this
			 * one on the same stack (a handler on an alternate stack
			 * never gets here: the walk starts on the thread's), and
			 * its instruction is exact, not a return address. */
			if (load(sp + UC_REG(REG_RIP), lo, stack_hi, &ip) ||
			    load(sp + UC_REG(REG_RSP), lo, stack_hi, &cfa) ||
			    load(sp + UC_REG(REG_RBP), lo, stack_hi, &bp) || cfa <= sp || cfa >= stack_hi)
				return 0;
			sp = cfa;
			exact = 1;
			if (ip == 0)
				return n;
			continue;
		}
		if (row.ra.how == R_UNDEF)
			return n; /* the outermost frame: _start, clone3 */
		if (row.cfa_reg == REG_SP)
			cfa = sp + (uintptr_t)row.cfa_off +
			      (row.plt_k && (ip & 15) >= (uintptr_t)row.plt_k ? 8 : 0);
		else if (row.cfa_reg == REG_BP)
			cfa = bp + (uintptr_t)row.cfa_off;
		else
			return 0;
		/* The CFA is above this frame and inside the stack. */
		if (cfa <= sp || cfa > stack_hi || row.ra.how != R_AT_CFA)
			return 0;
		if (load(cfa + (uintptr_t)row.ra.off, lo, stack_hi, &ip))
			return 0;
		/* A slot under this frame's stack pointer was popped already
		 * (an epilogue after its `pop %rbp`, where the CFI still names
		 * the slot): %rbp holds the caller's value. */
		bp_at = cfa + (uintptr_t)row.bp.off;
		if (row.bp.how == R_AT_CFA && bp_at >= sp && load(bp_at, lo, stack_hi, &bp))
			return 0;
		sp = cfa;
		if (ip == 0)
			return n;
	}
}
