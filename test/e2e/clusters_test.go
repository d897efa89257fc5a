package e2e

import (
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
)

func TestClustersEndpoint(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	_, _, text := p.get("/clusters")
	for _, want := range []string{
		"version_info::static\n",
		"backend::default_priority::max_connections::1024\n",
		"backend::127.0.0.1:1::health_flags::healthy\n",
		"backend::127.0.0.1:1::healthy::healthy\n",
		"backend::127.0.0.1:1::rq_total::0\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/clusters lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasPrefix(text, "version_info::static\n") {
		t.Errorf("/clusters does not start with the version line")
	}
	_, _, body := p.get("/clusters?format=json")
	var cs adminv3.Clusters
	strict(t, body, &cs)
	if len(cs.ClusterStatuses) != 1 || cs.ClusterStatuses[0].GetName() != "backend" {
		t.Fatalf("cluster statuses = %v", cs.ClusterStatuses)
	}
	_, _, dump := p.get("/config_dump?resource=static_clusters")
	if !strings.Contains(dump, "ClustersConfigDump.StaticCluster") || !strings.Contains(dump, "\"name\": \"backend\"") {
		t.Errorf("static clusters dump:\n%s", dump)
	}
	if _, _, stats := p.get("/stats?filter=^cluster.backend.membership_total$"); stats != "cluster.backend.membership_total: 1\n" {
		t.Errorf("membership_total = %q", stats)
	}
}
