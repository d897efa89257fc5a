package lb

import "github.com/legateproxy/legate/host"

// WeightedHost is a host with its normalized weight: the weights of one priority level sum to 1.
type WeightedHost struct {
	Host   *host.Host
	Weight float64
}

// NormalizedWeights returns the hosts a consistent-hashing table of level s is built from, with
// weights normalized to sum to 1 (Envoy's ThreadAwareLoadBalancerBase normalizeWeights): the
// healthy hosts, or all hosts when the level is in panic; with locality weighted balancing and
// locality weights, each locality's hosts share its configured weight (localities of weight 0
// are skipped). minW and maxW are the smallest and largest normalized weight.
func NormalizedWeights(s *host.Set, panic, localityWeighted bool) (out []WeightedHost, minW, maxW float64) {
	minW, maxW = 1, 0
	add := func(hosts []*host.Host, localityShare float64) {
		var sum uint64
		for _, h := range hosts {
			sum += uint64(h.Weight())
		}
		for _, h := range hosts {
			w := float64(h.Weight()) * localityShare / float64(sum)
			out = append(out, WeightedHost{Host: h, Weight: w})
			minW, maxW = min(minW, w), max(maxW, w)
		}
	}
	lw := s.LocalityWeights()
	if !localityWeighted || len(lw) == 0 {
		if panic {
			add(s.Hosts(), 1)
		} else {
			add(s.HealthyHosts(), 1)
		}
		return out, minW, maxW
	}
	perLocality := s.HealthyHostsPerLocality()
	if panic {
		perLocality = s.HostsPerLocality()
	}
	var sum uint64
	for _, w := range lw {
		sum += uint64(w)
	}
	if sum == 0 {
		return nil, minW, maxW
	}
	for i, w := range lw {
		if w != 0 && len(perLocality[i]) > 0 {
			add(perLocality[i], float64(w)/float64(sum))
		}
	}
	return out, minW, maxW
}

// HashKey is the string a consistent-hashing policy hashes for h: the envoy.lb metadata
// "hash_key" when set, else the hostname (use_hostname_for_hashing) or the address.
func HashKey(h *host.Host, useHostname bool) string {
	if k, ok := h.Metadata("hash_key"); ok && k != "" {
		return k
	}
	if useHostname {
		return h.Hostname()
	}
	return h.Address()
}

// HashTable is one priority level's consistent-hashing structure (a ring or a Maglev table).
type HashTable interface {
	// Choose returns the host for hash on the given attempt (0 first; later attempts must move
	// away deterministically), or nil when the table is empty.
	Choose(hash uint64, attempt uint32) *host.Host
}

// HashBalancer is the thread-aware balancer shell of RING_HASH and MAGLEV: one table per
// priority level, the level chosen from the hash by priority load, retries through the
// attempt number. Immutable; Pick is lock-free and allocation-free.
type HashBalancer struct {
	base   *Base
	tables []HashTable
}

// NewHashBalancer builds one table per level with build(weights, minW, maxW).
func NewHashBalancer(p Params, cfg *Config, build func(hosts []WeightedHost, minW, maxW float64) HashTable) (*HashBalancer, error) {
	base, err := NewBase(p, cfg)
	if err != nil {
		return nil, err
	}
	lw := cfg != nil && cfg.LocalityWeighted
	b := &HashBalancer{base: base, tables: make([]HashTable, len(base.sets))}
	for i, s := range base.sets {
		ws, minW, maxW := NormalizedWeights(s, base.load.Panic[i], lw)
		b.tables[i] = build(ws, minW, maxW)
	}
	return b, nil
}

// Table returns the table of a priority level.
func (b *HashBalancer) Table(priority int) HashTable { return b.tables[priority] }

// Pick uses ctx's hash key (a random number without one) for both the priority and the table.
func (b *HashBalancer) Pick(ctx *Context) (*host.Host, error) {
	var h uint64
	if ctx != nil && ctx.HasHashKey {
		h = ctx.HashKey
	} else {
		h = b.base.rand()
	}
	prio, _ := b.base.ChoosePriority(ctx, h)
	if b.base.load.Panic[prio] {
		b.base.stats.HealthyPanic.Inc()
	}
	t := b.tables[prio]
	if ctx.MaxPicks() == 1 {
		return Picked(t.Choose(h, 0))
	}
	return PickWithRetries(ctx, func(attempt uint32) *host.Host { return t.Choose(h, attempt) })
}
