// Package listenerfilter is the contract between the listener manager and its listener
// filters (Envoy's envoy.filters.listener.* extensions): the registry kind a filter package
// registers its factory with, and the Filter the listener manager runs on each new connection
// before it selects a filter chain.
//
// It sits below package listener so that listener filters need not import the listener
// manager, and the manager's own tests may run real filters.
package listenerfilter

import (
	"net"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
)

// Filters is the kind of listener filter extensions. A filter package registers itself with
//
//	registry.Add(b, listenerfilter.Filters, Name, &pb.Config{}, factory)
//
// and the listener manager builds each entry of a listener's listener_filters through it.
var Filters = registry.Kind[Factory]{Category: registry.ListenerFilter}

// Factory builds one listener filter of a listener from its typed_config, decoded into the
// registered message (an empty one when the entry has none). It is called on the goroutine
// that adds the listener; an error refuses the listener.
type Factory func(ctx *Context, cfg proto.Message) (Filter, error)

// Context is what a Factory builds a filter with.
type Context struct {
	// Path names the entry in errors, for example "listener_filters[1]".
	Path string
	// Listener is the listener's configuration.
	Listener *config.Listener
	// Stats is the server's stats store; Logger the listener manager's (may be nil).
	Stats  *stats.Store
	Logger *logging.Logger
}

// Status is what a filter decided about the bytes read so far.
type Status uint8

const (
	// NeedMore: read more bytes and call OnData again.
	NeedMore Status = iota
	// Done: the filter is finished; the next one runs.
	Done
	// Close: close the connection; the filter has counted why.
	Close
	// Fail: close the connection and count it in the listener's
	// downstream_listener_filter_error.
	Fail
)

// Filter is one listener filter of a listener. The listener manager runs a listener's filters
// in configuration order on each new connection. A Filter is shared by the listener's
// connections, so it must be safe for concurrent use.
type Filter interface {
	// OnData looks at b, the connection's first bytes that earlier filters left (empty on
	// the first call, which lets a filter that needs no bytes act at once), and records what
	// it learns in c. It returns how many bytes of b it consumed (a header that is not part
	// of the stream the filter chain reads) and its decision.
	OnData(b []byte, c *Conn) (drained int, s Status)
}

// ReadFailer is a Filter that accounts for connections that ended or failed while it waited
// for bytes (the HTTP inspector's read_error).
type ReadFailer interface {
	ReadFailed(c *Conn)
}

// Conn is what the listener filters learn about a new connection, and the socket they learn
// it from.
type Conn struct {
	// Socket is the accepted connection. Filters read its addresses and socket options;
	// its bytes come to them through OnData.
	Socket net.Conn
	// TLS is set when the TLS inspector saw a ClientHello; ServerName is its SNI, lower-cased.
	TLS        bool
	ServerName string
	// ALPN are the application protocols the client offered (the HTTP inspector's for a
	// plain-text connection).
	ALPN []string
	// Local is the connection's local address as the original destination or a PROXY header
	// gave it; Remote is the PROXY header's source. Nil: the socket's own.
	Local, Remote *net.TCPAddr
	// Metadata is the connection's dynamic metadata by namespace (the PROXY protocol rules'
	// TLVs, an internal connection's passed-through metadata); filters add with AddMetadata.
	Metadata map[string]*structpb.Struct
	// TLVs are the PROXY v2 TLVs kept for an upstream PROXY protocol socket.
	TLVs []proxyproto.TLV
	// Source is where the upstream connections made for this connection bind (the
	// original_src filter's); nil: the cluster's own bind configuration.
	Source *sockopt.Source
	// FilterState is the connection's filter state so far (an internal connection's
	// inherited objects, the PROXY protocol rules' TLVs); nil until an object is set.
	// Filters set objects through State.
	FilterState *filterstate.State
}

// State returns the connection's filter state, made on first use (listener filters run on
// the connection's goroutine, one at a time).
func (c *Conn) State() *filterstate.State {
	if c.FilterState == nil {
		c.FilterState = &filterstate.State{}
	}
	return c.FilterState
}

// RemoteAddr returns the connection's remote address: Remote, else the socket's.
func (c *Conn) RemoteAddr() net.Addr {
	if c.Remote != nil {
		return c.Remote
	}
	return c.Socket.RemoteAddr()
}

// AddMetadata adds the keys of md's namespaces to the connection's dynamic metadata (a key
// already there is replaced). The structs are not shared with anyone until the connection
// reaches its filter chain, so they change in place.
func (c *Conn) AddMetadata(md map[string]*structpb.Struct) {
	if c.Metadata == nil {
		c.Metadata = md
		return
	}
	for ns, st := range md {
		have := c.Metadata[ns]
		if have == nil {
			c.Metadata[ns] = st
			continue
		}
		for k, v := range st.GetFields() {
			have.Fields[k] = v
		}
	}
}

// LocalAddr returns the connection's local address: Local, else the socket's.
func (c *Conn) LocalAddr() net.Addr {
	if c.Local != nil {
		return c.Local
	}
	return c.Socket.LocalAddr()
}
