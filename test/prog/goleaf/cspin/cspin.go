// Package cspin is C code that goleaf calls through cgo: samples in it
// (CPU, and allocations, the only Go-program allocations malloc sees)
// are walked by .eh_frame up to runtime.asmcgocall, and on by frame
// pointer through the Go code that called it.  (A package of its own: Go
// assembly, as goleaf's clobber, cannot share a package with cgo.)
package cspin

/*
static unsigned long long
spin_c(unsigned long long n)
{
	volatile unsigned long long x = n;

	for (unsigned long long i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

#include <stdlib.h>

// churn: n allocations of 1 KiB, each freed at once.
static unsigned long long
churn(unsigned long long n)
{
	unsigned long long sum = 0;

	for (unsigned long long i = 0; i < n; i++) {
		volatile char *p = malloc(1024);

		if (!p)
			abort();
		p[0] = (char)i;
		sum += (unsigned char)p[0];
		free((void *)p);
	}
	return sum;
}

// exit_c: the C library's exit, which runs the atexit handlers and the
// ELF destructors (the shim's among them) that Go's own exit skips.
static void
exit_c(int code)
{
	exit(code);
}
*/
import "C"

// Exit ends the process through the C library's exit(3).
func Exit(code int) {
	C.exit_c(C.int(code))
}

// Churn makes n allocations of 1 KiB in C, each freed at once.
func Churn(n uint64) uint64 {
	return uint64(C.churn(C.ulonglong(n)))
}

// Spin runs the C loop n times.
func Spin(n uint64) uint64 {
	return uint64(C.spin_c(C.ulonglong(n)))
}
