package tcpproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// testExtensions is the registry of the TCP proxy's tests: the TCP proxy (config's parser
// and this package's factory).
func testExtensions(t *testing.T) *registry.Registry {
	t.Helper()
	r, err := registry.Of(config.Register, Register)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serveListener runs a listener manager with the TCP proxy registered with deps and one
// listener, named "tcp", from YAML; it returns the listener's address.
func serveListener(t *testing.T, e *env, deps Deps, yml string) string {
	t.Helper()
	ext := testExtensions(t)
	js, err := yaml.YAMLToJSON([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	var lpb listenerv3.Listener
	if err := protojson.Unmarshal(js, &lpb); err != nil {
		t.Fatal(err)
	}
	lcfg, err := config.ListenerFromProto(&lpb, config.Limits{Extensions: ext})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := listener.NewManager(listener.ManagerConfig{Stats: e.store, Extensions: ext, Services: listener.Services{config.TCPProxyFilter: NewService(deps)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.AddStatic([]*config.Listener{lcfg}); err != nil {
		t.Fatal(err)
	}
	if err := lm.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listener Run = %v", err)
		}
	})
	return lm.Addrs()["tcp"][0].String()
}

// tlsListener is a listener YAML whose one filter chain terminates TLS with the
// DownstreamTlsContext (YAML flow mapping) and proxies to cluster echo, logging to logPath.
func tlsListener(tlsContext, logPath, format string) string {
	return `
name: tcp
address: {socket_address: {address: 127.0.0.1, port_value: 0}}
filter_chains:
- transport_socket:
    name: envoy.transport_sockets.tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
      ` + strings.ReplaceAll(tlsContext, "\n", "\n      ") + `
  filters:
  - name: envoy.filters.network.tcp_proxy
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
      stat_prefix: tls_proxy
      cluster: echo
      access_log: [` + fileLog(logPath, format, "") + `]
`
}

// certYAML is a tls_certificates entry with inline PEM.
func certYAML(c *tlstest.Cert) string {
	return fmt.Sprintf("{certificate_chain: {inline_string: %s}, private_key: {inline_string: %s}}", strconv.Quote(string(c.CertPEM)), strconv.Quote(string(c.KeyPEM)))
}

// tlsFormat prints what a test knows of a TLS connection's entry.
const tlsFormat = "%DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_PEER_SUBJECT% %DOWNSTREAM_PEER_URI_SAN% %DOWNSTREAM_LOCAL_SUBJECT% %DOWNSTREAM_LOCAL_DNS_SAN% %REQUESTED_SERVER_NAME% %BYTES_RECEIVED% %BYTES_SENT% %UPSTREAM_CLUSTER%|%CONNECTION_ID%\n"

// TestTLSTermination runs TLS clients against a TCP proxy that terminates TLS (one-way and
// with require_client_certificate) in front of a plain-text echo upstream: the upstream sees
// plain text, the access log shows the handshake, and a refused handshake makes no upstream
// connection.
func TestTLSTermination(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "tcp ca"})
	other := tlstest.NewCA(t, tlstest.Options{CommonName: "other ca"})
	server := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	client := ca.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://example.com/client"}})
	stranger := other.Issue(t, tlstest.Options{CommonName: "stranger"})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	oneWay := "common_tls_context: {tls_certificates: [" + certYAML(server) + "]}"
	mutual := fmt.Sprintf("require_client_certificate: true\ncommon_tls_context: {tls_certificates: [%s], validation_context: {trusted_ca: {inline_string: %s}}}",
		certYAML(server), strconv.Quote(string(ca.CertPEM)))
	tests := []struct {
		name    string
		context string
		cert    *tlstest.Cert // the client's certificate; nil for none
		refused bool          // the proxy refuses the handshake
		want    string        // the access log line before "|"
	}{
		{name: "one-way", context: oneWay,
			want: "TLSv1.3 - - CN=proxy proxy.example.com proxy.example.com 5 5 echo"},
		{name: "mutual", context: mutual, cert: client,
			want: "TLSv1.3 CN=client spiffe://example.com/client CN=proxy proxy.example.com proxy.example.com 5 5 echo"},
		{name: "mutual without a client certificate", context: mutual, refused: true,
			want: "- - - - - - 0 0 -"},
		{name: "mutual with an untrusted certificate", context: mutual, cert: stranger, refused: true,
			want: "- - - - - - 0 0 -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, echo)
			e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
			logs := newLogFiles(t)
			addr := serveListener(t, e, Deps{Pools: e.pools, AccessLogs: AccessLogDeps{Files: logs.Manager}}, tlsListener(tt.context, logs.path("a.log"), tlsFormat))
			cfg := &tls.Config{RootCAs: roots, ServerName: "proxy.example.com"}
			if tt.cert != nil {
				cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{tt.cert.Cert.Raw}, PrivateKey: tt.cert.Key}}
			}
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: wait}, "tcp", addr, cfg)
			if err != nil {
				t.Fatalf("TLS dial: %v", err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(wait))
			io.WriteString(c, "hello")
			c.CloseWrite()
			got, err := io.ReadAll(c)
			switch {
			case tt.refused && err == nil:
				t.Fatalf("read %q after a handshake the proxy should refuse; want an error", got)
			case !tt.refused && (err != nil || string(got) != "hello"):
				t.Fatalf("echo = %q, %v; want %q", got, err, "hello")
			}
			line := logs.lines(t, "a.log", 1)[0]
			fields, id, _ := strings.Cut(line, "|")
			if fields != tt.want {
				t.Errorf("access log line:\n got %q\nwant %q", fields, tt.want)
			}
			if n, err := strconv.ParseUint(id, 10, 64); err != nil || n == 0 {
				t.Errorf("%%CONNECTION_ID%% = %q; want a non-zero number", id)
			}
			if tt.refused {
				select {
				case c := <-up.conns:
					c.Close()
					t.Errorf("upstream got a connection from %s; want none after a refused handshake", c.RemoteAddr())
				default:
				}
			}
		})
	}
}

