package listener

import (
	"io"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
)

// Conn is one accepted downstream connection after listener filters and filter chain
// selection (Envoy's server connection). It is a net.Conn whose first reads return the bytes
// the TLS inspector peeked, and it carries what was learnt about the connection and the drain
// decision of its filter chain.
//
// Methods are safe for concurrent use, except that Read must not be called concurrently while
// peeked bytes remain (net/http and crypto/tls never do). Close is idempotent: the listener
// counts the connection as destroyed on the first call.
type Conn struct {
	net.Conn
	id     uint64
	peeked []byte // TLS inspector bytes not yet read; only Read touches it
	chain  *chain
	worker *workerStats
	start  time.Time
	hello  clientHello
	tls    bool // transport protocol "tls" was detected
	// restored is the original destination the original_dst listener filter read; nil when
	// the local address is the one the connection was accepted on.
	restored *net.TCPAddr
	// remote is the client address of the PROXY protocol header; nil when the remote address
	// is the socket's peer.
	remote *net.TCPAddr
	// metadata is the connection's dynamic metadata; read only once the connection is built.
	metadata map[string]*structpb.Struct
	// tlvs are the PROXY protocol v2 TLVs the listener filter's pass_through_tlvs kept.
	tlvs []proxyproto.TLV
	// limited is set when the connection counts against the global connection limit;
	// admitted is the listener version whose connection limit counts it (the accepting one,
	// before an original_dst hand-off).
	limited  bool
	admitted *listenerInfo

	prev, next *Conn // the chain's connection list, guarded by chain.mu
	closed     atomic.Bool
	// onClose are the network filters' close hooks (OnClose); set before the terminal filter
	// has the connection, run by the first Close.
	onClose []func()
	// upstreamCluster is the envoy.tcp_proxy.cluster filter state (sni_cluster sets it).
	upstreamCluster string
	// source is the original_src listener filter's bind address for upstream connections.
	source *sockopt.Source
	// state is the connection's filter state (FilterState); empty, and free, until an
	// object is set.
	state filterstate.State
}

// FilterState returns the connection's filter state (Envoy's connection stream info's):
// what its listener filters and network filters set, the objects an internal connection
// inherited, and what its TCP proxy sets (the tunnel's response headers). HTTP streams read
// it as their parent's. Nil for a nil Conn.
func (c *Conn) FilterState() *filterstate.State {
	if c == nil {
		return nil
	}
	return &c.state
}

// OnClose registers fn to run once when the connection closes. Network filters call it from
// ConnFilter.OnConnection, before the terminal filter has the connection.
func (c *Conn) OnClose(fn func()) { c.onClose = append(c.onClose, fn) }

// SetUpstreamCluster sets the cluster the TCP proxy connects to instead of its configured
// one (Envoy's envoy.tcp_proxy.cluster filter state). Network filters call it from
// ConnFilter.OnConnection.
func (c *Conn) SetUpstreamCluster(name string) { c.upstreamCluster = name }

// UpstreamCluster returns the cluster a network filter chose for the TCP proxy; "" for none.
func (c *Conn) UpstreamCluster() string {
	if c == nil {
		return ""
	}
	return c.upstreamCluster
}

// DynamicMetadata returns the connection's dynamic metadata by namespace (Envoy's connection
// stream info): what the PROXY protocol filter's rules took from TLVs and what an
// internal_upstream socket passed through. It is shared and must not be modified; nil for none.
func (c *Conn) DynamicMetadata() map[string]*structpb.Struct {
	if c == nil {
		return nil
	}
	return c.metadata
}

// UpstreamSource returns where the TCP proxy binds the upstream connection it makes for this
// connection (the original_src listener filter's choice); nil for the cluster's own binding.
func (c *Conn) UpstreamSource() *sockopt.Source {
	if c == nil {
		return nil
	}
	return c.source
}

// ProxyProtocolTLVs returns the TLVs of the connection's PROXY v2 header that the listener
// filter's pass_through_tlvs kept, for an upstream PROXY protocol socket; read only.
func (c *Conn) ProxyProtocolTLVs() []proxyproto.TLV {
	if c == nil {
		return nil
	}
	return c.tlvs
}

