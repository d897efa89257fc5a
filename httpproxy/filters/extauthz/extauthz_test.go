package extauthz

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/internal/registry"
)

func build(t testing.TB, y string) (*Filter, error) {
	t.Helper()
	var pb extauthzv3.ExtAuthz
	filtertest.FromYAML(t, y, &pb)
	f, err := New(&pb, &filter.Context{})
	if err == nil {
		t.Cleanup(func() { f.Close() })
	}
	return f, err
}

const grpcSvc = `grpc_service: {envoy_grpc: {cluster_name: authz}}`
const httpSvc = `http_service: {server_uri: {uri: "http://authz", cluster: authz, timeout: 1s}}`

func TestNewErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"no service", `{}`, "one of grpc_service and http_service"},
		{"google grpc", `grpc_service: {google_grpc: {target_uri: x, stat_prefix: "y"}}`, "google_grpc"},
		{"no cluster", `grpc_service: {envoy_grpc: {}}`, "ClusterName"},
		{"http no timeout", `http_service: {server_uri: {uri: "http://a", cluster: authz}}`, "Timeout"},
		{"http path prefix", `http_service: {server_uri: {uri: "http://a", cluster: authz, timeout: 1s}, path_prefix: "x"}`, "path_prefix"},
		{"path override", `http_service: {server_uri: {uri: "http://a", cluster: authz, timeout: 1s}, path_override: /x}`, "path_override"},
		{"filter enabled", grpcSvc + `
filter_enabled: {default_value: {numerator: 50}}`, "filter_enabled: not implemented by Legate"},
		{"shadow", grpcSvc + `
shadow_mode: true`, "shadow_mode"},
		{"partial body", grpcSvc + `
with_request_body: {max_request_bytes: 10, allow_partial_message: true}`, "allow_partial_message"},
		{"zero body", grpcSvc + `
with_request_body: {max_request_bytes: 0}`, "MaxRequestBytes"},
		{"bad regex", grpcSvc + `
allowed_headers: {patterns: [{safe_regex: {regex: "("}}]}`, "allowed_headers"},
		{"api v2", grpcSvc + `
transport_api_version: V2`, "transport_api_version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := build(t, tt.yaml)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	f, err := build(t, grpcSvc)
	if err != nil {
		t.Fatal(err)
	}
	g := f.checker.(*grpcChecker)
	if g.t.timeout != defaultTimeout || g.t.authority != "authz" || f.set.statusOnError != 403 || f.set.failureModeAllow || !f.set.ingestMetadata {
		t.Errorf("defaults: timeout %v authority %q status_on_error %d failure_mode_allow %v ingest %v",
			g.t.timeout, g.t.authority, f.set.statusOnError, f.set.failureModeAllow, f.set.ingestMetadata)
	}
	f, err = build(t, httpSvc+`
status_on_error: {code: ServiceUnavailable}`)
	if err != nil {
		t.Fatal(err)
	}
	if f.set.statusOnError != 503 {
		t.Errorf("status_on_error = %d; want 503", f.set.statusOnError)
	}
}

// authServer is a real envoy.service.auth.v3.Authorization server: /allow is allowed with
// upstream and response headers and metadata, /deny denied with 401, anything else allowed
// plainly; it records the requests it saw.
type authServer struct {
	authv3.UnimplementedAuthorizationServer
	mu   sync.Mutex
	seen []*authv3.CheckRequest
}

func (s *authServer) Check(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	hv := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}}
	}
	switch {
	case strings.HasPrefix(req.GetAttributes().GetRequest().GetHttp().GetPath(), "/allow"):
		md, _ := structpb.NewStruct(map[string]any{"user": "alice"})
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_OK)}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers:              []*corev3.HeaderValueOption{hv("x-auth-user", "alice")},
			HeadersToRemove:      []string{"x-secret"},
			ResponseHeadersToAdd: []*corev3.HeaderValueOption{hv("x-auth-checked", "yes")},
		}}, DynamicMetadata: md}, nil
	case strings.HasPrefix(req.GetAttributes().GetRequest().GetHttp().GetPath(), "/deny"):
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_PERMISSION_DENIED)}, HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
			Headers: []*corev3.HeaderValueOption{hv("www-authenticate", "Bearer")},
			Body:    "go away",
		}}}, nil
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_OK)}}, nil
}

func (s *authServer) last() *authv3.CheckRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return nil
	}
	return s.seen[len(s.seen)-1]
}

func startAuthServer(t *testing.T) (*authServer, string) {
	s := &authServer{}
	return s, nettest.ServeGRPC(t, func(srv *grpc.Server) { authv3.RegisterAuthorizationServer(srv, s) })
}

