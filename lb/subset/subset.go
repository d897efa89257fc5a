package subset

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// FallbackPolicy is LbSubsetConfig.LbSubsetFallbackPolicy.
type FallbackPolicy uint8

// Fallback policies.
const (
	NoFallback FallbackPolicy = iota
	AnyEndpoint
	DefaultSubset
)

// Config is Cluster.LbSubsetConfig.
type Config struct {
	FallbackPolicy FallbackPolicy
	// DefaultSubset is default_subset: the metadata a host must have to be in the default
	// subset (values stringified as host.Config.Metadata).
	DefaultSubset []lb.Criterion
	// Selectors are subset_selectors: each a list of metadata keys.
	Selectors [][]string
	// LocalityWeightAware is locality_weight_aware: subsets keep locality weights.
	LocalityWeightAware bool
	// ScaleLocalityWeight is scale_locality_weight: with LocalityWeightAware, each locality
	// weight is scaled by the share of its hosts in the subset.
	ScaleLocalityWeight bool
	// PanicModeAny is panic_mode_any.
	PanicModeAny bool
}

// Balancer is a subset-aware snapshot. Safe for concurrent use.
type Balancer struct {
	stats    *lb.Stats // complete; shared with the children
	subsets  map[uint64][]*entry
	fallback lb.Balancer // nil with NO_FALLBACK or an empty default subset
	// panicAny is the whole-cluster balancer of panic_mode_any, nil otherwise: it serves
	// every pick the subsets and the fallback left without a host, as in Envoy, whatever the
	// fallback policy (an empty default subset included).
	panicAny lb.Balancer
}

type entry struct {
	criteria []lb.Criterion
	balancer lb.Balancer
}

// New builds the subsets of p.PrioritySet with child (the cluster's policy factory) and cfg
// (the cluster's balancer config, shared by the children).
func New(p lb.Params, cfg *lb.Config, sc Config, child lb.Factory) (*Balancer, error) {
	if p.PrioritySet == nil {
		return nil, fmt.Errorf("load balancer: nil priority set")
	}
	for i, sel := range sc.Selectors {
		if len(sel) == 0 {
			return nil, fmt.Errorf("lb_subset_config.subset_selectors[%d].keys: must not be empty", i)
		}
	}
	if sc.FallbackPolicy > DefaultSubset {
		return nil, fmt.Errorf("lb_subset_config.fallback_policy = %d; must be NO_FALLBACK, ANY_ENDPOINT or DEFAULT_SUBSET", sc.FallbackPolicy)
	}
	p.Stats = p.Stats.Complete()
	b := &Balancer{stats: p.Stats, subsets: map[uint64][]*entry{}}
	build := func(keep func(*host.Host) bool) (lb.Balancer, bool, error) {
		var sets []*host.Set
		any := false
		for _, s := range p.PrioritySet.Sets() {
			fs, err := s.Filter(keep, sc.LocalityWeightAware, sc.ScaleLocalityWeight)
			if err != nil {
				return nil, false, err
			}
			any = any || len(fs.Hosts()) > 0
			sets = append(sets, fs)
		}
		ps, err := host.NewPrioritySet(sets...)
		if err != nil {
			return nil, false, err
		}
		q := p
		q.PrioritySet = ps
		bal, err := child(q, cfg)
		return bal, any, err
	}
	all, err := child(p, cfg)
	if err != nil {
		return nil, err
	}
	switch sc.FallbackPolicy {
	case AnyEndpoint:
		b.fallback = all
	case DefaultSubset:
		def := slices.Clone(sc.DefaultSubset)
		lb.SortCriteria(def)
		bal, nonEmpty, err := build(func(h *host.Host) bool { return matches(h, def) })
		if err != nil {
			return nil, err
		}
		if nonEmpty {
			b.fallback = bal
		}
	}
	if sc.PanicModeAny {
		b.panicAny = all
	}
	for _, sel := range sc.Selectors {
		keys := slices.Clone(sel)
		slices.Sort(keys)
		keys = slices.Compact(keys)
		seen := map[string]bool{}
		for _, s := range p.PrioritySet.Sets() {
			for _, h := range s.Hosts() {
				crit, ok := criteriaOf(h, keys)
				if !ok {
					continue
				}
				id := fmt.Sprint(crit)
				if seen[id] {
					continue
				}
				seen[id] = true
				bal, _, err := build(func(h *host.Host) bool { return matches(h, crit) })
				if err != nil {
					return nil, err
				}
				k := hashCriteria(crit)
				b.subsets[k] = append(b.subsets[k], &entry{criteria: crit, balancer: bal})
			}
		}
	}
	return b, nil
}

