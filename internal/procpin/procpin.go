// Package procpin gives lock-free code the id of the P (Go's logical processor) it runs on, so
// that hot counters can be kept per P, as Envoy keeps them per worker thread, instead of on one
// cache line every core fights over.
//
// Pin returns the P's id and keeps the calling goroutine on that P (no preemption) until Unpin;
// keep the section between them short and free of anything that can block or allocate. sync.Pool
// does the same internally, and the runtime keeps these two linknames working on purpose
// (go.dev/issue/67401).
package procpin

import (
	"runtime"
	_ "unsafe" // for go:linkname
)

// Pin returns the id of the P running the caller, in [0, GOMAXPROCS), and disables preemption
// until Unpin.
//
//go:linkname Pin runtime.procPin
func Pin() int

// Unpin ends the section Pin started.
//
//go:linkname Unpin runtime.procUnpin
func Unpin()

// Slots returns the number of per-P slots to allocate now: GOMAXPROCS rounded up to a power of
// two, so that an id is mapped to a slot with a mask. GOMAXPROCS may grow later; ids beyond
// the table then share slots, which is why slots must still be updated atomically.
func Slots() int {
	n := 1
	for n < runtime.GOMAXPROCS(0) {
		n *= 2
	}
	return n
}

// MaxSlots returns the number of per-P slots for a table that is indexed by a mask and never
// resized: the most Ps the process can get, NumCPU (the CPU affinity mask at start-up, which
// bounds Go's default GOMAXPROCS and its updates after a container's CPU limit changes) or
// GOMAXPROCS now if larger, rounded up to a power of two. Ids beyond it come only from
// GOMAXPROCS raised by hand past NumCPU, or past the affinity mask the process started with
// (the runtime's updates follow a mask widened since); they share slots.
func MaxSlots() int {
	n := 1
	for want := max(runtime.NumCPU(), runtime.GOMAXPROCS(0)); n < want; {
		n *= 2
	}
	return n
}
