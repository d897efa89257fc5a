package resource

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	internalupstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

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
