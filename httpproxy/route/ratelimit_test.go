package route

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// rateLimitRoute compiles one route whose rate_limits has one entry with the given actions.
func rateLimitRoute(t *testing.T, actions string) *Match {
	t.Helper()
	tbl := mustCompile(t, fmt.Sprintf(`
virtual_hosts:
- name: vh
  domains: ["*"]
  rate_limits: [{actions: [{generic_key: {descriptor_value: vh}}]}]
  routes:
  - match: {prefix: "/"}
    route:
      cluster: web
      include_vh_rate_limits: true
      rate_limits: [{stage: 2, actions: %s}]
`, actions), Options{})
	m := tbl.Route(req("h", "/"))
	if m == nil || len(m.Route.RateLimits) != 1 || !m.Route.IncludeVhRateLimits || len(m.VirtualHost.RateLimits) != 1 {
		t.Fatalf("route %+v: want one route rate limit, include_vh_rate_limits and one virtual host rate limit", m)
	}
	if m.Route.RateLimits[0].Stage != 2 {
		t.Fatalf("stage = %d; want 2", m.Route.RateLimits[0].Stage)
	}
	return m
}

// TestRateLimitActions: each action's descriptor entry for a request, its defaults, and
// when it skips its entry or fails the descriptor.
func TestRateLimitActions(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{"user": map[string]any{"tier": "gold", "count": 3.0}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, actions string
		path          string
		headers       []string
		ip            string
		want          string // entries as k=v joined by ","; "FAIL" for a failed descriptor
	}{
		{"generic key default key", `[{generic_key: {descriptor_value: v}}]`, "/", nil, "", "generic_key=v"},
		{"generic key", `[{generic_key: {descriptor_key: k, descriptor_value: v}}]`, "/", nil, "", "k=v"},
		{"source and destination", `[{source_cluster: {}}, {destination_cluster: {}}]`, "/", nil, "", "source_cluster=local,destination_cluster=web"},
		{"request header", `[{request_headers: {header_name: x-user, descriptor_key: user}}]`, "/", []string{"x-user", "ann"}, "", "user=ann"},
		{"request header absent", `[{request_headers: {header_name: x-user, descriptor_key: user}}]`, "/", nil, "", "FAIL"},
		{"request header skipped", `[{request_headers: {header_name: x-user, descriptor_key: user, skip_if_absent: true}}, {generic_key: {descriptor_value: g}}]`, "/", nil, "", "generic_key=g"},
		{"first value", `[{request_headers: {header_name: x-user, descriptor_key: user}}]`, "/", []string{"x-user", "ann", "x-user", "bob"}, "", "user=ann"},
		{"pseudo header", `[{request_headers: {header_name: ":path", descriptor_key: p}}]`, "/a?b", nil, "", "p=/a?b"},
		{"query parameter", `[{query_parameters: {query_parameter_name: key, descriptor_key: api}}]`, "/?x=1&key=abc", nil, "", "api=abc"},
		{"query parameter absent", `[{query_parameters: {query_parameter_name: key, descriptor_key: api}}]`, "/?x=1", nil, "", "FAIL"},
		{"query parameter skipped", `[{query_parameters: {query_parameter_name: key, descriptor_key: api, skip_if_absent: true}}]`, "/", nil, "", ""},
		{"remote address", `[{remote_address: {}}]`, "/", nil, "10.1.2.3", "remote_address=10.1.2.3"},
		{"remote address unknown", `[{remote_address: {}}]`, "/", nil, "", "FAIL"},
		{"masked v4", `[{masked_remote_address: {v4_prefix_mask_len: 24}}]`, "/", nil, "10.1.2.3", "masked_remote_address=10.1.2.0/24"},
		{"masked default", `[{masked_remote_address: {}}]`, "/", nil, "10.1.2.3", "masked_remote_address=10.1.2.3/32"},
		{"masked v6", `[{masked_remote_address: {v6_prefix_mask_len: 64}}]`, "/", nil, "2001:db8:1:2:3::4", "masked_remote_address=2001:db8:1:2::/64"},
		{"header match", `[{header_value_match: {descriptor_value: get, headers: [{name: ":method", string_match: {exact: GET}}]}}]`, "/", nil, "", "header_match=get"},
		{"header mismatch", `[{header_value_match: {descriptor_value: post, headers: [{name: ":method", string_match: {exact: POST}}]}}]`, "/", nil, "", "FAIL"},
		{"header match expected false", `[{header_value_match: {descriptor_key: k, descriptor_value: notpost, expect_match: false, headers: [{name: ":method", string_match: {exact: POST}}]}}]`, "/", nil, "", "k=notpost"},
		{"query match", `[{query_parameter_value_match: {descriptor_value: dbg, query_parameters: [{name: debug, present_match: true}]}}]`, "/?debug=1", nil, "", "query_match=dbg"},
		{"query mismatch", `[{query_parameter_value_match: {descriptor_value: dbg, query_parameters: [{name: debug, present_match: true}]}}]`, "/", nil, "", "FAIL"},
		{"metadata", `[{metadata: {descriptor_key: tier, metadata_key: {key: auth, path: [{key: user}, {key: tier}]}}}]`, "/", nil, "", "tier=gold"},
		{"dynamic metadata", `[{dynamic_metadata: {descriptor_key: tier, metadata_key: {key: auth, path: [{key: user}, {key: tier}]}}}]`, "/", nil, "", "tier=gold"},
		{"metadata not a string", `[{metadata: {descriptor_key: count, metadata_key: {key: auth, path: [{key: user}, {key: count}]}, default_value: d}}]`, "/", nil, "", "count=d"},
		{"metadata absent", `[{metadata: {descriptor_key: x, metadata_key: {key: other, path: [{key: x}]}}}]`, "/", nil, "", "FAIL"},
		{"metadata skipped", `[{metadata: {descriptor_key: x, metadata_key: {key: other, path: [{key: x}]}, skip_if_absent: true}}]`, "/", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := rateLimitRoute(t, tt.actions)
			r := req("h", tt.path, tt.headers...)
			r.Method = "GET"
			in := DescriptorInput{Request: r, Match: m, ClientIP: tt.ip, LocalCluster: "local", Metadata: map[string]*structpb.Struct{"auth": md}}
			prior := []DescriptorEntry{{"before", "x"}}
			got, ok := m.Route.RateLimits[0].Descriptor(&in, prior)
			var s []string
			for _, e := range got[1:] {
				s = append(s, e.Key+"="+e.Value)
			}
			desc := strings.Join(s, ",")
			if !ok {
				desc = "FAIL"
				if len(got) != 1 {
					t.Errorf("a failed descriptor left %v in dst", got[1:])
				}
			}
			if desc != tt.want {
				t.Errorf("descriptor = %q; want %q", desc, tt.want)
			}
		})
	}
}

