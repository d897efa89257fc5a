package tcpproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestTunnelsSharePooledH2Connection: HTTP/2 tunnels are streams of the cluster's pool. Two
// open at once share one upstream connection (the x/net/http2 server accepts one); with
// max_concurrent_streams 1 the second tunnel gets a connection of its own. The pool counts
// the streams (upstream_rq_total, upstream_rq_active).
func TestTunnelsSharePooledH2Connection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options string
		conns   uint64
	}{
		{"shared", "", 1},
		{"max_concurrent_streams 1", "max_concurrent_streams: 1", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { nettest.EchoBody(w, r) })
			srv := &http2.Server{}
			up := newUpstream(t, func(c net.Conn) { srv.ServeConn(c, &http2.ServeConnOpts{Handler: h}) })
			cluster := "typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: " +
				"{\"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {" + tc.options + "}}}}"
			e := newEnv(t, cluster, map[string][]string{"proxy": {up.addr()}})
			p := newProxy(t, e, "{stat_prefix: tun, cluster: proxy, tunneling_config: {hostname: 'svc:443'}}", nil)
			addr := serveLocal(t, p)
			var clients []*net.TCPConn
			for _, msg := range []string{"first\n", "second\n"} {
				c := dial(t, addr)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c, msg)
				if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != msg {
					t.Fatalf("echo through tunnel = %q, %v; want %q", got, err, msg)
				}
				clients = append(clients, c) // kept open: the next tunnel opens beside it
			}
			cst := e.cm.Get("proxy").Stats()
			if got := []uint64{cst.UpstreamCxTotal.Value(), cst.UpstreamRqTotal.Value(), cst.UpstreamRqActive.Value(), uint64(len(up.conns))}; got[0] != tc.conns || got[1] != 2 || got[2] != 2 || got[3] != tc.conns {
				t.Errorf("upstream_cx_total, upstream_rq_total, upstream_rq_active, connections the server accepted = %v; want [%d 2 2 %d]", got, tc.conns, tc.conns)
			}
			for _, c := range clients {
				c.CloseWrite()
				if rest := readAll(t, c); rest != "" {
					t.Errorf("after the half-close the tunnel sent %q; want its end", rest)
				}
			}
			waitFor(t, "the tunnels' streams ended", func() bool { return cst.UpstreamRqActive.Value() == 0 })
		})
	}
}

// TestAutoConfigTunnelsPooled: an auto_config cluster's tunnels are streams of its pool when
// TLS ALPN chose h2 (two open at once share the one upstream connection), and tunnels of
// their own over HTTP/1.1 when the host speaks only that: the first tunnel's pooled attempt
// learns it (its connection stays in the pool, idle), later ones go straight to their own.
func TestAutoConfigTunnelsPooled(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "tunnel ca"})
	leaf := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cert := tls.Certificate{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}
	const cluster = "typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: " +
		"{\"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, auto_config: {}}}\n" +
		"transport_socket: {name: envoy.transport_sockets.tls, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext}}"
	proxyTo := func(t *testing.T, addr string) (string, *env) {
		e := newEnvTLS(t, cluster, map[string][]string{"proxy": {addr}}, func(*config.Cluster, *host.Host) *tls.Config {
			return &tls.Config{RootCAs: roots, ServerName: "proxy.example.com"}
		})
		return serveLocal(t, newProxy(t, e, "{stat_prefix: auto, cluster: proxy, tunneling_config: {hostname: 'svc:443'}}", nil)), e
	}
	// echoThrough opens a tunnel, checks its echo and leaves it open.
	echoThrough := func(t *testing.T, addr, msg string) {
		c := dial(t, addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, msg)
		if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != msg {
			t.Fatalf("echo through tunnel = %q, %v; want %q", got, err, msg)
		}
	}
	t.Run("h2", func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { nettest.EchoBody(w, r) })
		srv := &http2.Server{}
		serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
		up := newUpstream(t, func(c net.Conn) {
			tc := tls.Server(c, serverTLS)
			if tc.Handshake() == nil {
				srv.ServeConn(tc, &http2.ServeConnOpts{Handler: h})
			}
		})
		addr, e := proxyTo(t, up.addr())
		echoThrough(t, addr, "first\n")
		echoThrough(t, addr, "second\n")
		cst := e.cm.Get("proxy").Stats()
		if got := []uint64{cst.UpstreamCxTotal.Value(), cst.UpstreamRqTotal.Value(), uint64(len(up.conns))}; got[0] != 1 || got[1] != 2 || got[2] != 1 {
			t.Errorf("upstream_cx_total, upstream_rq_total, connections the server accepted = %v; want [1 2 1]", got)
		}
	})
	t.Run("http/1.1", func(t *testing.T) {
		var accepted atomic.Int32
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodConnect {
				http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
				return
			}
			hijackEcho(w, "HTTP/1.1 200 Connection established\r\n\r\n")
		}))
		s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}} // StartTLS offers http/1.1 only
		s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				accepted.Add(1)
			}
		}
		s.StartTLS()
		t.Cleanup(s.Close)
		addr, _ := proxyTo(t, s.Listener.Addr().String())
		roundTripEcho(t, addr, "first\n")
		roundTripEcho(t, addr, "second\n")
		if got := accepted.Load(); got != 3 {
			t.Errorf("connections the server accepted = %d; want 3 (the pool's, which learnt HTTP/1.1, and one per tunnel)", got)
		}
	})
}
