package admin

import (
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
)

var updateClusters = flag.Bool("update", false, "rewrite testdata golden files")

func clusterConfig(t testing.TB, y string) *config.Cluster {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return clusterConfigJSON(t, j)
}

// clusterConfigJSON decodes a v3 Cluster from JSON and converts it to config.
func clusterConfigJSON(t testing.TB, j []byte) *config.Cluster {
	t.Helper()
	var pc clusterv3.Cluster
	if err := protojson.Unmarshal(j, &pc); err != nil {
		t.Fatal(err)
	}
	c, err := config.ClusterFromProto(&pc, config.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newManager returns a cluster manager without clusters over a fresh stats store.
func newManager(t testing.TB) *cluster.Manager {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// clustersFixture builds a manager with a static cluster, a static cluster with outlier
// detection, alt_stat_name, localities, canary metadata and high-priority thresholds, and an
// EDS cluster with a service name and EDS health statuses.
func clustersFixture(t testing.TB) *cluster.Manager {
	t.Helper()
	m := newManager(t)
	err := m.AddStatic([]*config.Cluster{
		clusterConfig(t, `
name: service_a
load_assignment:
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 8080}}}
`),
		clusterConfig(t, `
name: "svc:b"
alt_stat_name: svc_b_stats
outlier_detection: {}
circuit_breakers:
  thresholds:
  - {priority: HIGH, max_connections: 10, max_retries: 1}
load_assignment:
  endpoints:
  - locality: {region: eu, zone: eu-1a, sub_zone: rack1}
    lb_endpoints:
    - endpoint:
        address: {socket_address: {address: "::1", port_value: 9000}}
        hostname: b1.example
      load_balancing_weight: 3
      metadata: {filter_metadata: {envoy.lb: {canary: true}}}
  - priority: 1
    lb_endpoints:
    - endpoint: {address: {socket_address: {address: 10.0.0.2, port_value: 0}}}
`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddOrUpdate(clusterConfig(t, "name: eds_cluster\ntype: EDS\neds_cluster_config: {service_name: eds_service_x}"), "3"); err != nil {
		t.Fatal(err)
	}
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := protojson.Unmarshal([]byte(`{"cluster_name":"eds_service_x","endpoints":[{"lb_endpoints":[
		{"endpoint":{"address":{"socket_address":{"address":"10.1.0.1","port_value":80}}},"health_status":"UNHEALTHY"},
		{"endpoint":{"address":{"socket_address":{"address":"10.1.0.2","port_value":80}}},"health_status":"DRAINING"},
		{"endpoint":{"address":{"socket_address":{"address":"10.1.0.3","port_value":80}}},"health_status":"DEGRADED"}]}]}`), cla); err != nil {
		t.Fatal(err)
	}
	if err := m.Warming()[0].ApplyAssignment(cla); err != nil {
		t.Fatal(err)
	}
	m.SetVersionInfo("3")
	c := m.Get("service_a")
	h := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	hs := c.Snapshot().HostStats(h)
	hs.CxTotal.Add(2)
	hs.AddRq(cluster.HostRq{Total: 5, Success: 5, Active: 1})
	return m
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateClusters {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

func serveClusters(t testing.TB, src ClusterSource, query string) *httptest.ResponseRecorder {
	t.Helper()
	e := ClustersEndpoint(src)
	r := httptest.NewRequest("GET", "/clusters?"+query, nil)
	w := httptest.NewRecorder()
	e.Handle(w, r, ParseQuery(query))
	return w
}

func TestClustersText(t *testing.T) {
	m := clustersFixture(t)
	for _, q := range []string{"", "format=text", "format=JSON"} {
		t.Run("query "+q, func(t *testing.T) {
			golden(t, "clusters.golden", serveClusters(t, m, q).Body.Bytes())
		})
	}
	body := serveClusters(t, m, "").Body.String()
	for _, want := range []string{
		"version_info::3\n",
		"eds_cluster::10.1.0.1:80::healthy::/failed_eds_health\n",
		"service_a::10.0.0.1:8080::healthy::healthy\n",
		"svc:b::observability_name::svc_b_stats\n",
		"svc:b::outlier::success_rate_average::-1\n",
		"svc:b::high_priority::max_connections::10\n",
		"eds_cluster::eds_service_name::eds_service_x\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/clusters lacks %q", want)
		}
	}
}

func TestClustersJSON(t *testing.T) {
	m := clustersFixture(t)
	w := serveClusters(t, m, "format=json")
	if got := w.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q; want application/json", got)
	}
	golden(t, "clusters_json.golden", w.Body.Bytes())
	var got adminv3.Clusters
	if err := (protojson.UnmarshalOptions{}).Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("strict decode into adminv3.Clusters: %v", err)
	}
	if n := len(got.GetClusterStatuses()); n != 3 {
		t.Fatalf("cluster_statuses = %d; want 3", n)
	}
	// Streaming must print exactly what printing the whole message prints.
	if diff := cmp.Diff(pbjsonClusters(t, m), w.Body.String()); diff != "" {
		t.Errorf("streamed JSON differs from the whole message (-whole +streamed):\n%s", diff)
	}
}

func TestClustersEmpty(t *testing.T) {
	m := newManager(t)
	if got := serveClusters(t, m, "format=json").Body.String(); got != "{}\n" {
		t.Errorf("empty JSON = %q; want %q", got, "{}\n")
	}
	if got := serveClusters(t, m, "").Body.String(); got != "version_info::static\n" {
		t.Errorf("empty text = %q; want %q", got, "version_info::static\n")
	}
}

// BenchmarkClustersText10k renders /clusters over 10,000 STATIC clusters of 10 hosts.
func BenchmarkClustersText10k(b *testing.B) {
	m := bigManager(b)
	b.ResetTimer()
	for range b.N {
		var w countWriter
		writeClustersText(&w, m)
		b.SetBytes(int64(w))
	}
}

// BenchmarkClustersJSON10k renders /clusters?format=json over the same clusters.
func BenchmarkClustersJSON10k(b *testing.B) {
	m := bigManager(b)
	b.ResetTimer()
	for range b.N {
		var w countWriter
		writeClustersJSON(&w, m)
		b.SetBytes(int64(w))
	}
}

func bigManager(b *testing.B) *cluster.Manager {
	m := newManager(b)
	var cfgs []*config.Cluster
	for i := range 10000 {
		y := fmt.Sprintf("name: cluster_%05d\nload_assignment:\n  endpoints:\n  - lb_endpoints:\n", i)
		for j := range 10 {
			y += fmt.Sprintf("    - endpoint: {address: {socket_address: {address: 10.%d.%d.%d, port_value: 80}}}\n", i/256, i%256, j+1)
		}
		cfgs = append(cfgs, clusterConfig(b, y))
	}
	if err := m.AddStatic(cfgs); err != nil {
		b.Fatal(err)
	}
	return m
}

// countWriter discards what it is given, as a streaming client would consume it.
type countWriter int

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }
