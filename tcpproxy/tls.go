package tcpproxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/tlsutil"
)

// The transport sockets of a TCP proxy's filter chain: plain, or TLS terminated here.
const (
	rawBufferName        = "envoy.transport_sockets.raw_buffer"
	rawBufferTypeURL     = "type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"
	tlsTransportName     = "envoy.transport_sockets.tls"
	downstreamTLSTypeURL = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
)

// downstreamTLS builds the TLS context of a filter chain's transport socket (Envoy's
// DownstreamTlsContext: static certificates or SDS secrets through deps.Secrets, registered
// in deps.Registry for /certs and reloaded with it when secrets rotate); nil for a plain
// chain.
func downstreamTLS(chain *config.FilterChain, deps tlsutil.Deps) (*tlsutil.ServerContext, error) {
	ts, u := chain.TransportSocket, chain.TransportSocketConfig.GetTypeUrl()
	switch {
	case ts == "" || ts == rawBufferName && u == "" || u == rawBufferTypeURL:
		return nil, nil
	case u != downstreamTLSTypeURL && !(u == "" && ts == tlsTransportName):
		return nil, fmt.Errorf("filter chain %q: transport_socket %q (%q): only %s and %s are implemented for the TCP proxy", chain.Name, ts, u, rawBufferName, tlsTransportName)
	}
	var pb tlsv3.DownstreamTlsContext
	if chain.TransportSocketConfig != nil {
		if err := chain.TransportSocketConfig.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("filter chain %q: transport_socket: %w", chain.Name, err)
		}
	}
	tc, err := tlsutil.DownstreamFromProto("transport_socket.typed_config", &pb)
	if err != nil {
		return nil, fmt.Errorf("filter chain %q: %w", chain.Name, err)
	}
	sc, err := tlsutil.NewServerContext(tc, deps)
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

// handshake terminates TLS on down. It returns the TLS connection and what the access log
// shows of it; the certificate the proxy presented is recorded only when an access log may
// print it.
func (p *Proxy) handshake(down net.Conn) (*tls.Conn, *accesslog.TLSInfo, error) {
	base := p.tls.Config()
	cfg := base
	var local *x509.Certificate // written by the handshake, on this goroutine
	if len(p.logs) > 0 {
		cfg = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := base.GetConfigForClient(h)
			if err != nil || c == nil || c.GetCertificate == nil {
				return c, err
			}
			c = c.Clone() // keeps the load's session ticket keys
			get := c.GetCertificate
			c.GetCertificate = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
				cert, err := get(h)
				if cert != nil {
					local = leaf(cert)
				}
				return cert, err
			}
			return c, nil
		}}
	}
	tc := tls.Server(down, cfg)
	if p.handshakeTimeout > 0 {
		down.SetDeadline(time.Now().Add(p.handshakeTimeout))
	}
	if err := tc.Handshake(); err != nil {
		return nil, nil, err
	}
	down.SetDeadline(time.Time{})
	return tc, &accesslog.TLSInfo{State: tc.ConnectionState(), Local: local}, nil
}

// leaf returns the parsed leaf of a certificate; nil if it does not parse.
func leaf(c *tls.Certificate) *x509.Certificate {
	if c.Leaf != nil || len(c.Certificate) == 0 {
		return c.Leaf
	}
	l, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return l
}
