package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// upstreamOptionsCluster is a cluster whose typed_extension_protocol_options hold the upstream
// HttpProtocolOptions fields given.
func upstreamOptionsCluster(name string, port int, fields string) string {
	return fmt.Sprintf(`  - name: %s
    connect_timeout: 1s
    load_assignment: {cluster_name: %s, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}}]}]}
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        %s
`, name, name, port, fields)
}

// Issue 17 items 3 and 5: the upstream HttpProtocolOptions in typed_extension_protocol_options
// choose the protocol (explicit HTTP/2 with prior knowledge, explicit HTTP/1.1) and carry
// common_http_protocol_options that act on the upstream connections: idle_timeout and
// max_connection_duration close them, max_stream_duration answers 504, max_headers_count
// turns an oversized response head into a 503, each counted as Envoy counts it.
func TestUpstreamHTTPProtocolOptions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/slow"):
			<-r.Context().Done()
		case strings.HasSuffix(r.URL.Path, "/many"):
			for i := range 10 {
				w.Header().Set(fmt.Sprintf("X-H%d", i), "v")
			}
		default:
			io.WriteString(w, r.Proto)
		}
	})}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	cfg := `
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
          stat_prefix: opts
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - {match: {prefix: /h2}, route: {cluster: h2}}
              - {match: {prefix: /h1}, route: {cluster: h1}}
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
  clusters:
` + upstreamOptionsCluster("h2", port, "explicit_http_config: {http2_protocol_options: {}}\n        common_http_protocol_options: {idle_timeout: 0.5s, max_stream_duration: 1s}") +
		upstreamOptionsCluster("h1", port, "explicit_http_config: {http_protocol_options: {}}\n        common_http_protocol_options: {max_connection_duration: 0.5s, max_headers_count: 8}")
	p := start(t, "-c", writeConfig(t, cfg))
	url := "http://" + p.listenerAddr("http")
	client := &http.Client{Timeout: 20 * time.Second}

	if code, body := httpGet(t, client, url+"/h2/proto", nil); code != http.StatusOK || body != "HTTP/2.0" {
		t.Fatalf("GET /h2/proto: %d %q; want 200 \"HTTP/2.0\" (explicit_http_config.http2_protocol_options)", code, body)
	}
	p.waitStat("cluster.h2.upstream_cx_idle_timeout", 1)
	if code, body := httpGet(t, client, url+"/h2/slow", nil); code != http.StatusGatewayTimeout || body != "upstream max stream duration reached" {
		t.Errorf("GET /h2/slow: %d %q; want 504 \"upstream max stream duration reached\"", code, body)
	}
	p.waitStat("cluster.h2.upstream_rq_max_duration_reached", 1)

	if code, body := httpGet(t, client, url+"/h1/proto", nil); code != http.StatusOK || body != "HTTP/1.1" {
		t.Fatalf("GET /h1/proto: %d %q; want 200 \"HTTP/1.1\"", code, body)
	}
	p.waitStat("cluster.h1.upstream_cx_max_duration_reached", 1)
	p.waitStat("cluster.h1.upstream_cx_active", 0)
	if code, _ := httpGet(t, client, url+"/h1/many", nil); code != http.StatusServiceUnavailable {
		t.Errorf("GET /h1/many: %d; want 503 (11 response header fields over max_headers_count 8)", code)
	}
	p.waitStat("cluster.h1.upstream_cx_protocol_error", 1)
}

// Issue 17 item 5: an upstream HttpProtocolOptions field Legate does not implement, or an
// invalid one, stops the load with its path, and auto_config without TLS is refused as Envoy
// refuses it.
func TestUpstreamHTTPProtocolOptionsRefused(t *testing.T) {
	for _, tc := range []struct{ name, fields, want string }{
		{"override_auto_sni_header", `upstream_http_protocol_options: {auto_sni: true, override_auto_sni_header: "bad header"}`,
			`typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].upstream_http_protocol_options.override_auto_sni_header: value does not match regex pattern`},
		{"http3", "explicit_http_config: {http3_protocol_options: {}}",
			`typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].explicit_http_config.http3_protocol_options: set; not implemented by Legate`},
		{"auto_config over plain text", "auto_config: {}", "auto_config: set on a cluster without a TLS transport_socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := "static_resources:\n  clusters:\n" + upstreamOptionsCluster("c", 1, tc.fields)
			code, _, stderr := runOnce(t, "--mode", "validate", "-c", writeConfig(t, cfg))
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("validate exited %d; want a failure naming %q; stderr:\n%s", code, tc.want, stderr)
			}
		})
	}
}
