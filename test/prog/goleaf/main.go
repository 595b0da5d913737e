// goleaf: a Go program of the shim's tests whose CPU time is almost all in
// one frameless leaf.  mix spills nothing and calls nothing, so the
// compiler gives it no frame: it never saves BP, and a frame-pointer walk
// from inside it skips its caller.  The shim's test asserts that samples
// in mix still reach spin (test_go.py).  Then clobber (assembly) spins
// with BP pointing at unmapped memory, at a PROT_NONE page, at a
// misaligned address and at data that is not a frame: the walk must end
// there, never fault.  Last, cgoWork spins in C code (package cspin)
// called through cgo.  Linked dynamically (it imports net), as the shim
// needs, by the C linker (cgo code of its own), and stripped
// (-ldflags=-s): its names and SP deltas come from its function table.
// Its output depends only on its argument.
//
// usage: goleaf ROUNDS [cexit]
//        goleaf signal SIG
// cexit: end through the C library's exit(3), so that the ELF destructors
// run (the shim reports its signal stacks' deepest use from one), as a Go
// program's own exit never does.
// signal: the program waits for signal SIG (os/signal) and sends it to each
// of its threads in turn (tgkill), and says whether each one came.  Go's
// threads start with every signal blocked (the C library's
// pthread_sigmask, around pthread_create) and unblock them with the
// system call itself.
package main

import (
	"fmt"
	"goleaf/cspin"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// clobber spins n times with BP = bp (clobber_amd64.s).
func clobber(n int, bp uintptr) int

// badFrames runs clobber with each kind of bad frame pointer.
//
//go:noinline
func badFrames(n int) int {
	none, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(err)
	}
	gone, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(err)
	}
	goneAt := uintptr(unsafe.Pointer(&gone[0]))
	if err := syscall.Munmap(gone); err != nil {
		panic(err)
	}
	junk := make([]uintptr, 4)
	for i := range junk {
		junk[i] = 0x5a5a5a5a5a5a5a5a
	}
	sum := 0
	for _, bp := range []uintptr{
		uintptr(unsafe.Pointer(&none[0])),     // PROT_NONE
		goneAt,                                // unmapped
		uintptr(unsafe.Pointer(&junk[0])) + 3, // misaligned
		uintptr(unsafe.Pointer(&junk[0])),     // not a frame
		^uintptr(7),                           // the top of the address space
	} {
		sum += clobber(n, bp) & 0xffff
	}
	return sum
}

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

// cgoWork: the Go caller of the C loop.
//
//go:noinline
func cgoWork(n int) uint64 {
	return cspin.Spin(uint64(n))
}

// cgoAlloc: the Go caller of the C allocations.
//
//go:noinline
func cgoAlloc(n int) uint64 {
	return cspin.Churn(uint64(n))
}

// signals: SIG sent to each thread, each received within 2 s.
func signals(sig syscall.Signal) {
	c := make(chan os.Signal, 64)
	signal.Notify(c, sig)
	// Threads of their own, each locked to its goroutine for good.
	for i := 0; i < 4; i++ {
		go func() {
			runtime.LockOSThread()
			select {}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		panic(err)
	}
	lost := 0
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			panic(err)
		}
		if err := syscall.Tgkill(os.Getpid(), tid, sig); err != nil {
			panic(err)
		}
		select {
		case <-c:
		case <-time.After(2 * time.Second):
			lost++
		}
	}
	fmt.Println("signal", int(sig), "sent to each thread, lost", lost)
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "signal" {
		sig, err := strconv.Atoi(os.Args[2])
		if err != nil || sig <= 0 || sig > 64 {
			fmt.Fprintln(os.Stderr, "goleaf: bad SIG")
			os.Exit(2)
		}
		signals(syscall.Signal(sig))
		return
	}
	if len(os.Args) != 2 && (len(os.Args) != 3 || os.Args[2] != "cexit") {
		fmt.Fprintln(os.Stderr, "usage: goleaf ROUNDS [cexit]")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 0 {
		fmt.Fprintln(os.Stderr, "goleaf: bad ROUNDS")
		os.Exit(2)
	}
	fmt.Println("rounds", n, "sum", spin(n), "via", net.IPv4(127, 0, 0, 1))
	fmt.Println("bad frames", badFrames(10*n))
	fmt.Println("cgo", cgoWork(20*n), cgoAlloc(n/10))
	if len(os.Args) == 3 {
		cspin.Exit(0)
	}
}