// TestRateLimitRefusals: options and actions Legate does not implement, and bad values, are
// refused with their paths.
func TestRateLimitRefusals(t *testing.T) {
	for _, tt := range []struct{ rl, want string }{
		{`{actions: [{generic_key: {descriptor_value: v}}], disable_key: k}`, "rate_limits[0].disable_key: not implemented by Legate"},
		{`{actions: [{generic_key: {descriptor_value: v}}], hits_addend: {number: 2}}`, "hits_addend: not implemented by Legate"},
		{`{actions: [{generic_key: {descriptor_value: v, default_value: d}}]}`, "generic_key.default_value: not implemented by Legate"},
		{`{actions: [{metadata: {descriptor_key: k, metadata_key: {key: ns, path: [{key: a}]}, source: ROUTE_ENTRY}}]}`, "metadata.source = ROUTE_ENTRY: not implemented by Legate"},
		{`{actions: [{masked_remote_address: {v4_prefix_mask_len: 33}}]}`, "v4_prefix_mask_len = 33"},
		{`{actions: [{request_headers: {header_name: x}}]}`, "descriptor_key are required"},
		{`{stage: 11, actions: [{remote_address: {}}]}`, "stage = 11"},
		{`{actions: []}`, "at least one action"},
		{`{actions: [{header_value_match: {descriptor_value: v, headers: [{name: x, safe_regex_match: {regex: "("}}]}}]}`, "header_value_match.headers[0]"},
	} {
		_, err := Compile(parseConfig(t, fmt.Sprintf(`
virtual_hosts:
- name: vh
  domains: ["*"]
  routes:
  - match: {prefix: "/"}
    route: {cluster: web, rate_limits: [%s]}
`, tt.rl)), Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "routes[0].route.rate_limits[0]") {
			t.Errorf("%s: Compile error = %v; want one naming routes[0].route.rate_limits[0] and containing %q", tt.rl, err, tt.want)
		}
	}
}
