package originalsrc

import (
	"fmt"
	"net"
	"net/netip"

	originalsrcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/listener/listenerfilter"
)

// Name is the filter's extension name.
const Name = "envoy.filters.listener.original_src"

// Register registers the filter; the listener manager builds it for listener_filters.
func Register(b *registry.Builder) {
	registry.Add(b, listenerfilter.Filters, Name, &originalsrcv3.OriginalSrc{}, New)
	b.Alias(registry.ListenerFilter, "envoy.listener.original_src", Name)
}

// New builds the filter of one listener.
func New(ctx *listenerfilter.Context, cfg proto.Message) (listenerfilter.Filter, error) {
	c := cfg.(*originalsrcv3.OriginalSrc)
	if err := sockopt.CheckSource(c.GetMark()); err != nil {
		return nil, fmt.Errorf("%s: %s: the upstream sockets cannot bind to the client's address (IP_TRANSPARENT and SO_MARK need CAP_NET_ADMIN or CAP_NET_RAW): %w", ctx.Path, Name, err)
	}
	return &filter{bindPort: c.GetBindPort(), mark: c.GetMark()}, nil
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
