package originalsrc

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	originalsrcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/listener/listenerfilter"
)

// Name is the filter's extension name.
const Name = "envoy.filters.listener.original_src"

// hcmType is the HTTP connection manager's type, which names it when a chain uses typed_config.
const hcmType = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

// Register registers the filter; the listener manager builds it for listener_filters.
func Register(b *registry.Builder) {
	registry.Add(b, listenerfilter.Filters, Name, &originalsrcv3.OriginalSrc{}, New)
	b.Alias(registry.ListenerFilter, "envoy.listener.original_src", Name)
}

// New builds the filter of one listener, refusing a listener whose chains serve HTTP.
func New(ctx *listenerfilter.Context, cfg proto.Message) (listenerfilter.Filter, error) {
	if path, ok := httpChain(ctx.Listener); ok {
		return nil, fmt.Errorf("%s: %s with %s (%s): not implemented by Legate (the HTTP connection manager's upstream connections are pooled, and Legate does not key its pools by the downstream's source address as Envoy does); only the TCP proxy binds to the original source", ctx.Path, Name, path, config.HTTPConnectionManagerFilter)
	}
	c := cfg.(*originalsrcv3.OriginalSrc)
	if err := sockopt.CheckSource(c.GetMark()); err != nil {
		return nil, fmt.Errorf("%s: %s: the upstream sockets cannot bind to the client's address (IP_TRANSPARENT and SO_MARK need CAP_NET_ADMIN or CAP_NET_RAW): %w", ctx.Path, Name, err)
	}
	return &filter{bindPort: c.GetBindPort(), mark: c.GetMark()}, nil
}

// httpChain returns the path of a filter chain of l that ends in the HTTP connection manager.
func httpChain(l *config.Listener) (string, bool) {
	if l == nil {
		return "", false
	}
	isHTTP := func(fc *config.FilterChain) bool {
		for _, f := range fc.Filters {
			if f.Name == config.HTTPConnectionManagerFilter || strings.HasSuffix(f.TypeURL(), "/"+hcmType) {
				return true
			}
		}
		return false
	}
	for i, fc := range l.FilterChains {
		if isHTTP(fc) {
			return fmt.Sprintf("filter_chains[%d]", i), true
		}
	}
	if fc := l.DefaultFilterChain; fc != nil && isHTTP(fc) {
		return "default_filter_chain", true
	}
	return "", false
}

// filter is one listener's original_src; it has no per-connection state.
type filter struct {
	bindPort bool
	mark     uint32
}

// OnData needs no bytes: it records the connection's source as the upstream's bind address.
func (f *filter) OnData(_ []byte, c *listenerfilter.Conn) (int, listenerfilter.Status) {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return 0, listenerfilter.Done // not IP: nothing to bind to
	}
	ap := ta.AddrPort()
	ip := ap.Addr().Unmap()
	if !ip.IsValid() {
		return 0, listenerfilter.Done
	}
	var port uint16
	if f.bindPort {
		port = ap.Port()
	}
	c.Source = &sockopt.Source{Addr: netip.AddrPortFrom(ip, port), Mark: f.mark}
	return 0, listenerfilter.Done
}
