package tlsutil

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	internalupstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	upppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/registry"
)

// The transport sockets this package implements.
const (
	TLSSocket              = "envoy.transport_sockets.tls"
	RawBufferSocket        = "envoy.transport_sockets.raw_buffer"
	InternalUpstreamSocket = "envoy.transport_sockets.internal_upstream"
)

// UpstreamSockets is the kind of upstream transport socket extensions (a cluster's
// transport_socket and transport_socket_matches): a socket package registers itself with
//
//	registry.Add(b, tlsutil.UpstreamSockets, Name, &pb.Config{}, factory)
//
// and the cluster's connections (the server's pools, health checks) and package config's
// checks convert sockets through it (Upstream).
var UpstreamSockets = registry.Kind[UpstreamSocketFactory]{Category: registry.UpstreamTransportSocket}

// UpstreamSocketFactory converts one upstream transport socket's typed_config, decoded into
// the registered message (empty when the socket has none); path names typed_config in errors.
// It returns nil for a plain-text socket. r is the registry it was found in, for a socket
// that wraps another (internal_upstream).
type UpstreamSocketFactory func(r *registry.Registry, path string, cfg proto.Message) (*UpstreamConfig, error)

// DownstreamSockets is the kind of downstream transport socket extensions (a filter chain's
// transport_socket), which the connection manager and the TCP proxy convert through
// Downstream.
var DownstreamSockets = registry.Kind[DownstreamSocketFactory]{Category: registry.DownstreamTransportSocket}

// DownstreamSocketFactory converts one downstream transport socket's typed_config, decoded
// into the registered message; nil is a plain-text socket.
type DownstreamSocketFactory func(path string, cfg proto.Message) (*DownstreamConfig, error)

// Register registers the transport sockets this package implements: TLS and raw_buffer,
// downstream and upstream, and the upstream internal_upstream and proxy_protocol sockets,
// whose wrapped socket does the TLS (WrappersOf reads what they add around it).
func Register(b *registry.Builder) {
	registry.Add(b, DownstreamSockets, TLSSocket, &tlsv3.DownstreamTlsContext{}, downstreamTLS)
	registry.Add(b, UpstreamSockets, TLSSocket, &tlsv3.UpstreamTlsContext{}, upstreamTLS)
	registry.Add(b, DownstreamSockets, RawBufferSocket, &rawbufferv3.RawBuffer{}, func(string, proto.Message) (*DownstreamConfig, error) { return nil, nil })
	registry.Add(b, UpstreamSockets, RawBufferSocket, &rawbufferv3.RawBuffer{}, func(*registry.Registry, string, proto.Message) (*UpstreamConfig, error) { return nil, nil })
	registry.Add(b, UpstreamSockets, InternalUpstreamSocket, &internalupstreamv3.InternalUpstreamTransport{}, internalUpstream)
	registry.Add(b, UpstreamSockets, proxyproto.UpstreamName, &upppv3.ProxyProtocolUpstreamTransport{}, proxyProtocolUpstream)
	for _, c := range []registry.Category{registry.DownstreamTransportSocket, registry.UpstreamTransportSocket} {
		// Names older configurations use.
		b.Alias(c, "tls", TLSSocket)
		b.Alias(c, "raw_buffer", RawBufferSocket)
	}
}

// Builtin returns a registry of Register's sockets, for a consumer built without the
// server's registry (a unit test's, a tool's).
func Builtin() *registry.Registry {
	b := registry.NewBuilder()
	Register(b)
	r, _ := b.Build()
	return r
}

func downstreamTLS(path string, cfg proto.Message) (*DownstreamConfig, error) {
	c, err := DownstreamFromProto(path, cfg.(*tlsv3.DownstreamTlsContext))
	return &c, err
}

func upstreamTLS(_ *registry.Registry, path string, cfg proto.Message) (*UpstreamConfig, error) {
	c, err := UpstreamFromProto(path, cfg.(*tlsv3.UpstreamTlsContext))
	return &c, err
}

