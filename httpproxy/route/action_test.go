package route

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	omitcanaryv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/omit_canary_hosts/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/lb"
)

const actionConfig = `
name: actions
request_headers_to_add:
- header: {key: x-level, value: global}
  append_action: OVERWRITE_IF_EXISTS_OR_ADD
- header: {key: x-trail, value: global}
response_headers_to_add:
- header: {key: x-resp, value: global}
virtual_hosts:
- name: v
  domains: ["*"]
  request_headers_to_add:
  - header: {key: x-level, value: vhost}
    append_action: OVERWRITE_IF_EXISTS_OR_ADD
  - header: {key: x-trail, value: vhost}
  request_headers_to_remove: [x-drop]
  retry_policy: {retry_on: "5xx", num_retries: 7}
  routes:
  - name: weighted
    match: {prefix: "/weighted"}
    route:
      metadata_match: {filter_metadata: {envoy.lb: {version: v1, stage: prod}}}
      weighted_clusters:
        clusters:
        - name: a
          weight: 20
          request_headers_to_add: [{header: {key: x-cluster, value: a}}]
          metadata_match: {filter_metadata: {envoy.lb: {version: v2}}}
        - {name: b, weight: 30, host_rewrite_literal: b.internal}
        - {name: c, weight: 50}
  - name: weighted-header
    match: {prefix: "/wh"}
    route:
      weighted_clusters:
        header_name: x-random
        clusters: [{name: a, weight: 1}, {name: b, weight: 1}]
  - name: by-header
    match: {prefix: "/by-header"}
    route: {cluster_header: x-cluster-name}
  - name: prefix-rewrite
    match: {prefix: "/old/"}
    route: {cluster: c, prefix_rewrite: "/new/", host_rewrite_literal: new.example.com}
  - name: exact-rewrite
    match: {path: "/exact"}
    route: {cluster: c, prefix_rewrite: "/replaced"}
  - name: regex-rewrite
    match: {safe_regex: {regex: "/regex/.*"}}
    route: {cluster: c, regex_rewrite: {pattern: {regex: "^/regex/([^/]+)/(.*)$"}, substitution: "/\\2/\\1"}}
  - name: policies
    match: {prefix: "/policies"}
    route:
      cluster: c
      timeout: 2.5s
      idle_timeout: 0s
      priority: HIGH
      retry_policy:
        retry_on: "5xx, gateway-error,connect-failure,retriable-4xx,refused-stream,retriable-status-codes,reset,unavailable,bogus"
        num_retries: 3
        per_try_timeout: 0.25s
        retriable_status_codes: [409, 418]
        retry_host_predicate: [{name: envoy.retry_host_predicates.previous_hosts}]
        host_selection_retry_max_attempts: 5
        retriable_request_headers: [{name: ":method", exact_match: GET}]
        retriable_headers: [{name: x-retry-me, present_match: true}]
      hash_policy:
      - header: {header_name: x-user}
      - {connection_properties: {source_ip: true}, terminal: true}
      - query_parameter: {name: never}
    request_headers_to_add:
    - header: {key: x-level, value: route}
      append_action: OVERWRITE_IF_EXISTS_OR_ADD
    - header: {key: x-trail, value: route}
    - header: {key: x-client, value: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"}
    - header: {key: x-absent-only, value: new}
      append_action: ADD_IF_ABSENT
    - header: {key: x-overwrite-existing, value: new}
      append_action: OVERWRITE_IF_EXISTS
    - header: {key: x-legacy-append-false, value: new}
      append: false
    - header: {key: x-empty, value: ""}
    - header: {key: x-kept-empty, value: ""}
      keep_empty_value: true
    response_headers_to_add:
    - header: {key: x-resp, value: route}
    response_headers_to_remove: [server]
  - name: defaults
    match: {prefix: "/defaults"}
    route: {cluster: c}
  - name: direct
    match: {prefix: "/direct"}
    direct_response: {status: 418, body: {inline_string: "teapot"}}
  - name: redirect
    match: {prefix: "/redirect"}
    redirect: {host_redirect: other.example.com, response_code: TEMPORARY_REDIRECT}
`

