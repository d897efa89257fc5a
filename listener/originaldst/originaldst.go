// Package originaldst is Envoy's envoy.filters.listener.original_dst listener filter
// (extensions.filters.listener.original_dst.v3.OriginalDst): it restores each connection's
// local address to the destination it had before an iptables REDIRECT or DNAT
// (SO_ORIGINAL_DST, Linux only), which filter chain matching, access logs and ORIGINAL_DST
// clusters then use. A listener with use_original_dst runs it first (package config adds it)
// and then hands the connection to the listener of that destination.
//
// OriginalDst has no fields. Outside Linux, or without a netfilter record, the address stays
// as accepted.
package originaldst

import (
	"net"

	originaldstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener/listenerfilter"
)

// Register registers the filter; the listener manager builds it for listener_filters.
func Register(b *registry.Builder) {
	registry.Add(b, listenerfilter.Filters, config.OriginalDstFilter, &originaldstv3.OriginalDst{}, New)
	b.Alias(registry.ListenerFilter, "envoy.listener.original_dst", config.OriginalDstFilter)
}

// New returns the filter; it has no state, so every listener may share one.
func New(*listenerfilter.Context, proto.Message) (listenerfilter.Filter, error) {
	return filter{}, nil
}

type filter struct{}

// OnData needs no bytes: it reads the socket's original destination.
func (filter) OnData(_ []byte, c *listenerfilter.Conn) (int, listenerfilter.Status) {
	if dst, ok := originalDestination(c.Socket); ok {
		c.Local = net.TCPAddrFromAddrPort(dst)
	}
	return 0, listenerfilter.Done
}
