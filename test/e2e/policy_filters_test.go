package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestLocalRateLimitEnvoyConfig: Envoy's documented local rate limit setup (one bucket for the
// listener, enabled and enforced through runtime keys with 100% defaults) answers 429 once the
// bucket is empty and counts under <stat_prefix>.http_local_rate_limit.*.
func TestLocalRateLimitEnvoyConfig(t *testing.T) {
	cfg := policyConfig(namedBackend(t, 0, "backend"), "", `          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
              stat_prefix: http_local_rate_limiter
              token_bucket: {max_tokens: 3, tokens_per_fill: 3, fill_interval: 3600s}
              filter_enabled:
                runtime_key: local_rate_limit_enabled
                default_value: {numerator: 100, denominator: HUNDRED}
              filter_enforced:
                runtime_key: local_rate_limit_enforced
                default_value: {numerator: 100, denominator: HUNDRED}
              response_headers_to_add:
              - append_action: OVERWRITE_IF_EXISTS_OR_ADD
                header: {key: x-local-rate-limit, value: "true"}`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("http") + "/"
	for i := range 3 {
		if code, _, body := send(t, client, http.MethodGet, url, nil); code != 200 || body != "backend" {
			t.Fatalf("GET #%d = %d %q; want 200 backend", i, code, body)
		}
	}
	code, h, body := send(t, client, http.MethodGet, url, nil)
	if code != 429 || body != "local_rate_limited" || h.Get("X-Local-Rate-Limit") != "true" {
		t.Errorf("GET over the limit = %d %q x-local-rate-limit %q; want 429 local_rate_limited true", code, body, h.Get("X-Local-Rate-Limit"))
	}
	for name, want := range map[string]uint64{
		"http_local_rate_limiter.http_local_rate_limit.enabled":      4,
		"http_local_rate_limiter.http_local_rate_limit.ok":           3,
		"http_local_rate_limiter.http_local_rate_limit.rate_limited": 1,
		"http_local_rate_limiter.http_local_rate_limit.enforced":     1,
	} {
		if v, _ := p.stat(name); v != want {
			t.Errorf("%s = %d; want %d", name, v, want)
		}
	}
}

// TestFaultEnvoyConfig: an Envoy-shaped fault injection setup (a fixed abort for a share of
// requests selected by a header, header-controlled delays) aborts and delays requests on the
// binary and counts them under http.policy.fault.*.
func TestFaultEnvoyConfig(t *testing.T) {
	cfg := policyConfig(namedBackend(t, 0, "backend"), "", `          - name: envoy.filters.http.fault
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
              abort:
                http_status: 503
                percentage: {numerator: 100, denominator: HUNDRED}
              headers: [{name: x-chaos, string_match: {exact: abort}}]
          - name: fault_delays
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
              delay:
                header_delay: {}
                percentage: {numerator: 100}`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("http") + "/"
	if code, _, body := send(t, client, http.MethodGet, url, nil, "x-chaos", "abort"); code != 503 || body != "fault filter abort" {
		t.Errorf("GET with x-chaos: abort = %d %q; want 503 fault filter abort", code, body)
	}
	if code, _, body := send(t, client, http.MethodGet, url, nil); code != 200 || body != "backend" {
		t.Errorf("GET = %d %q; want 200 backend", code, body)
	}
	began := time.Now()
	if code, _, body := send(t, client, http.MethodGet, url, nil, "x-envoy-fault-delay-request", "250"); code != 200 || body != "backend" {
		t.Errorf("GET with a delay header = %d %q; want 200 backend", code, body)
	}
	if d := time.Since(began); d < 250*time.Millisecond {
		t.Errorf("delayed GET took %v; want at least 250ms", d)
	}
	for name, want := range map[string]uint64{"http.policy.fault.aborts_injected": 1, "http.policy.fault.delays_injected": 1} {
		if v, _ := p.stat(name); v != want {
			t.Errorf("%s = %d; want %d", name, v, want)
		}
	}
}

// TestBufferEnvoyConfig: with Envoy's buffer filter a body over max_request_bytes is answered
// 413 by the binary and one within it reaches the backend.
func TestBufferEnvoyConfig(t *testing.T) {
	cfg := policyConfig(namedBackend(t, 0, "backend"), "", `          - name: envoy.filters.http.buffer
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer
              max_request_bytes: 64`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("http") + "/upload"
	if code, _, body := send(t, client, http.MethodPost, url, strings.NewReader(strings.Repeat("a", 32))); code != 200 || body != "backend" {
		t.Errorf("POST 32 bytes = %d %q; want 200 backend", code, body)
	}
	if code, _, body := send(t, client, http.MethodPost, url, strings.NewReader(strings.Repeat("a", 100))); code != 413 || body != "Payload Too Large" {
		t.Errorf("POST 100 bytes = %d %q; want 413 Payload Too Large", code, body)
	}
	if v, _ := p.stat("http.policy.downstream_rq_too_large"); v != 1 {
		t.Errorf("http.policy.downstream_rq_too_large = %d; want 1", v)
	}
}

// TestCSRFEnvoyConfig: Envoy's CSRF filter on the binary refuses a cross-origin POST with 403
// and lets a same-origin one through.
func TestCSRFEnvoyConfig(t *testing.T) {
	cfg := policyConfig(namedBackend(t, 0, "backend"), "", `          - name: envoy.filters.http.csrf
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
              filter_enabled:
                default_value: {numerator: 100, denominator: HUNDRED}
                runtime_key: csrf.enabled`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	addr := p.listenerAddr("http")
	url := "http://" + addr + "/form"
	if code, _, body := send(t, client, http.MethodPost, url, nil, "Origin", "http://"+addr); code != 200 || body != "backend" {
		t.Errorf("same-origin POST = %d %q; want 200 backend", code, body)
	}
	if code, _, body := send(t, client, http.MethodPost, url, nil, "Origin", "https://evil.example"); code != 403 || body != "Invalid origin" {
		t.Errorf("cross-origin POST = %d %q; want 403 Invalid origin", code, body)
	}
	for name, want := range map[string]uint64{"http.policy.csrf.request_valid": 1, "http.policy.csrf.request_invalid": 1} {
		if v, _ := p.stat(name); v != want {
			t.Errorf("%s = %d; want %d", name, v, want)
		}
	}
}

// TestHeaderMutationEnvoyConfig: Envoy's header_mutation filter on the binary adds a request
// header the backend sees and removes a response header.
func TestHeaderMutationEnvoyConfig(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Internal", "secret")
		io.WriteString(w, r.Header.Get("X-Tenant"))
	}))
	t.Cleanup(backend.Close)
	cfg := policyConfig(backend.Listener.Addr().String(), "", `          - name: envoy.filters.http.header_mutation
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
              mutations:
                request_mutations:
                - append:
                    header: {key: x-tenant, value: acme}
                    append_action: OVERWRITE_IF_EXISTS_OR_ADD
                response_mutations:
                - remove: x-internal`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	code, h, body := send(t, client, http.MethodGet, "http://"+p.listenerAddr("http")+"/", nil, "X-Tenant", "spoofed")
	if code != 200 || body != "acme" || h.Get("X-Internal") != "" {
		t.Errorf("GET = %d %q x-internal %q; want 200, the backend saw x-tenant acme, x-internal removed", code, body, h.Get("X-Internal"))
	}
}

// TestSetMetadataEnvoyConfig: on the binary, the dynamic metadata Envoy's set_metadata filter
// writes is what a later RBAC filter's metadata principal matches.
func TestSetMetadataEnvoyConfig(t *testing.T) {
	cfg := policyConfig(namedBackend(t, 0, "backend"), "", `          - name: envoy.filters.http.set_metadata
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config
              metadata:
              - metadata_namespace: acme
                value: {plan: free}
          - name: envoy.filters.http.rbac
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
              rules:
                action: ALLOW
                policies:
                  paid-only:
                    permissions: [{any: true}]
                    principals: [{metadata: {filter: acme, path: [{key: plan}], value: {string_match: {exact: paid}}}}]`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	if code, _, body := send(t, client, http.MethodGet, "http://"+p.listenerAddr("http")+"/", nil); code != 403 {
		t.Errorf("GET = %d %q; want 403: the plan set_metadata wrote is not paid", code, body)
	}
}
