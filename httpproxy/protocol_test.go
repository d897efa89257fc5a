package httpproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// h2cClient is an HTTP/2 client with prior knowledge over plain TCP.
func h2cClient(t testing.TB) *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: wait}
}

// downstreamTLS is a tls transport socket serving a certificate for 127.0.0.1 issued by ca.
func downstreamTLSSocket(t testing.TB, ca *tlstest.Cert) *corev3.TransportSocket {
	leaf := ca.Issue(t, tlstest.Options{CommonName: "proxy", IPs: []string{"127.0.0.1"}})
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		AlpnProtocols: []string{"h2", "http/1.1"},
		TlsCertificates: []*tlsv3.TlsCertificate{{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: leaf.CertPEM}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: leaf.KeyPEM}},
		}},
	}}
	a, err := anypb.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

func TestProtocols(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	upLeaf := ca.Issue(t, tlstest.Options{CommonName: "upstream", IPs: []string{"127.0.0.1"}})

	h1 := echo(t, "h1")
	h2c := httptest.NewUnstartedServer(h1.Config.Handler)
	h2c.Config.Protocols = new(http.Protocols)
	h2c.Config.Protocols.SetUnencryptedHTTP2(true)
	h2c.Start()
	t.Cleanup(h2c.Close)
	both := httptest.NewUnstartedServer(h1.Config.Handler)
	both.Config.Protocols = new(http.Protocols)
	both.Config.Protocols.SetHTTP1(true)
	both.Config.Protocols.SetUnencryptedHTTP2(true)
	both.Start()
	t.Cleanup(both.Close)
	h2tls := httptest.NewUnstartedServer(h1.Config.Handler)
	h2tls.EnableHTTP2 = true
	h2tls.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{upLeaf.Cert.Raw}, PrivateKey: upLeaf.Key}}}
	h2tls.StartTLS()
	t.Cleanup(h2tls.Close)
	upTLS := func(c *config.Cluster, h *host.Host) *tls.Config {
		if c.Name != "h2tls" {
			return nil
		}
		return &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	}
	clusters := []string{
		staticCluster("h1", "", h1.Listener.Addr().String()),
		staticCluster("h2c", "http2_protocol_options: {}", h2c.Listener.Addr().String()),
		staticCluster("h2tls", "http2_protocol_options: {}", h2tls.Listener.Addr().String()),
		staticCluster("same", "protocol_selection: USE_DOWNSTREAM_PROTOCOL\nhttp2_protocol_options: {}", both.Listener.Addr().String()),
	}
	hcm := `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/h1"}
      route: {cluster: h1}
    - match: {prefix: "/h2c"}
      route: {cluster: h2c}
    - match: {prefix: "/h2tls"}
      route: {cluster: h2tls}
    - match: {prefix: "/same"}
      route: {cluster: same}
`
	plain := newEnv(t, envOptions{clusters: clusters, hcm: hcm, upTLS: upTLS})
	secure := newEnv(t, envOptions{clusters: clusters, hcm: hcm, upTLS: upTLS, tls: downstreamTLSSocket(t, ca)})

	h1Client := plain.client()
	h2cC := h2cClient(t)
	tlsTransport := func(protos ...string) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: protos}, ForceAttemptHTTP2: len(protos) > 0 && protos[0] == "h2"}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: wait}
	}
	tests := []struct {
		name       string
		env        *env
		client     *http.Client
		scheme     string
		path       string
		downstream string // the protocol the client saw
		upstream   string // the protocol the upstream saw
	}{
		{"http1 to http1", plain, h1Client, "http", "/h1", "HTTP/1.1", "HTTP/1.1"},
		{"http1 to h2c", plain, h1Client, "http", "/h2c", "HTTP/1.1", "HTTP/2.0"},
		{"http1 to h2 over TLS", plain, h1Client, "http", "/h2tls", "HTTP/1.1", "HTTP/2.0"},
		{"h2c to http1", plain, h2cC, "http", "/h1", "HTTP/2.0", "HTTP/1.1"},
		{"h2c to h2c", plain, h2cC, "http", "/h2c", "HTTP/2.0", "HTTP/2.0"},
		{"http1 keeps http1 (use downstream protocol)", plain, h1Client, "http", "/same", "HTTP/1.1", "HTTP/1.1"},
		{"h2c keeps h2 (use downstream protocol)", plain, h2cC, "http", "/same", "HTTP/2.0", "HTTP/2.0"},
		{"TLS ALPN h2 to http1", secure, tlsTransport("h2", "http/1.1"), "https", "/h1", "HTTP/2.0", "HTTP/1.1"},
		{"TLS ALPN h2 to h2 over TLS", secure, tlsTransport("h2", "http/1.1"), "https", "/h2tls", "HTTP/2.0", "HTTP/2.0"},
		{"TLS http/1.1", secure, tlsTransport("http/1.1"), "https", "/h1", "HTTP/1.1", "HTTP/1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 3 {
				resp, err := tt.client.Get(tt.scheme + "://" + tt.env.addr + tt.path + "?i=" + strings.Repeat("x", i))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "h1 "+tt.path {
					t.Fatalf("got %d %q; want 200 %q", resp.StatusCode, body, "h1 "+tt.path)
				}
				if resp.Proto != tt.downstream {
					t.Errorf("downstream protocol = %s; want %s", resp.Proto, tt.downstream)
				}
				if got := resp.Header.Get("X-Seen-Proto"); got != tt.upstream {
					t.Errorf("upstream protocol = %s; want %s", got, tt.upstream)
				}
			}
		})
	}
	if got := plain.stat("http.ingress.downstream_cx_http2_total"); got == 0 {
		t.Errorf("downstream_cx_http2_total = 0; want > 0")
	}
	if got := secure.stat("http.ingress.downstream_cx_ssl_total"); got == 0 {
		t.Errorf("downstream_cx_ssl_total = 0; want > 0")
	}
}

