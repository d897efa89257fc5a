package cluster

import (
	"context"

	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/runtime"
)

// withRuntime applies the runtime overrides Envoy reads for load balancing
// (upstream.healthy_panic_threshold, upstream.zone_routing.enabled,
// upstream.zone_routing.min_cluster_size) over the cluster's configured
// values. Envoy reads them on every pick; Legate reads them when a balancer
// is built and rebuilds every balancer when the runtime changes
// (watchRuntime), so picks stay lock-free and lookup-free.
func (m *Manager) withRuntime(cfg *lb.Config) *lb.Config {
	if m.runtime == nil {
		return cfg
	}
	snap := m.runtime.Snapshot()
	if snap == nil {
		return cfg
	}
	threshold := float64(snap.HealthyPanicThreshold(uint64(cfg.PanicThreshold())))
	cfg.HealthyPanicThreshold = &threshold
	enabled := uint64(lb.DefaultRoutingEnabled)
	if v := cfg.ZoneAware.RoutingEnabled; v != nil {
		enabled = uint64(*v)
	}
	routing := float64(min(snap.Uint64(runtime.KeyZoneRoutingEnabled, enabled), 100))
	cfg.ZoneAware.RoutingEnabled = &routing
	minSize := uint64(lb.DefaultMinClusterSize)
	if v := cfg.ZoneAware.MinClusterSize; v != nil {
		minSize = *v
	}
	size := snap.ZoneRoutingMinClusterSize(minSize)
	cfg.ZoneAware.MinClusterSize = &size
	return cfg
}

// watchRuntime rebuilds every cluster's balancer when the runtime changes,
// so overrides take effect at once. It runs under Run and ends with ctx. The
// snapshot is taken before the first rebuild, so a change made at any time
// (even before Run) is never missed.
func (m *Manager) watchRuntime(ctx context.Context) {
	if m.runtime == nil {
		return
	}
	for {
		snap := m.runtime.Snapshot()
		if snap == nil {
			return
		}
		for _, c := range m.Snapshot() {
			c.HealthChanged()
		}
		select {
		case <-ctx.Done():
			return
		case <-snap.Changed():
		}
	}
}