// internalUpstream checks an internal_upstream's passthrough_metadata (which WrappersOf reads
// for the pools) and converts the socket it wraps (raw_buffer by default).
func internalUpstream(r *registry.Registry, path string, cfg proto.Message) (*UpstreamConfig, error) {
	iu := cfg.(*internalupstreamv3.InternalUpstreamTransport)
	for i, src := range iu.GetPassthroughMetadata() {
		if _, err := metadataSource(fmt.Sprintf("%s.passthrough_metadata[%d]", path, i), src); err != nil {
			return nil, err
		}
	}
	return Upstream(r, path+".transport_socket", iu.GetTransportSocket())
}

// proxyProtocolUpstream checks a proxy_protocol socket's header settings (which WrappersOf
// reads for the pools) and converts the socket it wraps (raw_buffer by default).
func proxyProtocolUpstream(r *registry.Registry, path string, cfg proto.Message) (*UpstreamConfig, error) {
	pp := cfg.(*upppv3.ProxyProtocolUpstreamTransport)
	if _, err := proxyproto.UpstreamFromProto(path, pp); err != nil {
		return nil, err
	}
	return Upstream(r, path+".transport_socket", pp.GetTransportSocket())
}

// Upstream converts a cluster's transport_socket through r's upstream socket extensions (r
// nil: Builtin's). It returns nil for a missing or plain-text socket. path names the
// transport_socket field.
func Upstream(r *registry.Registry, path string, ts *corev3.TransportSocket) (*UpstreamConfig, error) {
	if ts == nil {
		return nil, nil
	}
	if r == nil {
		r = Builtin()
	}
	f, cfg, err := find(r, UpstreamSockets, path, ts.GetName(), ts.GetTypedConfig())
	if err != nil {
		return nil, err
	}
	return f(r, path+".typed_config", cfg)
}

// Downstream converts a filter chain's transport socket, its name and typed_config, through
// r's downstream socket extensions (r nil: Builtin's). It returns nil for a plain-text socket.
// path names the transport_socket field.
func Downstream(r *registry.Registry, path, name string, tc *anypb.Any) (*DownstreamConfig, error) {
	if name == "" && tc == nil {
		return nil, nil
	}
	if r == nil {
		r = Builtin()
	}
	f, cfg, err := find(r, DownstreamSockets, path, name, tc)
	if err != nil {
		return nil, err
	}
	return f(path+".typed_config", cfg)
}

// find looks up a transport socket by its typed_config's type, else (none) by its name, and
// decodes its config.
func find[F any](r *registry.Registry, k registry.Kind[F], path, name string, tc *anypb.Any) (F, proto.Message, error) {
	u := tc.GetTypeUrl()
	f, e, ok := registry.Lookup(r, k, name, u)
	switch {
	case ok && (u == "" || e.TypeURL() == u):
		cfg, err := e.Decode(path+".typed_config", tc)
		return f, cfg, err
	case u == "":
		return f, nil, fmt.Errorf("%s.typed_config: missing for transport socket %q", path, name)
	}
	return f, nil, fmt.Errorf("%s.typed_config.@type = %q; must be %s", path, u, Implemented(r, k))
}

// Implemented lists the typed_config types of k's sockets in r, for errors.
func Implemented[F any](r *registry.Registry, k registry.Kind[F]) string {
	var names []string
	for e := range registry.All(r, k) {
		names = append(names, e.TypeName())
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ServerContextFor builds the server context of a filter chain's transport socket, its name
// and typed_config, through r's downstream sockets (r nil: Builtin's); nil for a plain-text
// chain. Errors name the field below transport_socket.
func ServerContextFor(r *registry.Registry, name string, tc *anypb.Any, deps Deps) (*ServerContext, error) {
	cfg, err := Downstream(r, "transport_socket", name, tc)
	if err != nil || cfg == nil {
		return nil, err
	}
	return NewServerContext(*cfg, deps)
}
