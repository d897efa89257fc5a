package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestAutoSNI runs the binary with a cluster whose typed HttpProtocolOptions set auto_sni and
// auto_san_validation, in front of one TLS upstream holding a certificate per name (chosen by
// the SNI it receives, as a virtual-hosting server does). Requests for a.example and
// b.example, interleaved, each reach the upstream with their own Host as SNI and are served;
// every connection carries one name only (two handshakes for four requests); a request for
// c.example, whose SNI gets the a.example certificate, is refused with 503 and counted as
// Envoy counts it (ssl.fail_verify_san, upstream_cx_connect_fail).
func TestAutoSNI(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "e2e auto_sni ca"})
	certs := map[string]tls.Certificate{}
	for _, name := range []string{"a.example", "b.example"} {
		certs[name] = tlsCert(ca.Issue(t, tlstest.Options{CommonName: name, DNSNames: []string{name}}))
	}
	caPath := writePEM(t, t.TempDir(), "ca.pem", ca.CertPEM)

	var mu sync.Mutex
	handshakes := map[string]int{} // SNI -> handshakes the upstream completed
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The connection's SNI, which a shared connection would show for another Host.
		fmt.Fprintf(w, "sni=%s host=%s", r.TLS.ServerName, r.Host)
	}))
	up.TLS = &tls.Config{
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			mu.Lock()
			handshakes[h.ServerName]++
			mu.Unlock()
			if c, ok := certs[h.ServerName]; ok {
				return &c, nil
			}
			c := certs["a.example"] // the server's default name
			return &c, nil
		},
	}
	up.StartTLS()
	t.Cleanup(up.Close)
	upPort := strconv.Itoa(up.Listener.Addr().(*net.TCPAddr).Port)

	routes := `            - name: all
              domains: ["*"]
              routes: [{match: {prefix: "/"}, route: {cluster: vhosts}}]`
	cluster := `
  - name: vhosts
    connect_timeout: 5s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http_protocol_options: {}}
        upstream_http_protocol_options: {auto_sni: true, auto_san_validation: true}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: configured.example
        common_tls_context:
          validation_context:
            trusted_ca: {filename: ` + caPath + `}
    load_assignment:
      cluster_name: vhosts
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + upPort + `}}}`
	p := start(t, "-c", writeConfig(t, exampleBootstrap(exampleHCM("http", routes, ""), cluster)))
	addr := p.listenerAddr("example")
	client := &http.Client{Timeout: 20 * time.Second}
	get := func(host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET with Host %s: %v", host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	for _, r := range []struct{ host, sni string }{
		{"a.example", "a.example"}, {"b.example:8443", "b.example"}, {"a.example", "a.example"}, {"b.example", "b.example"},
	} {
		code, body := get(r.host)
		if want := "sni=" + r.sni + " host=" + r.host; code != http.StatusOK || body != want {
			t.Fatalf("Host %s: %d %q; want 200 %q", r.host, code, body, want)
		}
	}
	mu.Lock()
	a, b := handshakes["a.example"], handshakes["b.example"]
	mu.Unlock()
	if a != 1 || b != 1 {
		t.Errorf("upstream handshakes a.example=%d b.example=%d; want one connection per name, reused", a, b)
	}

	if code, body := get("c.example"); code != http.StatusServiceUnavailable {
		t.Fatalf("Host c.example (certificate for a.example): %d %q; want 503", code, body)
	}
	for name, want := range map[string]uint64{
		"cluster.vhosts.ssl.fail_verify_san":      1,
		"cluster.vhosts.upstream_cx_connect_fail": 1,
		"cluster.vhosts.ssl.handshake":            2,
		"cluster.vhosts.upstream_rq_2xx":          4,
	} {
		if v, ok := p.stat(name); !ok || v != want {
			t.Errorf("%s = %d (listed %v); want %d", name, v, ok, want)
		}
	}
}
