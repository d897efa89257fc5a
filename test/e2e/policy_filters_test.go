package e2e

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// policyConfig is a bootstrap with one HTTP listener ("http", stat_prefix policy) whose
// virtual host has vhostExtra (indented YAML fields of the virtual host, such as
// typed_per_filter_config) and routes every path to the cluster web at backend; filters are
// the http_filters before the router, as YAML list items.
func policyConfig(backend, vhostExtra, filters string) string {
	host, port, _ := net.SplitHostPort(backend)
	return `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: policy
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
` + vhostExtra + `
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
`
}

// send sends one request and returns its status, headers and body.
func send(t *testing.T, client *http.Client, method, url string, body io.Reader, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestCORSFilterEnvoyConfig: an Envoy-shaped CORS setup (the filter in the chain, the policy
// in the virtual host's typed_per_filter_config) answers preflights itself, decorates
// cross-origin responses and counts origins under http.policy.cors.*.
func TestCORSFilterEnvoyConfig(t *testing.T) {
	cfg := policyConfig(namedBackend(t, 0, "backend"), `              typed_per_filter_config:
                envoy.filters.http.cors:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                  allow_origin_string_match: [{safe_regex: {regex: "https://.*\\.example\\.com"}}]
                  allow_methods: "GET, POST"
                  allow_headers: "content-type"
                  max_age: "3600"`, `          - name: envoy.filters.http.cors
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("http") + "/api"
	code, h, body := send(t, client, http.MethodOptions, url, nil, "Origin", "https://app.example.com", "Access-Control-Request-Method", "POST")
	if code != 200 || body != "" || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		h.Get("Access-Control-Allow-Methods") != "GET, POST" || h.Get("Access-Control-Max-Age") != "3600" {
		t.Errorf("preflight = %d %q %v; want 200, no body, the policy's allow headers", code, body, h)
	}
	code, h, body = send(t, client, http.MethodGet, url, nil, "Origin", "https://app.example.com")
	if code != 200 || body != "backend" || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("GET = %d %q allow-origin %q; want 200 backend https://app.example.com", code, body, h.Get("Access-Control-Allow-Origin"))
	}
	code, h, body = send(t, client, http.MethodGet, url, nil, "Origin", "https://evil.test")
	if code != 200 || body != "backend" || h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET from another origin = %d %q allow-origin %q; want 200 backend and none", code, body, h.Get("Access-Control-Allow-Origin"))
	}
	for name, want := range map[string]uint64{"http.policy.cors.origin_valid": 2, "http.policy.cors.origin_invalid": 1} {
		if v, _ := p.stat(name); v != want {
			t.Errorf("%s = %d; want %d", name, v, want)
		}
	}
}