func TestWeightedClusters(t *testing.T) {
	tbl := mustCompile(t, actionConfig, Options{})
	tests := []struct {
		random uint64
		want   string
	}{{0, "a"}, {19, "a"}, {20, "b"}, {49, "b"}, {50, "c"}, {99, "c"}, {100, "a"}, {1<<64 - 1, "a"}}
	for _, tt := range tests {
		r := req("h", "/weighted")
		r.Random = tt.random
		m := tbl.Route(r)
		if m == nil || m.Cluster != tt.want || m.Weighted.Name != tt.want {
			t.Errorf("Route(random %d) cluster = %v; want %q", tt.random, m, tt.want)
		}
	}
	r := req("h", "/weighted")
	m := tbl.Route(r)
	if diff := cmp.Diff([]lb.Criterion{{Name: "stage", Value: "prod"}, {Name: "version", Value: "v2"}}, m.MetadataMatch); diff != "" {
		t.Errorf("cluster a MetadataMatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]lb.Criterion{{Name: "stage", Value: "prod"}, {Name: "version", Value: "v1"}}, m.Route.MetadataMatch); diff != "" {
		t.Errorf("route MetadataMatch (-want +got):\n%s", diff)
	}
	h := http.Header{}
	m.FinalizeRequestHeaders(h, nil)
	if got := h.Get("X-Cluster"); got != "a" {
		t.Errorf("X-Cluster = %q; want a (weighted cluster header)", got)
	}
	r.Random = 25
	if m := tbl.Route(r); m.HostRewrite != "b.internal" {
		t.Errorf("cluster b HostRewrite = %q; want b.internal", m.HostRewrite)
	}

	t.Run("random value from header", func(t *testing.T) {
		for v, want := range map[string]string{"0": "a", "1": "b", "3": "b", "x": "a", "99999999999999999999999": "a"} {
			r := req("h", "/wh", "X-Random", v)
			if got := tbl.Route(r).Cluster; got != want {
				t.Errorf("x-random %q: cluster = %q; want %q", v, got, want)
			}
		}
	})
}

func TestClusterHeader(t *testing.T) {
	tbl := mustCompile(t, actionConfig, Options{})
	if got := tbl.Route(req("h", "/by-header", "X-Cluster-Name", "dyn")).Cluster; got != "dyn" {
		t.Errorf("Cluster = %q; want dyn", got)
	}
	if got := tbl.Route(req("h", "/by-header")).Cluster; got != "" {
		t.Errorf("Cluster without header = %q; want empty (Envoy answers 503 NC)", got)
	}
}

func TestRewritePath(t *testing.T) {
	tbl := mustCompile(t, actionConfig, Options{})
	tests := []struct {
		path, want string
		changed    bool
	}{
		{"/old/a/b?q=1", "/new/a/b?q=1", true},
		{"/exact", "/replaced", true},
		{"/exact?x", "/replaced?x", true},
		{"/regex/one/two/three?z", "/two/three/one?z", true},
		{"/defaults/x", "/defaults/x", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			m := tbl.Route(req("h", tt.path))
			got, changed := m.Route.RewritePath(tt.path)
			if got != tt.want || changed != tt.changed {
				t.Errorf("RewritePath(%q) = %q, %v; want %q, %v", tt.path, got, changed, tt.want, tt.changed)
			}
		})
	}
	if m := tbl.Route(req("h", "/old/x")); m.HostRewrite != "new.example.com" {
		t.Errorf("HostRewrite = %q; want new.example.com", m.HostRewrite)
	}
}

