package procpin

import "sync/atomic"

// Lines is a counter per P, each on a cache line of its own, for state every request writes:
// each P adds to its own line and readers that need the total sum the lines. A table is made
// for GOMAXPROCS at first use, at most limit lines. When GOMAXPROCS rose since (by the
// program, or by the runtime following a container's CPU limit, Go 1.25+), a P beyond the
// table counts on a line of the table for the moment and flags it, and the next LoadLines
// replaces it with a larger table holding the same line objects, so no count is moved or lost
// and the P then has a line of its own. Only on more Ps than limit do several share a line for
// good, which is why the counters are atomics. Safe for concurrent use; the methods never
// allocate.
type Lines struct {
	line  []*line // line[id] is P id's, each a 64-byte object: a cache line of its own
	limit int
	more  atomic.Bool // a P beyond line asked for its line, and the table may still grow
	_     [24]byte    // 64 bytes: the header every count reads shares no line with another object
}

type line struct {
	n atomic.Uint64
	_ [56]byte
}

// LoadLines returns the table at p, installing one of at most limit lines if there is none
// yet, or a larger one if a P beyond it asked (Of); concurrent callers get the same table.
func LoadLines(p *atomic.Pointer[Lines], limit int) *Lines {
	if l := p.Load(); l != nil && !l.more.Load() {
		return l
	}
	return growLines(p, limit)
}

// growLines installs a table of a line for every P of GOMAXPROCS now (at most limit), holding
// the lines of the table it replaces, and returns the table installed (this one or a
// concurrent caller's).
func growLines(p *atomic.Pointer[Lines], limit int) *Lines {
	for {
		old := p.Load()
		var kept []*line
		if old != nil {
			if !old.more.Load() {
				return old
			}
			kept = old.line
		}
		n := max(min(Slots(), limit), len(kept), 1)
		l := &Lines{line: make([]*line, n, (n+7)&^7), limit: limit} // whole lines of pointers
		copy(l.line, kept)
		for i := len(kept); i < n; i++ {
			l.line[i] = new(line)
		}
		if p.CompareAndSwap(old, l) {
			return l
		}
	}
}

// Line returns line i's counter, i in [0, Len).
func (l *Lines) Line(i int) *atomic.Uint64 { return &l.line[i].n }

// Of returns the counter of P id's line (id from Pin).
func (l *Lines) Of(id int) *atomic.Uint64 {
	if uint(id) < uint(len(l.line)) {
		return &l.line[id].n
	}
	return l.beyond(id)
}

// beyond returns the line a P beyond the table counts on until the table grows, and flags the
// table for growth while it may still grow.
func (l *Lines) beyond(id int) *atomic.Uint64 {
	if len(l.line) < l.limit && !l.more.Load() {
		l.more.Store(true)
	}
	return &l.line[id%len(l.line)].n
}

// Len returns the number of lines.
func (l *Lines) Len() int { return len(l.line) }

// Sum returns the (wrapping) sum of the lines: a snapshot, exact when no P adds meanwhile.
func (l *Lines) Sum() uint64 {
	var n uint64
	for _, c := range l.line {
		n += c.n.Load()
	}
	return n
}