func authzFilter(body string) string {
	return `- name: envoy.filters.http.ext_authz
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
` + body
}

const perRouteOther = `      typed_per_filter_config:
        envoy.filters.http.ext_authz:
          "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute
          disabled: true`

// TestGRPCService: through a real listener with a real upstream and a real grpc-go
// authorization server, an allowed request reaches the upstream with the service's header
// changes and the client gets its response header; a denied one gets the service's status,
// headers and body; a route that disables the filter is not checked; the stats count each.
func TestGRPCService(t *testing.T) {
	auth, authAddr := startAuthServer(t)
	up := filtertest.Upstream(t, "x-auth-user", "x-secret")
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up), filtertest.StaticCluster("authz", "http2_protocol_options: {}", authAddr)},
		HCM: filtertest.HCM(authzFilter(`    grpc_service: {envoy_grpc: {cluster_name: authz}, timeout: 5s}
    stat_prefix: front
    with_request_body: {max_request_bytes: 1024}
`), perRouteOther),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	resp, body := p.Get(c, "/allow?x=1", "x-secret", "s3cret", "x-user-agent", "test")
	if resp.StatusCode != 200 || body != "upstream" {
		t.Fatalf("GET /allow = %d %q; want 200 from the upstream", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Echo-X-Auth-User"); got != "alice" {
		t.Errorf("upstream saw x-auth-user %q; want alice (the service's header)", got)
	}
	if got := resp.Header.Get("Echo-X-Secret"); got != "" {
		t.Errorf("upstream saw x-secret %q; the service removed it", got)
	}
	if got := resp.Header.Get("X-Auth-Checked"); got != "yes" {
		t.Errorf("response x-auth-checked = %q; want yes (response_headers_to_add)", got)
	}
	hr := auth.last().GetAttributes().GetRequest().GetHttp()
	if hr.GetMethod() != "GET" || hr.GetPath() != "/allow?x=1" || hr.GetQuery() != "x=1" || hr.GetHeaders()["x-user-agent"] != "test" || hr.GetHeaders()[":method"] != "GET" {
		t.Errorf("CheckRequest http = %v", hr)
	}
	if src := auth.last().GetAttributes().GetSource().GetAddress().GetSocketAddress().GetAddress(); src != "127.0.0.1" {
		t.Errorf("CheckRequest source = %q; want 127.0.0.1", src)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+"/deny", strings.NewReader("the body"))
	resp, body = p.Do(c, req)
	if resp.StatusCode != 401 || body != "go away" || resp.Header.Get("Www-Authenticate") != "Bearer" {
		t.Fatalf("POST /deny = %d %q %v; want 401 go away with www-authenticate", resp.StatusCode, body, resp.Header)
	}
	if got := auth.last().GetAttributes().GetRequest().GetHttp().GetBody(); got != "the body" {
		t.Errorf("CheckRequest body = %q; want the request body (with_request_body)", got)
	}
	n := len(auth.seen)
	if resp, _ := p.Get(c, "/other/deny"); resp.StatusCode != 200 {
		t.Errorf("GET /other/deny = %d; want 200 (the route disables the filter)", resp.StatusCode)
	}
	if len(auth.seen) != n {
		t.Errorf("the service was asked about a request on a disabled route")
	}
	for name, want := range map[string]uint64{
		"http.ingress.ext_authz.front.ok": 1, "http.ingress.ext_authz.front.denied": 1, "http.ingress.ext_authz.front.disabled": 1,
	} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

// TestServiceDown: with the service unreachable the request gets status_on_error, or goes on
// with failure_mode_allow (marked with x-envoy-auth-failure-mode-allowed).
func TestServiceDown(t *testing.T) {
	up := filtertest.Upstream(t, "x-envoy-auth-failure-mode-allowed")
	for _, tc := range []struct {
		name, cfg  string
		want       int
		wantHeader string
		stat       string
	}{
		{"status_on_error", `    status_on_error: {code: 503}
`, 503, "", "http.ingress.ext_authz.error"},
		{"failure_mode_allow", `    failure_mode_allow: true
    failure_mode_allow_header_add: true
`, 200, "true", "http.ingress.ext_authz.failure_mode_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filtertest.Start(t, filtertest.Options{
				Clusters: []string{filtertest.StaticCluster("web", "", up), filtertest.StaticCluster("authz", "", nettest.ClosedAddr(t))},
				HCM:      filtertest.HCM(authzFilter("    grpc_service: {envoy_grpc: {cluster_name: authz}, timeout: 5s}\n"+tc.cfg), ""),
				Register: []func(*registry.Builder){Register},
			})
			resp, _ := p.Get(p.Client(), "/x")
			if resp.StatusCode != tc.want || resp.Header.Get("Echo-X-Envoy-Auth-Failure-Mode-Allowed") != tc.wantHeader {
				t.Errorf("GET = %d (upstream saw failure header %q); want %d, %q", resp.StatusCode, resp.Header.Get("Echo-X-Envoy-Auth-Failure-Mode-Allowed"), tc.want, tc.wantHeader)
			}
			if got := p.Stat(tc.stat); got != 1 {
				t.Errorf("%s = %d; want 1", tc.stat, got)
			}
		})
	}
}