func TestPolicies(t *testing.T) {
	tbl := mustCompile(t, actionConfig, Options{})
	r := tbl.Route(req("h", "/policies")).Route
	want := &RetryPolicy{
		RetryOn: Retry5xx | RetryGatewayError | RetryConnectFailure | RetryRetriable4xx | RetryRefusedStream |
			RetryRetriableStatusCodes | RetryReset | RetryGRPCUnavailable,
		NumRetries:                    3,
		PerTryTimeout:                 250 * time.Millisecond,
		RetriableStatusCodes:          []uint32{409, 418},
		PreviousHosts:                 true,
		HostSelectionRetryMaxAttempts: 5,
		BaseInterval:                  25 * time.Millisecond,
		MaxInterval:                   250 * time.Millisecond,
	}
	if diff := cmp.Diff(want, r.RetryPolicy, cmpopts.IgnoreUnexported(RetryPolicy{})); diff != "" {
		t.Errorf("RetryPolicy (-want +got):\n%s", diff)
	}
	if !r.RetryPolicy.RetriableRequest(req("h", "/")) {
		t.Errorf("RetriableRequest(GET) = false; want true")
	}
	if r.RetryPolicy.RetriableRequest(&Request{Method: "POST"}) {
		t.Errorf("RetriableRequest(POST) = true; want false")
	}
	if !r.RetryPolicy.RetriableResponse(http.Header{"X-Retry-Me": {"1"}}) || r.RetryPolicy.RetriableResponse(http.Header{}) {
		t.Errorf("RetriableResponse does not follow retriable_headers")
	}
	if r.Timeout != 2500*time.Millisecond || !r.IdleTimeoutSet || r.IdleTimeout != 0 || r.Priority != PriorityHigh {
		t.Errorf("Timeout, IdleTimeout, IdleTimeoutSet, Priority = %v, %v, %v, %v; want 2.5s, 0s, true, HIGH",
			r.Timeout, r.IdleTimeout, r.IdleTimeoutSet, r.Priority)
	}

	if r.TimeoutMillis != "2500" {
		t.Errorf("TimeoutMillis = %q; want 2500", r.TimeoutMillis)
	}

	d := tbl.Route(req("h", "/defaults")).Route
	if d.Timeout != 15*time.Second || d.IdleTimeoutSet || d.Priority != PriorityDefault {
		t.Errorf("defaults: Timeout, IdleTimeoutSet, Priority = %v, %v, %v; want 15s, false, DEFAULT", d.Timeout, d.IdleTimeoutSet, d.Priority)
	}
	if d.TimeoutMillis != "15000" {
		t.Errorf("defaults: TimeoutMillis = %q; want 15000", d.TimeoutMillis)
	}
	if d.RetryPolicy == nil || d.RetryPolicy.NumRetries != 7 || d.RetryPolicy.RetryOn != Retry5xx {
		t.Errorf("defaults: RetryPolicy = %+v; want the virtual host's (5xx, 7 retries)", d.RetryPolicy)
	}
	if p, _ := compileRetryPolicy(parseConfig(t, "virtual_hosts: [{name: v, domains: [x], retry_policy: {}}]").GetVirtualHosts()[0].GetRetryPolicy(), ""); p.NumRetries != 1 || p.HostSelectionRetryMaxAttempts != 1 {
		t.Errorf("empty retry policy: NumRetries, HostSelectionRetryMaxAttempts = %d, %d; want 1, 1", p.NumRetries, p.HostSelectionRetryMaxAttempts)
	}
}

func TestParseRetryOn(t *testing.T) {
	on, unknown := ParseRetryOn(" 5xx ,,reset-before-request,envoy-ratelimited,retriable-headers,http3-post-connect-failure,cancelled,deadline-exceeded,resource-exhausted,internal,nope")
	want := Retry5xx | RetryResetBeforeRequest | RetryEnvoyRateLimited | RetryRetriableHeaders | RetryHTTP3PostConnectFailure |
		RetryGRPCCancelled | RetryGRPCDeadlineExceeded | RetryGRPCResourceExhausted | RetryGRPCInternal
	if on != want {
		t.Errorf("ParseRetryOn = %b; want %b", on, want)
	}
	if diff := cmp.Diff([]string{"nope"}, unknown); diff != "" {
		t.Errorf("unknown tokens (-want +got):\n%s", diff)
	}
}

