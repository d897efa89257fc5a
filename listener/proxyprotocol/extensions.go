package proxyprotocol

import (
	"net"

	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener/listenerfilter"
	"github.com/legateproxy/legate/logging"
)

// Register registers the filter, which the listener manager builds for listener_filters (and
// for a listener whose filter chain sets use_proxy_proto). The upstream
// envoy.transport_sockets.proxy_protocol socket registers with the other transport sockets
// (tlsutil).
func Register(b *registry.Builder) {
	registry.Add(b, listenerfilter.Filters, Name, &proxyprotocolv3.ProxyProtocol{}, build)
	b.Alias(registry.ListenerFilter, "envoy.listener.proxy_protocol", Name)
}

func build(ctx *listenerfilter.Context, cfg proto.Message) (listenerfilter.Filter, error) {
	f, err := New(cfg.(*proxyprotocolv3.ProxyProtocol), ctx.Stats)
	if err != nil {
		return nil, err
	}
	return &listenerFilter{f: f, listener: ctx.Listener.Name, logger: ctx.Logger}, nil
}

// listenerFilter runs a Filter as one of a listener's listener filters.
type listenerFilter struct {
	f        *Filter
	listener string
	logger   *logging.Logger
}

// OnData reads the header and applies it: its source becomes the connection's remote address
// and its destination, when it differs from the local one, the restored local address; its
// rules' TLVs join the connection's dynamic metadata and pass_through_tlvs' are kept.
func (l *listenerFilter) OnData(b []byte, c *listenerfilter.Conn) (int, listenerfilter.Status) {
	h, res := l.f.OnData(b)
	switch res {
	case NeedMore:
		return 0, listenerfilter.NeedMore
	case Absent:
		return 0, listenerfilter.Done
	case Close:
		l.logger.Debugf("listener '%s': closing connection from %s: bad or missing PROXY protocol header", l.listener, c.Socket.RemoteAddr())
		return 0, listenerfilter.Close
	}
	if !h.Local {
		c.AddMetadata(l.f.Metadata(h))
		if tlvs := l.f.TLVs(h); tlvs != nil {
			// The connection's state is new: no read-only object is there yet.
			_ = c.State().Set(TLVKey, tlvs, filterstate.Options{})
		}
		c.TLVs = l.f.PassThrough(h)
		c.Remote = net.TCPAddrFromAddrPort(h.Source)
		if local, ok := c.LocalAddr().(*net.TCPAddr); !ok || local.AddrPort() != h.Destination {
			c.Local = net.TCPAddrFromAddrPort(h.Destination)
		}
	}
	return h.Len, listenerfilter.Done
}
