package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// tlsEchoServer accepts TLS connections on 127.0.0.1 with cert and echoes until the client's
// close_notify, then sends its own; it returns the port.
func tlsEchoServer(t *testing.T, cert *tlstest.Cert) int {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{tlsCert(cert)}})
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		io.Copy(c, c)
		c.(*tls.Conn).CloseWrite()
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// secureCluster is the static_resources.clusters entry secure: one host, 127.0.0.1:port,
// spoken to over TLS with SNI backend.example.com, verified against the CA in caPath and
// required to have that DNS name.
func secureCluster(caPath string, port int) string {
	return `  - name: secure
    connect_timeout: 1s
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: backend.example.com
        common_tls_context:
          validation_context:
            trusted_ca: {filename: ` + caPath + `}
            match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: backend.example.com}}]
    load_assignment:
      cluster_name: secure
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(port) + `}}}}]}]
`
}

// tlsCert is c as a certificate for a tls.Config.
func tlsCert(c *tlstest.Cert) tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.Cert.Raw}, PrivateKey: c.Key}
}

// writePEM writes b to a file in dir and returns its path.
func writePEM(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTCPTLS runs the binary with a TCP proxy listener that terminates mutual TLS (its
// certificate a static secret named by sds_secret_config, the client CA from a file,
// require_client_certificate) in front of a plain echo server, and a plain TCP proxy
// listener in front of a cluster whose hosts speak TLS (UpstreamTlsContext). A client with a
// certificate from the CA is proxied and logged with its TLS version, subject and the
// connection id; one without a certificate is refused and reaches no upstream; the
// listener's certificate is in /certs; plain text reaches the TLS upstream encrypted.
func TestTCPTLS(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "e2e tcp ca"})
	server := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	client := ca.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://e2e/client"}})
	backend := ca.Issue(t, tlstest.Options{CommonName: "backend", DNSNames: []string{"backend.example.com"}})
	dir := t.TempDir()
	caPath := writePEM(t, dir, "ca.pem", ca.CertPEM)
	echoPort := echoServer(t)
	tlsPort := tlsEchoServer(t, backend)
	logPath := filepath.Join(dir, "tcp.log")
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  secrets:
  - name: proxy-cert
    tls_certificate:
      certificate_chain: {filename: ` + writePEM(t, dir, "proxy.pem", server.CertPEM) + `}
      private_key: {filename: ` + writePEM(t, dir, "proxy-key.pem", server.KeyPEM) + `}
  listeners:
  - name: mtls
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          require_client_certificate: true
          common_tls_context:
            tls_certificate_sds_secret_configs: [{name: proxy-cert}]
            validation_context: {trusted_ca: {filename: ` + caPath + `}}
      filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: mtls
          cluster: echo
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: ` + logPath + `
              log_format: {text_format: "%DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_PEER_SUBJECT% %DOWNSTREAM_PEER_URI_SAN% %DOWNSTREAM_LOCAL_SUBJECT% %BYTES_RECEIVED% %BYTES_SENT% %UPSTREAM_CLUSTER% %CONNECTION_ID%\n"}
  - name: to-tls
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: to_tls
          cluster: secure
  clusters:
  - name: echo
    connect_timeout: 1s
    load_assignment:
      cluster_name: echo
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(echoPort) + `}}}}]}]
` + secureCluster(caPath, tlsPort)
	p := start(t, "-c", writeConfig(t, cfg), "--file-flush-interval-msec", "20")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	addr := p.listenerAddr("mtls")
	dial := func(cert *tlstest.Cert) (string, error) {
		cfg := &tls.Config{RootCAs: roots, ServerName: "proxy.example.com"}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{tlsCert(cert)}
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if got := c.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "proxy" {
			t.Errorf("proxy certificate CN = %q; want proxy", got)
		}
		io.WriteString(c, "hello over tls")
		c.CloseWrite()
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if got, err := dial(client); err != nil || got != "hello over tls" {
		t.Fatalf("mutual TLS echo = %q, %v; want %q", got, err, "hello over tls")
	}
	if got, err := dial(nil); err == nil {
		t.Errorf("without a client certificate read %q; want the handshake refused", got)
	}

	got := logLines(t, logPath, 2)
	var ids []string
	for i, l := range got {
		j := strings.LastIndexByte(l, ' ')
		ids = append(ids, l[j+1:])
		got[i] = l[:j]
	}
	// Each line is written when its connection closes: either may come first.
	slices.Sort(got)
	want := []string{
		"- - - - 0 0 -",
		"TLSv1.3 CN=client spiffe://e2e/client CN=proxy 14 14 echo",
	}
	if !slices.Equal(got, want) {
		t.Errorf("TCP access log:\n got %q\nwant %q", got, want)
	}
	if ids[0] == "0" || ids[1] == "0" || ids[0] == ids[1] {
		t.Errorf("%%CONNECTION_ID%% of the two connections = %q; want two different non-zero ids", ids)
	}
	if _, _, body := p.get("/stats?filter=^tcp\\.mtls\\.downstream_cx_total$"); body != "tcp.mtls.downstream_cx_total: 2\n" {
		t.Errorf("stats: %q; want tcp.mtls.downstream_cx_total: 2", body)
	}
	if _, _, body := p.get("/stats?filter=^cluster\\.echo\\.upstream_cx_total$"); body != "cluster.echo.upstream_cx_total: 1\n" {
		t.Errorf("stats: %q; want cluster.echo.upstream_cx_total: 1 (none for the refused handshake)", body)
	}
	if _, _, body := p.get("/certs"); !strings.Contains(body, strings.ToLower(server.Cert.SerialNumber.Text(16))) {
		t.Errorf("/certs does not list the listener's certificate (serial %x):\n%s", server.Cert.SerialNumber, body)
	}

	// Plain text in, TLS to the upstream.
	c, err := net.DialTimeout("tcp", p.listenerAddr("to-tls"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "to a tls upstream")
	c.(*net.TCPConn).CloseWrite()
	if b, err := io.ReadAll(c); err != nil || string(b) != "to a tls upstream" {
		t.Errorf("echo through the TLS upstream = %q, %v; want %q", b, err, "to a tls upstream")
	}
	if _, _, body := p.get("/stats?filter=^cluster\\.secure\\.upstream_cx_total$"); body != "cluster.secure.upstream_cx_total: 1\n" {
		t.Errorf("stats: %q; want cluster.secure.upstream_cx_total: 1", body)
	}
}
