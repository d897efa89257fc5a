package lb

import (
	"fmt"

	"github.com/legateproxy/legate/host"
)

// SourceKind names which hosts of a priority level a pick draws from (Envoy's
// HostsSource::SourceType).
type SourceKind uint8

// Source kinds.
const (
	AllHosts SourceKind = iota
	HealthyHosts
	DegradedHosts
	LocalityHealthyHosts
	LocalityDegradedHosts
)

// Source identifies the host list one pick draws from.
type Source struct {
	Priority int
	Kind     SourceKind
	Locality int
}

// Base is the policy-independent part of every balancer: priority load and spill-over, panic
// mode, degraded hosts, locality-weighted picking and zone-aware routing. Policies embed it
// and pick within the host list ChooseSource selects. Built once per snapshot; safe for
// concurrent use; ChooseSource takes no lock and does not allocate.
type Base struct {
	sets []*host.Set
	load PriorityLoad
	// health and degraded are each level's availability, from which a retry priority
	// spreads the load again (choosePriority).
	health, degraded []uint32
	// oneLevel: priority 0 takes all the healthy load, so choosing a level needs no draw.
	oneLevel bool
	// plain: besides, priority 0 is not in panic and neither locality weights nor zone-aware
	// routing choose a locality, so every pick without excluded levels draws from priority
	// 0's healthy hosts.
	plain bool
	rand  func() uint64
	stats *Stats // complete: every field set

	localityWeighted   bool
	failTrafficOnPanic bool
	routingEnabled     uint64 // percent
	zone               zoneState

	// Per-priority locality schedules over effective locality weights (nil when the level
	// has no locality weights or all are 0).
	healthyLocality, degradedLocality []*Sequence
}

// NewBase validates cfg and computes the shared state for p.PrioritySet.
func NewBase(p Params, cfg *Config) (*Base, error) {
	if p.PrioritySet == nil {
		return nil, fmt.Errorf("load balancer: nil priority set")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = &Config{}
	}
	b := &Base{
		sets:               p.PrioritySet.Sets(),
		rand:               p.RandOrDefault(),
		stats:              p.Stats.Complete(),
		localityWeighted:   cfg.LocalityWeighted,
		failTrafficOnPanic: cfg.ZoneAware.FailTrafficOnPanic,
		routingEnabled:     DefaultRoutingEnabled,
	}
	threshold := cfg.PanicThreshold()
	b.load = ComputePriorityLoad(b.sets, threshold)
	b.health, b.degraded = availabilities(b.sets)
	b.oneLevel = len(b.load.Healthy) > 0 && b.load.Healthy[0] == 100
	if v := cfg.ZoneAware.RoutingEnabled; v != nil {
		b.routingEnabled = uint64(*v)
	}
	minSize := uint64(DefaultMinClusterSize)
	if v := cfg.ZoneAware.MinClusterSize; v != nil {
		minSize = *v
	}
	if p.Local != nil && !cfg.LocalityWeighted {
		b.zone = newZoneState(b.sets[0], p.Local.Sets()[0], minSize, threshold, b.stats)
	}
	if cfg.LocalityWeighted {
		b.healthyLocality = make([]*Sequence, len(b.sets))
		b.degradedLocality = make([]*Sequence, len(b.sets))
		for i, s := range b.sets {
			if s.LocalityWeights() != nil {
				b.healthyLocality[i] = NewFloatSequence(s.HealthyLocalityWeights(), b.rand())
				b.degradedLocality[i] = NewFloatSequence(s.DegradedLocalityWeights(), b.rand())
			}
		}
	}
	b.plain = b.oneLevel && !b.load.Panic[0] && b.zone.routing == noLocalityRouting &&
		(b.healthyLocality == nil || b.healthyLocality[0] == nil)
	return b, nil
}

// Sets returns the priority levels.
func (b *Base) Sets() []*host.Set { return b.sets }

// Load returns the computed priority load and panic state.
func (b *Base) Load() *PriorityLoad { return &b.load }

// Stats returns the lb_* statistics the balancer updates (never nil).
func (b *Base) Stats() *Stats { return b.stats }

// Rand returns the random source.
func (b *Base) Rand() func() uint64 { return b.rand }

// LocalityWeighted reports whether locality weighted balancing is on.
func (b *Base) LocalityWeighted() bool { return b.localityWeighted }

// ChooseRandomSource is ChooseSource for policies that choose the level at random. It draws the
// random number only when there is a choice to make: Envoy always draws one, but the result is
// the same and a draw is a fifth of a pick's cost.
func (b *Base) ChooseRandomSource(ctx *Context) (Source, bool) {
	if b.oneLevel && (ctx == nil || ctx.excludedPriorities == 0) {
		if b.plain {
			return Source{Kind: HealthyHosts}, true // what ChooseSource would find, for less
		}
		return b.ChooseSource(ctx, 0)
	}
	return b.ChooseSource(ctx, b.rand())
}

// Plain reports whether ChooseRandomSource would choose ctx's hosts without a draw as
// Source{Kind: HealthyHosts} (priority 0's healthy hosts), so that a balancer may take
// PlainHosts and its SourceTable's Plain directly: the common case (one level, no panic,
// locality or zone-aware routing, no excluded priorities) then costs no call.
func (b *Base) Plain(ctx *Context) bool {
	return b.plain && (ctx == nil || ctx.excludedPriorities == 0)
}

// PlainHosts is Hosts(Source{Kind: HealthyHosts}): priority 0's healthy hosts.
func (b *Base) PlainHosts() []*host.Host { return b.sets[0].HealthyHosts() }

