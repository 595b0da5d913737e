// gogen: a CPU-bound Go program of the shim's tests -- goroutines
// generating JSON events (encoding/json, maps, a hash), linked dynamically
// against libc because it imports net (cgo resolver), as most Go services
// are.  Its output depends only on its arguments.
//
// usage: gogen EVENTS [CPUPROFILE]
//   EVENTS      events per worker (2 workers)
//   CPUPROFILE  also run Go's own runtime/pprof CPU profiler into this file
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
)

type event struct {
	ID     string            `json:"id"`
	Seq    int               `json:"seq"`
	Source string            `json:"source"`
	Tags   map[string]string `json:"tags"`
	Values []float64         `json:"values"`
}

func makeEvent(worker, i int) event {
	h := sha256.Sum256([]byte(strconv.Itoa(worker*1000003 + i)))
	return event{
		ID:     hex.EncodeToString(h[:16]),
		Seq:    i,
		Source: net.IPv4(10, byte(worker), byte(i>>8), byte(i)).String(),
		Tags:   map[string]string{"worker": strconv.Itoa(worker), "parity": strconv.Itoa(i % 2)},
		Values: []float64{float64(i), float64(i) / 3, float64(worker)},
	}
}

// roundTrip encodes an event and decodes it again, returning a checksum.
func roundTrip(e event) int {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	var back event
	if err := json.Unmarshal(b, &back); err != nil {
		panic(err)
	}
	return len(b) + back.Seq%7 + len(back.Tags)
}

func work(worker, n int) int {
	sum := 0
	for i := 0; i < n; i++ {
		sum += roundTrip(makeEvent(worker, i))
	}
	return sum
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gogen EVENTS [CPUPROFILE]")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 0 {
		fmt.Fprintln(os.Stderr, "gogen: bad EVENTS")
		os.Exit(2)
	}
	if len(os.Args) > 2 {
		f, err := os.Create(os.Args[2])
		if err != nil {
			panic(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			panic(err)
		}
		defer pprof.StopCPUProfile()
	}
	var wg sync.WaitGroup
	sums := make([]int, 2)
	for w := range sums {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			sums[w] = work(w, n)
		}(w)
	}
	wg.Wait()
	fmt.Println("events", 2*n, "checksum", sums[0], sums[1])
}