// Read reads the peeked bytes first, then from the socket.
func (c *Conn) Read(p []byte) (int, error) {
	if len(c.peeked) > 0 {
		n := copy(p, c.peeked)
		c.peeked = c.peeked[n:]
		if len(c.peeked) == 0 {
			c.peeked = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// WriteTo writes the peeked bytes and then the rest of the stream to w, letting the socket
// splice to w when it can (*net.TCPConn to *net.TCPConn), for the TCP proxy.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	var n int64
	if len(c.peeked) > 0 {
		k, err := w.Write(c.peeked)
		n += int64(k)
		c.peeked = c.peeked[k:]
		if err != nil {
			return n, err
		}
		c.peeked = nil
	}
	if wt, ok := c.Conn.(io.WriterTo); ok {
		k, err := wt.WriteTo(w)
		return n + k, err
	}
	k, err := io.Copy(w, struct{ io.Reader }{c.Conn})
	return n + k, err
}

// ReadFrom copies r to the socket, letting the socket splice from r when it can.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// Close closes the socket. The first call also removes the connection from its listener's
// accounting (downstream_cx_active, downstream_cx_destroy, downstream_cx_length_ms).
func (c *Conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		for _, fn := range c.onClose {
			fn()
		}
		c.chain.remove(c)
		c.chain.info.closed(c)
	}
	return err
}

// LocalAddr returns the connection's local address: its original destination when the
// listener restored one from SO_ORIGINAL_DST or a PROXY protocol header (Envoy's restored
// local address, which %DOWNSTREAM_LOCAL_ADDRESS% and filter chain matching see), else the
// address it was accepted on.
func (c *Conn) LocalAddr() net.Addr {
	if c.restored != nil {
		return c.restored
	}
	return c.Conn.LocalAddr()
}

// RemoteAddr returns the connection's remote address: the client the PROXY protocol header
// named (Envoy's remote address after the proxy_protocol listener filter), else the socket's
// peer.
func (c *Conn) RemoteAddr() net.Addr {
	if c.remote != nil {
		return c.remote
	}
	return c.Conn.RemoteAddr()
}

// DirectRemoteAddr returns the socket's peer, whatever a PROXY header said (Envoy's direct
// remote address, %DOWNSTREAM_DIRECT_REMOTE_ADDRESS%).
func (c *Conn) DirectRemoteAddr() net.Addr { return c.Conn.RemoteAddr() }

// LocalAddressRestored reports whether LocalAddr is an original destination read by the
// listener (use_original_dst or envoy.filters.listener.original_dst): the address ORIGINAL_DST
// clusters send the connection's traffic to.
func (c *Conn) LocalAddressRestored() bool { return c != nil && c.restored != nil }

// ID returns the connection's id (Envoy's connection id, %CONNECTION_ID%): assigned when
// the connection is handed to its filter chain, unique among the connections of the Manager
// (one per server process) and never 0; 0 for a nil Conn.
func (c *Conn) ID() uint64 {
	if c == nil {
		return 0
	}
	return c.id
}

// ListenerName returns the name of the listener that accepted the connection.
func (c *Conn) ListenerName() string { return c.chain.info.name }

// FilterChainName returns the name of the filter chain serving the connection ("" when the
// chain has none).
func (c *Conn) FilterChainName() string { return c.chain.cfg.Name }

// ServerName returns the SNI the TLS inspector read from the ClientHello, lower-cased; "".
func (c *Conn) ServerName() string { return c.hello.serverName }

// ApplicationProtocols returns the ALPN protocols the client offered, in its order.
func (c *Conn) ApplicationProtocols() []string { return c.hello.alpn }

// TransportProtocol returns "tls" when the TLS inspector saw a ClientHello, else "raw_buffer".
func (c *Conn) TransportProtocol() string {
	if c.tls {
		return "tls"
	}
	return "raw_buffer"
}

// BufferLimit returns the listener's per_connection_buffer_limit_bytes: the soft limit a
// handler applies to what it buffers for this connection.
func (c *Conn) BufferLimit() uint32 { return c.chain.info.bufferLimit }

// DrainClose reports whether the connection should be closed now because the server or its
// listener is draining (Envoy's DrainDecision::drainClose): always while health checks are
// failed (/healthcheck/fail) on a DEFAULT drain-type listener; during a drain, always with the
// immediate strategy and with probability elapsed/drain time with the gradual one. It takes
// no lock.
func (c *Conn) DrainClose() bool {
	info := c.chain.info
	if info.drainType == config.DrainDefault && info.mgr.healthCheckFailed() {
		return true
	}
	start := c.chain.drain.start.Load()
	return start != nil && info.mgr.drain.closeNow(*start)
}

// DrainStarted returns a channel closed when a drain covering the connection starts. Handlers
// close idle connections then, and let busy ones finish what they are doing.
func (c *Conn) DrainStarted() <-chan struct{} { return c.chain.drain.ch }

// Draining reports whether a drain covering the connection has started, as a receive from
// DrainStarted would, for a check on every request: one atomic load, where a non-blocking
// receive costs a call of about 60 instructions.
func (c *Conn) Draining() bool { return c.chain.drain.start.Load() != nil }
