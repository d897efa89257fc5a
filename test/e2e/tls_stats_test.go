package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestTLSStatsHTTP runs the binary with an HTTP listener terminating TLS in front of a
// cluster whose host speaks TLS. One HTTPS request with a client certificate and one
// without are proxied; the access log carries the downstream TLS fields, and /stats shows
// listener.<address>.ssl.* and cluster.secure.ssl.* counted as Envoy counts them.
func TestTLSStatsHTTP(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "e2e tls ca"})
	server := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	client := ca.Issue(t, tlstest.Options{CommonName: "client"})
	backend := ca.Issue(t, tlstest.Options{CommonName: "backend", DNSNames: []string{"backend.example.com"}})
	dir := t.TempDir()
	caPath := writePEM(t, dir, "ca.pem", ca.CertPEM)
	logPath := filepath.Join(dir, "http.log")

	upTLS := make(chan tls.ConnectionState, 4)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upTLS <- *r.TLS
		io.WriteString(w, "hello")
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{tlsCert(backend)}}
	up.StartTLS()
	t.Cleanup(up.Close)
	upPort := up.Listener.Addr().(*net.TCPAddr).Port

	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: https
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: {filename: ` + writePEM(t, dir, "proxy.pem", server.CertPEM) + `}
              private_key: {filename: ` + writePEM(t, dir, "proxy-key.pem", server.KeyPEM) + `}
            validation_context: {trusted_ca: {filename: ` + caPath + `}}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: https
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes: [{match: {prefix: "/"}, route: {cluster: secure}}]
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: ` + logPath + `
              log_format: {text_format: "%REQ(:PATH)% %RESPONSE_CODE% %DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_PEER_SUBJECT% %DOWNSTREAM_LOCAL_SUBJECT% %REQUESTED_SERVER_NAME%\n"}
  clusters:
` + secureCluster(caPath, upPort)
	p := start(t, "-c", writeConfig(t, cfg), "--file-flush-interval-msec", "20")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	addr := p.listenerAddr("https")
	var downCiphers []string
	for i, cert := range []*tlstest.Cert{client, nil} {
		tc := &tls.Config{RootCAs: roots, ServerName: "proxy.example.com", CurvePreferences: []tls.CurveID{tls.X25519}}
		if cert != nil {
			tc.Certificates = []tls.Certificate{tlsCert(cert)}
		}
		tr := &http.Transport{TLSClientConfig: tc}
		c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		resp, err := c.Get(fmt.Sprintf("https://%s/r%d", addr, i))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != 200 || string(b) != "hello" {
			t.Fatalf("request %d: %d %q; want 200 hello", i, resp.StatusCode, b)
		}
		downCiphers = append(downCiphers, tlsutil.CipherName(resp.TLS.CipherSuite))
	}
	// The proxy reuses its upstream connection: one upstream handshake.
	first := <-upTLS

	got := logLines(t, logPath, 2)
	slices.Sort(got)
	want := []string{
		"/r0 200 TLSv1.3 CN=client CN=proxy proxy.example.com",
		"/r1 200 TLSv1.3 - CN=proxy proxy.example.com",
	}
	if !slices.Equal(got, want) {
		t.Errorf("HTTP access log:\n got %q\nwant %q", got, want)
	}

	_, _, body := p.get("/stats?filter=\\.ssl\\.")
	var gotStats []string
	for _, l := range lines(body) {
		if !strings.HasSuffix(l, ": 0") {
			gotStats = append(gotStats, l)
		}
	}
	ls, cl := "listener.127.0.0.1_0.ssl.", "cluster.secure.ssl."
	wantStats := []string{
		cl + "ciphers." + tlsutil.CipherName(first.CipherSuite) + ": 1",
		cl + "curves." + tlsutil.CurveName(first.CurveID) + ": 1",
		cl + "handshake: 1",
		cl + "versions." + tlsutil.VersionName(first.Version) + ": 1",
		ls + "curves.X25519: 2",
		ls + "handshake: 2",
		ls + "no_certificate: 1",
		ls + "versions.TLSv1.3: 2",
	}
	if downCiphers[0] == downCiphers[1] {
		wantStats = append(wantStats, ls+"ciphers."+downCiphers[0]+": 2")
	} else {
		wantStats = append(wantStats, ls+"ciphers."+downCiphers[0]+": 1", ls+"ciphers."+downCiphers[1]+": 1")
	}
	slices.Sort(gotStats)
	slices.Sort(wantStats)
	if !slices.Equal(gotStats, wantStats) {
		t.Errorf("/stats?filter=\\.ssl\\. (non-zero):\n got %q\nwant %q", gotStats, wantStats)
	}
}
