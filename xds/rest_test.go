package xds

import (
	"context"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestRESTNewNamesAtSameVersion: names added to a REST subscription are fetched although the
// type's version did not move. go-control-plane's REST gateway answers 304 to a poll whose
// version_info is current, so a poll for the new names that carried the version held for the
// old ones would never get them (its e2e suite's scoped route configurations, named after RDS
// had fetched the others, never arrived).
func TestRESTNewNamesAtSameVersion(t *testing.T) {
	cp := newControlPlane(t, false)
	src := &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType:             corev3.ApiConfigSource_REST,
			TransportApiVersion: corev3.ApiVersion_V3,
			ClusterNames:        []string{"xds"},
			RefreshDelay:        durationpb.New(20 * time.Millisecond),
		}},
	}
	endpoints := []types.Resource{assignment("web-svc", "10.0.0.1:80"), assignment("api-svc", "10.0.0.2:80")}
	setTyped := func(clusterVersion string, clusters ...types.Resource) {
		t.Helper()
		var snap cachev3.Snapshot
		snap.Resources[types.Cluster] = cachev3.NewResources(clusterVersion, clusters)
		snap.Resources[types.Endpoint] = cachev3.NewResources("e1", endpoints) // never moves
		if err := cp.Cache.SetSnapshot(context.Background(), testNode, &snap); err != nil {
			t.Fatal(err)
		}
	}
	p := startProxy(t, &bootstrapv3.Bootstrap_DynamicResources{CdsConfig: src}, withDial(cp))
	setTyped("c1", edsCluster("web", "web-svc", src))
	p.waitFor("web", p.hasHosts("web", "10.0.0.1:80"))

	setTyped("c2", edsCluster("web", "web-svc", src), edsCluster("api", "api-svc", src))
	p.waitFor("api's endpoints at the unchanged EDS version", p.hasHosts("api", "10.0.0.2:80"))
	for _, r := range cp.Requests() {
		if r.GetTypeUrl() == resourcev3.EndpointType && len(r.GetResourceNames()) == 2 && r.GetVersionInfo() == "" {
			return
		}
	}
	t.Errorf("no EDS poll for both names without version_info")
}
