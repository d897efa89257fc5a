package stats

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestHotLinesOutliveGOMAXPROCSRise makes a HotCounter's, a HotGauge's and a HotBlock's lines
// at GOMAXPROCS 1, then raises it to NumCPU (as the runtime does when a container's CPU limit
// rises): every P then adds on a cache line of its own in each table, and what goroutines on
// all Ps add is counted exactly. A table made after GOMAXPROCS was raised by hand past NumCPU
// has a line for each of its Ps.
func TestHotLinesOutliveGOMAXPROCSRise(t *testing.T) {
	ncpu := runtime.NumCPU()
	if ncpu < 2 {
		t.Skip("one CPU: GOMAXPROCS cannot rise within NumCPU")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	type line struct{ a, b atomic.Uint64 }
	var c, bound HotCounter
	var g HotGauge
	c.Inc()
	g.Inc()
	blk := NewHotBlock[line]()
	BindCounter(&bound, blk, func(l *line) *atomic.Uint64 { return &l.a })
	runtime.GOMAXPROCS(ncpu)

	tables := []struct {
		name string
		on   func(Line) unsafe.Pointer
	}{
		{"HotCounter", func(l Line) unsafe.Pointer { return unsafe.Pointer(c.shards.Load().on(l)) }},
		{"HotGauge", func(l Line) unsafe.Pointer { return unsafe.Pointer(g.shards.Load().on(l)) }},
		{"HotBlock", func(l Line) unsafe.Pointer { return unsafe.Pointer(blk.On(l)) }},
		{"bound HotCounter", func(l Line) unsafe.Pointer { return unsafe.Pointer(bound.shards.Load().on(l)) }},
	}
	for _, tab := range tables {
		lines := map[uintptr]int{}
		for id := range ncpu {
			a := uintptr(tab.on(Line(id)|taken)) / 64
			if other, ok := lines[a]; ok {
				t.Errorf("%s made at GOMAXPROCS 1: Ps %d and %d add on one cache line at GOMAXPROCS %d", tab.name, other, id, ncpu)
			}
			lines[a] = id
		}
	}

	const adds = 5000
	var wg sync.WaitGroup
	for range 2 * ncpu {
		wg.Go(func() {
			for i := range adds {
				l := ThisLine()
				c.IncOn(l)
				c.Inc()
				g.IncOn(l)
				g.DecOn(l)
				blk.On(l).a.Add(1)
				bound.Inc()
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	if got, want := c.Value(), uint64(1+2*2*ncpu*adds); got != want {
		t.Errorf("HotCounter = %d; want %d", got, want)
	}
	if got := g.Value(); got != 1 {
		t.Errorf("HotGauge = %d; want 1", got)
	}
	if got, want := bound.Value(), uint64(2*2*ncpu*adds); got != want {
		t.Errorf("bound HotCounter = %d; want %d", got, want)
	}

	procs := 2*ncpu + 1
	runtime.GOMAXPROCS(procs)
	var late HotCounter
	late.Inc()
	if n := late.shards.Load().mask + 1; n < uint64(procs) {
		t.Errorf("a HotCounter made at GOMAXPROCS %d has %d lines; want at least %d", procs, n, procs)
	}
}
