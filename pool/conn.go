package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
)

// Connection errors. Callers branch on them with errors.Is.
var (
	// ErrConnectFailure: the upstream connection could not be established (refused, reset,
	// TLS handshake failure).
	ErrConnectFailure = errors.New("upstream connect failure")
	// ErrConnectTimeout: connect_timeout elapsed first. It also matches ErrConnectFailure.
	ErrConnectTimeout = fmt.Errorf("%w: connect timeout", ErrConnectFailure)
	// ErrClosed: the pool was closed or its host was removed while the request waited.
	ErrClosed = errors.New("connection pool closed")
	// ErrReset: the upstream connection closed or failed before the response was complete.
	ErrReset = errors.New("upstream connection reset")
	// ErrRequestBody: reading the request body failed (the downstream client sent a
	// malformed or truncated body, or went away). It is the client's error, never the
	// upstream host's: callers answer it as a downstream protocol error and charge nothing to
	// the host. The body reader's own error is wrapped with it.
	ErrRequestBody = errors.New("downstream request body")
)

// upConn is one upstream connection with its accounting: it counts bytes into the cluster's
// rx/tx totals and, when closed (once), the destroy counters and gauges.
type upConn struct {
	net.Conn
	hp       *hostPool
	cx       *breaker.Resource // the max_connections unit the connection holds
	opened   time.Time
	requests atomic.Uint32
	closed   atomic.Bool
	// rqActive is the number of requests in flight on the connection (HTTP/2 has several).
	rqActive atomic.Int32
	// rx counts the bytes read, for HTTP/1.1 to tell whether any of a response arrived. It is
	// touched by whoever reads the connection, one at a time.
	rx int64
	// line is the line the byte counters are added on: the last HTTP/1.1 exchange's (whose
	// stream reads and writes the connection), else NoLine, P 0's: a stale line only costs
	// cache traffic, the counters being atomics.
	line stats.Line
}

func (c *upConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.rx += int64(n)
		c.hp.m.st.Lines().On(c.line).CxRxBytes.Add(uint64(n))
	}
	return n, err
}

func (c *upConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.hp.m.st.Lines().On(c.line).CxTxBytes.Add(uint64(n))
	}
	return n, err
}

// CloseWrite half-closes the connection when the transport supports it.
func (c *upConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// shut closes the socket and records the connection's end; local says who ended it. Only the
// first call counts. It releases the connection's circuit-breaker unit.
func (c *upConn) shut(local bool) {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.Conn.Close()
	hp, st := c.hp, c.hp.m.st
	st.UpstreamCxDestroy.Inc()
	active := c.rqActive.Load() > 0
	if local {
		st.UpstreamCxDestroyLocal.Inc()
	} else {
		st.UpstreamCxDestroyRemote.Inc()
	}
	if active {
		st.UpstreamCxDestroyWithActiveRq.Inc()
		if local {
			st.UpstreamCxDestroyLocalWithActiveRq.Inc()
		} else {
			st.UpstreamCxDestroyRemoteWithActiveRq.Inc()
		}
	}
	st.UpstreamCxActive.Dec()
	hp.hs.CxActive.Add(-1)
	st.UpstreamCxLengthMs.Record(uint64(hp.m.now().Sub(c.opened).Milliseconds()))
	st.UpstreamRqPerCx.Record(uint64(c.requests.Load()))
	c.cx.Release()
	hp.h2wait.signal() // a request waiting for an HTTP/2 stream may now open a connection
}

// cancelWith runs cancel when ctx ends, until the returned stop is called. Unlike a context
// derived from ctx, it never asks ctx for its error after ctx is done: a request's context
// may be reused for another request by then (httpproxy's per-attempt context), whose Err is
// nil, and context.WithTimeout's watch of a context type it does not know panics on that.
func cancelWith(ctx context.Context, cancel context.CancelFunc) (stop func()) {
	done := ctx.Done()
	if done == nil {
		return func() {}
	}
	over := make(chan struct{})
	go func() {
		select {
		case <-done:
			cancel()
		case <-over:
		}
	}()
	return func() { close(over) }
}

// dial connects to a host's address: over TCP, or in memory to an internal listener.
func (m *Manager) dial(ctx context.Context, address string) (net.Conn, error) {
	if strings.HasPrefix(address, "envoy://") {
		if m.dialInternal == nil {
			return nil, fmt.Errorf("%s: internal addresses need the %s bootstrap extension", address, config.InternalListenerExtension)
		}
		return m.dialInternal(ctx, address)
	}
	if s := sockopt.SourceFrom(ctx); s != nil {
		// original_src: a connection of its own, bound to the downstream's source address.
		return s.Dialer(&m.dialer).DialContext(ctx, "tcp", address)
	}
	return m.dialer.DialContext(ctx, "tcp", address)
}

// connect dials h with connect_timeout, the bind address and keep-alive settings, and runs the
// TLS handshake when the TLS hook gives a configuration. alpn overrides the configuration's
// NextProtos when set. o is what the connection is made for: the downstream's source it binds
// to instead (original_src) and the downstream its PROXY protocol header describes. Every attempt is counted (upstream_cx_total, cx_total); failures count
// upstream_cx_connect_fail (and _timeout) and the host's cx_connect_fail. The caller holds a
// max_connections unit, which the returned connection owns from now on. A request whose context
// has ended dials nothing.
func (hp *hostPool) connect(ctx context.Context, alpn []string, cx *breaker.Resource, o origin) (*upConn, error) {
	if err := ctx.Err(); err != nil { // the request is gone: no connection for it
		cx.Release()
		return nil, err
	}
	m := hp.m
	st := m.st
	st.UpstreamCxTotal.Inc()
	hp.hs.CxTotal.Add(1)
	start := m.now()
	dctx, cancel := context.WithTimeout(context.Background(), m.connectTimeout)
	defer cancel()
	defer cancelWith(ctx, cancel)()
	// A cluster whose transport_socket_matcher reads filter state chooses this connection's
	// socket with the objects the downstream shares with it.
	shared := filterstate.Upstream(ctx)
	sock := hp.host.SocketFor(shared)
	w := m.wrappersAt(sock)
	if len(w.Passthrough) > 0 {
		dctx = listener.WithPassthroughMetadata(dctx, m.passthrough(hp.host, w.Passthrough))
	}
	dctx = sockopt.WithSource(dctx, o.source)
	// The downstream's filter state objects shared with this connection (an internal
	// listener's connection inherits them: DialInternal).
	dctx = filterstate.WithUpstream(dctx, shared)
	nc, err := m.dial(dctx, hp.host.Address())
	if err == nil && w.ProxyProtocol != nil {
		err = writeProxyHeader(dctx, nc, w.ProxyProtocol, o.down, hp.host.ProxyProtocolTLVs())
	}
	if err == nil {
		if cfg := hp.tlsConfig(sock); cfg != nil {
			if alpn != nil {
				cfg = cfg.Clone()
				cfg.NextProtos = alpn
			}
			tc := tls.Client(nc, cfg)
			var st *tlsutil.Stats
			if m.tlsStats != nil {
				st = m.tlsStats()
			}
			if _, err = st.Handshake(dctx, tc); err != nil {
				nc.Close()
			}
			nc = tc
		}
	}
	if err != nil {
		hp.hs.CxConnectFail.Add(1)
		st.UpstreamCxConnectFail.Inc()
		cx.Release()
		if m.bind != nil && errors.Is(err, syscall.EADDRNOTAVAIL) {
			st.BindErrors.Inc()
		}
		if ctx.Err() == nil && (dctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)) {
			st.UpstreamCxConnectTimeout.Inc()
			return nil, fmt.Errorf("%w: %s after %v", ErrConnectTimeout, hp.host.Address(), m.connectTimeout)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrConnectFailure, hp.host.Address(), err)
	}
	st.UpstreamCxConnectMs.Record(uint64(m.now().Sub(start).Milliseconds()))
	st.UpstreamCxActive.Inc()
	hp.hs.CxActive.Add(1)
	return &upConn{Conn: nc, hp: hp, cx: cx, opened: m.now()}, nil
}

