package stats

import (
	"sync/atomic"
	"unsafe"

	"github.com/legateproxy/legate/internal/procpin"
)

// Kind is the type of a stat.
type Kind uint8

// The four stat kinds Envoy has.
const (
	KindCounter Kind = iota
	KindGauge
	KindHistogram
	KindTextReadout
)

// String returns the lower-case kind name.
func (k Kind) String() string {
	switch k {
	case KindCounter:
		return "counter"
	case KindGauge:
		return "gauge"
	case KindHistogram:
		return "histogram"
	case KindTextReadout:
		return "text_readout"
	}
	return "unknown"
}

// ImportMode is Envoy's Gauge::ImportMode: what a hot-restarted child does with
// the parent's value of a gauge. HiddenAccumulate gauges are hidden from /stats
// unless hidden=include or hidden=only.
type ImportMode uint8

// Envoy's gauge import modes. The zero value is Accumulate.
const (
	Accumulate ImportMode = iota
	NeverImport
	HiddenAccumulate
)

// Counter is a monotonically increasing uint64 (Envoy's Counter). Embed it by
// value in a component's stats struct; the zero value is a usable counter at 0.
// Safe for concurrent use; Inc and Add take no lock and allocate nothing.
//
// /reset_counters (Store.ResetCounters) makes Value read 0 but does not
// disturb the deltas sinks receive (Envoy keeps pending_increment_ apart from
// value_ for the same reason).
type Counter struct {
	total atomic.Uint64 // every increment since creation
	base  atomic.Uint64 // total at the last reset
	latch atomic.Uint64 // total at the last flush; written only by the flusher
}

// Inc adds one.
func (c *Counter) Inc() { c.total.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.total.Add(n) }

// Value is the count since creation or since the last reset.
func (c *Counter) Value() uint64 { return c.total.Load() - c.base.Load() }

// Used reports whether the counter was ever incremented by a non-zero amount
// (Envoy's usedonly rule). A reset does not clear it.
func (c *Counter) Used() bool { return c.total.Load() != 0 }

// reset makes Value read 0 (control path).
func (c *Counter) reset() { c.base.Store(c.total.Load()) }

// latchDelta returns the increments since the previous latch and moves the
// latch; only the flusher calls it.
func (c *Counter) latchDelta() uint64 {
	t := c.total.Load()
	return t - c.latch.Swap(t)
}

// HotCounter is a Counter for paths that every core takes at once, such as a load balancer's
// per-pick stats or the counters every proxied request adds to: each P increments its own cache
// line and the lines are summed into the counter whenever it is read, so increments scale with
// cores where one shared atomic would have them queue for the same line. It costs a line per
// CPU (allocLines) once first incremented; use Counter everywhere else. Declare it in a stats struct like a
// Counter; it is one to every reader. Safe for concurrent use.
type HotCounter struct {
	Counter
	shards atomic.Pointer[hotShards]
}

// hotShards are the per-P lines of a HotCounter or a HotGauge: line i's counter is stride
// bytes after line 0's, on a cache line of its own or in a HotBlock's line. Adds go to the
// first lines; next holds lines added to before a HotBlock was bound, which readers still sum.
type hotShards struct {
	line0  unsafe.Pointer
	stride uintptr
	mask   uint64
	next   *hotShards
}

// on returns the counter of line l (mask keeps it within the lines).
func (s *hotShards) on(l Line) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(s.line0, uintptr(uint64(l)&s.mask)*s.stride))
}

// hotAdd adds n (two's complement for a decrement) to the calling P's line of p, making the
// lines on first use.
func hotAdd(p *atomic.Pointer[hotShards], n uint64) {
	s := p.Load()
	if s == nil {
		s = newShards(p)
	}
	s.on(Line(procpin.Pin())).Add(n)
	procpin.Unpin()
}

// Line is the line of the P a goroutine ran on when it called ThisLine: a run of HotCounter and
// HotGauge changes made on one goroutine (a stream's) may take it once and add on it (IncOn,
// DecOn), instead of finding the P for every change (a pin and an unpin, about a third of an
// increment's instructions). A goroutine that has since moved to another P adds on a line that
// P may share: every change still lands and every reader still sees it, only that line may
// be written from two cores.
type Line uint32

// NoLine is the zero Line, which ThisLine never returns: a Line field left unset (a
// pool.Request's) reads as none taken. Adding on it is still correct (it is P 0's line).
const NoLine Line = 0

// taken marks a Line ThisLine returned; every table's mask drops it.
const taken Line = 1 << 31

// ThisLine returns the line of the P running the caller.
func ThisLine() Line {
	id := procpin.Pin()
	procpin.Unpin()
	return Line(id) | taken
}

// P returns the id of the P the line is for, without ThisLine's mark: the index of its line in
// a table that grows to the Ps it meets instead of masking.
func (l Line) P() int { return int(l &^ taken) }

// hotAddOn adds n to line l of p, making the lines on first use.
func hotAddOn(p *atomic.Pointer[hotShards], l Line, n uint64) {
	s := p.Load()
	if s == nil {
		s = newShards(p)
	}
	s.on(l).Add(n)
}

// newShards installs p's lines (once, whoever wins) and returns them.
func newShards(p *atomic.Pointer[hotShards]) *hotShards {
	line0, stride, mask := allocLines(8)
	p.CompareAndSwap(nil, &hotShards{line0: line0, stride: stride, mask: mask})
	return p.Load()
}

