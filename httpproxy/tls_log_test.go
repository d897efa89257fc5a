package httpproxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog/als/alstest"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// mtlsSocket is a downstream TLS transport socket presenting a certificate for
// proxy.example.com and asking clients for a certificate of ca (not requiring one).
func mtlsSocket(t testing.TB, ca *tlstest.Cert) *corev3.TransportSocket {
	t.Helper()
	leaf := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	inline := func(b []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
	}
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		AlpnProtocols:   []string{"h2", "http/1.1"},
		TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: inline(leaf.CertPEM), PrivateKey: inline(leaf.KeyPEM)}},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inline(ca.CertPEM),
		}},
	}}
	a, err := anypb.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

// TestDownstreamTLSInHTTPAccessLogs sends HTTP/1.1 and HTTP/2 requests over mutual TLS and
// checks the file access log's TLS operators, the gRPC access log's tls_properties, and
// the listener's ssl.* stats.
func TestDownstreamTLSInHTTPAccessLogs(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	clientCert := ca.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://example.com/client"}})
	up := echo(t, "a")
	alsSrv := alstest.Start(t)
	path := filepath.Join(t.TempDir(), "tls.log")
	hcm := fmt.Sprintf(webHCM+`access_log:%s
- name: envoy.access_loggers.http_grpc
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig
    common_config:
      log_name: edge
      transport_api_version: V3
      grpc_service: {envoy_grpc: {cluster_name: als}}
      buffer_flush_interval: 0.05s
`, fileLogYAML(path, "%REQ(:PATH)% %PROTOCOL% %DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_TLS_CIPHER% %DOWNSTREAM_PEER_SUBJECT% %DOWNSTREAM_PEER_URI_SAN% %DOWNSTREAM_LOCAL_SUBJECT% %REQUESTED_SERVER_NAME%\n", ""))
	var e *env
	e = newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String()), staticCluster("als", "", alsSrv.Addr)},
		hcm:      hcm,
		tls:      mtlsSocket(t, ca),
		als:      alstest.RunManager(t, clusterDialer(&e)),
	})

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	pair, err := tls.X509KeyPair(clientCert.CertPEM, clientCert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var ciphers []string
	get := func(h2 bool, p string) {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "proxy.example.com",
			Certificates: []tls.Certificate{pair}, CurvePreferences: []tls.CurveID{tls.X25519}}}
		tr.Protocols = new(http.Protocols)
		if h2 {
			tr.Protocols.SetHTTP2(true)
		} else {
			tr.Protocols.SetHTTP1(true)
		}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: wait}
		resp, err := c.Get("https://" + e.addr + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ciphers = append(ciphers, tlsutil.CipherName(resp.TLS.CipherSuite))
	}
	get(false, "/h1")
	get(true, "/h2")

	var props []string
	timeout := time.After(wait)
	for len(props) < 2 {
		select {
		case msg := <-alsSrv.Msgs:
			for _, le := range msg.GetHttpLogs().GetLogEntry() {
				tp := le.GetCommonProperties().GetTlsProperties()
				props = append(props, fmt.Sprintf("%s %s %d %s %s %s", le.GetRequest().GetPath(), tp.GetTlsVersion(),
					tp.GetTlsCipherSuite().GetValue(), tp.GetTlsSniHostname(), tp.GetPeerCertificateProperties().GetSubject(),
					tp.GetLocalCertificateProperties().GetSubject()))
			}
		case <-timeout:
			t.Fatalf("gRPC access log entries %q; want 2", props)
		}
	}
	sort.Strings(props)
	wantProps := []string{
		fmt.Sprintf("/h1 TLSv1_3 %d proxy.example.com CN=client CN=proxy", cipherID(ciphers[0])),
		fmt.Sprintf("/h2 TLSv1_3 %d proxy.example.com CN=client CN=proxy", cipherID(ciphers[1])),
	}
	if diff := cmp.Diff(wantProps, props); diff != "" {
		t.Errorf("tls_properties (-want +got):\n%s", diff)
	}

	want := []string{
		"/h1 HTTP/1.1 TLSv1.3 " + ciphers[0] + " CN=client spiffe://example.com/client CN=proxy proxy.example.com",
		"/h2 HTTP/2 TLSv1.3 " + ciphers[1] + " CN=client spiffe://example.com/client CN=proxy proxy.example.com",
	}
	// The file log is written before the gRPC log of the same stream: both entries have
	// reached the service, so both lines are in.
	got := e.readLog(t, path)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("access log (-want +got):\n%s", diff)
	}

	// The listener's scope is where its downstream_cx_total is.
	var scope string
	e.store.Each(stats.KindSet(stats.KindCounter), func(st *stats.Stat) bool {
		if n, ok := strings.CutSuffix(st.Name(), ".downstream_cx_total"); ok && strings.HasPrefix(n, "listener.") && !strings.Contains(n, ".http.") && !strings.Contains(n, ".worker_") {
			scope = n + ".ssl."
		}
		return true
	})
	gotStats := map[string]uint64{}
	e.store.Each(stats.KindSet(stats.KindCounter), func(st *stats.Stat) bool {
		if strings.Contains(st.Name(), ".ssl.") && st.Value() > 0 {
			gotStats[strings.TrimPrefix(st.Name(), scope)] = st.Value()
		}
		return true
	})
	wantStats := map[string]uint64{"handshake": 2, "versions.TLSv1.3": 2, "curves.X25519": 2}
	for _, c := range ciphers {
		wantStats["ciphers."+c]++
	}
	if diff := cmp.Diff(wantStats, gotStats); diff != "" {
		t.Errorf("%s* (-want +got):\n%s", scope, diff)
	}
}

// cipherID returns the id of a TLS 1.3 suite by its name.
func cipherID(name string) uint16 {
	for _, s := range tls.CipherSuites() {
		if s.Name == name {
			return s.ID
		}
	}
	return 0
}
