package tcpproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// seenRequest is what a tunnel server saw of the tunnel's request.
type seenRequest struct {
	method, host, path, proto string
	header                    http.Header
}

func see(r *http.Request) seenRequest {
	return seenRequest{method: r.Method, host: r.Host, path: r.URL.Path, proto: r.Proto, header: r.Header.Clone()}
}

// h1TunnelServer is a net/http HTTP/1.1 server: a CONNECT is answered status and, when it
// is 200, hijacked and echoed raw until the client half-closes; a POST is echoed in a
// chunked response body (full duplex). Each request is sent on seen.
func h1TunnelServer(t *testing.T, status int, seen chan<- seenRequest) string {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- see(r)
		if status != http.StatusOK {
			http.Error(w, "no", status)
			return
		}
		if r.Method == http.MethodPost {
			http.NewResponseController(w).EnableFullDuplex()
			nettest.EchoBody(w, r)
			return
		}
		hijackEcho(w, "HTTP/1.1 200 Connection established\r\n\r\n")
	})
	return serveHTTP1(t, h)
}

// hijackEcho answers a CONNECT with head on the hijacked connection, then echoes its bytes
// until the client half-closes.
func hijackEcho(w http.ResponseWriter, head string) {
	c, brw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	brw.WriteString(head)
	brw.Flush()
	io.Copy(c, brw)
	c.(*net.TCPConn).CloseWrite()
}

// serveHTTP1 serves h with net/http on 127.0.0.1 until the test ends; it returns the address.
func serveHTTP1(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// h2TunnelServer is an x/net/http2 server (prior knowledge) answering CONNECT and POST with
// status; a 200 echoes the stream's bytes until the client ends its side.
func h2TunnelServer(t *testing.T, status int, seen chan<- seenRequest) string {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- see(r)
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		nettest.EchoBody(w, r)
	})
	srv := &http2.Server{}
	up := newUpstream(t, func(c net.Conn) { srv.ServeConn(c, &http2.ServeConnOpts{Handler: h}) })
	return up.addr()
}

const h2Cluster = "typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: " +
	"{\"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}"

// roundTripEcho sends msg through the proxy at addr, half-closes and reads the echo to EOF.
func roundTripEcho(t *testing.T, addr, msg string) {
	t.Helper()
	c := dial(t, addr)
	io.WriteString(c, msg)
	c.CloseWrite()
	if got := readAll(t, c); got != msg {
		t.Fatalf("echo through the tunnel = %q; want %q", got, msg)
	}
}

func receive(t *testing.T, seen <-chan seenRequest) seenRequest {
	t.Helper()
	select {
	case r := <-seen:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the tunnel server saw no request")
		return seenRequest{}
	}
}

// TestTunnel carries a TCP echo in the tunnel's request to real HTTP servers, over each
// codec and method: the request has the formatted hostname and headers_to_add, the payload
// crosses both ways and each side's end of stream reaches the other.
func TestTunnel(t *testing.T) {
	tests := []struct {
		name, cluster, tunnel string
		server                func(*testing.T, int, chan<- seenRequest) string
		method, path, proto   string
	}{
		{"HTTP/1.1 CONNECT", "", "", h1TunnelServer, "CONNECT", "", "HTTP/1.1"},
		{"HTTP/1.1 POST", "", ", use_post: true, post_path: /tcp", h1TunnelServer, "POST", "/tcp", "HTTP/1.1"},
		{"HTTP/2 CONNECT", h2Cluster, "", h2TunnelServer, "CONNECT", "", "HTTP/2.0"},
		{"HTTP/2 POST", h2Cluster, ", use_post: true", h2TunnelServer, "POST", "/", "HTTP/2.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan seenRequest, 1)
			e := newEnv(t, tc.cluster, map[string][]string{"proxy": {tc.server(t, http.StatusOK, seen)}})
			p := newProxy(t, e, `{stat_prefix: tun, cluster: proxy, tunneling_config: {hostname: "svc-%DOWNSTREAM_LOCAL_PORT%:443"`+tc.tunnel+`,
headers_to_add: [{header: {key: x-client, value: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"}}, {header: {key: x-empty, value: ""}}]}}`, nil)
			addr := serveLocal(t, p)
			roundTripEcho(t, addr, "through the tunnel")
			r := receive(t, seen)
			_, port, _ := net.SplitHostPort(addr)
			if r.method != tc.method || r.host != "svc-"+port+":443" || r.path != tc.path || r.proto != tc.proto {
				t.Errorf("request = %s %q %q %s; want %s %q %q %s", r.method, r.host, r.path, r.proto, tc.method, "svc-"+port+":443", tc.path, tc.proto)
			}
			if got := r.header.Get("X-Client"); got != "127.0.0.1" {
				t.Errorf("x-client = %q; want 127.0.0.1", got)
			}
			if _, ok := r.header["X-Empty"]; ok {
				t.Errorf("x-empty was sent; an empty value without keep_empty_value is not")
			}
			if ua := r.header.Get("User-Agent"); ua != "" {
				t.Errorf("user-agent = %q; the tunnel adds none", ua)
			}
			cst := e.cm.Get("proxy").Stats()
			waitFor(t, "the tunnel's request ended", func() bool { return cst.UpstreamRqActive.Value() == 0 })
			if got := []uint64{cst.UpstreamRqTotal.Value(), cst.UpstreamCxTotal.Value(), p.Stats().DownstreamCxRxBytesTotal.Value()}; got[0] != 1 || got[1] != 1 || got[2] != 18 {
				t.Errorf("upstream_rq_total, upstream_cx_total, downstream_cx_rx_bytes_total = %v; want [1 1 18]", got)
			}
		})
	}
}

