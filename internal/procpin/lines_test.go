package procpin

import (
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestLinesGrowWithGOMAXPROCS raises GOMAXPROCS after a table was made for one P: a P beyond it
// counts on a line of the table until the next LoadLines, which grows the table to a line per
// P, no two on one cache line, keeping the lines and their counts; no table grows past its
// limit.
func TestLinesGrowWithGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var p atomic.Pointer[Lines]
	l := LoadLines(&p, 16)
	if l.Len() != 1 {
		t.Fatalf("a table made with GOMAXPROCS 1 has %d lines; want 1", l.Len())
	}
	l.Of(0).Add(5)
	const procs = 4
	runtime.GOMAXPROCS(procs)
	if LoadLines(&p, 16) != l {
		t.Fatal("the table was replaced before a P beyond it asked for a line")
	}
	l.Of(3).Add(7)
	g := LoadLines(&p, 16)
	if g.Len() != procs {
		t.Fatalf("after P 3 asked, the table has %d lines; want %d", g.Len(), procs)
	}
	if g.Line(0) != l.Line(0) {
		t.Fatal("the grown table does not hold the old table's line")
	}
	if got := g.Sum(); got != 12 {
		t.Fatalf("Sum() after the growth = %d; want 12", got)
	}
	lines := map[uintptr]int{}
	for id := range procs {
		a := uintptr(unsafe.Pointer(g.Of(id)))
		if other, ok := lines[a/64]; ok {
			t.Fatalf("Ps %d and %d count on one cache line", other, id)
		}
		lines[a/64] = id
	}
	if LoadLines(&p, 16) != g {
		t.Fatal("the table was replaced again with no P beyond it")
	}

	var q atomic.Pointer[Lines]
	small := LoadLines(&q, 2)
	small.Of(3).Add(1)
	if got := LoadLines(&q, 2); got != small || got.Len() != 2 {
		t.Fatalf("a table at its limit of 2 was replaced by one of %d lines", got.Len())
	}
}
