package stats

import (
	"sort"
	"strings"
	"unsafe"
)

// Stat is a read-only view of one stat during iteration. It is valid only
// inside the callback that received it.
type Stat struct {
	reg *Registration
	f   *field
	fi  int
}

// Kind returns the stat's kind.
func (st *Stat) Kind() Kind { return st.f.kind }

// AppendName appends the full stat name to b.
func (st *Stat) AppendName(b []byte) []byte {
	return append(append(b, st.reg.prefix...), st.f.name...)
}

// Name returns the full stat name (allocating).
func (st *Stat) Name() string { return st.reg.prefix + st.f.name }

// ImportMode returns a gauge's import mode.
func (st *Stat) ImportMode() ImportMode {
	if st.reg.parent != nil {
		return st.reg.mode
	}
	return st.f.mode
}

// Hidden reports whether the stat is hidden (a HiddenAccumulate gauge).
func (st *Stat) Hidden() bool { return st.f.kind == KindGauge && st.ImportMode() == HiddenAccumulate }

func (st *Stat) ptr() unsafe.Pointer { return unsafe.Add(st.reg.base, st.f.offset) }

// Used applies Envoy's usedonly rule for the stat's kind.
func (st *Stat) Used() bool {
	switch st.f.kind {
	case KindCounter:
		return counterAt(st.reg.base, st.f).Used()
	case KindGauge:
		return gaugeAt(st.reg.base, st.f).Used()
	case KindHistogram:
		return (*Histogram)(st.ptr()).Used()
	}
	return (*TextReadout)(st.ptr()).Used()
}

// Value returns a counter's or gauge's value (0 for other kinds).
func (st *Stat) Value() uint64 {
	switch st.f.kind {
	case KindCounter:
		return counterAt(st.reg.base, st.f).Value()
	case KindGauge:
		return gaugeAt(st.reg.base, st.f).Value()
	}
	return 0
}

// Text returns a text readout's value.
func (st *Stat) Text() string {
	if st.f.kind != KindTextReadout {
		return ""
	}
	return (*TextReadout)(st.ptr()).Value()
}

// Histogram returns the histogram, or nil for other kinds.
func (st *Stat) Histogram() *Histogram {
	if st.f.kind != KindHistogram {
		return nil
	}
	return (*Histogram)(st.ptr())
}

// Kinds is a set of stat kinds.
type Kinds uint8

// Has reports whether k is in the set.
func (ks Kinds) Has(k Kind) bool { return ks&(1<<k) != 0 }

// KindSet builds a Kinds.
func KindSet(k ...Kind) Kinds {
	var ks Kinds
	for _, x := range k {
		ks |= 1 << x
	}
	return ks
}

// order is the sorted view of the registrations used to list stats in byte
// order of their full names without sorting a million names. Registrations
// are sorted by prefix; a group is a run of registrations whose prefixes
// extend the first one's, and only inside a group do names interleave (names
// in different groups compare like the groups' prefixes). Groups are merged
// lazily while iterating. Immutable once built.
type order struct {
	items  []item
	groups []int32 // start of each group in items, plus len(items)
}

// item is a registration, or a single field of one ("exploded" so that its
// name does not force a huge group, e.g. a root registration with prefix "").
type item struct {
	key   string // prefix, or full name when field >= 0
	reg   *Registration
	field int32 // -1: every field
}

// single reports whether the item lists exactly one name equal to its key.
func (it *item) single() bool { return it.field >= 0 || it.reg.parent != nil }

// maxGroup is the number of registrations under one prefix above which that
// prefix's registration is exploded into single fields.
const maxGroup = 16

// buildOrder sorts the registrations; regs is a private copy.
func buildOrder(regs []*Registration) *order {
	items := make([]item, 0, len(regs))
	for _, r := range regs {
		items = append(items, item{key: r.prefix, reg: r, field: -1})
	}
	for {
		sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
		exploded := false
		var out []item
		for i := 0; i < len(items); i++ {
			it := items[i]
			if !it.single() {
				n := 0
				for j := i + 1; j < len(items) && strings.HasPrefix(items[j].key, it.key); j++ {
					n++
				}
				if n > maxGroup {
					if out == nil {
						out = append(make([]item, 0, len(items)+len(it.reg.layout.fields)), items[:i]...)
					}
					for fi := range it.reg.layout.fields {
						out = append(out, item{key: it.key + it.reg.layout.fields[fi].name, reg: it.reg, field: int32(fi)})
					}
					exploded = true
					continue
				}
			}
			if out != nil {
				out = append(out, it)
			}
		}
		if !exploded {
			break
		}
		items = out
	}
	o := &order{items: items}
	for i := 0; i < len(items); {
		o.groups = append(o.groups, int32(i))
		j := i + 1
		if !items[i].single() {
			for j < len(items) && strings.HasPrefix(items[j].key, items[i].key) {
				j++
			}
		}
		i = j
	}
	o.groups = append(o.groups, int32(len(items)))
	return o
}

