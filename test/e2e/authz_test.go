package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
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

// e2eAuthz is an authorization service that allows requests carrying "x-let-in: yes" and
// denies the others with 401.
type e2eAuthz struct {
	authv3.UnimplementedAuthorizationServer
}

func (e2eAuthz) Check(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	if req.GetAttributes().GetRequest().GetHttp().GetHeaders()["x-let-in"] == "yes" {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_OK)}}, nil
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_PERMISSION_DENIED)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized}, Body: "denied by e2e"}}}, nil
}

// TestExtAuthzFilter: an Envoy-shaped ext_authz configuration on the binary asks a real gRPC
// authorization service through its cluster, lets allowed requests reach the upstream and
// answers denied ones with the service's status and body.
func TestExtAuthzFilter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	authv3.RegisterAuthorizationServer(srv, e2eAuthz{})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	up := namedBackend(t, 0, "upstream")
	cfg := authzConfig(up, `
          - name: envoy.filters.http.ext_authz
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
              transport_api_version: V3
              grpc_service:
                envoy_grpc: {cluster_name: ext-authz}
                timeout: 5s`, `
  - name: ext-authz
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: ext-authz
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: `+host+`, port_value: `+port+`}}}}]}]
`)
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("authz") + "/x"
	if code, body := httpGet(t, client, url, http.Header{"X-Let-In": {"yes"}}); code != http.StatusOK || body != "upstream" {
		t.Fatalf("allowed GET = %d %q; want 200 from the upstream", code, body)
	}
	if code, body := httpGet(t, client, url, nil); code != http.StatusUnauthorized || body != "denied by e2e" {
		t.Fatalf("denied GET = %d %q; want 401 denied by e2e", code, body)
	}
	for name, want := range map[string]uint64{"http.authz.ext_authz.ok": 1, "http.authz.ext_authz.denied": 1} {
		if v, _ := p.stat(name); v != want {
			t.Errorf("%s = %d; want %d", name, v, want)
		}
	}
}