func TestCodecErrors(t *testing.T) {
	up := echo(t, "a")
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: simpleHCM("web", "")})
	tests := []struct {
		name, req string
		status    string
	}{
		{"no host", "GET / HTTP/1.1\r\n\r\n", "400"},
		{"bad version", "GET / HTTP/3.0\r\nHost: x\r\n\r\n", "400"},
		{"space in header name", "GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", "400"},
		{"folded header", "GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n c\r\n\r\n", "400"},
		{"chunked and length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "400"},
		{"unknown transfer coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "501"},
		{"head too large", "GET / HTTP/1.1\r\nHost: x\r\nBig: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", "431"},
		{"valid chunked post", "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "200"},
		{"http/1.0 without accept_http_10", "GET /old HTTP/1.0\r\n\r\n", "426"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(wait))
			go io.WriteString(c, tt.req)
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatalf("reading status line: %v", err)
			}
			if got := strings.Fields(line); len(got) < 2 || got[1] != tt.status {
				t.Errorf("status line = %q; want status %s", line, tt.status)
			}
		})
	}
}

func TestDrain(t *testing.T) {
	up := newBlockingPath(t, 0, "/busy")
	e := newEnv(t, envOptions{
		clusters:  []string{staticCluster("web", "", up.srv.Listener.Addr().String())},
		hcm:       simpleHCM("web", ""),
		drainTime: time.Minute, drainNow: true,
	})
	// An idle keep-alive connection.
	idle, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 4096)
	if err := readOneResponse(idle, buf); err != nil {
		t.Fatal(err)
	}
	// An in-flight request (the upstream holds it until released).
	busy := e.client()
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := busy.Get("http://" + e.addr + "/busy")
		if err != nil {
			t.Errorf("in-flight request: %v", err)
			done <- nil
			return
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- resp
	}()
	up.waitStarted(t, 2)
	e.lm.DrainListeners(listener.DrainRequest{Graceful: true, SkipExit: true}, nil)
	// The idle connection is closed by the proxy.
	idle.SetReadDeadline(time.Now().Add(wait))
	if n, err := idle.Read(buf); err != io.EOF {
		t.Errorf("idle connection read = %d, %v; want EOF", n, err)
	}
	up.unblock()
	resp := <-done
	if resp == nil {
		return
	}
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("in-flight response: status %d, close %v; want 200 with connection: close", resp.StatusCode, resp.Close)
	}
	if got := e.stat("http.ingress.downstream_cx_drain_close"); got != 2 {
		t.Errorf("downstream_cx_drain_close = %d; want 2", got)
	}
}

func TestDrainHTTP2(t *testing.T) {
	up := newBlocking(t, 0)
	e := newEnv(t, envOptions{
		clusters:  []string{staticCluster("web", "", up.srv.Listener.Addr().String())},
		hcm:       simpleHCM("web", ""),
		drainTime: time.Minute, drainNow: true,
	})
	c := h2cClient(t)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Get("http://" + e.addr + "/busy")
		if err != nil {
			done <- err
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "done" {
			t.Errorf("in-flight h2 request: %d %q; want 200 done", resp.StatusCode, b)
		}
		done <- nil
	}()
	up.waitStarted(t, 1)
	e.lm.DrainListeners(listener.DrainRequest{Graceful: true, SkipExit: true}, nil)
	up.unblock()
	if err := <-done; err != nil {
		t.Errorf("in-flight h2 request: %v", err)
	}
}
