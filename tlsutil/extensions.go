package tlsutil

import (
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the TLS transport socket, downstream and upstream.
func Register(b *registry.Builder) {
	b.Declare(registry.DownstreamTransportSocket, "envoy.transport_sockets.tls", &tlsv3.DownstreamTlsContext{})
	b.Declare(registry.UpstreamTransportSocket, "envoy.transport_sockets.tls", &tlsv3.UpstreamTlsContext{})
}
