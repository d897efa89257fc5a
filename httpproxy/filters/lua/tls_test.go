package lua

import (
	"crypto/tls"
	"net/http"
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestConnectionSSL: over a real mutual-TLS listener, connection():ssl() describes the
// handshake (version, the client certificate's URI SAN and digest) and streamInfo() the SNI.
func TestConnectionSSL(t *testing.T) {
	m := filtertest.NewMutualTLS(t)
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
		TLS:      m.Socket,
		Register: []func(*registry.Builder){Register},
	})
	cfg := m.ClientConfig(t, m.CA.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://example.com/client"}}))
	cfg.MaxVersion = tls.VersionTLS12
	tr := &http.Transport{TLSClientConfig: cfg}
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
