package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/internal/registry"
)

const service = `rate_limit_service: {grpc_service: {envoy_grpc: {cluster_name: rls}}, transport_api_version: V3}`

func build(t *testing.T, y string) (*Filter, error) {
	t.Helper()
	var pb rlv3.RateLimit
	filtertest.FromYAML(t, y, &pb)
	f, err := New(&pb, nil)
	if err == nil {
		t.Cleanup(func() { f.Close() })
	}
	return f, err
}

// TestConfig: defaults, every field read, and each error naming its field.
func TestConfig(t *testing.T) {
	f, err := build(t, "domain: d\n"+service)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if c.timeout != 20*time.Millisecond || c.limitedStatus != 429 || c.errorStatus != 500 || c.failureModeDeny ||
		!c.xEnvoyRateLimited || c.xRateLimit || c.statPrefix != "ratelimit." || c.requests != requestsBoth ||
		c.enabled.Key != "ratelimit.http_filter_enabled" || c.enforced.Key != "ratelimit.http_filter_enforcing" ||
		c.metadataNamespace != Name || c.service.Cluster != "rls" || c.service.Authority != "" {
		t.Errorf("defaults = %+v", c)
	}
	f, err = build(t, `domain: d
stage: 3
request_type: external
timeout: 0s
failure_mode_deny: true
rate_limited_as_resource_exhausted: true
enable_x_ratelimit_headers: DRAFT_VERSION_03
disable_x_envoy_ratelimited_header: true
rate_limited_status: {code: 503}
status_on_error: {code: 502}
response_headers_to_add: [{header: {key: x-limited, value: "yes"}}]
stat_prefix: front
metadata_namespace: rl
enable_retry_after_header: true
`+service)
	if err != nil {
		t.Fatal(err)
	}
	c = f.cfg
	if c.stage != 3 || c.requests != requestsExternal || c.timeout != 0 || !c.failureModeDeny || !c.resourceExhausted || !c.xRateLimit ||
		c.xEnvoyRateLimited || c.limitedStatus != 503 || c.errorStatus != 502 || c.responseHeaders == nil || c.statPrefix != "ratelimit.front." ||
		c.metadataNamespace != "rl" || !c.retryAfter {
		t.Errorf("config = %+v; want every field read", c)
	}
	f, err = build(t, "domain: d\nrate_limited_status: {code: 302}\n"+service)
	if err != nil || f.cfg.limitedStatus != 429 {
		t.Errorf("rate_limited_status 302: %v, status %d; want 429", err, f.cfg.limitedStatus)
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"no domain", service, "Domain"},
		{"no service", "domain: d", "RateLimitService"},
		{"google grpc", "domain: d\nrate_limit_service: {grpc_service: {google_grpc: {target_uri: x, stat_prefix: s}}}", "google_grpc is not implemented by Legate"},
		{"grpc timeout", "domain: d\nrate_limit_service: {grpc_service: {envoy_grpc: {cluster_name: rls}, timeout: 1s}}", "grpc_service.timeout: not implemented by Legate"},
		{"api v2", "domain: d\nrate_limit_service: {grpc_service: {envoy_grpc: {cluster_name: rls}}, transport_api_version: V2}", "only V3"},
		{"request type", "domain: d\nrequest_type: some\n" + service, "RequestType"},
		{"stage on own rate limits", "domain: d\nrate_limits: [{stage: 1, actions: [{remote_address: {}}]}]\n" + service, "rate_limits[0].stage"},
		{"dynamic metadata on own rate limits", "domain: d\nrate_limits: [{actions: [{dynamic_metadata: {descriptor_key: k, metadata_key: {key: a, path: [{key: b}]}}}]}]\n" + service, "dynamic_metadata: not supported here"},
		{"unimplemented action", "domain: d\nrate_limits: [{actions: [{remote_address_match: {descriptor_value: v, address_matcher: {}}}]}]\n" + service, "not implemented by Legate"},
		{"bad header", "domain: d\nresponse_headers_to_add: [{header: {key: ':status', value: x}}]\n" + service, "response_headers_to_add[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := build(t, tt.yaml); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

// TestPerRouteConfig: RateLimitPerRoute's fields and refusals.
func TestPerRouteConfig(t *testing.T) {
	pr := func(y string) (any, error) {
		var pb rlv3.RateLimitPerRoute
		filtertest.FromYAML(t, y, &pb)
		a, err := anypb.New(&pb)
		if err != nil {
			t.Fatal(err)
		}
		return perRouteFromAny(a)
	}
	got, err := pr("vh_rate_limits: INCLUDE\ndomain: other\nrate_limits: [{actions: [{generic_key: {descriptor_value: r}}]}]")
	if p, ok := got.(*perRoute); err != nil || !ok || p.vh != vhInclude || p.domain != "other" || len(p.rateLimits) != 1 {
		t.Errorf("per route = %+v, %v", got, err)
	}
	if _, err := pr("override_option: INCLUDE_POLICY"); err == nil || !strings.Contains(err.Error(), "override_option: not implemented by Legate") {
		t.Errorf("override_option: %v", err)
	}
}

// rlServer is a real envoy.service.ratelimit.v3.RateLimitService: a request with an entry
// valued "over" is over the limit, "slow" is answered only when the caller gives up, and
// "fail" gets a gRPC error; anything else is OK. Answers carry a per-minute limit status.
type rlServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	mu   sync.Mutex
	seen []*rlsv3.RateLimitRequest
}

func (s *rlServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	code := rlsv3.RateLimitResponse_OK
	for _, d := range req.GetDescriptors() {
		for _, e := range d.GetEntries() {
			switch e.GetValue() {
			case "over":
				code = rlsv3.RateLimitResponse_OVER_LIMIT
			case "slow":
				<-ctx.Done()
				return nil, ctx.Err()
			case "fail":
				return nil, fmt.Errorf("refused")
			}
		}
	}
	md, _ := structpb.NewStruct(map[string]any{"checked": "yes"})
	return &rlsv3.RateLimitResponse{
		OverallCode: code,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			{Code: code, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Name: "per-user"}, LimitRemaining: 3, DurationUntilReset: durationpb.New(42 * time.Second)},
			{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1000, Unit: rlsv3.RateLimitResponse_RateLimit_HOUR}, LimitRemaining: 900, DurationUntilReset: durationpb.New(time.Hour)},
		},
		ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "x-rls", Value: code.String()}},
		RequestHeadersToAdd:  []*corev3.HeaderValue{{Key: "x-rls-checked", Value: "1"}},
		RawBody:              []byte("slow down"),
		DynamicMetadata:      md,
	}, nil
}

