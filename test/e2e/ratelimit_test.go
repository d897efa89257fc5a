package e2e

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

// e2eRLS is a rate limit service that answers OVER_LIMIT to descriptors with an entry valued
// "blocked" (the HTTP user or the TCP listener's descriptor) and OK otherwise, with dynamic
// metadata naming its verdict.
type e2eRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (e2eRLS) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	verdict := rlsv3.RateLimitResponse_OK
	for _, d := range req.GetDescriptors() {
		for _, e := range d.GetEntries() {
			if e.GetValue() == "blocked" {
				verdict = rlsv3.RateLimitResponse_OVER_LIMIT
			}
		}
	}
	md, _ := structpb.NewStruct(map[string]any{"verdict": verdict.String() + "-" + req.GetDomain()})
	return &rlsv3.RateLimitResponse{OverallCode: verdict, DynamicMetadata: md}, nil
}

// e2eTCPAuthz allows connections to the listener whose port it was told, and denies others.
type e2eTCPAuthz struct {
	authv3.UnimplementedAuthorizationServer
	allowPort uint32
}

func (a *e2eTCPAuthz) Check(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	c := code.Code_PERMISSION_DENIED
	if req.GetAttributes().GetDestination().GetAddress().GetSocketAddress().GetPortValue() == a.allowPort {
		c = code.Code_OK
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(c)}}, nil
}

// TestGlobalRateLimitAndNetworkAuthz: Envoy-shaped configurations on the binary. The HTTP
// ratelimit filter asks a real gRPC rate limit service through its cluster with the route's
// descriptors, lets OK requests reach the upstream, answers over-limit ones 429 with
// x-envoy-ratelimited and flag RL, logs the service's dynamic metadata, and counts
// cluster.web.ratelimit.*; on TCP proxy chains the network ratelimit filter closes an
// over-limit listener's connections, and the network ext_authz filter closes those the
// authorization service denies.
func TestGlobalRateLimitAndNetworkAuthz(t *testing.T) {
	rls := serveGRPC(t, func(s *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(s, e2eRLS{}) })
	authz := &e2eTCPAuthz{}
	authzAddr := serveGRPC(t, func(s *grpc.Server) { authv3.RegisterAuthorizationServer(s, authz) })
	up := namedBackend(t, 0, "upstream")
	tcpPort := namedTCPServer(t, "tcp-upstream")
	// The authorization service allows the "authz-ok" listener only: reserve its port.
	okLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	okPort := okLn.Addr().(*net.TCPAddr).Port
	okLn.Close()
	authz.allowPort = uint32(okPort)
	logPath := filepath.Join(t.TempDir(), "access.log")

	const rlService = `rate_limit_service: {grpc_service: {envoy_grpc: {cluster_name: ratelimit}}, transport_api_version: V3}`
	tcpChain := func(name string, port int, filter string) string {
		return `
  - name: ` + name + `
    address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(port) + `}}
    filter_chains:
    - filters:
      - ` + filter + `
      - name: envoy.filters.network.tcp_proxy
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: ` + name + `, cluster: tcp}`
	}
	netRL := func(value string) string {
		return `{name: envoy.filters.network.ratelimit, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.ratelimit.v3.RateLimit, stat_prefix: tcp_` + value + `, domain: tcp, timeout: 5s, descriptors: [{entries: [{key: listener, value: ` + value + `}]}], ` + rlService + `}}`
	}
	const netAuthz = `{name: envoy.filters.network.ext_authz, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.ext_authz.v3.ExtAuthz, stat_prefix: tcp_authz, transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: authz}, timeout: 5s}}}`
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
          stat_prefix: edge
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: ` + logPath + `
              log_format: {text_format: "%REQ(X-USER)% %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %DYNAMIC_METADATA(envoy.filters.http.ratelimit:verdict)%\n"}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              rate_limits:
              - actions: [{generic_key: {descriptor_value: edge}}]
              routes:
              - match: {prefix: "/"}
                route:
                  cluster: web
                  include_vh_rate_limits: true
                  rate_limits:
                  - actions:
                    - request_headers: {header_name: x-user, descriptor_key: user}
                    - remote_address: {}
          http_filters:
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: edge
              timeout: 5s
              failure_mode_deny: false
              ` + rlService + `
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}` +
		tcpChain("rl-open", 0, netRL("open")) +
		tcpChain("rl-blocked", 0, netRL("blocked")) +
		tcpChain("authz-ok", okPort, netAuthz) +
		tcpChain("authz-denied", 0, netAuthz) + `
  clusters:` + exampleCluster("web", "", up) + grpcCluster("ratelimit", rls) + grpcCluster("authz", authzAddr) +
		exampleCluster("tcp", "", "127.0.0.1:"+strconv.Itoa(tcpPort))
	p := start(t, "-c", writeConfig(t, cfg))

	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("http") + "/x"
	if code, body := httpGet(t, client, url, http.Header{"X-User": {"ann"}}); code != http.StatusOK || body != "upstream" {
		t.Errorf("GET as ann = %d %q; want 200 from the upstream", code, body)
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-user", "blocked")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-Envoy-Ratelimited") != "true" {
		t.Errorf("GET as blocked = %d, x-envoy-ratelimited %q; want 429, true", resp.StatusCode, resp.Header.Get("X-Envoy-Ratelimited"))
	}
	if l := waitFileLine(t, logPath, "ann "); l != "ann 200 - via_upstream OK-edge" {
		t.Errorf("access log %q; want the OK request with the service's metadata", l)
	}
	if l := waitFileLine(t, logPath, "blocked "); l != "blocked 429 RL request_rate_limited OVER_LIMIT-edge" {
		t.Errorf("access log %q; want 429 with flag RL and details request_rate_limited", l)
	}
	p.waitStat("cluster.web.ratelimit.ok", 1)
	p.waitStat("cluster.web.ratelimit.over_limit", 1)

	for _, tc := range []struct{ listener, want string }{
		{"rl-open", "tcp-upstream\n"},
		{"rl-blocked", ""},
		{"authz-ok", "tcp-upstream\n"},
		{"authz-denied", ""},
	} {
		if line, _ := dialLine(t, p.listenerAddr(tc.listener), ""); line != tc.want {
			t.Errorf("%s: read %q; want %q", tc.listener, line, tc.want)
		}
	}
	p.waitStat("ratelimit.tcp_open.ok", 1)
	p.waitStat("ratelimit.tcp_blocked.over_limit", 1)
	p.waitStat("ratelimit.tcp_blocked.cx_closed", 1)
	p.waitStat("ext_authz.tcp_authz.ok", 1)
	p.waitStat("ext_authz.tcp_authz.denied", 1)
	if v, _ := p.stat("ext_authz.tcp_authz.cx_closed"); v != 1 {
		t.Errorf("ext_authz.tcp_authz.cx_closed = %d; want 1", v)
	}
}
