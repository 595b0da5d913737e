// Package cspin is C code that goleaf calls through cgo: samples in it
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
*/
import "C"

// Spin runs the C loop n times.
func Spin(n uint64) uint64 {
	return uint64(C.spin_c(C.ulonglong(n)))
}
