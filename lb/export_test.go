package lb

import "unsafe"

// Spread makes s keep one position per P, as pickers taking turns do, and returns each P's
// starting position.
func (s *Sequence) Spread() []uint64 {
	s.spread(0)
	p := s.perP.Load()
	starts := make([]uint64, len(p.slot))
	for k := range p.slot {
		// spread's own pick advanced one of the positions by one.
		starts[k] = p.slot[k].v.Load()
	}
	return starts
}

// NextOn is Next for a picker on P id.
func (s *Sequence) NextOn(id int) int { return s.nextOn(id) }

// PerP reports whether s keeps one position per P.
func (s *Sequence) PerP() bool { return s.perP.Load() != nil }

// PositionAddr returns the address of the position P id picks on once s keeps one per P (0
// before, or for a P the table has no position for yet).
func (s *Sequence) PositionAddr(id int) uintptr {
	p := s.perP.Load()
	if p == nil || id >= len(p.slot) {
		return 0
	}
	return uintptr(unsafe.Pointer(&p.slot[id].v))
}