// last returns the last request's descriptors as "k=v,k=v|k=v", and the domain.
func (s *rlServer) last() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return "", ""
	}
	r := s.seen[len(s.seen)-1]
	var ds []string
	for _, d := range r.GetDescriptors() {
		var es []string
		for _, e := range d.GetEntries() {
			es = append(es, e.GetKey()+"="+e.GetValue())
		}
		ds = append(ds, strings.Join(es, ","))
	}
	return strings.Join(ds, "|"), r.GetDomain()
}

func (s *rlServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func startRLS(t testing.TB) (*rlServer, string) {
	s := &rlServer{}
	return s, nettest.ServeGRPC(t, func(srv *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(srv, s) })
}

// hcm is a connection manager with the rate limit filter (extra fields after domain) and
// routes with rate_limits at the virtual host and route levels.
func hcm(extra string) string {
	return `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    rate_limits: [{actions: [{generic_key: {descriptor_value: vh}}]}]
    routes:
    - match: {prefix: "/include"}
      route:
        cluster: web
        include_vh_rate_limits: true
        rate_limits: [{actions: [{request_headers: {header_name: x-user, descriptor_key: user}}]}]
    - match: {prefix: "/ignore"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.ratelimit:
          "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
          vh_rate_limits: IGNORE
    - match: {prefix: "/own"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.ratelimit:
          "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
          domain: special
          rate_limits: [{actions: [{source_cluster: {}}, {destination_cluster: {}}]}]
    - match: {prefix: "/"}
      route:
        cluster: web
        rate_limits:
        - actions: [{request_headers: {header_name: x-user, descriptor_key: user}}, {remote_address: {}}]
        - stage: 1
          actions: [{generic_key: {descriptor_value: stage1}}]
http_filters:
- name: envoy.filters.http.ratelimit
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
    domain: edge
` + extra + `
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
}

const rlsCluster = "typed_extension_protocol_options: {envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {\"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions, explicit_http_config: {http2_protocol_options: {}}}}"

func start(t testing.TB, rlsAddr, extra string) *filtertest.Proxy {
	up := filtertest.Upstream(t, "x-rls-checked")
	return filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up), filtertest.StaticCluster("rls", rlsCluster, rlsAddr)},
		HCM:      hcm(extra),
		Register: []func(*registry.Builder){Register},
	})
}

// TestGlobalRateLimit: through a real listener, upstream and grpc-go rate limit service, the
// service gets the route's descriptors (virtual host ones as the route's options say), an OK
// lets the request on with the service's request and response headers and x-ratelimit-*,
// OVER_LIMIT answers 429 with the service's body, x-envoy-ratelimited and the headers, and
// cluster.web.ratelimit.* count each.
func TestGlobalRateLimit(t *testing.T) {
	rls, addr := startRLS(t)
	p := start(t, addr, `    timeout: 5s
    enable_x_ratelimit_headers: DRAFT_VERSION_03
    response_headers_to_add: [{header: {key: x-limited, value: "yes"}}]
    rate_limit_service: {grpc_service: {envoy_grpc: {cluster_name: rls}}, transport_api_version: V3}`)
	c := p.Client()

	resp, body := p.Get(c, "/a", "x-user", "ann")
	if resp.StatusCode != 200 || body != "upstream" {
		t.Fatalf("GET /a = %d %q; want 200 from the upstream", resp.StatusCode, body)
	}
	if d, domain := rls.last(); d != "user=ann,remote_address=127.0.0.1" || domain != "edge" {
		t.Errorf("service saw %q in %q; want the route's stage-0 descriptor user=ann,remote_address=127.0.0.1 in edge", d, domain)
	}
	if resp.Header.Get("Echo-X-Rls-Checked") != "1" || resp.Header.Get("X-Rls") != "OK" {
		t.Errorf("upstream saw x-rls-checked %q, client x-rls %q; want the service's request and response headers",
			resp.Header.Get("Echo-X-Rls-Checked"), resp.Header.Get("X-Rls"))
	}
	if got := resp.Header.Get("X-Ratelimit-Limit"); got != `10, 10;w=60;name="per-user", 1000;w=3600` ||
		resp.Header.Get("X-Ratelimit-Remaining") != "3" || resp.Header.Get("X-Ratelimit-Reset") != "42" {
		t.Errorf("x-ratelimit = %q %q %q", got, resp.Header.Get("X-Ratelimit-Remaining"), resp.Header.Get("X-Ratelimit-Reset"))
	}
	if resp.Header.Get("X-Envoy-Ratelimited") != "" || resp.Header.Get("X-Limited") != "" {
		t.Errorf("an allowed response got the rate-limited headers: %v", resp.Header)
	}

	resp, body = p.Get(c, "/a", "x-user", "over")
	if resp.StatusCode != 429 || body != "slow down" || resp.Header.Get("X-Envoy-Ratelimited") != "true" ||
		resp.Header.Get("X-Limited") != "yes" || resp.Header.Get("X-Rls") != "OVER_LIMIT" || resp.Header.Get("X-Ratelimit-Remaining") != "3" {
		t.Errorf("over limit: %d %q %v; want 429 'slow down' with x-envoy-ratelimited, x-limited, x-rls and x-ratelimit-*", resp.StatusCode, body, resp.Header)
	}

	// Without x-user the route's descriptor fails; the virtual host's is not read (the route
	// has rate_limits, OVERRIDE), so nothing is asked.
	n := rls.count()
	if resp, _ := p.Get(c, "/a"); resp.StatusCode != 200 || rls.count() != n {
		t.Errorf("no descriptor: %d, %d calls; want 200 without a call", resp.StatusCode, rls.count()-n)
	}
	for _, tc := range []struct{ path, want, domain string }{
		{"/include", "user=bob|generic_key=vh", "edge"},                     // include_vh_rate_limits
		{"/ignore", "", ""},                                                 // no route rate_limits, IGNORE: no call
		{"/own", "source_cluster=local,destination_cluster=web", "special"}, // per-route rate_limits and domain
	} {
		n := rls.count()
		resp, _ := p.Get(c, tc.path, "x-user", "bob")
		d, domain := rls.last()
		if tc.want == "" {
			if rls.count() != n || resp.StatusCode != 200 {
				t.Errorf("%s: %d calls, status %d; want none, 200", tc.path, rls.count()-n, resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != 200 || d != tc.want || domain != tc.domain {
			t.Errorf("%s: status %d, service saw %q in %q; want 200, %q in %q", tc.path, resp.StatusCode, d, domain, tc.want, tc.domain)
		}
	}
	for name, want := range map[string]uint64{"cluster.web.ratelimit.ok": 3, "cluster.web.ratelimit.over_limit": 1, "cluster.web.ratelimit.error": 0} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

// TestServiceFailures: a service that cannot be reached, fails the call or answers after
// the timeout lets the request on (failure_mode_allowed) or, with failure_mode_deny, answers
// status_on_error; each counts as an error.
func TestServiceFailures(t *testing.T) {
	_, addr := startRLS(t)
	down := nettest.ClosedAddr(t)
	for _, tc := range []struct {
		name, rls, user, extra string
		want                   int
		allowed                uint64
	}{
		{"down allowed", down, "ann", "", 200, 1},
		{"down denied", down, "ann", "    failure_mode_deny: true\n", 500, 0},
		{"down status on error", down, "ann", "    failure_mode_deny: true\n    status_on_error: {code: 503}\n", 503, 0},
		{"failed call denied", addr, "fail", "    failure_mode_deny: true\n", 500, 0},
		{"slow allowed", addr, "slow", "", 200, 1},
		{"slow denied", addr, "slow", "    failure_mode_deny: true\n", 500, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timeout := "5s"
			if strings.HasPrefix(tc.name, "slow") {
				timeout = "0.2s"
			}
			p := start(t, tc.rls, tc.extra+"    timeout: "+timeout+"\n    rate_limit_service: {grpc_service: {envoy_grpc: {cluster_name: rls}}}")
			start := time.Now()
			resp, _ := p.Get(p.Client(), "/a", "x-user", tc.user)
			if resp.StatusCode != tc.want {
				t.Errorf("GET = %d; want %d", resp.StatusCode, tc.want)
			}
			if strings.HasPrefix(tc.name, "slow") && time.Since(start) < 200*time.Millisecond {
				t.Errorf("answered after %v; the call should have waited for its 200ms timeout", time.Since(start))
			}
			if got := p.Stat("cluster.web.ratelimit.error"); got != 1 {
				t.Errorf("error = %d; want 1", got)
			}
			if got := p.Stat("cluster.web.ratelimit.failure_mode_allowed"); got != tc.allowed {
				t.Errorf("failure_mode_allowed = %d; want %d", got, tc.allowed)
			}
		})
	}
}

// TestGRPCReply: a rate-limited gRPC request is answered 200 with grpc-status UNAVAILABLE,
// or RESOURCE_EXHAUSTED with rate_limited_as_resource_exhausted, and the body as grpc-message;
// stat_prefix names the stats; request_type internal skips external requests.
func TestGRPCReply(t *testing.T) {
	rls, addr := startRLS(t)
	for _, tc := range []struct {
		extra, want string
	}{
		{"", "14"},
		{"    rate_limited_as_resource_exhausted: true\n", "8"},
	} {
		p := start(t, addr, tc.extra+"    stat_prefix: edge\n    timeout: 5s\n    disable_x_envoy_ratelimited_header: true\n    "+service)
		resp, body := p.Get(p.Client(), "/a", "x-user", "over", "content-type", "application/grpc")
		if resp.StatusCode != 200 || body != "" || resp.Header.Get("Grpc-Status") != tc.want || resp.Header.Get("Grpc-Message") != "slow down" ||
			resp.Header.Get("Content-Type") != "application/grpc" || resp.Header.Get("X-Envoy-Ratelimited") != "" {
			t.Errorf("%s: %d %q %v; want 200 with grpc-status %s, grpc-message and no x-envoy-ratelimited", tc.extra, resp.StatusCode, body, resp.Header, tc.want)
		}
		if got := p.Stat("cluster.web.ratelimit.edge.over_limit"); got != 1 {
			t.Errorf("cluster.web.ratelimit.edge.over_limit = %d; want 1", got)
		}
	}
	p := start(t, addr, "    request_type: internal\n    timeout: 5s\n    "+service)
	n := rls.count()
	if resp, _ := p.Get(p.Client(), "/a", "x-user", "over"); resp.StatusCode != 200 || rls.count() != n {
		t.Errorf("external request with request_type internal: %d after %d calls; want 200 without a call", resp.StatusCode, rls.count()-n)
	}
}

// TestRetryAfter: with enable_retry_after_header a 429 carries Retry-After from the
// over-limit status's duration_until_reset.
func TestRetryAfter(t *testing.T) {
	_, addr := startRLS(t)
	p := start(t, addr, "    timeout: 5s\n    enable_retry_after_header: true\n    "+service)
	resp, _ := p.Get(p.Client(), "/a", "x-user", "over")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "42" {
		t.Errorf("over limit: %d, Retry-After %q; want 429, 42", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// BenchmarkRateLimit measures a request through the proxy with one OK call to the service.
func BenchmarkRateLimit(b *testing.B) {
	_, addr := startRLS(b)
	p := start(b, addr, "    timeout: 5s\n    "+service)
	c := p.Client()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.Addr+"/a", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("x-user", "ann")
	b.ReportAllocs()
	for b.Loop() {
		if resp, _ := p.Do(c, req); resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}