// secrets is a tlsutil.SecretProvider whose secrets a test replaces, as SDS does.
type secrets struct {
	mu sync.Mutex // guards m
	m  map[string]tlsutil.Secret
}

func (s *secrets) Secret(name string) (tlsutil.Secret, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[name]
	return v, ok
}

func (s *secrets) setCertificate(t *testing.T, name string, c *tlstest.Cert) {
	t.Helper()
	sec, err := tlsutil.SecretFromProto("secret", &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(c.CertPEM), PrivateKey: inline(c.KeyPEM),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]tlsutil.Secret{}
	}
	s.m[name] = sec
}

// TestTLSSecretRotation serves the certificate of an SDS secret and, after the secret changes
// and the /certs registry reloads (what the server does when SDS delivers a new version),
// serves the new one on new connections.
func TestTLSSecretRotation(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "sds ca"})
	first := ca.Issue(t, tlstest.Options{CommonName: "first", DNSNames: []string{"proxy.example.com"}})
	second := ca.Issue(t, tlstest.Options{CommonName: "second", DNSNames: []string{"proxy.example.com"}})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	var sec secrets
	sec.setCertificate(t, "server", first)
	certs := tlsutil.NewRegistry(time.Now)
	up := newUpstream(t, echo)
	e := newEnv(t, "", map[string][]string{"echo": {up.addr()}})
	logs := newLogFiles(t)
	deps := Deps{Pools: e.pools, AccessLogs: AccessLogDeps{Files: logs.Manager}, TLS: tlsutil.Deps{Secrets: &sec, Registry: certs}}
	addr := serveListener(t, e, deps, tlsListener("common_tls_context: {tls_certificate_sds_secret_configs: [{name: server, sds_config: {ads: {}}}]}", logs.path("a.log"), "%DOWNSTREAM_LOCAL_SUBJECT%\n"))
	if got := len(certs.Certificates()); got != 1 {
		t.Fatalf("/certs contexts = %d; want 1 (the filter chain's)", got)
	}
	served := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: wait}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: "proxy.example.com"})
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(wait))
		io.WriteString(c, "x")
		c.CloseWrite()
		if got, err := io.ReadAll(c); err != nil || string(got) != "x" {
			t.Fatalf("echo = %q, %v; want %q", got, err, "x")
		}
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	for i, step := range []struct {
		rotate *tlstest.Cert
		want   string
	}{
		{nil, "first"},
		{second, "second"},
	} {
		t.Run(step.want, func(t *testing.T) {
			if step.rotate != nil {
				sec.setCertificate(t, "server", step.rotate)
				if err := certs.Reload(); err != nil {
					t.Fatalf("Reload() = %v", err)
				}
			}
			if got := served(); got != step.want {
				t.Errorf("served certificate CN = %q; want %q", got, step.want)
			}
			if got, want := logs.lines(t, "a.log", i+1)[i], "CN="+step.want; got != want {
				t.Errorf("%%DOWNSTREAM_LOCAL_SUBJECT%% = %q; want %q", got, want)
			}
		})
	}
}

// TestUpstreamTLS proxies plain-text downstream connections to a cluster whose hosts speak
// TLS: the pool's TCP connections handshake with the cluster's client configuration.
func TestUpstreamTLS(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "upstream ca"})
	leaf := ca.Issue(t, tlstest.Options{CommonName: "backend", DNSNames: []string{"backend.example.com"}})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	got := make(chan string, 1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(wait))
		b, _ := io.ReadAll(c)
		got <- string(b)
		c.Write([]byte("upstream says " + string(b)))
		c.(*tls.Conn).CloseWrite()
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	e := newEnvTLS(t, "", map[string][]string{"secure": {ln.Addr().String()}}, func(*config.Cluster, *host.Host) *tls.Config {
		return &tls.Config{RootCAs: roots, ServerName: "backend.example.com"}
	})
	p := newProxy(t, e, "{stat_prefix: t, cluster: secure}", nil)
	c := dial(t, serveLocal(t, p))
	io.WriteString(c, "hi")
	c.CloseWrite()
	if reply := readAll(t, c); reply != "upstream says hi" {
		t.Errorf("reply = %q; want %q", reply, "upstream says hi")
	}
	if b := <-got; b != "hi" {
		t.Errorf("upstream read %q; want %q", b, "hi")
	}
}

// wait bounds what a TLS test waits for.
const wait = 10 * time.Second

func inline(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}
