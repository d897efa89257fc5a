package httpproxy

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"testing"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// h2TunnelEcho is an HTTP/2 upstream built on x/net/http2's server (prior knowledge, or TLS
// with cfg, which must offer "h2"): it accepts CONNECT and extended CONNECT, sends the
// :protocol it got back in x-protocol, and echoes the stream's bytes until the client ends
// it.
func h2TunnelEcho(t *testing.T, cfg *tls.Config) string {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "tunnels only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("X-Protocol", r.Header.Get(":protocol"))
		w.Header().Set("X-Path", r.URL.RequestURI())
		nettest.EchoBody(w, r)
	})
	srv := &http2.Server{}
	return serveTCP(t, func(c net.Conn) {
		if cfg != nil {
			tc := tls.Server(c, cfg)
			if tc.Handshake() != nil {
				return
			}
			c = tc
		}
		srv.ServeConn(c, &http2.ServeConnOpts{Handler: h})
	})
}

// TestUpgradeToHTTP2Upstream sends an HTTP/1.1 WebSocket upgrade to a cluster that speaks
// HTTP/2: Legate opens it as an extended CONNECT (:protocol websocket) upstream, answers the
// client 101 when the upstream answers 200, and bytes cross both ways.
func TestUpgradeToHTTP2Upstream(t *testing.T) {
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "http2_protocol_options: {}", h2TunnelEcho(t, nil))},
		hcm:      upgradeHCM("", "upgrade_configs: [{upgrade_type: websocket}]"),
	})
	resp, br, nc := rawRequest(t, e.addr, "GET /chat?room=1 HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "websocket" ||
		resp.Header.Get("X-Protocol") != "websocket" || resp.Header.Get("X-Path") != "/chat?room=1" {
		t.Fatalf("response = %d %v; want 101, upgrade websocket, the upstream's :protocol websocket and path /chat?room=1", resp.StatusCode, resp.Header)
	}
	io.WriteString(nc, "frames")
	buf := make([]byte, 6)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "frames" {
		t.Fatalf("tunnel read %q (%v); want %q", buf, err, "frames")
	}
	nc.(*net.TCPConn).CloseWrite() // END_STREAM upstream; the echo ends its stream; the client sees EOF
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the half-close read %q (%v); want EOF", rest, err)
	}
	waitStat(t, e, "cluster.web.upstream_cx_destroy", 1)
	if got := e.stat("cluster.web.upstream_rq_200"); got != 1 {
		t.Errorf("upstream_rq_200 = %d; want 1", got)
	}
}

// TestUpgradeToHTTP2UpstreamOverTLS checks that the tunnel's connection to a TLS cluster that
// speaks HTTP/2 offers "h2" in ALPN (a server that only speaks h2 must pick it).
func TestUpgradeToHTTP2UpstreamOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	leaf := ca.Issue(t, tlstest.Options{CommonName: "upstream", IPs: []string{"127.0.0.1"}})
	serverTLS := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}},
		NextProtos:   []string{"h2"},
	}
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "http2_protocol_options: {}", h2TunnelEcho(t, serverTLS))},
		hcm:      upgradeHCM("", "upgrade_configs: [{upgrade_type: websocket}]"),
		upTLS: func(*config.Cluster, *host.Host) *tls.Config {
			return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
		},
	})
	resp, br, nc := rawRequest(t, e.addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Protocol") != "websocket" {
		t.Fatalf("response = %d %v; want 101 from the upstream's extended CONNECT", resp.StatusCode, resp.Header)
	}
	io.WriteString(nc, "sealed")
	buf := make([]byte, 6)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "sealed" {
		t.Fatalf("tunnel read %q (%v); want %q", buf, err, "sealed")
	}
}