func TestHashKey(t *testing.T) {
	tbl := mustCompile(t, actionConfig, Options{})
	r := tbl.Route(req("h", "/policies")).Route
	rot := func(h uint64) uint64 { return h<<1 | h>>63 }
	user := xxhash.Sum64String("alice")
	ip := xxhash.Sum64String("10.0.0.1")

	tests := []struct {
		name     string
		req      *Request
		sourceIP string
		want     uint64
		ok       bool
	}{
		{"header only", req("h", "/policies", "X-User", "alice"), "", user, true},
		{"header then terminal source ip", req("h", "/policies?never=1", "X-User", "alice"), "10.0.0.1", rot(user) ^ ip, true},
		{"source ip only", req("h", "/policies"), "10.0.0.1", ip, true},
		{"nothing", req("h", "/policies"), "", 0, false},
		{"query after a terminal without hash", req("h", "/policies?never=x"), "", xxhash.Sum64String("x"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := r.HashKey(tt.req, tt.sourceIP)
			if got != tt.want || ok != tt.ok {
				t.Errorf("HashKey() = %#x, %v; want %#x, %v", got, ok, tt.want, tt.ok)
			}
		})
	}

	t.Run("multiple header values are order independent and seeded", func(t *testing.T) {
		a, _ := r.HashKey(req("h", "/", "X-User", "b", "X-User", "a"), "")
		b, _ := r.HashKey(req("h", "/", "X-User", "a", "X-User", "b"), "")
		d := xxhash.NewWithSeed(xxhash.Sum64String("a"))
		_, _ = d.WriteString("b")
		if a != b || a != d.Sum64() {
			t.Errorf("HashKey = %#x and %#x; want both %#x", a, b, d.Sum64())
		}
	})

	t.Run("cookie", func(t *testing.T) {
		tbl := mustCompile(t, oneRoute(`route: {cluster: c, hash_policy: [{cookie: {name: sess, ttl: 60s, path: /p}}]}`), Options{})
		rt := tbl.Route(req("h", "/")).Route
		got, ok := rt.HashKey(req("h", "/", "Cookie", `a=1; sess="xyz"`), "")
		if !ok || got != xxhash.Sum64String("xyz") {
			t.Errorf("HashKey(cookie) = %#x, %v; want %#x", got, ok, xxhash.Sum64String("xyz"))
		}
		rq := req("h", "/")
		var added string
		rq.AddCookie = func(name, path string, ttl time.Duration) string {
			added = name + " " + path + " " + ttl.String()
			return "generated"
		}
		got, ok = rt.HashKey(rq, "")
		if !ok || got != xxhash.Sum64String("generated") || added != "sess /p 1m0s" {
			t.Errorf("HashKey(generated) = %#x, %v, added %q; want %#x, true, %q", got, ok, added, xxhash.Sum64String("generated"), "sess /p 1m0s")
		}
	})
}

func TestHeaderMutations(t *testing.T) {
	tbl := mustCompile(t, actionConfig, Options{})
	m := tbl.Route(req("h", "/policies"))
	h := http.Header{
		"X-Drop":                {"1"},
		"X-Trail":               {"client"},
		"X-Absent-Only":         {"old"},
		"X-Overwrite-Existing":  {"old"},
		"X-Legacy-Append-False": {"old"},
		"X-Untouched":           {"same"},
	}
	m.FinalizeRequestHeaders(h, &accesslog.Entry{DownstreamRemoteAddress: "10.1.2.3:5555"})
	want := http.Header{
		"X-Level":               {"global"},
		"X-Trail":               {"client", "route", "vhost", "global"},
		"X-Client":              {"10.1.2.3"},
		"X-Absent-Only":         {"old"},
		"X-Overwrite-Existing":  {"new"},
		"X-Legacy-Append-False": {"new"},
		"X-Kept-Empty":          {""},
		"X-Untouched":           {"same"},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("request headers (-want +got):\n%s", diff)
	}
	resp := http.Header{"Server": {"upstream"}}
	m.FinalizeResponseHeaders(resp, nil)
	if diff := cmp.Diff(http.Header{"X-Resp": {"route", "global"}}, resp); diff != "" {
		t.Errorf("response headers (-want +got):\n%s", diff)
	}

	t.Run("most specific wins", func(t *testing.T) {
		tbl := mustCompile(t, actionConfig+"most_specific_header_mutations_wins: true\n", Options{})
		h := http.Header{}
		tbl.Route(req("h", "/policies")).FinalizeRequestHeaders(h, nil)
		if got := h.Get("X-Level"); got != "route" {
			t.Errorf("X-Level = %q; want route", got)
		}
		if diff := cmp.Diff([]string{"global", "vhost", "route"}, h["X-Trail"]); diff != "" {
			t.Errorf("X-Trail (-want +got):\n%s", diff)
		}
	})
}

