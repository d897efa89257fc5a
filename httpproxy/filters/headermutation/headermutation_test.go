package headermutation

import (
	"net/http"
	"strings"
	"testing"

	hmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
)

func anyFromYAML(t testing.TB, y string, m proto.Message) *anypb.Any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(j, m); err != nil {
		t.Fatalf("%s: %v", j, err)
	}
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestConfig(t *testing.T) {
	tests := []struct{ name, yaml, wantErr string }{
		{"empty", "{}", ""},
		{"every action", `mutations:
  request_mutations:
  - append: {header: {key: x-a, value: "1"}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}
  - remove: x-b
  - remove_on_match: {key_matcher: {prefix: x-debug-}}
  response_mutations: [{remove: server}]
most_specific_header_mutations_wins: true`, ""},
		{"query parameters", "mutations: {query_parameter_mutations: [{remove: q}]}", "query_parameter_mutations: not implemented by Legate"},
		{"request trailers", "mutations: {request_trailers_mutations: [{remove: x}]}", "request_trailers_mutations: not implemented"},
		{"response trailers", "mutations: {response_trailers_mutations: [{remove: x}]}", "response_trailers_mutations: not implemented"},
		{"remove host", "mutations: {request_mutations: [{remove: host}]}", `request_mutations[0].remove = "host"`},
		{"append pseudo-header", "mutations: {request_mutations: [{append: {header: {key: ':path', value: /}}}]}", "request_mutations[0].append"},
		{"bad matcher", "mutations: {response_mutations: [{remove_on_match: {key_matcher: {safe_regex: {regex: '('}}}}]}", "remove_on_match.key_matcher"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromAny(anyFromYAML(t, tt.yaml, &hmv3.HeaderMutation{}), nil)
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("FromAny error = %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := PerRouteFromAny(anyFromYAML(t, "mutations: {request_mutations: [{remove: x}]}", &hmv3.HeaderMutationPerRoute{})); err != nil {
		t.Errorf("PerRouteFromAny = %v; want nil", err)
	}
	if _, err := PerRouteFromAny(anyFromYAML(t, "{}", &hmv3.HeaderMutation{})); err == nil {
		t.Error("PerRouteFromAny(HeaderMutation) = nil; want a type error")
	}
}

// TestOrder: mutations apply in their order; without most_specific_header_mutations_wins the
// filter's run last and win, with it the route's do.
func TestOrder(t *testing.T) {
	const filterLevel = `mutations:
  request_mutations:
  - append: {header: {key: x-who, value: filter}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}
  - remove_on_match: {key_matcher: {prefix: x-debug-}}
  - append: {header: {key: x-debug-kept, value: "1"}}
`
	perRoute, err := PerRouteFromAny(anyFromYAML(t, `mutations:
  request_mutations: [{append: {header: {key: x-who, value: route}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}}]
  response_mutations: [{remove: x-secret}]
`, &hmv3.HeaderMutationPerRoute{}))
	if err != nil {
		t.Fatal(err)
	}
	m := matchWith(t, perRoute)
	for _, tt := range []struct {
		wins bool
		want string
	}{{false, "filter"}, {true, "route"}} {
		y := filterLevel
		if tt.wins {
			y += "most_specific_header_mutations_wins: true\n"
		}
		f, err := FromAny(anyFromYAML(t, y, &hmv3.HeaderMutation{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{"X-Debug-Trace": {"t"}, "X-Keep": {"k"}}
		x := &filter.Exchange{Request: &route.Request{Path: "/", Method: "GET", Header: h}, Downstream: filtertest.Routed{Match: m}}
		f.OnRequest(x)
		if h.Get("X-Who") != tt.want || h.Get("X-Debug-Trace") != "" || h.Get("X-Debug-Kept") != "1" || h.Get("X-Keep") != "k" {
			t.Errorf("wins %v: request headers = %v; want x-who %s, x-debug-trace removed, x-debug-kept added after the removal", tt.wins, h, tt.want)
		}
		resp := http.Header{"X-Secret": {"s"}}
		f.OnResponse(x, resp)
		if resp.Get("X-Secret") != "" {
			t.Errorf("response headers = %v; want x-secret removed by the route", resp)
		}
	}
}

// matchWith is a route match whose route has the per-route mutations m.
func matchWith(t testing.TB, m *Mutations) *route.Match {
	t.Helper()
	pr, err := anypb.New(&hmv3.HeaderMutationPerRoute{})
	if err != nil {
		t.Fatal(err)
	}
	rc := routeConfig(pr)
	table, err := route.Compile(rc, route.Options{PerFilterConfig: func(string, *anypb.Any, bool) (any, error) { return m, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return table.Route(&route.Request{Authority: "a", Path: "/", Method: "GET", Header: http.Header{}})
}

// BenchmarkHeaderMutation is the filter's cost for one request header set and one response
// header removed, without per-route mutations.
func BenchmarkHeaderMutation(b *testing.B) {
	f, err := FromAny(anyFromYAML(b, `mutations:
  request_mutations: [{append: {header: {key: x-a, value: "1"}, append_action: OVERWRITE_IF_EXISTS_OR_ADD}}]
  response_mutations: [{remove: x-b}]
`, &hmv3.HeaderMutation{}), nil)
	if err != nil {
		b.Fatal(err)
	}
	req := &route.Request{Path: "/", Method: "GET", Header: http.Header{"X-A": {"0"}}}
	resp := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: req, Downstream: filtertest.Routed{}}
		f.OnRequest(&x)
		f.OnResponse(&x, resp)
	}
}
