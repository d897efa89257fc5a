package pbjson_test

import (
	"fmt"
	"io"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/internal/pbjson"
)

// benchDump is a ClustersConfigDump of n static clusters with one endpoint
// each, packed in a ConfigDump.
func benchDump(b *testing.B, n int) *adminv3.ConfigDump {
	d := &adminv3.ClustersConfigDump{VersionInfo: "v1"}
	for i := range n {
		c := &clusterv3.Cluster{
			Name:                 fmt.Sprintf("cluster_%04d", i),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			ConnectTimeout:       durationpb.New(250 * time.Millisecond),
			LoadAssignment: &endpointv3.ClusterLoadAssignment{
				ClusterName: fmt.Sprintf("cluster_%04d", i),
				Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
						Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
							Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
						}}},
					}},
				}}}},
			},
		}
		d.StaticClusters = append(d.StaticClusters, &adminv3.ClustersConfigDump_StaticCluster{Cluster: mustAny(b, c), LastUpdated: timestamppb.New(time.Date(2025, 1, 1, 0, 0, 0, 120e6, time.UTC))})
	}
	return &adminv3.ConfigDump{Configs: []*anypb.Any{mustAny(b, d)}}
}

func BenchmarkWrite(b *testing.B) {
	dump := benchDump(b, 1000)
	out, err := pbjson.Marshal(dump, pbjson.OmitDefaults)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("pbjson", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		for b.Loop() {
			if err := pbjson.Write(io.Discard, dump, pbjson.OmitDefaults); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson multiline for comparison", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		b.ReportAllocs()
		opts := protojson.MarshalOptions{Multiline: true, Indent: " ", UseProtoNames: true}
		for b.Loop() {
			if _, err := opts.Marshal(dump); err != nil {
				b.Fatal(err)
			}
		}
	})
}
