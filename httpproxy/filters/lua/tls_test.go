package lua

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestConnectionSSL: over a real mutual-TLS listener, connection():ssl() describes the
// handshake (version, the client certificate's URI SAN and digest) and streamInfo() the SNI.
func TestConnectionSSL(t *testing.T) {
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
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", echoUpstream(t))},
		HCM: luaHCM(`
    inline_code: |
      function envoy_on_request(handle)
        local ssl = handle:connection():ssl()
        local h = handle:headers()
        h:add("x-present", tostring(ssl:peerCertificatePresented()))
        h:add("x-version", ssl:tlsVersion())
        h:add("x-uri", ssl:uriSanPeerCertificate()[1])
        h:add("x-digest-len", tostring(#ssl:sha256PeerCertificateDigest()))
        h:add("x-sni", handle:streamInfo():requestedServerName())
      end`, ""),
		TLS:      &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}},
		Register: []func(*registry.Builder){Register},
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client := ca.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://example.com/client"}})
	pair, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "proxy.example.com",
		Certificates: []tls.Certificate{pair}, MaxVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+p.Addr+"/x", nil)
	resp, _ := p.Do(&http.Client{Transport: tr, Timeout: filtertest.Wait}, req)
	for k, want := range map[string]string{
		"Echo-X-Present": "true", "Echo-X-Version": "TLSv1.2", "Echo-X-Uri": "spiffe://example.com/client",
		"Echo-X-Digest-Len": "64", "Echo-X-Sni": "proxy.example.com",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q; want %q", k, got, want)
		}
	}
}