// TestHTTPService: a real net/http authorization service gets the client's method, path
// under path_prefix, authorization and allowed headers; its 200 lets the request on with the
// allowed upstream headers; any other status is the client's answer with its body and headers.
func TestHTTPService(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		if r.Header.Get("Authorization") == "Bearer good" {
			w.Header().Set("X-Auth-User", "bob")
			w.Header().Set("X-Internal", "no")
			w.Header().Set("X-Session", "s1")
			return
		}
		w.Header().Set("X-Reason", "bad token")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "nope")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	up := filtertest.Upstream(t, "x-auth-user", "x-internal")
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up), filtertest.StaticCluster("authz", "", ln.Addr().String())},
		HCM: filtertest.HCM(authzFilter(`    http_service:
      server_uri: {uri: "http://authz", cluster: authz, timeout: 5s}
      path_prefix: /check
      authorization_request:
        allowed_headers: {patterns: [{exact: x-tenant}]}
        headers_to_add: [{key: x-from, value: legate}]
      authorization_response:
        allowed_upstream_headers: {patterns: [{exact: x-auth-user}]}
        allowed_client_headers: {patterns: [{exact: x-reason}]}
        allowed_client_headers_on_success: {patterns: [{exact: x-session}]}
`), ""),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	resp, body := p.Get(c, "/a?b=c", "authorization", "Bearer good", "x-tenant", "t1", "x-other", "o")
	if resp.StatusCode != 200 || body != "upstream" {
		t.Fatalf("allowed GET = %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Echo-X-Auth-User") != "bob" || resp.Header.Get("Echo-X-Internal") != "" || resp.Header.Get("X-Session") != "s1" {
		t.Errorf("allowed: upstream x-auth-user %q x-internal %q, client x-session %q; want bob, none, s1",
			resp.Header.Get("Echo-X-Auth-User"), resp.Header.Get("Echo-X-Internal"), resp.Header.Get("X-Session"))
	}
	mu.Lock()
	got := seen[len(seen)-1]
	mu.Unlock()
	if got.URL.RequestURI() != "/check/a?b=c" || got.Header.Get("X-Tenant") != "t1" || got.Header.Get("X-Other") != "" || got.Header.Get("X-From") != "legate" {
		t.Errorf("service saw %s %s %v", got.Method, got.URL.RequestURI(), got.Header)
	}
	resp, body = p.Get(c, "/a", "authorization", "Bearer bad")
	if resp.StatusCode != 403 || body != "nope" || resp.Header.Get("X-Reason") != "bad token" {
		t.Errorf("denied GET = %d %q x-reason %q; want 403 nope, bad token", resp.StatusCode, body, resp.Header.Get("X-Reason"))
	}
}

// TestFromOption covers the header append rules of the service's answers.
func TestFromOption(t *testing.T) {
	h := http.Header{"A": {"1"}}
	for _, o := range []*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: "a", Value: "2"}, Append: wrapperspb.Bool(true)},
		{Header: &corev3.HeaderValue{Key: "b", Value: "x"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS},
		{Header: &corev3.HeaderValue{Key: "c", Value: "y"}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT},
		{Header: &corev3.HeaderValue{Key: "c", Value: "z"}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT},
	} {
		applyHeader(h, fromOption(o))
	}
	if strings.Join(h["A"], ",") != "1,2" || h["B"] != nil || strings.Join(h["C"], ",") != "y" {
		t.Errorf("headers = %v", h)
	}
}

func BenchmarkGRPCCheck(b *testing.B) {
	addr := nettest.ServeGRPC(b, func(srv *grpc.Server) { authv3.RegisterAuthorizationServer(srv, &authServer{}) })
	up := filtertest.Upstream(b)
	p := filtertest.Start(b, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up), filtertest.StaticCluster("authz", "http2_protocol_options: {}", addr)},
		HCM:      filtertest.HCM(authzFilter("    grpc_service: {envoy_grpc: {cluster_name: authz}, timeout: 5s}\n"), ""),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	b.ReportAllocs()
	for b.Loop() {
		if resp, _ := p.Get(c, "/x"); resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}
