package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/legateproxy/legate/xds/xdstest"
)

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
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-xds", ADS: true})
	set := func(version string, clusters ...types.Resource) {
		t.Helper()
		xds.Set(version, map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: clusters})
	}
	set("v1", staticCluster("dynamic_a", 1))
	p := start(t, "-c", writeConfig(t, adsBootstrap("e2e-xds", xds, []string{"cds_config"})))

	waitXDS(t, xds, "dynamic_a in /clusters", func() bool {
		_, _, body := p.get("/clusters")
		return strings.HasPrefix(body, "version_info::v1\n") && strings.Contains(body, "dynamic_a::added_via_api::true")
	})

	// A bad cluster is NACKed; the last good configuration keeps serving.
	bad := staticCluster("bad", 2)
	bad.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	bad.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{}}
	set("v2", staticCluster("dynamic_a", 1), bad)
	// go-control-plane resends a rejected version, so the count may pass 1.
	waitXDS(t, xds, "the NACK to be counted", func() bool {
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
	waitXDS(t, xds, "dynamic_a removed", func() bool {
		_, _, body := p.get("/clusters")
		return strings.HasPrefix(body, "version_info::v3\n") && !strings.Contains(body, "dynamic_a::")
	})
}
