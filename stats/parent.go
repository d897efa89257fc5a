package stats

import (
	"strings"
	"sync"
	"unsafe"
)

// ParentValues are a hot-restart parent's counters and importable gauges by
// full name: every used counter's value, and every used gauge whose import
// mode is Accumulate (Gauges) or HiddenAccumulate (HiddenGauges).
// NeverImport gauges are left out.
type ParentValues struct {
	Counters     map[string]uint64
	Gauges       map[string]uint64
	HiddenGauges map[string]uint64
}

// ParentValues snapshots what a hot-restart child imports from this store
// (Envoy's HotRestartingParent::exportStatsToChild).
func (s *Store) ParentValues() ParentValues {
	v := ParentValues{Counters: map[string]uint64{}, Gauges: map[string]uint64{}, HiddenGauges: map[string]uint64{}}
	s.Each(KindSet(KindCounter, KindGauge), func(st *Stat) bool {
		if !st.Used() {
			return true
		}
		switch {
		case st.Kind() == KindCounter:
			v.Counters[st.Name()] += st.Value()
		case st.ImportMode() == Accumulate:
			v.Gauges[st.Name()] += st.Value()
		case st.ImportMode() == HiddenAccumulate:
			v.HiddenGauges[st.Name()] += st.Value()
		}
		return true
	})
	return v
}

// ParentImport merges a hot-restart parent's statistics into a store, as
// Envoy's StatMerger does: each counter grows by the parent's increments
// since the previous Apply (the first Apply adds the parent's totals), and
// each importable gauge carries the parent's current value on top of the
// child's own, until Release takes the parent's share out again.
//
// Stats the child does not have yet are created, under the registration
// whose prefix is the longest match (so "cluster.web.upstream_rq_200"
// becomes a dynamic stat of "cluster.web." and the child's own lookup of it
// later finds the same stat).
//
// Managed gauges are ones the server sets itself on every flush
// (server.total_connections, server.memory_allocated, …): their parent
// values are remembered for ParentGauge but not added, since the next Set
// would erase them.
//
// Safe for concurrent use; the methods serialise on one mutex. This is the
// control path: Apply walks the store.
type ParentImport struct {
	store   *Store
	managed map[string]bool

	mu       sync.Mutex // guards the maps below
	counters map[string]*importedCounter
	gauges   map[string]*importedGauge
}

type importedCounter struct {
	c    *Counter
	last uint64
}

type importedGauge struct {
	g    *Gauge // nil for managed gauges
	last uint64
}

// NewParentImport returns an importer into s. managed names gauges the
// caller sets itself (see ParentImport).
func (s *Store) NewParentImport(managed ...string) *ParentImport {
	p := &ParentImport{store: s, managed: map[string]bool{}, counters: map[string]*importedCounter{}, gauges: map[string]*importedGauge{}}
	for _, m := range managed {
		p.managed[m] = true
	}
	return p
}

// Apply merges one snapshot of the parent's values. A counter that went
// down (the parent's /reset_counters) contributes nothing until it passes
// its previous value.
func (p *ParentImport) Apply(v ParentValues) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var existing map[string]unsafe.Pointer // built on the first miss
	find := func(kind Kind, name string, mode ImportMode) unsafe.Pointer {
		if existing == nil {
			existing = p.store.byName()
		}
		if ptr, ok := existing[kind.String()+":"+name]; ok {
			return ptr
		}
		return p.store.createForImport(kind, name, mode)
	}
	for name, val := range v.Counters {
		ic := p.counters[name]
		if ic == nil {
			ic = &importedCounter{c: (*Counter)(find(KindCounter, name, 0))}
			p.counters[name] = ic
		}
		if val > ic.last {
			ic.c.Add(val - ic.last)
		}
		ic.last = val
	}
	apply := func(gauges map[string]uint64, mode ImportMode) {
		for name, val := range gauges {
			ig := p.gauges[name]
			if ig == nil {
				ig = &importedGauge{}
				if !p.managed[name] {
					ig.g = (*Gauge)(find(KindGauge, name, mode))
				}
				p.gauges[name] = ig
			}
			if ig.g != nil && val != ig.last {
				ig.g.Add(val - ig.last) // wraps: a decrease subtracts
			}
			ig.last = val
		}
	}
	apply(v.Gauges, Accumulate)
	apply(v.HiddenGauges, HiddenAccumulate)
	// A gauge the parent no longer reports (unused or gone) contributes 0.
	for name, ig := range p.gauges {
		_, a := v.Gauges[name]
		_, h := v.HiddenGauges[name]
		if !a && !h && ig.last != 0 {
			if ig.g != nil {
				ig.g.Sub(ig.last)
			}
			ig.last = 0
		}
	}
}

// ParentGauge is the parent's last value of a gauge (0 when unknown). The
// server adds it to the managed gauges it sets.
func (p *ParentImport) ParentGauge(name string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ig := p.gauges[name]; ig != nil {
		return ig.last
	}
	return 0
}

// Release takes the parent's share out of every imported gauge, except the
// retained ones, whose parent share stays (Envoy keeps
// server.hot_restart_generation's). Call it once the parent has exited.
// Counters keep what they imported.
func (p *ParentImport) Release(retain ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := map[string]bool{}
	for _, r := range retain {
		keep[r] = true
	}
	for name, ig := range p.gauges {
		if ig.g != nil && !keep[name] {
			ig.g.Sub(ig.last)
		}
		delete(p.gauges, name)
	}
	clear(p.counters)
}

// byName maps kind+name of every listed counter and gauge to the stat.
func (s *Store) byName() map[string]unsafe.Pointer {
	out := map[string]unsafe.Pointer{}
	s.Each(KindSet(KindCounter, KindGauge), func(st *Stat) bool {
		key := st.Kind().String() + ":" + st.Name()
		if _, dup := out[key]; !dup {
			out[key] = st.ptr()
		}
		return true
	})
	return out
}

// createForImport creates a parent's stat the child lacks, as a dynamic stat
// of the registration with the longest prefix of name.
func (s *Store) createForImport(kind Kind, name string, mode ImportMode) unsafe.Pointer {
	s.mu.Lock()
	owner := s.root
	for _, r := range s.regs {
		if r.parent == nil && len(r.prefix) > len(owner.prefix) && len(r.prefix) < len(name) && strings.HasPrefix(name, r.prefix) {
			owner = r
		}
	}
	s.mu.Unlock()
	rel := name[len(owner.prefix):]
	if kind == KindCounter {
		return unsafe.Pointer(owner.Counter(rel))
	}
	return unsafe.Pointer(owner.Gauge(rel, mode))
}