func TestDirectResponseAndRedirectRoutes(t *testing.T) {
	tbl := mustCompile(t, actionConfig, Options{})
	d := tbl.Route(req("h", "/direct")).Route
	if d.Kind != ActionDirectResponse || d.DirectResponse.Status != 418 || string(d.DirectResponse.Body) != "teapot" {
		t.Errorf("direct route = %v %+v; want 418 teapot", d.Kind, d.DirectResponse)
	}
	rd := tbl.Route(req("h", "/redirect")).Route
	if rd.Kind != ActionRedirect || rd.Redirect.ResponseCode != 307 {
		t.Errorf("redirect route = %v %+v; want a 307 redirect", rd.Kind, rd.Redirect)
	}
	t.Run("body from file", func(t *testing.T) {
		tbl := mustCompile(t, oneRoute(`direct_response: {status: 200, body: {filename: /body.txt}}`),
			Options{ReadFile: func(name string) ([]byte, error) { return []byte("from " + name), nil }})
		if got := string(tbl.Route(req("h", "/")).Route.DirectResponse.Body); got != "from /body.txt" {
			t.Errorf("Body = %q; want %q", got, "from /body.txt")
		}
	})
}

func TestHashPolicyDetails(t *testing.T) {
	tbl := mustCompile(t, oneRoute(`route: {cluster: c, hash_policy: [{connection_properties: {source_ip: false}}, {query_parameter: {name: k}}, {cookie: {name: s}}]}`), Options{})
	rt := tbl.Route(req("h", "/")).Route
	tests := []struct {
		name string
		req  *Request
		want uint64
		ok   bool
	}{
		{"query value is hashed undecoded", req("h", "/?k=a%20b"), xxhash.Sum64String("a%20b"), true},
		{"empty cookie is absent", req("h", "/", "Cookie", "s="), 0, false},
		{"cookie keeps trailing spaces", req("h", "/", "Cookie", "x=1;  s=v "), xxhash.Sum64String("v "), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := rt.HashKey(tt.req, "10.0.0.1")
			if got != tt.want || ok != tt.ok {
				t.Errorf("HashKey() = %#x, %v; want %#x, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestMetadataMatchNamespaces: metadata_match is read under the spec's proxy.lb as well as
// Envoy's envoy.lb (envoy.lb wins a key both set), on routes and weighted clusters, as
// endpoint metadata is.
func TestMetadataMatchNamespaces(t *testing.T) {
	const src = `
virtual_hosts:
- name: v
  domains: ["*"]
  routes:
  - match: {prefix: "/spec"}
    route: {cluster: c, metadata_match: {filter_metadata: {proxy.lb: {version: v1, canary: true, weight: 2}}}}
  - match: {prefix: "/both"}
    route: {cluster: c, metadata_match: {filter_metadata: {proxy.lb: {version: v1, stage: prod}, envoy.lb: {stage: canary}}}}
  - match: {prefix: "/weighted"}
    route:
      metadata_match: {filter_metadata: {proxy.lb: {version: v1, stage: prod}}}
      weighted_clusters:
        clusters:
        - {name: a, weight: 1, metadata_match: {filter_metadata: {proxy.lb: {version: v2}}}}
`
	tbl := mustCompile(t, src, Options{})
	for _, tc := range []struct {
		path string
		want []lb.Criterion
	}{
		{"/spec", []lb.Criterion{{Name: "canary", Value: "true"}, {Name: "version", Value: "v1"}, {Name: "weight", Value: "2"}}},
		{"/both", []lb.Criterion{{Name: "stage", Value: "canary"}, {Name: "version", Value: "v1"}}},
		{"/weighted", []lb.Criterion{{Name: "stage", Value: "prod"}, {Name: "version", Value: "v2"}}},
	} {
		m := tbl.Route(req("h", tc.path))
		if m == nil {
			t.Fatalf("Route(%s) = nil", tc.path)
		}
		if diff := cmp.Diff(tc.want, m.MetadataMatch); diff != "" {
			t.Errorf("Route(%s).MetadataMatch (-want +got):\n%s", tc.path, diff)
		}
	}
}

// TestRetryHostPredicatesFromTheRegistry checks that a retry_host_predicate is applied by the
// factory Options.Extensions has for it, and that one it lacks is refused.
func TestRetryHostPredicatesFromTheRegistry(t *testing.T) {
	b := registry.NewBuilder()
	registry.Add(b, RetryHostPredicates, OmitCanaryHostsPredicate, &omitcanaryv3.OmitCanaryHostsPredicate{},
		func(_ string, _ proto.Message, p *RetryPolicy) error { p.NumRetries = 7; return nil })
	r, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rc := func(name string) *routev3.RouteConfiguration {
		return parseConfig(t, "virtual_hosts: [{name: v, domains: [x], retry_policy: {retry_host_predicate: [{name: "+name+"}]}}]")
	}
	tb, err := Compile(rc(OmitCanaryHostsPredicate), Options{Extensions: r})
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.VirtualHosts()[0].RetryPolicy; got.NumRetries != 7 || got.OmitCanaryHosts {
		t.Errorf("retry policy = %+v; want the registered factory's NumRetries 7 and nothing else", got)
	}
	if _, err := Compile(rc(PreviousHostsPredicate), Options{Extensions: r}); err == nil || !strings.Contains(err.Error(), "unsupported; must be "+OmitCanaryHostsPredicate) {
		t.Errorf("Compile(unregistered predicate) = %v; want unsupported, naming the registered one", err)
	}
}

// TestMatchFixed pins which Matches are the table's own (Fixed), by whose cluster name the
// connection manager's caches find a cluster again without comparing names: a fixed cluster's
// and a weighted cluster's, never a Match made for a request whose cluster a header names
// (its Cluster views the request, whose memory the next request reuses).
func TestMatchFixed(t *testing.T) {
	tbl := mustCompile(t, actionConfig+`
  - name: weighted-by-header
    match: {prefix: "/wbh"}
    route:
      weighted_clusters:
        clusters: [{cluster_header: x-up, weight: 1}]
`, Options{})
	for _, tt := range []struct {
		r     *Request
		fixed bool
	}{
		{req("h", "/old/x"), true},
		{req("h", "/weighted"), true},
		{req("h", "/wh", "X-Random", "1"), true},
		{req("h", "/by-header", "X-Cluster-Name", "dyn"), false},
		{req("h", "/by-header"), false},
		{req("h", "/wbh", "X-Up", "dyn"), false},
	} {
		m := tbl.Route(tt.r)
		if m == nil {
			t.Fatalf("%s: no match", tt.r.Path)
		}
		if m.Fixed() != tt.fixed {
			t.Errorf("%s (cluster %q): Fixed() = %v; want %v", tt.r.Path, m.Cluster, m.Fixed(), tt.fixed)
		}
		if again := tbl.Route(tt.r); (again == m) != tt.fixed {
			t.Errorf("%s: the same Match again = %v; want %v (only a fixed Match is shared)", tt.r.Path, again == m, tt.fixed)
		}
	}
}
