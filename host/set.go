package host

import (
	"fmt"
	"slices"
)

// DefaultOverprovisioningFactor is ClusterLoadAssignment.policy.overprovisioning_factor's
// default, in percent (1.4).
const DefaultOverprovisioningFactor = 140

// SetConfig describes one priority level to build.
type SetConfig struct {
	// Priority is the level's priority; 0 is the highest.
	Priority uint32
	// Hosts are the level's hosts in discovery order.
	Hosts []*Host
	// LocalityWeights maps a locality to its LocalityLbEndpoints.load_balancing_weight. A nil
	// map means no locality weights were given (locality weighted balancing is then off for the
	// level); a locality missing from a non-nil map has weight 0.
	LocalityWeights map[Locality]uint32
	// LocalLocality is the locality of this proxy (node.locality) when known. Hosts of that
	// locality are grouped first, as Envoy's HostsPerLocality with hasLocalLocality.
	LocalLocality *Locality
	// OverprovisioningFactor in percent; 0 means DefaultOverprovisioningFactor.
	OverprovisioningFactor uint32
	// WeightedPriorityHealth computes the level's health from host weights instead of host
	// counts (ClusterLoadAssignment.policy.weighted_priority_health).
	WeightedPriorityHealth bool
}

// Set is one priority level: its hosts partitioned by health and by locality.
//
// A Set is immutable once built and safe for concurrent use. The slices its methods return are
// shared: callers must not modify them. Health partitions are taken from the hosts' flags when
// the Set is built; a health change is published by building a new Set.
type Set struct {
	priority               uint32
	localLocality          *Locality
	overprovisioningFactor uint32
	weightedPriorityHealth bool

	hosts, healthy, degraded, excluded []*Host

	localities                                      []Locality
	hasLocalLocality                                bool
	perLocality, healthyPerLocality                 [][]*Host
	degradedPerLocality, excludedPerLocality        [][]*Host
	localityWeights                                 []uint32
	healthyLocalityWeights, degradedLocalityWeights []float64
}

// NewSet partitions cfg.Hosts by health and locality.
func NewSet(cfg SetConfig) (*Set, error) {
	s := &Set{
		priority:               cfg.Priority,
		overprovisioningFactor: cfg.OverprovisioningFactor,
		weightedPriorityHealth: cfg.WeightedPriorityHealth,
		hosts:                  slices.Clip(slices.Clone(cfg.Hosts)),
	}
	if cfg.LocalLocality != nil {
		l := *cfg.LocalLocality
		s.localLocality = &l
	}
	if s.overprovisioningFactor == 0 {
		s.overprovisioningFactor = DefaultOverprovisioningFactor
	}
	for _, h := range s.hosts {
		if h == nil {
			return nil, fmt.Errorf("priority %d: nil host", cfg.Priority)
		}
	}
	s.healthy, s.degraded, s.excluded = partition(s.hosts)

	// Group localities: the local locality first (when present), then the others in Envoy's
	// LocalityLess order.
	index := map[Locality]int{}
	for _, h := range s.hosts {
		if _, ok := index[h.Locality()]; !ok {
			index[h.Locality()] = -1
			s.localities = append(s.localities, h.Locality())
		}
	}
	slices.SortFunc(s.localities, func(a, b Locality) int {
		switch {
		case a == b:
			return 0
		case cfg.LocalLocality != nil && a == *cfg.LocalLocality:
			return -1
		case cfg.LocalLocality != nil && b == *cfg.LocalLocality:
			return 1
		case a.Less(b):
			return -1
		default:
			return 1
		}
	})
	// As in Envoy, the local locality counts only when some host is in it.
	s.hasLocalLocality = cfg.LocalLocality != nil && len(s.localities) > 0 && s.localities[0] == *cfg.LocalLocality
	for i, l := range s.localities {
		index[l] = i
	}
	n := len(s.localities)
	s.perLocality = make([][]*Host, n)
	for _, h := range s.hosts {
		i := index[h.Locality()]
		s.perLocality[i] = append(s.perLocality[i], h)
	}
	s.healthyPerLocality = make([][]*Host, n)
	s.degradedPerLocality = make([][]*Host, n)
	s.excludedPerLocality = make([][]*Host, n)
	for i, hs := range s.perLocality {
		s.perLocality[i] = slices.Clip(hs)
		s.healthyPerLocality[i], s.degradedPerLocality[i], s.excludedPerLocality[i] = partition(hs)
	}
	if cfg.LocalityWeights != nil {
		s.localityWeights = make([]uint32, n)
		for i, l := range s.localities {
			s.localityWeights[i] = cfg.LocalityWeights[l]
		}
		s.healthyLocalityWeights = s.effectiveLocalityWeights(s.healthyPerLocality)
		s.degradedLocalityWeights = s.effectiveLocalityWeights(s.degradedPerLocality)
	}
	return s, nil
}

