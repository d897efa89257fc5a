package stats

import (
	"sync/atomic"
	"unsafe"

	"github.com/legateproxy/legate/internal/procpin"
)

// HotBlock is a line per P holding several hot stats that one request writes together (a
// connection manager's request totals, its response classes): T is a struct of atomic.Uint64
// fields, each the per-P share of a HotCounter bound to it (BindCounter). A stream takes its
// line's T once (On, which finds it by arithmetic, inlined, with no check of a lazily made
// table) and adds to its fields, where each HotCounter.IncOn costs a call and a check; a
// request's counters then share one cache line per P instead of one line each. Readers see
// the counters as before (the store sums a bound counter's field over the lines). The lines
// are made with the block, one for every P the process can get (allocLines), so make blocks
// for stats that carry traffic (a connection manager's, a cluster's that was routed to), not
// for every configured object. Safe for concurrent use.
type HotBlock[T any] struct {
	line0  unsafe.Pointer
	stride uintptr
	mask   uint64
}

// NewHotBlock makes a block's lines: one T per P, each on cache lines of its own.
func NewHotBlock[T any]() *HotBlock[T] {
	var t T
	line0, stride, mask := allocLines(unsafe.Sizeof(t))
	return &HotBlock[T]{line0: line0, stride: stride, mask: mask}
}

// On returns line l's T (l from ThisLine; any Line is correct, a stale one only shares a line).
func (b *HotBlock[T]) On(l Line) *T {
	return (*T)(unsafe.Add(b.line0, uintptr(uint64(l)&b.mask)*b.stride))
}

// BindCounter makes c count in the field of b's lines that field returns (given a line's T):
// its Inc, Add and IncOn add there too from then on, and readers sum the field over the lines.
// What c counted before, on lines of its own, stays counted. Bind a counter once: binding it
// again makes the new block its lines and keeps summing the old one's.
func BindCounter[T any](c *HotCounter, b *HotBlock[T], field func(*T) *atomic.Uint64) {
	s := &hotShards{line0: unsafe.Pointer(field(b.On(0))), stride: b.stride, mask: b.mask}
	for {
		s.next = c.shards.Load()
		if c.shards.CompareAndSwap(s.next, s) {
			return
		}
	}
}

// allocLines allocates a size-byte share per P, each starting a cache line, and returns line
// 0's address, the distance between lines and the mask of a line index. The lines are never
// resized, as HotBlock.On and hotShards.on find a line by a mask without a check, so they are
// made for the most Ps the process can get (procpin.MaxSlots: NumCPU, or GOMAXPROCS now if
// larger): when GOMAXPROCS rises later (set by the program, or by the runtime following a
// container's CPU limit, Go 1.25+), every P still has a line of its own. Made for GOMAXPROCS
// at creation instead, a table made at GOMAXPROCS 2 folded P 2 onto P 0's line for good. The
// cost is lines for Ps that may never run: 64 bytes × NumCPU per table where GOMAXPROCS is
// lower (a CPU quota on a large machine); tables are made only for stats that carried traffic.
// Only a GOMAXPROCS raised by hand past NumCPU (or past the affinity mask the process started
// with) has Ps beyond the lines, which then share lines: every add still lands.
func allocLines(size uintptr) (line0 unsafe.Pointer, stride uintptr, mask uint64) {
	const lineSize = 64
	stride = (size + lineSize - 1) &^ (lineSize - 1)
	n := procpin.MaxSlots()
	// Allocations of a whole number of lines start on a line (their size classes are multiples
	// of 64 bytes); the slack is only for an allocator that one day does otherwise.
	buf := make([]uint64, uintptr(n)*stride/8)
	p := unsafe.Pointer(&buf[0])
	if off := uintptr(p) & (lineSize - 1); off != 0 {
		buf = make([]uint64, (uintptr(n)*stride+lineSize)/8)
		p = unsafe.Pointer(&buf[0])
		p = unsafe.Add(p, (lineSize-uintptr(p)&(lineSize-1))&(lineSize-1))
	}
	return p, stride, uint64(n - 1)
}
