package pbjson_test

import (
	"encoding/json"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/internal/pbjson"
)

// checkRoundTrip prints m in both modes, decodes each output strictly with
// protojson into a fresh message, and compares it with m.
func checkRoundTrip(t *testing.T, m proto.Message) {
	t.Helper()
	for _, mode := range []pbjson.Mode{pbjson.OmitDefaults, pbjson.AllFields} {
		out, err := pbjson.Marshal(m, mode)
		if err != nil {
			t.Fatalf("Marshal(mode %d) error: %v", mode, err)
		}
		got := m.ProtoReflect().New().Interface()
		if err := (protojson.UnmarshalOptions{}).Unmarshal(out, got); err != nil {
			t.Fatalf("protojson.Unmarshal(Marshal(mode %d)) error: %v\n%s", mode, err, out)
		}
		if diff := cmp.Diff(m, got, protocmp.Transform(), cmpopts.EquateNaNs()); diff != "" {
			t.Errorf("round trip (mode %d) mismatch (-want +got):\n%s", mode, diff)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	cluster := &clusterv3.Cluster{
		Name:                          "service_a",
		ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		ConnectTimeout:                durationpb.New(250 * time.Millisecond),
		LbPolicy:                      clusterv3.Cluster_RING_HASH,
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(32768),
		Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			"envoy.lb": mustStruct(t, map[string]any{"canary": true, "weight": 0.1, "tags": []any{"a<b>", "\u2028"}}),
		}},
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0.30000000000000004}},
	}
	bootstrap := &bootstrapv3.Bootstrap{
		Node:               &corev3.Node{Id: "node1", Cluster: "c", UserAgentName: "envoy"},
		StaticResources:    &bootstrapv3.Bootstrap_StaticResources{Clusters: []*clusterv3.Cluster{cluster}},
		StatsFlushInterval: durationpb.New(5 * time.Second),
	}
	tests := []struct {
		name string
		msg  proto.Message
	}{
		{name: "server info", msg: &adminv3.ServerInfo{
			Version:            "abc/1.37.0/Clean/RELEASE/BoringSSL",
			State:              adminv3.ServerInfo_DRAINING,
			UptimeCurrentEpoch: durationpb.New(12 * time.Second),
			CommandLineOptions: &adminv3.CommandLineOptions{BaseId: 1 << 60, Concurrency: 2, StatsTag: []string{"a:b"}, Mode: adminv3.CommandLineOptions_Validate},
			Node:               bootstrap.Node,
		}},
		{name: "clusters", msg: &adminv3.Clusters{ClusterStatuses: []*adminv3.ClusterStatus{{
			Name:                         "service_a",
			AddedViaApi:                  true,
			SuccessRateEjectionThreshold: &typev3.Percent{Value: 43.2},
			HostStatuses: []*adminv3.HostStatus{{
				Address:      &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0}}}},
				Stats:        []*adminv3.SimpleMetric{{Type: adminv3.SimpleMetric_COUNTER, Value: 1 << 62, Name: "cx_total"}},
				HealthStatus: &adminv3.HostHealthStatus{EdsHealthStatus: corev3.HealthStatus_DEGRADED},
				Weight:       1,
				Locality:     &corev3.Locality{},
			}},
		}}}},
		{name: "config dump with bootstrap", msg: &adminv3.ConfigDump{Configs: []*anypb.Any{
			mustAny(t, &adminv3.BootstrapConfigDump{Bootstrap: bootstrap, LastUpdated: ts(t, "2025-01-01T00:00:00.123Z")}),
			mustAny(t, &adminv3.ClustersConfigDump{StaticClusters: []*adminv3.ClustersConfigDump_StaticCluster{{Cluster: mustAny(t, cluster)}}}),
			mustAny(t, &adminv3.ListenersConfigDump{}),
		}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkRoundTrip(t, tc.msg) })
	}
}

// fuzzTypes are the messages the fuzzer decodes its input into.
var fuzzTypes = []func() proto.Message{
	func() proto.Message { return &adminv3.ServerInfo{} },
	func() proto.Message { return &adminv3.Clusters{} },
	func() proto.Message { return &clusterv3.Cluster{} },
	func() proto.Message { return &structpb.Struct{} },
}

// FuzzRoundTrip decodes fuzz bytes into a message, prints it, and checks
// that the output is JSON that protojson decodes strictly back into the same
// message, and that printing is deterministic. Messages that cannot be
// printed (an Any of an unknown type, a Duration out of range, a NaN Value)
// are skipped: those errors are the printer's documented behaviour.
func FuzzRoundTrip(f *testing.F) {
	seed := func(which uint8, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(which, b)
	}
	seed(0, &adminv3.ServerInfo{Version: "v", CommandLineOptions: &adminv3.CommandLineOptions{Concurrency: 1}})
	seed(1, &adminv3.Clusters{ClusterStatuses: []*adminv3.ClusterStatus{{Name: "x<y>"}}})
	seed(2, &clusterv3.Cluster{Name: "c", ConnectTimeout: durationpb.New(time.Second)})
	seed(3, mustStruct(f, map[string]any{"a": []any{1.5, "s", nil, true}}))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		m := fuzzTypes[int(which)%len(fuzzTypes)]()
		if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, m); err != nil {
			return
		}
		out, err := pbjson.Marshal(m, pbjson.OmitDefaults)
		if err != nil {
			return
		}
		if !json.Valid(out) && !(len(out) == 1 && out[0] == '\n') {
			t.Fatalf("Marshal() output is not JSON:\n%s", out)
		}
		again, err := pbjson.Marshal(m, pbjson.OmitDefaults)
		if err != nil || string(again) != string(out) {
			t.Fatalf("Marshal() not deterministic: %v\n%s\n%s", err, out, again)
		}
		got := m.ProtoReflect().New().Interface()
		if err := (protojson.UnmarshalOptions{}).Unmarshal(out, got); err != nil {
			t.Fatalf("protojson.Unmarshal() error: %v\n%s", err, out)
		}
		want := proto.Clone(m)
		dropEmptyValues(want.ProtoReflect())
		if diff := cmp.Diff(want, got, protocmp.Transform(), cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s\n%s", diff, out)
		}
	})
}

// dropEmptyValues removes the google.protobuf.Value messages that hold no
// kind, which the JSON form cannot carry (protobuf C++ drops them too).
func dropEmptyValues(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		isValue := fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value"
		switch {
		case fd.IsMap():
			mp := v.Map()
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Message() == nil {
					return true
				}
				if fd.MapValue().Message().FullName() == "google.protobuf.Value" && isEmptyMsg(mv.Message()) {
					mp.Clear(k)
					return true
				}
				dropEmptyValues(mv.Message())
				return true
			})
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			kept := 0
			for i := range l.Len() {
				e := l.Get(i)
				if isValue && isEmptyMsg(e.Message()) {
					continue
				}
				dropEmptyValues(e.Message())
				l.Set(kept, e)
				kept++
			}
			l.Truncate(kept)
		case fd.Message() != nil:
			if isValue && isEmptyMsg(v.Message()) {
				m.Clear(fd)
				return true
			}
			dropEmptyValues(v.Message())
		}
		return true
	})
}

func isEmptyMsg(m protoreflect.Message) bool {
	empty := true
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		empty = false
		return false
	})
	return empty
}
