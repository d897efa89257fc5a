package cluster

import (
	"testing"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/lb"
)

// TestLoadBalancingPolicyPicks checks, through the cluster manager, that the balancer chosen by
// load_balancing_policy is the one used: RingHash sends one hash key to one host every time,
// RoundRobin alternates, and lb_policy is overridden.
func TestLoadBalancingPolicyPicks(t *testing.T) {
	const policies = "load_balancing_policy:\n  policies:\n  - typed_extension_config:\n      name: p\n      typed_config: {'@type': type.googleapis.com/envoy.extensions.load_balancing_policies."
	tests := []struct {
		name       string
		extra      string
		wantPolicy string
		// consistent: the same key always picks the same host; else picks alternate.
		consistent bool
	}{
		{"ring hash", policies + "ring_hash.v3.RingHash, minimum_ring_size: 64}\n", "RING_HASH", true},
		{"maglev", policies + "maglev.v3.Maglev, table_size: 131}\n", "MAGLEV", true},
		{"round robin overrides lb_policy", "lb_policy: RING_HASH\n" + policies + "round_robin.v3.RoundRobin}\n", "ROUND_ROBIN", false},
		{"wrr locality round robin", policies + "wrr_locality.v3.WrrLocality, endpoint_picking_policy: {policies: [{typed_extension_config: {name: rr, typed_config: {'@type': type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin}}}]}}\n", "ROUND_ROBIN", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			cfg := parseCluster(t, staticYAML("web", "10.0.0.1", "10.0.0.2", "10.0.0.3")+tt.extra)
			if cfg.LbPolicy != tt.wantPolicy {
				t.Fatalf("LbPolicy = %q; want %q", cfg.LbPolicy, tt.wantPolicy)
			}
			if err := e.m.AddStatic([]*config.Cluster{cfg}); err != nil {
				t.Fatal(err)
			}
			c := e.m.Get("web")
			seen := map[string]int{}
			var prev string
			for i := range 30 {
				ctx := &lb.Context{HashKey: 0x9e3779b97f4a7c15, HasHashKey: true}
				h, err := c.Pick(ctx)
				if err != nil {
					t.Fatalf("Pick() error = %v", err)
				}
				a := h.Address()
				seen[a]++
				if !tt.consistent && i > 0 && a == prev {
					t.Fatalf("pick %d = %s, the same host as pick %d; want round robin to alternate", i, a, i-1)
				}
				prev = a
			}
			switch {
			case tt.consistent && len(seen) != 1:
				t.Errorf("one hash key picked %d hosts (%v); want 1", len(seen), seen)
			case !tt.consistent && len(seen) != 3:
				t.Errorf("round robin picked %d hosts (%v); want 3", len(seen), seen)
			}
		})
	}
}
