package cluster

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/config"
)

// TestZoneRoutingFollowsLocalCluster checks that zone-aware routing uses the local cluster's
// current hosts: Envoy recomputes every balancer's locality plan when the local cluster's
// membership or health changes, so a change there must reach clusters whose own hosts did not
// change.
func TestZoneRoutingFollowsLocalCluster(t *testing.T) {
	e := newEnv(t, func(c *ManagerConfig) { c.LocalClusterName = "local"; c.ServiceZone = "a" })
	if _, err := e.m.AddOrUpdate(parseCluster(t, "name: local\ntype: EDS\ncommon_lb_config: {update_merge_window: 0s}"), "1"); err != nil {
		t.Fatal(err)
	}
	local := e.m.Warming()[0]
	assign := func(zones ...string) {
		t.Helper()
		cla := &endpointv3.ClusterLoadAssignment{ClusterName: "local"}
		for i, z := range zones {
			j := `{"locality":{"zone":"` + z + `"},"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":"10.9.0.` +
				string(rune('1'+i)) + `","port_value":80}}}}]}`
			var le endpointv3.LocalityLbEndpoints
			if err := protojson.Unmarshal([]byte(j), &le); err != nil {
				t.Fatal(err)
			}
			cla.Endpoints = append(cla.Endpoints, &le)
		}
		if err := local.ApplyAssignment(cla); err != nil {
			t.Fatal(err)
		}
	}
	assign("b") // no local host in this proxy's zone: no zone-aware routing
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(t, `name: up
common_lb_config:
  update_merge_window: 0s
  zone_aware_lb_config: {min_cluster_size: 1}
load_assignment:
  endpoints:
  - locality: {zone: a}
    lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}}]
  - locality: {zone: b}
    lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.2, port_value: 80}}}}]
`)}); err != nil {
		t.Fatal(err)
	}
	picks := func() map[string]int {
		t.Helper()
		out := map[string]int{}
		for range 100 {
			h, err := e.m.Get("up").Pick(nil)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Address()]++
		}
		return out
	}
	if got := picks(); got["10.0.0.2:80"] == 0 {
		t.Errorf("picks with no local host in zone a = %v; want both zones", got)
	}
	// Half the local hosts, and half the upstream hosts, are now in zone a: every pick can
	// stay in the zone.
	assign("a", "b")
	if got := picks(); got["10.0.0.1:80"] != 100 {
		t.Errorf("picks after the local cluster gained a zone-a host = %v; want all 100 to 10.0.0.1:80", got)
	}
	e.wantStats(t, map[string]uint64{"cluster.up.lb_zone_routing_all_directly": 100})
}

// TestHasCountsWarmingClusters checks that a cluster waiting for its first health check round
// is known to configuration checks (validate_clusters) though Get does not return it yet.
func TestHasCountsWarmingClusters(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.m.AddOrUpdate(parseCluster(t, "name: eds\ntype: EDS"), "1"); err != nil {
		t.Fatal(err)
	}
	if e.m.Get("eds") != nil {
		t.Fatal("Get(eds) returned a warming cluster")
	}
	if !e.m.Has("eds") {
		t.Error("Has(eds) = false for a warming cluster; want true")
	}
	if e.m.Has("other") {
		t.Error("Has(other) = true; want false")
	}
}

// TestHasConfig checks that a configuration stops being current once CDS replaces it.
func TestHasConfig(t *testing.T) {
	e := newEnv(t, nil)
	v1 := parseCluster(t, staticYAML("web", "10.0.0.1"))
	if _, err := e.m.AddOrUpdate(v1, "1"); err != nil {
		t.Fatal(err)
	}
	if !e.m.HasConfig(v1) {
		t.Fatal("HasConfig(v1) = false for the active configuration")
	}
	v2 := parseCluster(t, staticYAML("web", "10.0.0.2"))
	if _, err := e.m.AddOrUpdate(v2, "2"); err != nil {
		t.Fatal(err)
	}
	if e.m.HasConfig(v1) || !e.m.HasConfig(v2) {
		t.Errorf("after the update HasConfig(v1), HasConfig(v2) = %v, %v; want false, true", e.m.HasConfig(v1), e.m.HasConfig(v2))
	}
	e.m.Remove("web")
	if e.m.HasConfig(v2) {
		t.Error("HasConfig(v2) = true after Remove")
	}
}
