package lb

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
