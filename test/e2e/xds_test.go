package e2e

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	clustersvc "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// managementServer runs go-control-plane's real ADS/CDS server on 127.0.0.1.
func managementServer(t *testing.T) (cachev3.SnapshotCache, string, chan *discoveryv3.DiscoveryRequest) {
	t.Helper()
	snapshots := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	requests := make(chan *discoveryv3.DiscoveryRequest, 256)
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, snapshots, serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
			select {
			case requests <- r:
			default:
			}
			return nil
		},
	})
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	clustersvc.RegisterClusterDiscoveryServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(func() {
		gs.Stop()
		cancel()
	})
	return snapshots, lis.Addr().String(), requests
}

func staticCluster(name string, port uint32) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
					}}},
				}},
			}}}},
		},
	}
}

func TestXDSClustersOverADS(t *testing.T) {
	snapshots, addr, requests := managementServer(t)
	host, port, _ := net.SplitHostPort(addr)
	cfg := `` + adsHeader("e2e-xds", "cds_config") + `static_resources:
  clusters:
` + xdsCluster(host, port) + ``
	set := func(version string, clusters ...types.Resource) {
		t.Helper()
		snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: clusters})
		if err != nil {
			t.Fatal(err)
		}
		if err := snapshots.SetSnapshot(context.Background(), "e2e-xds", snap); err != nil {
			t.Fatal(err)
		}
	}
	set("v1", staticCluster("dynamic_a", 1))
	p := start(t, "-c", writeConfig(t, cfg))

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			select {
			case <-requests:
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitFor("dynamic_a in /clusters", func() bool {
		_, _, body := p.get("/clusters")
		return strings.HasPrefix(body, "version_info::v1\n") && strings.Contains(body, "dynamic_a::added_via_api::true")
	})

	// A bad cluster is NACKed; the last good configuration keeps serving.
	bad := staticCluster("bad", 2)
	bad.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	bad.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{}}
	set("v2", staticCluster("dynamic_a", 1), bad)
	// go-control-plane resends a rejected version, so the count may pass 1.
	waitFor("the NACK to be counted", func() bool {
		_, _, body := p.get("/stats?filter=^cluster_manager.cds.update_rejected$")
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(body, "cluster_manager.cds.update_rejected: ")))
		return err == nil && n >= 1
	})
	_, _, body := p.get("/clusters")
	if !strings.Contains(body, "dynamic_a::added_via_api::true") || strings.Contains(body, "\nbad::") {
		t.Errorf("after the NACK /clusters =\n%s", body)
	}
	_, _, dump := p.get("/config_dump?resource=dynamic_active_clusters")
	var d adminv3.ConfigDump
	strict(t, dump, &d)
	if !strings.Contains(dump, "dynamic_a") {
		t.Errorf("dynamic_active_clusters lacks dynamic_a:\n%s", dump)
	}

	// Removal.
	set("v3")
	waitFor("dynamic_a removed", func() bool {
		_, _, body := p.get("/clusters")
		return strings.HasPrefix(body, "version_info::v3\n") && !strings.Contains(body, "dynamic_a::")
	})
}

// adsHeader starts a bootstrap that takes subscription ("lds_config" or
// "cds_config") over ADS from the bootstrap cluster named xds.
func adsHeader(node, subscription string) string {
	return `
node: {id: ` + node + `, cluster: e2e}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{envoy_grpc: {cluster_name: xds}}]
  ` + subscription + `: {ads: {}, resource_api_version: V3}
`
}

// xdsCluster is the static_resources.clusters entry for the management
// server at host:port, spoken to over HTTP/2.
func xdsCluster(host, port string) string {
	return `  - name: xds
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: xds
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: ` + host + `, port_value: ` + port + `}}}}]}]
`
}
