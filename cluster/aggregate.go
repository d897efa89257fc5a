package cluster

import (
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// aggregateBalancer is the load balancer of an envoy.clusters.aggregate cluster: the priority
// levels of its member clusters, in the configured order, are concatenated into one priority
// list; a pick chooses a level by Envoy's priority load over that list and delegates to the
// member cluster owning the level. Immutable; safe for concurrent use.
type aggregateBalancer struct {
	ps    *host.PrioritySet
	load  lb.PriorityLoad
	rand  func() uint64
	owner []*Snapshot // owner[i] is the member snapshot of concatenated level i
}

// aggregateMembers are the member clusters of an aggregate cluster; none when its settings
// were not decoded by config (a hand-built config.Cluster).
func aggregateMembers(cfg *config.Cluster) []string {
	if a, ok := cfg.CustomType.Settings.(*config.AggregateConfig); ok && a != nil {
		return a.Clusters
	}
	return nil
}

// buildAggregate builds the aggregate view of c's members as they are now. Members that are
// missing, warming or themselves custom clusters contribute no levels.
func buildAggregate(m *Manager, c *Cluster, _ *host.PrioritySet) (*host.PrioritySet, lb.Balancer) {
	a := &aggregateBalancer{rand: m.rand}
	var sets []*host.Set
	for _, name := range aggregateMembers(c.cfg) {
		member := m.Get(name)
		if member == nil || member.cfg.CustomType != nil {
			continue
		}
		snap := member.Snapshot()
		for _, s := range snap.PrioritySet.Sets() {
			level, err := host.NewSet(host.SetConfig{
				Priority:               uint32(len(sets)),
				Hosts:                  s.Hosts(),
				OverprovisioningFactor: s.OverprovisioningFactor(),
				WeightedPriorityHealth: s.WeightedPriorityHealth(),
			})
			if err != nil {
				continue
			}
			sets = append(sets, level)
			a.owner = append(a.owner, snap)
		}
	}
	a.ps, _ = host.NewPrioritySet(sets...)
	a.load = lb.ComputePriorityLoad(a.ps.Sets(), uint32(c.cfg.CommonLb.HealthyPanicThreshold))
	return a.ps, a
}

// Pick chooses a level by priority load and lets the owning member cluster pick.
func (a *aggregateBalancer) Pick(ctx *lb.Context) (*host.Host, error) {
	if len(a.owner) == 0 {
		return nil, lb.ErrNoHealthyHost
	}
	prio, _ := a.load.ChoosePriority(a.rand())
	if prio >= len(a.owner) {
		return nil, lb.ErrNoHealthyHost
	}
	return a.owner[prio].Pick(ctx)
}
