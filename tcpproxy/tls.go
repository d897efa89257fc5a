package tcpproxy

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/tlsutil"
)

// downstreamTLS builds the TLS context of a filter chain's transport socket through r's
// downstream sockets (Envoy's DownstreamTlsContext: static certificates or SDS secrets through
// deps.Secrets, registered in deps.Registry for /certs and reloaded with it when secrets
// rotate); nil for a plain chain.
func downstreamTLS(r *registry.Registry, chain *config.FilterChain, deps tlsutil.Deps) (*tlsutil.ServerContext, error) {
	sc, err := tlsutil.ServerContextFor(r, chain.TransportSocket, chain.TransportSocketConfig, deps)
	if err != nil {
		return nil, fmt.Errorf("filter chain %q: %w", chain.Name, err)
	}
	return sc, nil
}

// handshakeTimeout is how long the TLS handshake of a connection may take: the filter chain's
// transport_socket_connect_timeout, else the proxy's idle_timeout; zero means no limit.
func handshakeTimeout(chain *config.FilterChain, idle time.Duration) time.Duration {
	if d := chain.Proto.GetTransportSocketConnectTimeout(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return idle
}

// handshake terminates TLS on down, counting it in the listener's ssl.* stats. It returns
// the TLS connection and what the access log shows of it; the certificate the proxy
// presented is recorded only when an access log may print it.
func (p *Proxy) handshake(down net.Conn) (*tls.Conn, *accesslog.TLSInfo, error) {
	var deadline time.Time
	if p.handshakeTimeout > 0 {
		// Real clock: a socket deadline, which the runtime poller compares with the system clock.
		deadline = time.Now().Add(p.ov.ScaleTimer(overload.TransportSocketConnect, p.handshakeTimeout))
	}
	tc, cs, local, err := p.tls.Accept(down, deadline, len(p.logs) > 0)
	if err != nil {
		return nil, nil, err
	}
	return tc, &accesslog.TLSInfo{State: cs, Local: local}, nil
}
