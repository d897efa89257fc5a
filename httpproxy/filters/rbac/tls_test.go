package rbac

import (
	"io"
	"net/http"
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// TestAuthenticatedPrincipal: over a real mutual-TLS listener, the authenticated principal
// matches the client certificate's URI SAN and requested_server_name the SNI; a client with
// another certificate, or none, is denied.
func TestAuthenticatedPrincipal(t *testing.T) {
	m := filtertest.NewMutualTLS(t)
	up := filtertest.Upstream(t)
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		HCM: filtertest.HCM(rbacFilter(`    rules:
      policies:
        client:
          permissions: [{requested_server_name: {exact: proxy.example.com}}]
          principals: [{authenticated: {principal_name: {exact: "spiffe://example.com/client"}}}]
`), ""),
		TLS:      m.Socket,
		Register: []func(*registry.Builder){Register},
	})
	get := func(cert *tlstest.Cert) int {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: m.ClientConfig(t, cert)}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: filtertest.Wait}).Get("https://" + p.Addr + "/x")
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(m.CA.Issue(t, tlstest.Options{CommonName: "client", URIs: []string{"spiffe://example.com/client"}})); code != 200 {
		t.Errorf("the named client: %d; want 200", code)
	}
	if code := get(m.CA.Issue(t, tlstest.Options{CommonName: "other", URIs: []string{"spiffe://example.com/other"}})); code != 403 {
		t.Errorf("another client: %d; want 403", code)
	}
	if code := get(nil); code != 403 {
		t.Errorf("no client certificate: %d; want 403", code)
	}
}
