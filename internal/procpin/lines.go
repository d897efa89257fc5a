package procpin

import "sync/atomic"

// Lines is a counter per P, each on a cache line of its own, for state every request writes:
// each P adds to its own line and readers that need the total sum the lines. On more Ps than
// lines (a table is sized once, GOMAXPROCS rounded up to a power of two and at most its
// bound), several Ps share a line, which is why the counters are atomics. Safe for concurrent
// use; the methods never allocate.
type Lines struct {
	mask uint64
	line []line
}

type line struct {
	n atomic.Uint64
	_ [56]byte
}

// LoadLines returns the table at p, installing one of at most limit lines (a power of two) if
// there is none yet; concurrent callers get the same table.
func LoadLines(p *atomic.Pointer[Lines], limit int) *Lines {
	if l := p.Load(); l != nil {
		return l
	}
	n := min(Slots(), limit)
	p.CompareAndSwap(nil, &Lines{mask: uint64(n - 1), line: make([]line, n)})
	return p.Load()
}

// Index returns the index of P id's line (id from Pin), in [0, Len).
func (l *Lines) Index(id int) int { return int(uint64(id) & l.mask) }

// Line returns line i's counter.
func (l *Lines) Line(i int) *atomic.Uint64 { return &l.line[i].n }

// Of returns the counter of P id's line.
func (l *Lines) Of(id int) *atomic.Uint64 { return &l.line[uint64(id)&l.mask].n }

// Len returns the number of lines.
func (l *Lines) Len() int { return len(l.line) }

// Sum returns the (wrapping) sum of the lines: a snapshot, exact when no P adds meanwhile.
func (l *Lines) Sum() uint64 {
	var n uint64
	for i := range l.line {
		n += l.line[i].n.Load()
	}
	return n
}
