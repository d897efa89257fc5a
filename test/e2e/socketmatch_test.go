package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestTransportSocketMatches runs the binary with Istio's shape of cluster: an endpoint
// labelled tlsMode: istio is reached over TLS (a real TLS upstream that would refuse plain
// text), the other over plain text (a plain net/http upstream that would refuse TLS), each
// selected by its metadata through transport_socket_matches' labels. Both serve requests, and
// the per-match total_match_count stats count one host each.
func TestTransportSocketMatches(t *testing.T) {
	testSocketSelection(t, "{tlsMode: istio}", "{}", "")
}

// TestTransportSocketMatcher is TestTransportSocketMatches with the selection made by the
// cluster's transport_socket_matcher (the unified matcher over the endpoint's metadata, with
// on_no_match naming the plain-text entry), the matches' labels left empty: the matcher
// chooses TLS for one endpoint and plain text for the other.
func TestTransportSocketMatcher(t *testing.T) {
	testSocketSelection(t, "{}", "{}", `
    transport_socket_matcher:
      matcher_tree:
        input:
          name: envoy.matching.inputs.endpoint_metadata
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.EndpointMetadataInput
            filter: envoy.transport_socket_match
            path: [{key: tlsMode}]
        exact_match_map:
          map:
            istio:
              action:
                name: istio
                typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.TransportSocketNameAction, name: tlsMode-istio}
      on_no_match:
        action:
          name: plain
          typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.TransportSocketNameAction, name: tlsMode-disabled}`)
}

// testSocketSelection runs the cluster "mesh" with a TLS and a plain-text entry of
// transport_socket_matches (their match labels given) and the extra cluster fields, in
// front of a TLS upstream whose endpoint is labelled tlsMode: istio and a plain one.
func testSocketSelection(t *testing.T, tlsLabels, plainLabels, extra string) {
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "e2e socket match ca"})
	backend := ca.Issue(t, tlstest.Options{CommonName: "backend", DNSNames: []string{"backend.example.com"}})
	caPath := writePEM(t, t.TempDir(), "ca.pem", ca.CertPEM)

	var tlsServed, plainServed atomic.Int32
	secure := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			http.Error(w, "plain text on the TLS upstream", http.StatusBadRequest)
			return
		}
		tlsServed.Add(1)
		io.WriteString(w, "tls")
	}))
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{tlsCert(backend)}}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainServed.Add(1)
		io.WriteString(w, "plain")
	}))
	t.Cleanup(plain.Close)
	port := func(s *httptest.Server) string { return strconv.Itoa(s.Listener.Addr().(*net.TCPAddr).Port) }

	routes := `            - name: all
              domains: ["*"]
              routes: [{match: {prefix: "/"}, route: {cluster: mesh}}]`
	mesh := `
  - name: mesh
    connect_timeout: 5s
    transport_socket_matches:
    - name: tlsMode-istio
      match: ` + tlsLabels + `
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
          sni: backend.example.com
          common_tls_context:
            validation_context:
              trusted_ca: {filename: ` + caPath + `}
    - name: tlsMode-disabled
      match: ` + plainLabels + `
      transport_socket: {name: envoy.transport_sockets.raw_buffer}` + extra + `
    load_assignment:
      cluster_name: mesh
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + port(secure) + `}}}
          metadata: {filter_metadata: {envoy.transport_socket_match: {tlsMode: istio}}}
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + port(plain) + `}}}`
	cfg := exampleBootstrap(exampleHCM("http", routes, ""), mesh)
	p := start(t, "-c", writeConfig(t, cfg))
	addr := p.listenerAddr("example")
	client := &http.Client{Timeout: 20 * time.Second}
	got := map[string]int{}
	// Round robin alternates the two hosts; a bounded number of requests reaches both.
	for i := 0; i < 20 && (got["tls"] == 0 || got["plain"] == 0); i++ {
		resp, err := client.Get(fmt.Sprintf("http://%s/r%d", addr, i))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %q; want 200", i, resp.StatusCode, b)
		}
		got[string(b)]++
	}
	if got["tls"] == 0 || got["plain"] == 0 || tlsServed.Load() == 0 || plainServed.Load() == 0 {
		t.Fatalf("answers %v (TLS upstream served %d, plain %d); want both upstreams to serve", got, tlsServed.Load(), plainServed.Load())
	}
	for name, want := range map[string]uint64{
		"cluster.mesh.tlsMode-istio.total_match_count":    1,
		"cluster.mesh.tlsMode-disabled.total_match_count": 1,
		"cluster.mesh.default.total_match_count":          0,
		"cluster.mesh.ssl.handshake":                      1,
	} {
		if v, ok := p.stat(name); !ok || v != want {
			t.Errorf("%s = %d (listed %v); want %d", name, v, ok, want)
		}
	}
}
