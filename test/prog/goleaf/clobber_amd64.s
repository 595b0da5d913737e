// clobber: a frameless assembly leaf that spins with BP set to a bad
// value, as some hand-written assembly uses BP as a general register.
// A frame-pointer walk that trusted BP would read from it.

#include "textflag.h"

// func clobber(n int, bp uintptr) int
TEXT ·clobber(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ BP, R8
	MOVQ bp+8(FP), BP
	MOVQ n+0(FP), CX
	XORQ AX, AX
loop:
	ADDQ CX, AX
	DECQ CX
	JNZ loop
	MOVQ R8, BP
	MOVQ AX, ret+16(FP)
	RET
