package accesslog

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"math/big"
	"testing"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

func TestTLSOperators(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "ops ca"})
	peer := ca.Issue(t, tlstest.Options{CommonName: "client", Serial: big.NewInt(0x0a1b), DNSNames: []string{"c.example.com", "d.example.com"},
		URIs: []string{"spiffe://example.com/client"}, IPs: []string{"10.1.2.3"}, Emails: []string{"ops@example.com"}})
	local := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"proxy.example.com"}, URIs: []string{"spiffe://example.com/proxy"}})
	sum256, sum1 := sha256.Sum256(peer.Cert.Raw), sha1.Sum(peer.Cert.Raw)
	mtls := &Entry{DownstreamTLS: &TLSInfo{Local: local.Cert, State: tls.ConnectionState{
		Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, PeerCertificates: []*x509.Certificate{peer.Cert, ca.Cert},
	}}}
	oneWay := &Entry{DownstreamTLS: &TLSInfo{State: tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_128_GCM_SHA256}}}
	plain := &Entry{}
	tests := []struct {
		name, format string
		entry        *Entry
		want         string
	}{
		{"version 1.2", "%DOWNSTREAM_TLS_VERSION%", mtls, "TLSv1.2"},
		{"version 1.3", "%DOWNSTREAM_TLS_VERSION%", oneWay, "TLSv1.3"},
		{"version plain", "%DOWNSTREAM_TLS_VERSION%", plain, "-"},
		{"cipher 1.2", "%DOWNSTREAM_TLS_CIPHER%", mtls, "ECDHE-ECDSA-AES128-GCM-SHA256"},
		{"cipher 1.3", "%DOWNSTREAM_TLS_CIPHER%", oneWay, "TLS_AES_128_GCM_SHA256"},
		{"peer subject", "%DOWNSTREAM_PEER_SUBJECT%", mtls, "CN=client"},
		{"peer issuer", "%DOWNSTREAM_PEER_ISSUER%", mtls, "CN=ops ca"},
		{"peer uri san", "%DOWNSTREAM_PEER_URI_SAN%", mtls, "spiffe://example.com/client"},
		{"peer dns san", "%DOWNSTREAM_PEER_DNS_SAN%", mtls, "c.example.com,d.example.com"},
		{"peer ip san", "%DOWNSTREAM_PEER_IP_SAN%", mtls, "10.1.2.3"},
		{"peer email san", "%DOWNSTREAM_PEER_EMAIL_SAN%", mtls, "ops@example.com"},
		{"peer serial", "%DOWNSTREAM_PEER_SERIAL%", mtls, "a1b"},
		{"peer sha256", "%DOWNSTREAM_PEER_FINGERPRINT_256%", mtls, hex.EncodeToString(sum256[:])},
		{"peer sha1", "%DOWNSTREAM_PEER_FINGERPRINT_1%", mtls, hex.EncodeToString(sum1[:])},
		{"peer sha256 truncated", "%DOWNSTREAM_PEER_FINGERPRINT_256:8%", mtls, hex.EncodeToString(sum256[:])[:8]},
		{"no peer certificate", "%DOWNSTREAM_PEER_SUBJECT% %DOWNSTREAM_PEER_FINGERPRINT_256%", oneWay, "- -"},
		{"local subject", "%DOWNSTREAM_LOCAL_SUBJECT%", mtls, "CN=proxy"},
		{"local sans", "%DOWNSTREAM_LOCAL_URI_SAN% %DOWNSTREAM_LOCAL_DNS_SAN% %DOWNSTREAM_LOCAL_IP_SAN%", mtls, "spiffe://example.com/proxy proxy.example.com -"},
		{"local unknown", "%DOWNSTREAM_LOCAL_SUBJECT%", oneWay, "-"},
		{"plain peer", "%DOWNSTREAM_PEER_URI_SAN%", plain, "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustText(t, tc.format, Options{})
			if got := string(f.Format(nil, tc.entry)); got != tc.want {
				t.Errorf("Format(%q) = %q; want %q", tc.format, got, tc.want)
			}
		})
	}
}
