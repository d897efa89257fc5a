package pool

import (
	"context"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
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
	bp, err := m.priority(prio)
	if err != nil {
		return nil, err
	}
	cx := &bp.Connections
	if cx.TryAcquire() != nil {
		m.st.UpstreamCxOverflow.Inc()
		return nil, m.errCxOverflow
	}
	uc, err := hp.connect(ctx, alpn, cx)
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
