package rbac

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestAuthenticatedPrincipal: over a real mutual-TLS listener, the authenticated principal
// matches the client certificate's URI SAN and requested_server_name the SNI; a client with
// another certificate, or none, is denied.
func TestAuthenticatedPrincipal(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "test ca"})
	leaf := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}})
	inline := func(b []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
	}
	a, err := anypb.New(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: inline(leaf.CertPEM), PrivateKey: inline(leaf.KeyPEM)}},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inline(ca.CertPEM),
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	up := filtertest.Upstream(t)
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		HCM: filtertest.HCM(rbacFilter(`    rules:
      policies:
        client:
          permissions: [{requested_server_name: {exact: proxy.example.com}}]
          principals: [{authenticated: {principal_name: {exact: "spiffe://example.com/client"}}}]
`), ""),
		TLS:      &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}},
		Register: []func(*registry.Builder){Register},
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	get := func(cert *tlstest.Cert) int {
		t.Helper()
		cfg := &tls.Config{RootCAs: roots, ServerName: "proxy.example.com"}
		if cert != nil {
			pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: filtertest.Wait}).Get("https://" + p.Addr + "/x")
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(ca.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://example.com/client"}})); code != 200 {
		t.Errorf("the named client: %d; want 200", code)
	}
	if code := get(ca.Issue(t, tlstest.Options{CommonName: "other", URIs: []string{"spiffe://example.com/other"}})); code != 403 {
		t.Errorf("another client: %d; want 403", code)
	}
	if code := get(nil); code != 403 {
		t.Errorf("no client certificate: %d; want 403", code)
	}
}
