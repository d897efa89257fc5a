// Package tlsinspector is Envoy's envoy.filters.listener.tls_inspector listener filter
// (extensions.filters.listener.tls_inspector.v3.TlsInspector): it tells a TLS connection from
// a plain-text one by its first bytes and, for TLS, reads the SNI and ALPN of the
// ClientHello, which filter_chain_match.server_names, transport_protocol and
// application_protocols then select on. A ClientHello larger than 64 KiB closes the
// connection (downstream_listener_filter_error), as in Envoy.
//
// Fields: initial_read_buffer_size is accepted and has no effect (Legate reads as much as the
// ClientHello needs). Refused with "not implemented by Legate": enable_ja3_fingerprinting and
// enable_ja4_fingerprinting (no fingerprint is computed for the access log),
// close_connection_on_client_hello_parsing_errors (a connection that is not TLS goes on as
// plain text) and max_client_hello_size (the limit is Envoy's default, 64 KiB).
package tlsinspector

import (
	"fmt"

	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener/listenerfilter"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.listener.tls_inspector"

// Register registers the filter; the listener manager builds it for listener_filters.
func Register(b *registry.Builder) {
	registry.Add(b, listenerfilter.Filters, Name, &tlsinspectorv3.TlsInspector{}, New)
	b.Alias(registry.ListenerFilter, "envoy.listener.tls_inspector", Name)
}

// New returns the inspector; it has no state, so every listener may share one.
func New(ctx *listenerfilter.Context, cfg proto.Message) (listenerfilter.Filter, error) {
	pb := cfg.(*tlsinspectorv3.TlsInspector)
	switch {
	case pb.GetEnableJa3Fingerprinting().GetValue():
		return nil, fmt.Errorf("%s.typed_config.enable_ja3_fingerprinting: set; not implemented by Legate", ctx.Path)
	case pb.GetEnableJa4Fingerprinting().GetValue():
		return nil, fmt.Errorf("%s.typed_config.enable_ja4_fingerprinting: set; not implemented by Legate", ctx.Path)
	case pb.GetCloseConnectionOnClientHelloParsingErrors():
		return nil, fmt.Errorf("%s.typed_config.close_connection_on_client_hello_parsing_errors: set; not implemented by Legate", ctx.Path)
	case pb.GetMaxClientHelloSize() != nil:
		return nil, fmt.Errorf("%s.typed_config.max_client_hello_size: set; not implemented by Legate", ctx.Path)
	}
	return inspector{}, nil
}

type inspector struct{}

// OnData parses the ClientHello at the start of b.
func (inspector) OnData(b []byte, c *listenerfilter.Conn) (int, listenerfilter.Status) {
	h, err := parseClientHello(b)
	switch err {
	case nil:
		c.TLS, c.ServerName, c.ALPN = true, h.serverName, h.alpn
		return 0, listenerfilter.Done
	case errNotTLS:
		return 0, listenerfilter.Done
	case errHelloTooLarge:
		return 0, listenerfilter.Fail
	}
	return 0, listenerfilter.NeedMore
}
