package config

import (
	"os"
	"testing"

	"github.com/legateproxy/legate/bootstrap"
)

// FuzzFromBootstrap runs FromBootstrap on every bootstrap the parser accepts: it must not panic,
// and a success must describe the same clusters and listeners as the proto.
func FuzzFromBootstrap(f *testing.F) {
	data, err := os.ReadFile("testdata/good.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, uint16(0))
	f.Add([]byte("stats_flush_interval: 1s\nstats_flush_on_admin: true"), uint16(0))
	f.Add([]byte(webCluster("lb_policy: RING_HASH", "ring_hash_lb_config: {minimum_ring_size: 10, maximum_ring_size: 5}")), uint16(3))
	f.Add([]byte(webCluster("load_balancing_policy: {policies: [{typed_extension_config: {name: m, typed_config: {'@type': type.googleapis.com/envoy.extensions.load_balancing_policies.maglev.v3.Maglev, table_size: 131}}}]}")), uint16(0))
	f.Add([]byte("tracing: {}\nwatchdogs: {}\n"+webCluster("track_cluster_stats: {}", "preconnect_policy: {}")), uint16(0))
	for _, tc := range refusedCases {
		f.Add([]byte(tc.yaml), uint16(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxNameLen uint16) {
		l, err := bootstrap.Parse(data, bootstrap.FormatYAML, bootstrap.Options{})
		if err != nil {
			return
		}
		b, err := FromBootstrap(l.Bootstrap, Limits{MaxObjNameLen: int(maxNameLen)})
		if err != nil {
			return
		}
		if got, want := len(b.ClusterNames), len(l.Bootstrap.GetStaticResources().GetClusters()); got != want {
			t.Fatalf("len(ClusterNames) = %d; want %d", got, want)
		}
		if got, want := len(b.ListenerNames), len(l.Bootstrap.GetStaticResources().GetListeners()); got != want {
			t.Fatalf("len(ListenerNames) = %d; want %d", got, want)
		}
		if a := b.Admin; a != nil && (a.ProfilePath == "" || a.Address == "") {
			t.Fatalf("Admin = %+v; want an address and a profile path", *a)
		}
	})
}
