package e2e

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// authzConfig is a bootstrap whose listener "authz" runs the given http_filters entries
// before the router, routing every request to cluster web at upstream, plus extra clusters.
func authzConfig(upstream, filters, clusters string) string {
	host, port, _ := net.SplitHostPort(upstream)
	return `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: authz
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: authz
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: web}
          http_filters:
` + filters + `
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  clusters:
  - name: web
    connect_timeout: 1s
    load_assignment:
      cluster_name: web
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: ` + host + `, port_value: ` + port + `}}}}]}]
` + clusters
}

// TestRBACFilter: an Envoy-shaped RBAC configuration on the binary lets GET through to the
// upstream, answers other methods 403 "RBAC: access denied", and counts both.
func TestRBACFilter(t *testing.T) {
	up := namedBackend(t, 0, "upstream")
	cfg := authzConfig(up, `
          - name: envoy.filters.http.rbac
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
              rules:
                action: ALLOW
                policies:
                  "read-only":
                    permissions:
                    - or_rules:
                        rules:
                        - header: {name: ":method", string_match: {exact: GET}}
                        - header: {name: ":method", string_match: {exact: HEAD}}
                    principals:
                    - remote_ip: {address_prefix: 127.0.0.1, prefix_len: 32}`, "")
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("authz") + "/x"
	if code, body := httpGet(t, client, url, nil); code != http.StatusOK || body != "upstream" {
		t.Fatalf("GET = %d %q; want 200 from the upstream", code, body)
	}
	resp, err := client.Post(url, "text/plain", strings.NewReader("data"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusForbidden || string(b) != "RBAC: access denied" {
		t.Fatalf("POST = %d %q (%v); want 403 RBAC: access denied", resp.StatusCode, b, err)
	}
	for name, want := range map[string]uint64{"http.authz.rbac.allowed": 1, "http.authz.rbac.denied": 1} {
		if v, _ := p.stat(name); v != want {
			t.Errorf("%s = %d; want %d", name, v, want)
		}
	}
}