func partition(hosts []*Host) (healthy, degraded, excluded []*Host) {
	for _, h := range hosts {
		f := h.HealthFlags()
		switch {
		case f.Excluded():
			excluded = append(excluded, h)
		case f.Coarse() == Healthy:
			healthy = append(healthy, h)
		case f.Coarse() == Degraded:
			degraded = append(degraded, h)
		}
	}
	return slices.Clip(healthy), slices.Clip(degraded), slices.Clip(excluded)
}

// effectiveLocalityWeights scales each locality weight by the locality's availability (eligible
// over non-excluded hosts) times the overprovisioning factor, capped at 1, as Envoy's
// HostSetImpl::effectiveLocalityWeight.
func (s *Set) effectiveLocalityWeights(eligible [][]*Host) []float64 {
	out := make([]float64, len(s.localities))
	for i := range s.localities {
		total := len(s.perLocality[i]) - len(s.excludedPerLocality[i])
		if total <= 0 {
			continue
		}
		ratio := float64(len(eligible[i])) / float64(total)
		out[i] = float64(s.localityWeights[i]) * min(1.0, float64(s.overprovisioningFactor)/100*ratio)
	}
	return out
}

// Filter builds the level restricted to the hosts keep accepts, with the same priority, local
// locality and overprovisioning settings (subset load balancing). With keepLocalityWeights the
// locality weights are kept; with scaleLocalityWeights as well, each is scaled by the share of
// the locality's hosts that were kept (LbSubsetConfig.scale_locality_weight).
func (s *Set) Filter(keep func(*Host) bool, keepLocalityWeights, scaleLocalityWeights bool) (*Set, error) {
	cfg := SetConfig{
		Priority:               s.priority,
		LocalLocality:          s.localLocality,
		OverprovisioningFactor: s.overprovisioningFactor,
		WeightedPriorityHealth: s.weightedPriorityHealth,
	}
	for _, h := range s.hosts {
		if keep(h) {
			cfg.Hosts = append(cfg.Hosts, h)
		}
	}
	if keepLocalityWeights && s.localityWeights != nil {
		cfg.LocalityWeights = make(map[Locality]uint32, len(s.localities))
		for i, l := range s.localities {
			w := s.localityWeights[i]
			if scaleLocalityWeights && len(s.perLocality[i]) > 0 {
				kept := 0
				for _, h := range s.perLocality[i] {
					if keep(h) {
						kept++
					}
				}
				w = uint32(uint64(w) * uint64(kept) / uint64(len(s.perLocality[i])))
			}
			cfg.LocalityWeights[l] = w
		}
	}
	return NewSet(cfg)
}

// Priority returns the level's priority.
func (s *Set) Priority() uint32 { return s.priority }

// OverprovisioningFactor returns the factor in percent (140 means 1.4).
func (s *Set) OverprovisioningFactor() uint32 { return s.overprovisioningFactor }

// WeightedPriorityHealth reports whether level health is computed from weights.
func (s *Set) WeightedPriorityHealth() bool { return s.weightedPriorityHealth }

// Hosts returns all hosts of the level, including unhealthy and excluded ones.
func (s *Set) Hosts() []*Host { return s.hosts }

// HealthyHosts returns the healthy, non-excluded hosts.
func (s *Set) HealthyHosts() []*Host { return s.healthy }

// DegradedHosts returns the degraded, non-excluded hosts.
func (s *Set) DegradedHosts() []*Host { return s.degraded }