// drain empties the lines, and those bound before them, and returns their (wrapping) sum.
func (s *hotShards) drain() uint64 {
	var t uint64
	for ; s != nil; s = s.next {
		for i := range s.mask + 1 {
			c := s.on(Line(i))
			if n := c.Load(); n != 0 {
				t += c.Swap(0)
			}
		}
	}
	return t
}

// Inc adds one.
func (c *HotCounter) Inc() { hotAdd(&c.shards, 1) }

// Add adds n.
func (c *HotCounter) Add(n uint64) { hotAdd(&c.shards, n) }

// IncOn adds one on line l (ThisLine).
func (c *HotCounter) IncOn(l Line) { hotAddOn(&c.shards, l, 1) }

// AddOn adds n on line l (ThisLine).
func (c *HotCounter) AddOn(l Line, n uint64) { hotAddOn(&c.shards, l, n) }

// Value is the count since creation or since the last reset.
func (c *HotCounter) Value() uint64 { return c.fold().Value() }

// Used reports whether the counter was ever incremented by a non-zero amount.
func (c *HotCounter) Used() bool { return c.fold().Used() }

// fold moves the per-P increments into the counter and returns it.
func (c *HotCounter) fold() *Counter {
	if s := c.shards.Load(); s != nil {
		if n := s.drain(); n != 0 {
			c.total.Add(n)
		}
	}
	return &c.Counter
}

// HotGauge is a Gauge that every core moves at once, such as the active requests of a
// connection manager or a cluster: like HotCounter, each P adds to its own cache line and
// reads sum the lines into the gauge. Inc, Dec, Add and Sub take no lock and, after the
// first, allocate nothing; Set is for gauges that are not also moved concurrently. Declare it
// in a stats struct like a Gauge. Safe for concurrent use.
type HotGauge struct {
	Gauge
	shards atomic.Pointer[hotShards]
}

// Inc adds one.
func (g *HotGauge) Inc() { g.add(1) }

// Dec subtracts one.
func (g *HotGauge) Dec() { g.add(^uint64(0)) }

// Add adds n.
func (g *HotGauge) Add(n uint64) { g.add(n) }

// Sub subtracts n.
func (g *HotGauge) Sub(n uint64) { g.add(^(n - 1)) }

// IncOn adds one on line l (ThisLine).
func (g *HotGauge) IncOn(l Line) { hotAddOn(&g.shards, l, 1) }

// DecOn subtracts one on line l (ThisLine).
func (g *HotGauge) DecOn(l Line) { hotAddOn(&g.shards, l, ^uint64(0)) }

// add moves the gauge by n. It does not mark the gauge used: the lines exist once it has
// moved, and Used and fold read that instead, which keeps IncOn and DecOn small enough to
// be inlined.
func (g *HotGauge) add(n uint64) { hotAdd(&g.shards, n) }

// Used reports whether the gauge was ever written.
func (g *HotGauge) Used() bool { return g.shards.Load() != nil || g.Gauge.Used() }

// Set stores v, dropping the moves not yet folded in.
func (g *HotGauge) Set(v uint64) {
	g.fold()
	g.Gauge.Set(v)
}

// Value returns the current value.
func (g *HotGauge) Value() uint64 { return g.fold().Value() }

// fold moves the per-P changes into the gauge and returns it.
func (g *HotGauge) fold() *Gauge {
	if s := g.shards.Load(); s != nil {
		g.markUsed() // moved on its lines
		if n := s.drain(); n != 0 {
			g.v.Add(n)
		}
	}
	return &g.Gauge
}

// Gauge is a uint64 that goes up and down (Envoy's Gauge). The zero value is a
// usable gauge at 0. Its import mode comes from the struct tag
// (`stat:"name,never_import"`, `stat:"name,hidden"`) or from Store.Gauge.
// Safe for concurrent use; no method takes a lock or allocates.
type Gauge struct {
	v    atomic.Uint64
	used atomic.Uint32
}

func (g *Gauge) markUsed() {
	if g.used.Load() == 0 {
		g.used.Store(1)
	}
}

// Set stores v. Setting any value, including 0, marks the gauge used.
func (g *Gauge) Set(v uint64) { g.v.Store(v); g.markUsed() }

// Inc adds one.
func (g *Gauge) Inc() { g.v.Add(1); g.markUsed() }

// Dec subtracts one (wrapping below zero, which is a caller bug).
func (g *Gauge) Dec() { g.v.Add(^uint64(0)); g.markUsed() }

// Add adds n.
func (g *Gauge) Add(n uint64) { g.v.Add(n); g.markUsed() }

// Sub subtracts n.
func (g *Gauge) Sub(n uint64) { g.v.Add(^(n - 1)); g.markUsed() }

// Value returns the current value.
func (g *Gauge) Value() uint64 { return g.v.Load() }

// Used reports whether the gauge was ever written.
func (g *Gauge) Used() bool { return g.used.Load() != 0 }

// TextReadout holds a string (Envoy's TextReadout). The zero value is an unset
// readout with the empty value. Safe for concurrent use. Set takes no lock but
// allocates one small pointer; text readouts are not on request paths.
type TextReadout struct {
	p atomic.Pointer[string]
}

// Set stores s and marks the readout used.
func (t *TextReadout) Set(s string) { t.p.Store(&s) }

// Value returns the last value set, or "".
func (t *TextReadout) Value() string {
	if p := t.p.Load(); p != nil {
		return *p
	}
	return ""
}

// Used reports whether Set was ever called.
func (t *TextReadout) Used() bool { return t.p.Load() != nil }
