package tlsutil

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	internalupstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	upppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"

	"github.com/legateproxy/legate/internal/proxyproto"
)

// MetadataSource is one internal_upstream passthrough_metadata entry: the namespace of the
// host's or the cluster's metadata passed to the internal listener's connection.
type MetadataSource struct {
	Host      bool // the host's (endpoint's) metadata; else the cluster's
	Namespace string
}

// Wrappers is what the wrapping upstream transport sockets of a cluster's socket add around
// the TLS or raw socket they hold: envoy.transport_sockets.proxy_protocol's header and
// envoy.transport_sockets.internal_upstream's passed-through metadata.
type Wrappers struct {
	ProxyProtocol *proxyproto.Upstream // nil: no PROXY header
	Passthrough   []MetadataSource
}

// WrappersOf reads the wrappers of a cluster's transport_socket (either may wrap the other);
// path names the field. Fields Legate does not implement are refused with their path.
func WrappersOf(path string, ts *corev3.TransportSocket) (Wrappers, error) {
	var w Wrappers
	for a := ts.GetTypedConfig(); a != nil; a = ts.GetTypedConfig() {
		var iu internalupstreamv3.InternalUpstreamTransport
		var pp upppv3.ProxyProtocolUpstreamTransport
		switch {
		case a.MessageIs(&iu):
			if err := a.UnmarshalTo(&iu); err != nil {
				return w, fmt.Errorf("%s.typed_config: %w", path, err)
			}
			for i, src := range iu.GetPassthroughMetadata() {
				m, err := metadataSource(fmt.Sprintf("%s.typed_config.passthrough_metadata[%d]", path, i), src)
				if err != nil {
					return w, err
				}
				w.Passthrough = append(w.Passthrough, m)
			}
			ts, path = iu.GetTransportSocket(), path+".typed_config.transport_socket"
		case a.MessageIs(&pp):
			if err := a.UnmarshalTo(&pp); err != nil {
				return w, fmt.Errorf("%s.typed_config: %w", path, err)
			}
			u, err := proxyproto.UpstreamFromProto(path+".typed_config", &pp)
			if err != nil {
				return w, err
			}
			w.ProxyProtocol = u
			ts, path = pp.GetTransportSocket(), path+".typed_config.transport_socket"
		default:
			return w, nil
		}
	}
	return w, nil
}

func metadataSource(path string, src *internalupstreamv3.InternalUpstreamTransport_MetadataValueSource) (MetadataSource, error) {
	if src.GetName() == "" {
		return MetadataSource{}, fmt.Errorf("%s.name: required", path)
	}
	switch k := src.GetKind(); {
	case k.GetHost() != nil:
		return MetadataSource{Host: true, Namespace: src.GetName()}, nil
	case k.GetCluster() != nil:
		return MetadataSource{Namespace: src.GetName()}, nil
	case k == nil || k.GetKind() == nil:
		return MetadataSource{}, fmt.Errorf("%s.kind: required", path)
	}
	return MetadataSource{}, fmt.Errorf("%s.kind: only host and cluster metadata can be passed to an internal listener", path)
}