// ExcludedHosts returns the excluded hosts.
func (s *Set) ExcludedHosts() []*Host { return s.excluded }

// Localities returns the localities of the level, indexed as the per-locality slices.
func (s *Set) Localities() []Locality { return s.localities }

// HasLocalLocality reports whether index 0 of the per-locality slices is this proxy's locality.
func (s *Set) HasLocalLocality() bool { return s.hasLocalLocality }

// HostsPerLocality returns all hosts grouped by locality.
func (s *Set) HostsPerLocality() [][]*Host { return s.perLocality }

// HealthyHostsPerLocality returns healthy hosts grouped by locality.
func (s *Set) HealthyHostsPerLocality() [][]*Host { return s.healthyPerLocality }

// DegradedHostsPerLocality returns degraded hosts grouped by locality.
func (s *Set) DegradedHostsPerLocality() [][]*Host { return s.degradedPerLocality }

// ExcludedHostsPerLocality returns excluded hosts grouped by locality.
func (s *Set) ExcludedHostsPerLocality() [][]*Host { return s.excludedPerLocality }

// LocalityWeights returns the configured weight of each locality, or nil when none was given.
func (s *Set) LocalityWeights() []uint32 { return s.localityWeights }

// HealthyLocalityWeights returns each locality's effective weight for picking among healthy
// hosts (nil without locality weights).
func (s *Set) HealthyLocalityWeights() []float64 { return s.healthyLocalityWeights }

// DegradedLocalityWeights returns each locality's effective weight for picking among degraded
// hosts (nil without locality weights).
func (s *Set) DegradedLocalityWeights() []float64 { return s.degradedLocalityWeights }

// PrioritySet is the ordered list of priority levels of a cluster. Level i has priority i; levels
// without hosts are present as empty Sets. Immutable and safe for concurrent use.
type PrioritySet struct {
	sets []*Set
}

// NewPrioritySet orders sets by priority and fills gaps with empty levels. Two sets with the
// same priority are an error.
func NewPrioritySet(sets ...*Set) (*PrioritySet, error) {
	maxPrio := -1
	for _, s := range sets {
		maxPrio = max(maxPrio, int(s.priority))
	}
	ps := &PrioritySet{sets: make([]*Set, maxPrio+1)}
	for _, s := range sets {
		if ps.sets[s.priority] != nil {
			return nil, fmt.Errorf("priority %d: defined twice", s.priority)
		}
		ps.sets[s.priority] = s
	}
	for i := range ps.sets {
		if ps.sets[i] == nil {
			ps.sets[i], _ = NewSet(SetConfig{Priority: uint32(i)})
		}
	}
	if len(ps.sets) == 0 {
		empty, _ := NewSet(SetConfig{})
		ps.sets = []*Set{empty}
	}
	return ps, nil
}

// Build groups hosts by their Priority into Sets sharing the other settings of cfg (whose Hosts
// and Priority are ignored) and returns the PrioritySet. It is the usual way discovery publishes
// a new snapshot.
func Build(hosts []*Host, cfg SetConfig) (*PrioritySet, error) {
	byPrio := map[uint32][]*Host{}
	for _, h := range hosts {
		if h == nil {
			return nil, fmt.Errorf("nil host")
		}
		byPrio[h.Priority()] = append(byPrio[h.Priority()], h)
	}
	var sets []*Set
	for p, hs := range byPrio {
		c := cfg
		c.Priority, c.Hosts = p, hs
		s, err := NewSet(c)
		if err != nil {
			return nil, err
		}
		sets = append(sets, s)
	}
	return NewPrioritySet(sets...)
}

// Sets returns the levels, index = priority. Never empty: a cluster without hosts has one empty
// level.
func (ps *PrioritySet) Sets() []*Set { return ps.sets }

// Len returns the number of levels.
func (ps *PrioritySet) Len() int { return len(ps.sets) }

// Hosts returns the total number of hosts over all levels.
func (ps *PrioritySet) Hosts() int {
	n := 0
	for _, s := range ps.sets {
		n += len(s.hosts)
	}
	return n
}
