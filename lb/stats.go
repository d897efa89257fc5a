package lb

import "github.com/legateproxy/legate/stats"

// Stats are the lb_* statistics of a cluster (Envoy's ClusterLbStats) that balancers update.
// The cluster owns the counters (fields of its cluster.<name>.* stats) and passes one Stats to
// every balancer it builds through Params.Stats. Every update is one atomic add: picks stay
// lock-free and allocation-free. Counters a pick may increment are HotCounters, so that picks
// on different cores don't queue for one cache line. Complete fills nil fields.
type Stats struct {
	// HealthyPanic is lb_healthy_panic: a pick from a priority level in panic.
	HealthyPanic *stats.HotCounter
	// LocalClusterNotOK is lb_local_cluster_not_ok: zone-aware routing not done because the
	// local cluster has no hosts in this proxy's locality (counted per plan) or is in panic
	// (counted per pick).
	LocalClusterNotOK *stats.HotCounter
	// RecalculateZoneStructures is lb_recalculate_zone_structures: a zone-aware routing plan
	// computed (each balancer build with a local cluster).
	RecalculateZoneStructures *stats.Counter
	// ZoneClusterTooSmall is lb_zone_cluster_too_small: a plan without zone-aware routing because
	// the upstream has fewer healthy hosts than min_cluster_size.
	ZoneClusterTooSmall *stats.Counter
	// ZoneRoutingAllDirectly is lb_zone_routing_all_directly: a pick sent to the local locality
	// because it can take all the traffic.
	ZoneRoutingAllDirectly *stats.HotCounter
	// ZoneRoutingSampled is lb_zone_routing_sampled: a pick sent to the local locality by the
	// sampled share it can take.
	ZoneRoutingSampled *stats.HotCounter
	// ZoneRoutingCrossZone is lb_zone_routing_cross_zone: a pick sent to another locality.
	ZoneRoutingCrossZone *stats.HotCounter
	// ZoneNoCapacityLeft is lb_zone_no_capacity_left: a cross-zone pick with no residual
	// capacity anywhere (a rounding corner), so the locality is chosen at random.
	ZoneNoCapacityLeft *stats.HotCounter

	// SubsetsSelected is lb_subsets_selected: a pick served by the subset matching the request.
	SubsetsSelected *stats.HotCounter
	// SubsetsFallback is lb_subsets_fallback: a pick served by the fallback policy.
	SubsetsFallback *stats.HotCounter
	// SubsetsFallbackPanic is lb_subsets_fallback_panic: a pick served by panic_mode_any.
	SubsetsFallbackPanic *stats.HotCounter
	// SubsetsCreated and SubsetsRemoved are lb_subsets_created and lb_subsets_removed: subsets
	// that appear in, or disappear from, a rebuilt subset balancer.
	SubsetsCreated, SubsetsRemoved *stats.Counter
	// SubsetsActive is the lb_subsets_active gauge: the subsets of the newest balancer.
	SubsetsActive *stats.Gauge
}

// Complete returns s when every field is set, else a copy whose unset fields are private,
// unreported statistics, so that the pick path increments without nil checks. Builders call it
// once per build.
func (s *Stats) Complete() *Stats {
	if s != nil && s.SubsetsActive != nil && !s.anyNil() {
		return s
	}
	out := &Stats{}
	if s != nil {
		*out = *s
	}
	for _, c := range out.hotCounters() {
		if *c == nil {
			*c = new(stats.HotCounter)
		}
	}
	for _, c := range out.counters() {
		if *c == nil {
			*c = new(stats.Counter)
		}
	}
	if out.SubsetsActive == nil {
		out.SubsetsActive = new(stats.Gauge)
	}
	return out
}

// hotCounters lists the per-pick counter fields of s.
func (s *Stats) hotCounters() []**stats.HotCounter {
	return []**stats.HotCounter{
		&s.HealthyPanic, &s.LocalClusterNotOK, &s.ZoneRoutingAllDirectly, &s.ZoneRoutingSampled,
		&s.ZoneRoutingCrossZone, &s.ZoneNoCapacityLeft, &s.SubsetsSelected, &s.SubsetsFallback,
		&s.SubsetsFallbackPanic,
	}
}

// counters lists the other counter fields of s.
func (s *Stats) counters() []**stats.Counter {
	return []**stats.Counter{&s.RecalculateZoneStructures, &s.ZoneClusterTooSmall, &s.SubsetsCreated, &s.SubsetsRemoved}
}

func (s *Stats) anyNil() bool {
	for _, c := range s.hotCounters() {
		if *c == nil {
			return true
		}
	}
	for _, c := range s.counters() {
		if *c == nil {
			return true
		}
	}
	return false
}