// criteriaOf returns h's values for keys (sorted), or false when a key is missing.
func criteriaOf(h *host.Host, keys []string) ([]lb.Criterion, bool) {
	out := make([]lb.Criterion, len(keys))
	for i, k := range keys {
		v, ok := h.Metadata(k)
		if !ok {
			return nil, false
		}
		out[i] = lb.Criterion{Name: k, Value: v}
	}
	return out, true
}

// matches reports whether h has every criterion (a subset holds every host with its values,
// whatever the host's other keys).
func matches(h *host.Host, crit []lb.Criterion) bool {
	for _, c := range crit {
		if v, ok := h.Metadata(c.Name); !ok || v != c.Value {
			return false
		}
	}
	return true
}

// hashCriteria keys the subset table. It runs on every pick: one-shot string hashes mixed in
// order cost a third of a streaming digest; equalCriteria settles collisions.
func hashCriteria(crit []lb.Criterion) uint64 {
	h := uint64(len(crit))
	for _, c := range crit {
		h = (bits.RotateLeft64(h, 23) ^ xxhash.Sum64String(c.Name)) * 0x9e3779b97f4a7c15
		h = (bits.RotateLeft64(h, 23) ^ xxhash.Sum64String(c.Value)) * 0x9e3779b97f4a7c15
	}
	return h
}

func equalCriteria(a, b []lb.Criterion) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Pick picks from the subset matching ctx.MetadataMatch, or applies the fallback policy, and
// with panic_mode_any picks from the whole cluster when neither found a host. It counts
// lb_subsets_selected, lb_subsets_fallback or lb_subsets_fallback_panic for the pick that
// found a host.
func (b *Balancer) Pick(ctx *lb.Context) (*host.Host, error) {
	h, err := b.pickSubset(ctx)
	if err == nil || b.panicAny == nil {
		return h, err
	}
	h, err = b.panicAny.Pick(ctx)
	if err == nil {
		b.stats.SubsetsFallbackPanic.Inc()
	}
	return h, err
}

// pickSubset picks from the matching subset, else from the fallback.
func (b *Balancer) pickSubset(ctx *lb.Context) (*host.Host, error) {
	if ctx != nil && len(ctx.MetadataMatch) > 0 {
		if e := b.find(ctx.MetadataMatch); e != nil {
			h, err := e.balancer.Pick(ctx)
			if err == nil {
				b.stats.SubsetsSelected.Inc()
			}
			return h, err
		}
	}
	if b.fallback == nil {
		return nil, lb.ErrNoHealthyHost
	}
	h, err := b.fallback.Pick(ctx)
	if err == nil {
		b.stats.SubsetsFallback.Inc()
	}
	return h, err
}

// find returns the subset of exactly crit, or nil; b may be nil.
func (b *Balancer) find(crit []lb.Criterion) *entry {
	if b == nil {
		return nil
	}
	for _, e := range b.subsets[hashCriteria(crit)] {
		if equalCriteria(e.criteria, crit) {
			return e
		}
	}
	return nil
}

// CountChanges records how b differs from prev, the balancer of the same cluster it replaces
// (nil for the first): lb_subsets_created for its subsets prev lacks, lb_subsets_removed for
// prev's subsets it lacks (they lost their last host), and lb_subsets_active. The cluster calls
// it once per published balancer, on the control side.
func (b *Balancer) CountChanges(prev *Balancer) {
	var active, created, removed uint64
	for _, es := range b.subsets {
		for _, e := range es {
			active++
			if prev.find(e.criteria) == nil {
				created++
			}
		}
	}
	if prev != nil {
		for _, es := range prev.subsets {
			for _, e := range es {
				if b.find(e.criteria) == nil {
					removed++
				}
			}
		}
	}
	b.stats.SubsetsCreated.Add(created)
	b.stats.SubsetsRemoved.Add(removed)
	b.stats.SubsetsActive.Set(active)
}
