package pool

import (
	"context"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
)

// TCPConn is a raw upstream connection for the TCP proxy (Envoy's TCP connection pool). It
// counts bytes into upstream_cx_rx_bytes_total / upstream_cx_tx_bytes_total and holds one
// max_connections unit until Close. Read, Write and Close are safe for concurrent use as on
// any net.Conn; Close is idempotent.
type TCPConn struct {
	*upConn
}

// ConnectTCP opens a raw connection to h (TLS when the TLS hook gives a configuration). It
// fails with an error wrapping breaker.ErrOverflow when max_connections of priority prio is
// reached (upstream_cx_overflow), or with ErrConnectFailure / ErrConnectTimeout.
func (m *Manager) ConnectTCP(ctx context.Context, h *host.Host, prio config.Priority) (*TCPConn, error) {
	return m.ConnectALPN(ctx, h, prio, nil)
}

// ConnectALPN is ConnectTCP offering alpn in the TLS handshake instead of the TLS
// configuration's protocols (nil keeps them): the connection manager opens upgrade tunnels
// to HTTP/2 clusters with ["h2"], as the HTTP/2 pool does.
func (m *Manager) ConnectALPN(ctx context.Context, h *host.Host, prio config.Priority, alpn []string) (*TCPConn, error) {
	hp, err := m.pool(h)
	if err != nil {
		return nil, err
	}
	return m.connectTCP(ctx, hp, prio, alpn)
}

// ConnectUpgrade is ConnectALPN for the upstream connection of an upgraded request
// (WebSocket, CONNECT) whose authority is given, made for the downstream connection from (nil:
// none): with auto_sni or auto_san_validation it is opened for that name (or for the value
// header returns for override_auto_sni_header), as RoundTrip's connections are, and kept with
// that name's pool; with original_src it binds to from's source.
func (m *Manager) ConnectUpgrade(ctx context.Context, h *host.Host, prio config.Priority, alpn []string, authority string, header func(name string) string, from Origin) (*TCPConn, error) {
	hp, err := m.pool(h)
	if err != nil {
		return nil, err
	}
	if from != nil {
		// A raw connection of this downstream alone: bound to its source, its PROXY
		// protocol header describing it.
		ctx = sockopt.WithSource(ctx, from.UpstreamSource())
		ctx = proxyproto.WithDownstream(ctx, &proxyproto.Downstream{Source: from.RemoteAddr(), Destination: from.LocalAddr(), TLVs: from.ProxyProtocolTLVs()})
	}
	if !m.byAuthority {
		return m.connectTCP(ctx, hp, prio, alpn)
	}
	override := ""
	if m.sniHeader != "" {
		override = header(m.sniHeader)
	}
	name := nameOf(authority, override)
	if name == "" {
		return m.connectTCP(ctx, hp, prio, alpn)
	}
	hp = hp.keyed(poolKey{name: name}, nil)
	defer hp.leave()
	return m.connectTCP(ctx, hp, prio, alpn)
}

// connectTCP opens a raw connection of pool hp.
func (m *Manager) connectTCP(ctx context.Context, hp *hostPool, prio config.Priority, alpn []string) (*TCPConn, error) {
	bp, err := m.priority(prio)
	if err != nil {
		return nil, err
	}
	cx := &bp.Connections
	if cx.TryAcquire() != nil {
		m.st.UpstreamCxOverflow.Inc()
		return nil, m.errCxOverflow
	}
	uc, err := hp.connect(ctx, alpn, cx, originOf(ctx))
	if err != nil {
		return nil, err
	}
	c := &TCPConn{upConn: uc}
	hp.mu.Lock()
	hp.tcp[c] = struct{}{}
	hp.mu.Unlock()
	return c, nil
}

// Close closes the connection (a local close).
func (c *TCPConn) Close() error {
	hp := c.hp
	hp.mu.Lock()
	delete(hp.tcp, c)
	hp.mu.Unlock()
	c.shut(true)
	return nil
}

// Host returns the upstream host.
func (c *TCPConn) Host() *host.Host { return c.hp.host }
