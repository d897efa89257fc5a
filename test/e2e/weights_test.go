package e2e

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/xds/xdstest"
)

// Issue 17 item 6: host weights are 1..100 (the spec's limit). A larger one is refused at load
// with its field path and NACKed over EDS with the reason; it is never clamped.

func TestHostWeightLimitAtLoad(t *testing.T) {
	for _, tc := range []struct {
		weight string
		ok     bool
	}{{"100", true}, {"101", false}, {"128", false}} {
		cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  clusters:
  - name: weighted
    load_assignment:
      cluster_name: weighted
      endpoints: [{lb_endpoints: [{load_balancing_weight: ` + tc.weight + `, endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}]}]
`
		code, _, stderr := runOnce(t, "--mode", "validate", "-c", writeConfig(t, cfg))
		want := `cluster "weighted": load_assignment.endpoints[0].lb_endpoints[0].load_balancing_weight = ` + tc.weight + `; must be in 1..100`
		switch {
		case tc.ok && code != 0:
			t.Errorf("weight %s: exit %d; want 0\n%s", tc.weight, code, stderr)
		case !tc.ok && (code == 0 || !strings.Contains(stderr, want)):
			t.Errorf("weight %s: exit %d, stderr:\n%s\nwant a failure containing %q", tc.weight, code, stderr, want)
		}
	}
}

func edsAssignment(weight uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: "weighted",
		Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			LoadBalancingWeight: wrapperspb.UInt32(weight),
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 1},
				}}},
			}},
		}}}},
	}
}

func TestHostWeightLimitOverEDS(t *testing.T) {
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-weights", ADS: true})
	eds := &clusterv3.Cluster{
		Name:                 "weighted",
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
	}
	set := func(version string, weight uint32) {
		xds.Set(version, map[resourcev3.Type][]types.Resource{
			resourcev3.ClusterType:  {eds},
			resourcev3.EndpointType: {edsAssignment(weight)},
		})
	}
	set("v1", 100)
	p := start(t, "-c", writeConfig(t, adsBootstrap("e2e-weights", xds, []string{"cds_config"})))
	waitXDS(t, xds, "weighted::127.0.0.1:1::weight::100 in /clusters", func() bool {
		_, _, body := p.get("/clusters")
		return strings.Contains(body, "weighted::127.0.0.1:1::weight::100")
	})

	set("v2", 200)
	const want = "load_balancing_weight = 200; must be in 1..100"
	waitXDS(t, xds, "an EDS NACK containing "+want, func() bool {
		for _, r := range xds.Requests() {
			if r.GetTypeUrl() == resourcev3.EndpointType && strings.Contains(r.GetErrorDetail().GetMessage(), want) {
				return true
			}
		}
		return false
	})
	if _, _, body := p.get("/clusters"); !strings.Contains(body, "weighted::127.0.0.1:1::weight::100") {
		t.Errorf("after the NACK the host's weight changed; /clusters:\n%s", body)
	}
	if v, _ := p.stat("cluster.weighted.update_rejected"); v == 0 {
		t.Errorf("cluster.weighted.update_rejected = 0; want the NACKed assignment counted")
	}
}