// ChoosePriority maps priorityHash to a level by the priority load, the one ctx's retry
// priority leaves when it excludes levels (Context.ExcludePreviousPriorities). When the
// excluded levels are all that have availability, ctx forgets them and the cluster's load
// applies. degraded reports that the level was chosen for its degraded hosts.
func (b *Base) ChoosePriority(ctx *Context, priorityHash uint64) (priority int, degraded bool) {
	if ctx == nil || ctx.excludedPriorities == 0 {
		return b.load.ChoosePriority(priorityHash)
	}
	if p, d, ok := choosePriorityExcluding(b.health, b.degraded, ctx.excludedPriorities, priorityHash); ok {
		return p, d
	}
	ctx.resetPriorities()
	return b.load.ChoosePriority(priorityHash)
}

// ChooseSource picks the host list for one request (Envoy's hostSourceToUse): priority by
// priorityHash (a random number for most policies) and ctx's retry priority, all hosts in
// panic, else a locality by weight (locality weighted) or by zone-aware routing at priority
// 0, else the healthy or degraded hosts. ok is false when the request must fail
// (fail_traffic_on_panic).
func (b *Base) ChooseSource(ctx *Context, priorityHash uint64) (src Source, ok bool) {
	prio, degraded := b.ChoosePriority(ctx, priorityHash)
	src.Priority = prio
	if b.load.Panic[prio] {
		b.stats.HealthyPanic.Inc()
		if b.failTrafficOnPanic {
			return src, false
		}
		src.Kind = AllHosts
		return src, true
	}
	plain, local := HealthyHosts, LocalityHealthyHosts
	if degraded {
		plain, local = DegradedHosts, LocalityDegradedHosts
	}
	if b.localityWeighted {
		seqs := b.healthyLocality
		if degraded {
			seqs = b.degradedLocality
		}
		if seq := seqs[prio]; seq != nil {
			src.Kind, src.Locality = local, seq.Next()
			return src, true
		}
	}
	src.Kind = plain
	if prio != 0 || b.zone.routing == noLocalityRouting {
		return src, true
	}
	if b.routingEnabled < 100 && b.rand()%100 >= b.routingEnabled {
		return src, true
	}
	if b.zone.localPanic {
		b.stats.LocalClusterNotOK.Inc()
		if b.failTrafficOnPanic {
			return src, false
		}
		return src, true
	}
	src.Kind = local
	src.Locality = b.zone.chooseLocality(b.rand, len(b.sets[0].HealthyHostsPerLocality()), b.stats)
	return src, true
}

// Hosts returns the host list of src.
func (b *Base) Hosts(src Source) []*host.Host {
	s := b.sets[src.Priority]
	switch src.Kind {
	case HealthyHosts:
		return s.HealthyHosts()
	case DegradedHosts:
		return s.DegradedHosts()
	case LocalityHealthyHosts:
		return s.HealthyHostsPerLocality()[src.Locality]
	case LocalityDegradedHosts:
		if src.Locality < len(s.DegradedHostsPerLocality()) {
			return s.DegradedHostsPerLocality()[src.Locality]
		}
		return nil
	default:
		return s.Hosts()
	}
}

// SourceTable holds one precomputed value (a schedule, a table) per host list of every level,
// so that a pick finds its structure by Source without a map lookup. Immutable once built.
type SourceTable[T any] struct {
	levels []sourceLevel[T]
}

type sourceLevel[T any] struct {
	all, healthy, degraded  T
	healthyLoc, degradedLoc []T
}

// NewSourceTable calls build for every host list of every level of b.
func NewSourceTable[T any](b *Base, build func(hosts []*host.Host) T) *SourceTable[T] {
	t := &SourceTable[T]{levels: make([]sourceLevel[T], len(b.sets))}
	for i, s := range b.sets {
		l := &t.levels[i]
		l.all, l.healthy, l.degraded = build(s.Hosts()), build(s.HealthyHosts()), build(s.DegradedHosts())
		for _, hs := range s.HealthyHostsPerLocality() {
			l.healthyLoc = append(l.healthyLoc, build(hs))
		}
		for _, hs := range s.DegradedHostsPerLocality() {
			l.degradedLoc = append(l.degradedLoc, build(hs))
		}
	}
	return t
}

// Plain is Get(Source{Kind: HealthyHosts}): the value for priority 0's healthy hosts.
func (t *SourceTable[T]) Plain() *T { return &t.levels[0].healthy }

// Get returns the value for src.
func (t *SourceTable[T]) Get(src Source) *T {
	l := &t.levels[src.Priority]
	switch src.Kind {
	case HealthyHosts:
		return &l.healthy
	case DegradedHosts:
		return &l.degraded
	case LocalityHealthyHosts:
		return &l.healthyLoc[src.Locality]
	case LocalityDegradedHosts:
		return &l.degradedLoc[src.Locality]
	default:
		return &l.all
	}
}

// Picked is what PickWithRetries returns when its one pick (ctx.MaxPicks() == 1: no host
// selection retries, every request but a few) returned h. A balancer's Pick returns it
// directly in that case, without the loop's call and its closure's.
func Picked(h *host.Host) (*host.Host, error) {
	if h == nil {
		return nil, ErrNoHealthyHost
	}
	return h, nil
}

// PickWithRetries calls pick up to ctx.MaxPicks() times, returning the first host not already
// attempted, or the last host picked (Envoy's chooseHost retry loop). It returns
// ErrNoHealthyHost when pick returns nil.
func PickWithRetries(ctx *Context, pick func(attempt uint32) *host.Host) (*host.Host, error) {
	var h *host.Host
	n := ctx.MaxPicks()
	for i := range n {
		h = pick(i)
		if h == nil {
			return nil, ErrNoHealthyHost
		}
		if !ctx.Attempted(h) {
			return h, nil
		}
	}
	return h, nil
}