// TestTunnelRefused checks that an answer that does not open the tunnel (403 over either
// codec; over HTTP/2 even a 2xx other than 200) closes the downstream connection without a
// byte, after max_connect_attempts tries.
func TestTunnelRefused(t *testing.T) {
	tests := []struct {
		name, cluster string
		server        func(*testing.T, int, chan<- seenRequest) string
		status        int
	}{
		{"HTTP/1.1 403", "", h1TunnelServer, http.StatusForbidden},
		{"HTTP/2 403", h2Cluster, h2TunnelServer, http.StatusForbidden},
		{"HTTP/2 202", h2Cluster, h2TunnelServer, http.StatusAccepted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan seenRequest, 2)
			e := newEnv(t, tc.cluster, map[string][]string{"proxy": {tc.server(t, tc.status, seen)}})
			p := newProxy(t, e, "{stat_prefix: tun, cluster: proxy, max_connect_attempts: 2, tunneling_config: {hostname: x:1}}", nil)
			c := dial(t, serveLocal(t, p))
			if got := readAll(t, c); got != "" {
				t.Fatalf("refused tunnel sent %q downstream; want nothing", got)
			}
			receive(t, seen)
			receive(t, seen)
			cst := e.cm.Get("proxy").Stats()
			if tc.cluster == "" {
				waitFor(t, "the attempts' connections closed", func() bool { return cst.UpstreamCxActive.Value() == 0 })
			} else {
				// HTTP/2 attempts are streams of one pooled connection, which stays open.
				waitFor(t, "the attempts' streams ended", func() bool { return cst.UpstreamRqActive.Value() == 0 })
				if got := cst.UpstreamCxTotal.Value(); got != 1 {
					t.Errorf("upstream_cx_total = %d; want both attempts on 1 pooled connection", got)
				}
			}
			if got := []uint64{cst.UpstreamRqTotal.Value(), cst.UpstreamRqActive.Value(), cst.UpstreamCxConnectAttemptsExceeded.Value()}; got[0] != 2 || got[1] != 0 || got[2] != 1 {
				t.Errorf("upstream_rq_total, upstream_rq_active, upstream_cx_connect_attempts_exceeded = %v; want [2 0 1]", got)
			}
		})
	}
}

// TestTunnelUpstreamResets checks an upstream that reads the tunnel's request and closes
// without an answer: the downstream connection is closed.
func TestTunnelUpstreamResets(t *testing.T) {
	heads := make(chan string, 1)
	up := newUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		var head strings.Builder
		for {
			line, err := br.ReadString('\n')
			head.WriteString(line)
			if err != nil || line == "\r\n" {
				break
			}
		}
		heads <- head.String()
		c.(*net.TCPConn).SetLinger(0)
	})
	e := newEnv(t, "", map[string][]string{"proxy": {up.addr()}})
	p := newProxy(t, e, "{stat_prefix: tun, cluster: proxy, tunneling_config: {hostname: 'target:80'}}", nil)
	c := dial(t, serveLocal(t, p))
	if got := readAll(t, c); got != "" {
		t.Fatalf("reset tunnel sent %q downstream; want nothing", got)
	}
	if h := <-heads; !strings.HasPrefix(h, "CONNECT target:80 HTTP/1.1\r\nhost: target:80\r\n") {
		t.Errorf("request head = %q; want a CONNECT to target:80", h)
	}
}

// TestTunnelOverTLS checks the codec choice on TLS clusters: an HTTP/2 cluster offers only
// "h2" in ALPN, and an auto_config cluster speaks what the server picks (h2 here).
func TestTunnelOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "tunnel ca"})
	leaf := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, tc := range []struct{ name, cluster string }{
		{"HTTP/2", h2Cluster},
		{"auto_config", "typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: " +
			"{\"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, auto_config: {}}}\n" +
			"transport_socket: {name: envoy.transport_sockets.tls, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan seenRequest, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen <- see(r)
				nettest.EchoBody(w, r)
			})
			srv := &http2.Server{}
			serverTLS := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}, NextProtos: []string{"h2"}}
			up := newUpstream(t, func(c net.Conn) {
				tc := tls.Server(c, serverTLS)
				if tc.Handshake() != nil {
					return
				}
				srv.ServeConn(tc, &http2.ServeConnOpts{Handler: h})
			})
			e := newEnvTLS(t, tc.cluster, map[string][]string{"proxy": {up.addr()}}, func(*config.Cluster, *host.Host) *tls.Config {
				return &tls.Config{RootCAs: roots, ServerName: "proxy.example.com"}
			})
			p := newProxy(t, e, "{stat_prefix: tls, cluster: proxy, tunneling_config: {hostname: 'svc:443', use_post: true}}", nil)
			roundTripEcho(t, serveLocal(t, p), "sealed tunnel")
			if r := receive(t, seen); r.proto != "HTTP/2.0" || r.method != "POST" {
				t.Errorf("request = %s %s; want an HTTP/2 POST", r.method, r.proto)
			}
		})
	}
}
