// goleaf: a Go program of the shim's tests whose CPU time is almost all in
// one frameless leaf.  mix spills nothing and calls nothing, so the
// compiler gives it no frame: it never saves BP, and a frame-pointer walk
// from inside it skips its caller.  The shim's test asserts that samples
// in mix still reach spin (test_go.py).  Linked dynamically (it imports
// net), as the shim needs.  Its output depends only on its argument.
//
// usage: goleaf ROUNDS
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// mix: a frameless leaf (TEXT main.mix(SB), NOSPLIT|ABIInternal, $0-8).
//
//go:noinline
func mix(x uint64) uint64 {
	for i := 0; i < 64; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// spin: mix's only caller.
//
//go:noinline
func spin(n int) uint64 {
	var s uint64
	for i := 0; i < n; i++ {
		s += mix(s + uint64(i))
	}
	return s
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: goleaf ROUNDS")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 0 {
		fmt.Fprintln(os.Stderr, "goleaf: bad ROUNDS")
		os.Exit(2)
	}
	fmt.Println("rounds", n, "sum", spin(n), "via", net.IPv4(127, 0, 0, 1))
}
