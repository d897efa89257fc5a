package lds

import (
	"strings"
	"testing"
	"time"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
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

func FuzzDecodeListener(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 'l'})
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := DecodeListener(&anypb.Any{TypeUrl: watch.ListenerType, Value: data}, nil)
		if err == nil && (l == nil || l.Config == nil || l.Name == "" || l.Name != l.Config.Name) {
			t.Errorf("DecodeListener succeeded with %+v", l)
		}
		_ = resource.ListenerName(&anypb.Any{TypeUrl: watch.ListenerType, Value: data})
	})
}

// tcpListener is an LDS listener whose one network filter has the typed_config given.
func tcpListener(tc *anypb.Any) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name: "l",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 1}}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "any name", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tc}}}}},
	}
}

// TestDecodeListenerTypedStruct: a TypedStruct delivered over xDS is opened into the message its
// type_url names, with the bootstrap loader's rules (here a Duration object), as Envoy opens it; the listener equals the one sent with the TcpProxy itself.
func TestDecodeListenerTypedStruct(t *testing.T) {
	value, err := structpb.NewStruct(map[string]any{
		"stat_prefix": "t", "cluster": "c",
		"idle_timeout": map[string]any{"seconds": 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	const tcpURL = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"
	want := mustAny(t, &tcpproxyv3.TcpProxy{StatPrefix: "t", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "c"},
		IdleTimeout: durationpb.New(5 * time.Second)})
	for _, ts := range []proto.Message{
		&udpatypev1.TypedStruct{TypeUrl: tcpURL, Value: value},
		&xdstypev3.TypedStruct{TypeUrl: tcpURL, Value: value},
	} {
		name := string(ts.ProtoReflect().Descriptor().FullName())
		t.Run(name, func(t *testing.T) {
			got, err := DecodeListener(mustAny(t, tcpListener(mustAny(t, ts))), nil)
			if err != nil {
				t.Fatalf("DecodeListener error: %v", err)
			}
			tc := got.Config.Proto.GetFilterChains()[0].GetFilters()[0].GetTypedConfig()
			var gotTCP, wantTCP tcpproxyv3.TcpProxy
			if tc.GetTypeUrl() != tcpURL || tc.UnmarshalTo(&gotTCP) != nil || want.UnmarshalTo(&wantTCP) != nil || !proto.Equal(&gotTCP, &wantTCP) {
				t.Errorf("typed_config = %v; want the TcpProxy %v", tc, &wantTCP)
			}
		})
	}
	bad, err := structpb.NewStruct(map[string]any{"stat_prefix": "t", "cluster": "c", "colour": "blue"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = DecodeListener(mustAny(t, tcpListener(mustAny(t, &udpatypev1.TypedStruct{TypeUrl: tcpURL, Value: bad}))), nil)
	if want := "filter_chains[0].filters[0].typed_config.value.colour: unknown field"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("DecodeListener error = %v; want one containing %q", err, want)
	}
}

// TestDecodeListenerNetworkFilters: with the server's registry an LDS listener's network
// filters are decoded once, as the bootstrap's are: the factory's value is there, and a
// config the filter refuses is an error naming the filter's path (the NACK's text).
func TestDecodeListenerNetworkFilters(t *testing.T) {
	ext, err := registry.Of(config.Register)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeListener(mustAny(t, tcpListener(mustAny(t, &tcpproxyv3.TcpProxy{StatPrefix: "t", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "c"}}))), ext)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := got.Config.FilterChains[0].Filters[0].Config.(*config.TCPProxy); !ok || p.Cluster != "c" {
		t.Errorf("Config = %#v; want the *config.TCPProxy of cluster c", got.Config.FilterChains[0].Filters[0].Config)
	}
	_, err = DecodeListener(mustAny(t, tcpListener(mustAny(t, &tcpproxyv3.TcpProxy{StatPrefix: "t", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "c"},
		HashPolicy: []*typev3.HashPolicy{{PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}}}}}))), ext)
	if want := `filter_chains[0].filters[0]: tcp_proxy "t": hash_policy is set`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("DecodeListener error = %v; want one containing %q", err, want)
	}
}
