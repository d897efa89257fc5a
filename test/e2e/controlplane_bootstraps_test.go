package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestValidateControlPlaneBootstraps runs `legate --mode validate` on bootstraps written here in
// the shapes Istio, Consul, Kuma and go-control-plane's samples generate (testdata/controlplanes):
// a single grpc_services object and domains string (Consul, go-control-plane), camelCase keys
// and google_re2 (Kuma), lookahead stats_tags regexes, TypedStructs, the TLS inspector,
// filters found by their type URL whatever their name, and the internal listener bootstrap
// extension every Istio bootstrap sets (Istio). Envoy loads each; so must Legate.
func TestValidateControlPlaneBootstraps(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "controlplanes", "*"))
	if err != nil || len(paths) < 4 {
		t.Fatalf("testdata/controlplanes: %v files, err %v; want at least 4", len(paths), err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			abs, err := filepath.Abs(path)
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runOnce(t, "--mode", "validate", "-c", abs)
			if want := "configuration '" + abs + "' OK\n"; code != 0 || stdout != want {
				t.Errorf("validate = %d, stdout %q; want 0, %q; stderr:\n%s", code, stdout, want, strings.Join(lines(stderr), "\n"))
			}
		})
	}
}

// TestLenientBootstrapServesTraffic starts the binary on a bootstrap written only in the forms
// Envoy's loader accepts beyond canonical JSON (single values for lists, a domains string,
// TypedStructs around the connection manager and the router with free-text names, lower-case
// enums, Duration and wrapper objects, a lookahead stats_tags regex) and sends a request
// through it: the loaded configuration is the one that serves.
func TestLenientBootstrapServesTraffic(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "upstream") }))
	t.Cleanup(upstream.Close)
	_, upstreamPort, err := net.SplitHostPort(upstream.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
stats_config:
  use_all_default_tags: "false"
  stats_tags: {tag_name: svc, regex: '^cluster(?=\.)\.((\w+?)\.)'}
static_resources:
  listeners:
    name: web
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
      filters:
        name: front door
        typed_config:
          "@type": type.googleapis.com/xds.type.v3.TypedStruct
          type_url: type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          value:
            stat_prefix: ingress
            codec_type: auto
            stream_idle_timeout: {seconds: 30}
            route_config:
              virtual_hosts: {name: all, domains: "*", routes: {match: {prefix: /}, route: {cluster: backend}}}
            http_filters:
              name: last
              typed_config: {"@type": type.googleapis.com/udpa.type.v1.TypedStruct, type_url: type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  clusters:
    name: backend
    type: static
    lb_policy: round_robin
    connect_timeout: {nanos: 250000000}
    per_connection_buffer_limit_bytes: {value: 32768}
    load_assignment:
      cluster_name: backend
      endpoints: {lb_endpoints: {endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: "` + upstreamPort + `"}}}}}
`
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + p.listenerAddr("web") + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "upstream" {
		t.Fatalf("GET through legate = %d %q, %v; want 200 \"upstream\"", resp.StatusCode, body, err)
	}
	if _, _, stats := p.get("/stats?format=prometheus&filter=upstream_rq_total"); !strings.Contains(stats, `envoy_cluster_upstream_rq_total{svc="backend"} 1`) {
		t.Errorf("prometheus stats lack the lookahead tag svc=\"backend\":\n%s", stats)
	}
}
