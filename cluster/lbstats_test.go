package cluster

import (
	"testing"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// TestLbStats checks that the balancers a cluster builds count into its cluster.<name>.lb_*
// stats: panic picks, and subsets created, removed and active across host updates.
func TestLbStats(t *testing.T) {
	t.Run("healthy panic", func(t *testing.T) {
		e := newEnv(t, nil)
		if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, staticYAML("web", "10.0.0.1", "10.0.0.2", "10.0.0.3"))}); err != nil {
			t.Fatal(err)
		}
		c := e.m.Get("web")
		for _, h := range c.Snapshot().PrioritySet.Sets()[0].Hosts()[:2] {
			h.SetHealthFlag(host.FailedActiveHC)
		}
		c.HealthChanged()
		e.clock.Advance(e.m.Get("web").Config().CommonLb.UpdateMergeWindow) // publish the merged health change
		for range 5 {
			if _, err := c.Pick(nil); err != nil {
				t.Fatal(err)
			}
		}
		e.wantStats(t, map[string]uint64{"cluster.web.lb_healthy_panic": 5})
	})
	t.Run("subsets", func(t *testing.T) {
		e := newEnv(t, nil)
		y := `
name: sub
lb_subset_config:
  fallback_policy: ANY_ENDPOINT
  subset_selectors: [{keys: [version]}]
load_assignment:
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}
      metadata: {filter_metadata: {envoy.lb: {version: v1}}}
    - endpoint: {address: {socket_address: {address: 10.0.0.2, port_value: 80}}}
      metadata: {filter_metadata: {envoy.lb: {version: v2}}}
`
		if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, y)}); err != nil {
			t.Fatal(err)
		}
		c := e.m.Get("sub")
		if _, err := c.Pick(&lb.Context{MetadataMatch: []lb.Criterion{{Name: "version", Value: "v1"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Pick(&lb.Context{MetadataMatch: []lb.Criterion{{Name: "version", Value: "v9"}}}); err != nil {
			t.Fatal(err)
		}
		e.wantStats(t, map[string]uint64{
			"cluster.sub.lb_subsets_active": 2, "cluster.sub.lb_subsets_created": 2, "cluster.sub.lb_subsets_removed": 0,
			"cluster.sub.lb_subsets_selected": 1, "cluster.sub.lb_subsets_fallback": 1,
		})
	})
}
