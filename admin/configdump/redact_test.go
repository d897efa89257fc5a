package configdump_test

import (
	"testing"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/admin/configdump"
)

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func inlineString(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}

func inlineBytes(b string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(b)}}
}

func filename(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: s}}
}

// tlsCluster is a cluster whose transport socket carries an inline key.
func tlsCluster(t testing.TB, key *corev3.DataSource) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name: "backend",
		TransportSocket: &corev3.TransportSocket{
			Name: "envoy.transport_sockets.tls",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &tlsv3.UpstreamTlsContext{
				Sni: "backend.example.com",
				CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{
					CertificateChain: filename("/certs/client.pem"),
					PrivateKey:       key,
					Password:         inlineString("hunter2"),
				}}},
			})},
		},
	}
}

func TestRedactBootstrap(t *testing.T) {
	bootstrap := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: "n"},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{tlsCluster(t, inlineString("-----BEGIN PRIVATE KEY-----"))},
			Secrets: []*tlsv3.Secret{
				{Name: "server_cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
					CertificateChain: filename("/certs/cert.pem"),
					PrivateKey:       inlineBytes("key bytes"),
				}}},
				{Name: "tickets", Type: &tlsv3.Secret_SessionTicketKeys{SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{
					Keys: []*corev3.DataSource{inlineBytes("k1"), filename("/k2")},
				}}},
				{Name: "generic", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
					Secret:  inlineString("s"),
					Secrets: map[string]*corev3.DataSource{"a": inlineString("x"), "b": filename("/y")},
				}}},
			},
		},
	}
	want := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: "n"},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{{
				Name: "backend",
				TransportSocket: &corev3.TransportSocket{
					Name: "envoy.transport_sockets.tls",
					ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &tlsv3.UpstreamTlsContext{
						Sni: "backend.example.com",
						CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{
							CertificateChain: filename("/certs/client.pem"),
							PrivateKey:       inlineString("[redacted]"),
							Password:         inlineString("[redacted]"),
						}}},
					})},
				},
			}},
			Secrets: []*tlsv3.Secret{
				{Name: "server_cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
					CertificateChain: filename("/certs/cert.pem"),
					PrivateKey:       inlineBytes("[redacted]"),
				}}},
				{Name: "tickets", Type: &tlsv3.Secret_SessionTicketKeys{SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{
					Keys: []*corev3.DataSource{inlineBytes("[redacted]"), filename("[redacted]")},
				}}},
				{Name: "generic", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
					Secret:  inlineString("[redacted]"),
					Secrets: map[string]*corev3.DataSource{"a": inlineString("[redacted]"), "b": filename("[redacted]")},
				}}},
			},
		},
	}
	configdump.Redact(bootstrap)
	if diff := cmp.Diff(want, bootstrap, protocmp.Transform()); diff != "" {
		t.Errorf("Redact() mismatch (-want +got):\n%s", diff)
	}
}

func TestRedact(t *testing.T) {
	typedStruct := func(t testing.TB, fields map[string]any) *xdstypev3.TypedStruct {
		s, err := structpb.NewStruct(fields)
		if err != nil {
			t.Fatal(err)
		}
		return &xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.TlsCertificate", Value: s}
	}
	tests := []struct {
		name string
		in   proto.Message
		want proto.Message
	}{
		{
			name: "nothing sensitive is unchanged",
			in:   &corev3.Node{Id: "n", Cluster: "c"},
			want: &corev3.Node{Id: "n", Cluster: "c"},
		},
		{
			name: "unset sensitive field stays unset",
			in:   &tlsv3.TlsCertificate{CertificateChain: filename("/c")},
			want: &tlsv3.TlsCertificate{CertificateChain: filename("/c")},
		},
		{
			name: "any of unknown type is left alone",
			in:   &corev3.TransportSocket{ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type", Value: []byte{1, 2}}}},
			want: &corev3.TransportSocket{ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type", Value: []byte{1, 2}}}},
		},
		{
			name: "typed struct of known type",
			in:   typedStruct(t, map[string]any{"private_key": map[string]any{"inline_string": "secret"}, "certificate_chain": map[string]any{"filename": "/c"}}),
			want: typedStruct(t, map[string]any{"private_key": map[string]any{"inline_string": "[redacted]"}, "certificate_chain": map[string]any{"filename": "/c"}}),
		},
		{
			name: "typed struct inside any",
			in:   mustAny(t, typedStruct(t, map[string]any{"password": map[string]any{"inline_bytes": "aGk="}})),
			want: mustAny(t, typedStruct(t, map[string]any{"password": map[string]any{"inline_bytes": "W3JlZGFjdGVkXQ=="}})),
		},
		{
			name: "environment variable source",
			in:   &tlsv3.TlsCertificate{PrivateKey: &corev3.DataSource{Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "KEY"}}},
			want: &tlsv3.TlsCertificate{PrivateKey: &corev3.DataSource{Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "[redacted]"}}},
		},
		{
			name: "everything under a sensitive any",
			in: &tlsv3.PrivateKeyProvider{
				ProviderName: "p",
				ConfigType: &tlsv3.PrivateKeyProvider_TypedConfig{TypedConfig: mustAny(t, &corev3.SocketAddress{
					Protocol:      corev3.SocketAddress_UDP,
					Address:       "10.0.0.1",
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 5},
					Ipv4Compat:    true,
				})},
				Fallback: true,
			},
			want: &tlsv3.PrivateKeyProvider{
				ProviderName: "p",
				ConfigType:   &tlsv3.PrivateKeyProvider_TypedConfig{TypedConfig: mustAny(t, &corev3.SocketAddress{Address: "[redacted]"})},
				Fallback:     true,
			},
		},
		{
			name: "nil message",
			in:   nil,
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			configdump.Redact(tc.in)
			if diff := cmp.Diff(tc.want, tc.in, protocmp.Transform()); diff != "" {
				t.Errorf("Redact() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