// tlsConfig returns the TLS configuration of a new connection of the pool with transport
// socket sock: its authority's for a pool keyed by name, else the host's, or sock's when
// filter state chose another socket than the host's; nil for plain TCP.
func (hp *hostPool) tlsConfig(sock int) *tls.Config {
	m := hp.m
	switch {
	case sock != hp.host.SocketMatch():
		if m.socketTLS == nil {
			return nil
		}
		return m.socketTLS(hp.host, sock)
	case hp.key.name != "" && m.authorityTLS != nil:
		return m.authorityTLS(hp.host, hp.key.name)
	case hp.key.name == "" && m.tls != nil:
		return m.tls(hp.host)
	}
	return nil
}

// wrappersAt returns the wrapping sockets' settings of transport socket i (host.SocketMatch's
// kind of index).
func (m *Manager) wrappersAt(i int) tlsutil.Wrappers {
	if i > 0 && i < len(m.wrappers) {
		return m.wrappers[i]
	}
	return m.wrappers[0]
}

// passthrough is the dynamic metadata an internal_upstream socket gives the internal
// listener's connection: the named namespaces of h's endpoint metadata or of the cluster's,
// as they are (a namespace neither has is left out).
func (m *Manager) passthrough(h *host.Host, srcs []tlsutil.MetadataSource) map[string]*structpb.Struct {
	md := make(map[string]*structpb.Struct, len(srcs))
	for _, src := range srcs {
		var st *structpb.Struct
		if src.Host {
			st = h.FilterMetadata(src.Namespace)
		} else {
			st = m.cfg.Metadata.GetFilterMetadata()[src.Namespace]
		}
		if st != nil {
			md[src.Namespace] = st
		}
	}
	return md
}

// writeProxyHeader starts an upstream connection with the PROXY protocol header of u (Envoy's
// envoy.transport_sockets.proxy_protocol, under any TLS). It describes d, the downstream
// connection the connection is made for, with host's TLVs; without one (a connection of
// Legate's own) it is u's LocalHeader, as Envoy's socket writes without PROXY protocol state.
func writeProxyHeader(ctx context.Context, nc net.Conn, u *proxyproto.Upstream, d *proxyproto.Downstream, host []proxyproto.TLV) error {
	hdr := u.LocalHeader(nc.LocalAddr(), nc.RemoteAddr())
	if d != nil {
		hdr = u.Header(d, host)
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetWriteDeadline(dl)
		defer nc.SetWriteDeadline(time.Time{})
	}
	if _, err := nc.Write(hdr); err != nil {
		nc.Close()
		return fmt.Errorf("writing the PROXY protocol header: %w", err)
	}
	return nil
}

// negotiated returns the ALPN protocol of a TLS connection, "" for plain TCP.
func negotiated(c net.Conn) string {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.ConnectionState().NegotiatedProtocol
	}
	return ""
}