func (s *Store) currentOrder() *order {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.order == nil {
		s.order = buildOrder(append([]*Registration(nil), s.regs...))
	}
	return s.order
}

// listed reports whether field fi of r is listed (not rejected by the matcher).
func (r *Registration) listed(fi int) bool {
	return r.rejected == nil || r.rejected[fi/64]&(1<<(fi%64)) == 0
}

// cursor walks one item's fields of the wanted kinds in name order.
type cursor struct {
	it    *item
	pos   int // into it.reg.layout.sorted, or 0/1 for single-field items
	kinds Kinds
	fi    int
}

// next positions the cursor on the next wanted field; false at the end.
func (c *cursor) next() bool {
	r := c.it.reg
	if c.pos == 0 && !r.shown() {
		return false
	}
	if c.it.field >= 0 || r.parent != nil {
		fi := max(int(c.it.field), 0)
		for c.pos == 0 {
			c.pos++
			if c.kinds.Has(r.layout.fields[fi].kind) && r.listed(fi) {
				c.fi = fi
				return true
			}
		}
		return false
	}
	for c.pos < len(r.layout.sorted) {
		fi := int(r.layout.sorted[c.pos])
		c.pos++
		if c.kinds.Has(r.layout.fields[fi].kind) && r.listed(fi) {
			c.fi = fi
			return true
		}
	}
	return false
}

func (c *cursor) name() (string, string) {
	return c.it.reg.prefix, c.it.reg.layout.fields[c.fi].name
}

// Each calls fn for every listed stat of the given kinds, in byte order of the
// full names, until fn returns false. It does not block stat updates and
// holds the store lock only to (re)build the sorted registration view.
// Stats registered twice under the same full name are each listed.
func (s *Store) Each(kinds Kinds, fn func(st *Stat) bool) {
	o := s.currentOrder()
	var st Stat
	var heap []*cursor
	for g := 0; g+1 < len(o.groups); g++ {
		members := o.items[o.groups[g]:o.groups[g+1]]
		if len(members) == 1 {
			c := cursor{it: &members[0], kinds: kinds}
			for c.next() {
				st = Stat{reg: c.it.reg, f: &c.it.reg.layout.fields[c.fi], fi: c.fi}
				if !fn(&st) {
					return
				}
			}
			continue
		}
		heap = heap[:0]
		for i := range members {
			c := &cursor{it: &members[i], kinds: kinds}
			if c.next() {
				heap = append(heap, c)
			}
		}
		for i := len(heap)/2 - 1; i >= 0; i-- {
			siftDown(heap, i)
		}
		for len(heap) > 0 {
			c := heap[0]
			st = Stat{reg: c.it.reg, f: &c.it.reg.layout.fields[c.fi], fi: c.fi}
			if !fn(&st) {
				return
			}
			if c.next() {
				siftDown(heap, 0)
			} else {
				heap[0] = heap[len(heap)-1]
				heap = heap[:len(heap)-1]
				if len(heap) > 0 {
					siftDown(heap, 0)
				}
			}
		}
	}
}

func cursorLess(a, b *cursor) bool {
	a1, a2 := a.name()
	b1, b2 := b.name()
	return compareSplit(a1, a2, b1, b2, false) < 0
}

func siftDown(h []*cursor, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && cursorLess(h[r], h[l]) {
			m = r
		}
		if !cursorLess(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// compareSplit compares a1+a2 with b1+b2 without concatenating. With tokens,
// '.' sorts below every other byte, which is the same as comparing the
// dot-separated tokens one by one (Envoy's Prometheus ordering).
func compareSplit(a1, a2, b1, b2 string, tokens bool) int {
	la, lb := len(a1)+len(a2), len(b1)+len(b2)
	n := min(la, lb)
	i := 0
	// Fast path over the common part of the two first halves.
	if m := min(len(a1), len(b1)); m > 0 {
		for i < m && a1[i] == b1[i] {
			i++
		}
	}
	for ; i < n; i++ {
		var x, y byte
		if i < len(a1) {
			x = a1[i]
		} else {
			x = a2[i-len(a1)]
		}
		if i < len(b1) {
			y = b1[i]
		} else {
			y = b2[i-len(b1)]
		}
		if x == y {
			continue
		}
		if tokens {
			if x == '.' {
				return -1
			}
			if y == '.' {
				return 1
			}
		}
		if x < y {
			return -1
		}
		return 1
	}
	switch {
	case la < lb:
		return -1
	case la > lb:
		return 1
	}
	return 0
}
