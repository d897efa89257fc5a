package lb

// Spread makes s keep one position per P, as the first collision of two pickers does, and
// returns each P's starting position.
func (s *Sequence) Spread() []uint64 {
	s.spread()
	p := s.perP.Load()
	starts := make([]uint64, len(p.slot))
	for k := range p.slot {
		// spread's own pick advanced one of the positions by one.
		starts[k] = p.slot[k].v.Load()
	}
	return starts
}
