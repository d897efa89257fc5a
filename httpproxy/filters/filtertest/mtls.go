package filtertest

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// MutualTLS is a listener that requires client certificates: its transport socket (for
// Options.TLS), serving proxy.example.com with a certificate of CA, which clients' certificates
// must also be issued by.
type MutualTLS struct {
	CA     *tlstest.Cert
	Socket *corev3.TransportSocket
}

// NewMutualTLS makes a CA and the listener's DownstreamTlsContext trusting it.
func NewMutualTLS(t testing.TB) *MutualTLS {
	t.Helper()
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
	return &MutualTLS{CA: ca, Socket: &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}}
}

// ClientConfig is a client's TLS configuration for the listener: it trusts the CA, asks for
// proxy.example.com and presents cert (none when nil).
func (m *MutualTLS) ClientConfig(t testing.TB, cert *tlstest.Cert) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(m.CA.Cert)
	cfg := &tls.Config{RootCAs: roots, ServerName: "proxy.example.com"}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}
