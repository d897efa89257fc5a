package cds

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	internalupstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

func edsCluster(name string, src *corev3.ConfigSource) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: src, ServiceName: "svc"},
	}
}

func TestDecodeCluster(t *testing.T) {
	good := edsCluster("web", adsSource())
	rc, err := DecodeCluster(mustAny(t, good), config.Limits{})
	if err != nil {
		t.Fatalf("DecodeCluster(good) error: %v", err)
	}
	if rc.Name != "web" || rc.EDS == nil || !rc.EDS.ADS || rc.EDS.InitialFetchTimeout != resource.DefaultInitialFetchTimeout {
		t.Errorf("DecodeCluster(good) = name %q, eds %+v; want web over ADS with the default timeout", rc.Name, rc.EDS)
	}

	tests := []struct {
		name string
		in   func(t *testing.T) *anypb.Any
		want string
	}{
		{"nil", func(*testing.T) *anypb.Any { return nil }, "cluster: resource is empty"},
		{"wrong type", func(t *testing.T) *anypb.Any { return mustAny(t, &endpointv3.ClusterLoadAssignment{ClusterName: "x"}) },
			`type_url = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"; want "type.googleapis.com/envoy.config.cluster.v3.Cluster"`},
		{"v2 type", func(*testing.T) *anypb.Any {
			return &anypb.Any{TypeUrl: "type.googleapis.com/envoy.api.v2.Cluster"}
		}, "only the v3 API is supported"},
		{"garbage", func(*testing.T) *anypb.Any { return &anypb.Any{TypeUrl: watch.ClusterType, Value: []byte{0xff, 0xff}} }, "cannot decode"},
		{"pgv", func(t *testing.T) *anypb.Any {
			c := edsCluster("web", adsSource())
			c.ConnectTimeout = durationpb.New(-time.Second)
			return mustAny(t, c)
		}, `cluster "web": invalid Cluster.ConnectTimeout`},
		{"legate rule", func(t *testing.T) *anypb.Any {
			c := edsCluster(strings.Repeat("n", 61), adsSource())
			return mustAny(t, c)
		}, "nnn"},
		{"eds without source", func(t *testing.T) *anypb.Any { return mustAny(t, edsCluster("web", nil)) },
			`cluster "web": eds_cluster_config.eds_config is not set`},
		{"eds v2 source", func(t *testing.T) *anypb.Any {
			src := adsSource()
			src.ResourceApiVersion = corev3.ApiVersion_V2
			return mustAny(t, edsCluster("web", src))
		}, `cluster "web": eds_cluster_config.eds_config.resource_api_version = V2; only V3 is supported`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCluster(tc.in(t), config.Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeCluster() error = %v; want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeEndpoints(t *testing.T) {
	cla := &endpointv3.ClusterLoadAssignment{
		ClusterName: "svc",
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{Zone: "z"},
			Priority:            1,
			LoadBalancingWeight: wrapperspb.UInt32(5),
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HealthStatus: corev3.HealthStatus_DRAINING,
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80},
					}}},
				}},
			}},
		}},
		Policy: &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(200)},
	}
	e, err := DecodeEndpoints(mustAny(t, cla))
	if err != nil {
		t.Fatalf("DecodeEndpoints error: %v", err)
	}
	got := struct {
		Name       string
		Factor     uint32
		Priority   uint32
		Weight     uint32
		Localities int
	}{e.Name, e.Assignment.OverprovisioningFactor, e.Assignment.Localities[0].Priority, e.Assignment.Localities[0].Weight, len(e.Assignment.Localities)}
	want := got
	want.Name, want.Factor, want.Priority, want.Weight, want.Localities = "svc", 200, 1, 5, 1
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("assignment (-want +got):\n%s", diff)
	}

	tests := []struct {
		name string
		in   *anypb.Any
		want string
	}{
		{"empty name", mustAny(t, &endpointv3.ClusterLoadAssignment{}), `cluster_load_assignment "": invalid ClusterLoadAssignment.ClusterName`},
		{"zero factor", mustAny(t, &endpointv3.ClusterLoadAssignment{ClusterName: "svc", Policy: &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(0)}}),
			`cluster_load_assignment "svc": `},
		{"wrong type", mustAny(t, edsCluster("x", adsSource())), "want \"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEndpoints(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeEndpoints() error = %v; want one containing %q", err, tc.want)
			}
		})
	}
}

func FuzzDecodeCluster(f *testing.F) {
	seed, _ := proto.Marshal(edsCluster("web", adsSource()))
	f.Add(seed)
	f.Add([]byte{0x0a, 0x01, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		rc, err := DecodeCluster(&anypb.Any{TypeUrl: watch.ClusterType, Value: data}, config.Limits{})
		if err == nil && (rc == nil || rc.Config == nil || rc.Name != rc.Config.Name) {
			t.Errorf("DecodeCluster succeeded with %+v", rc)
		}
		_ = ClusterName(&anypb.Any{TypeUrl: watch.ClusterType, Value: data})
	})
}

func FuzzDecodeEndpoints(f *testing.F) {
	f.Add([]byte{0x0a, 0x03, 's', 'v', 'c'})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEndpoints(&anypb.Any{TypeUrl: watch.EndpointType, Value: data})
		if err == nil && (e == nil || e.Name == "") {
			t.Errorf("DecodeEndpoints succeeded with %+v", e)
		}
	})
}

// TestUpstreamSecretsThroughInternalUpstream: the SDS secrets of a TLS socket wrapped in
// envoy.transport_sockets.internal_upstream are the cluster's dependencies, as unwrapped.
func TestUpstreamSecretsThroughInternalUpstream(t *testing.T) {
	tc, err := anypb.New(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "client-cert", SdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	iu, err := anypb.New(&internalupstreamv3.InternalUpstreamTransport{TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}})
	if err != nil {
		t.Fatal(err)
	}
	deps, err := UpstreamSecretDependencies("transport_socket", &corev3.TransportSocket{Name: "envoy.transport_sockets.internal_upstream", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: iu}})
	if err != nil || len(deps) != 1 || deps[0].Name != "client-cert" {
		t.Fatalf("dependencies = %+v, %v; want the wrapped socket's secret client-cert", deps, err)
	}
}
