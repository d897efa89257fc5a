package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestFilterChainMatcher runs the binary with a listener whose filter_chain_matcher picks
// a chain by TLS server name, then by transport protocol, else plain text: real TLS clients
// (crypto/tls through net/http) with two server names and a plain HTTP client each reach
// their chain, whose HTTP connection manager answers with the chain's name.
func TestFilterChainMatcher(t *testing.T) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "e2e matcher ca"})
	cert := ca.Issue(t, tlstest.Options{CommonName: "proxy", DNSNames: []string{"a.example.com", "b.example.com"}})
	dir := t.TempDir()
	certPath, keyPath := writePEM(t, dir, "proxy.pem", cert.CertPEM), writePEM(t, dir, "proxy-key.pem", cert.KeyPEM)
	answer := func(body string) string {
		return `            - name: all
              domains: ["*"]
              routes: [{match: {prefix: "/"}, direct_response: {status: 200, body: {inline_string: ` + body + `}}}]`
	}
	tlsSocket := `
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates: [{certificate_chain: {filename: ` + certPath + `}, private_key: {filename: ` + keyPath + `}}]`
	action := func(chain string) string {
		return `{action: {name: chain, typed_config: {"@type": type.googleapis.com/google.protobuf.StringValue, value: ` + chain + `}}}`
	}
	input := func(msg string) string {
		return `{name: in, typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.` + msg + `}}`
	}
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: example
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    listener_filters: [{name: envoy.filters.listener.tls_inspector}]
    filter_chain_matcher:
      matcher_tree:
        input: ` + input("ServerNameInput") + `
        exact_match_map: {map: {a.example.com: ` + action("tls-a") + `}}
      on_no_match:
        matcher:
          matcher_tree:
            input: ` + input("TransportProtocolInput") + `
            exact_match_map: {map: {tls: ` + action("tls-other") + `}}
          on_no_match: ` + action("plain") + `
    filter_chains:
    - name: tls-a` + tlsSocket + `
      filters:` + exampleHCM("tls_a", answer("tls-a"), "") + `
    - name: tls-other` + tlsSocket + `
      filters:` + exampleHCM("tls_other", answer("tls-other"), "") + `
    - name: plain
      filters:` + exampleHCM("plain", answer("plain"), "")
	p := start(t, "-c", writeConfig(t, cfg))
	addr := p.listenerAddr("example")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	get := func(scheme, serverName string) string {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		resp, err := c.Get(fmt.Sprintf("%s://%s/", scheme, addr))
		if err != nil {
			t.Fatalf("%s (server name %q): %v", scheme, serverName, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, tc := range []struct{ scheme, sni, want string }{
		{"https", "a.example.com", "tls-a"},
		{"https", "b.example.com", "tls-other"},
		{"http", "", "plain"},
	} {
		if got := get(tc.scheme, tc.sni); got != tc.want {
			t.Errorf("%s with server name %q: answered by %q; want %q", tc.scheme, tc.sni, got, tc.want)
		}
	}
}
