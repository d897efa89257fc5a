package rbac

import (
	"net/http"
	"strings"
	"testing"

	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/registry"
)

func build(t testing.TB, y string) (*Filter, error) {
	t.Helper()
	var pb rbachttpv3.RBAC
	filtertest.FromYAML(t, y, &pb)
	return New(&pb, &filter.Context{})
}

func TestNewErrors(t *testing.T) {
	const perm = `permissions: [{any: true}]`
	const prin = `principals: [{any: true}]`
	tests := []struct {
		name, yaml, want string
	}{
		{"empty permissions", `rules: {policies: {p: {permissions: [], ` + prin + `}}}`, "Policy.Permissions"},
		{"empty principals", `rules: {policies: {p: {` + perm + `, principals: []}}}`, "Policy.Principals"},
		{"any false", `rules: {policies: {p: {permissions: [{any: false}], ` + prin + `}}}`, `Permission.Any`},
		{"bad cidr", `rules: {policies: {p: {` + perm + `, principals: [{remote_ip: {address_prefix: "10.0.0", prefix_len: 8}}]}}}`, `address_prefix = "10.0.0"`},
		{"prefix too long", `rules: {policies: {p: {` + perm + `, principals: [{direct_remote_ip: {address_prefix: "10.0.0.0", prefix_len: 33}}]}}}`, "prefix_len = 33"},
		{"port range", `rules: {policies: {p: {permissions: [{destination_port_range: {start: 90, end: 80}}], ` + prin + `}}}`, "destination_port_range = [90, 80)"},
		{"port", `rules: {policies: {p: {permissions: [{destination_port: 70000}], ` + prin + `}}}`, "DestinationPort"},
		{"cel", `rules: {policies: {p: {` + perm + `, ` + prin + `, condition: {const_expr: {bool_value: true}}}}}`, "CEL conditions"},
		{"filter state", `rules: {policies: {p: {` + perm + `, principals: [{filter_state: {key: k, string_match: {exact: v}}}]}}}`, "filter_state"},
		{"route metadata", `rules: {policies: {p: {permissions: [{sourced_metadata: {metadata_source: ROUTE, metadata_matcher: {filter: f, path: [{key: k}], value: {present_match: true}}}}], ` + prin + `}}}`, "only DYNAMIC"},
		{"metadata without path", `rules: {policies: {p: {permissions: [{metadata: {filter: f, value: {present_match: true}}}], ` + prin + `}}}`, "MetadataMatcher.Path"},
		{"bad regex", `rules: {policies: {p: {permissions: [{url_path: {path: {safe_regex: {regex: "("}}}}], ` + prin + `}}}`, "url_path"},
		{"per rule stats", `track_per_rule_stats: true`, "track_per_rule_stats"},
		{"matcher", `matcher: {on_no_match: {action: {name: a, typed_config: {"@type": type.googleapis.com/envoy.config.rbac.v3.Action, name: a}}}}`, "matcher"},
		{"audit", `rules: {audit_logging_options: {audit_condition: ON_DENY}}`, "audit_logging_options"},
		{"uri template", `rules: {policies: {p: {permissions: [{uri_template: {name: t, typed_config: {"@type": type.googleapis.com/google.protobuf.Empty}}}], ` + prin + `}}}`, "uri_template"},
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

// TestDefaults: a filter without rules passes every request and counts nothing; with rules
// and no stat prefixes the metadata keys are Envoy's plain ones.
func TestDefaults(t *testing.T) {
	f, err := build(t, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	x := exchange("GET", "/", nil)
	if r := f.OnRequest(x); r != nil {
		t.Fatalf("OnRequest() = %+v; want nil without rules", r)
	}
	if f.enforced.Allowed.Value() != 0 || f.enforced.Denied.Value() != 0 || x.Metadata != nil {
		t.Errorf("a filter without rules counted or recorded something")
	}
	f, err = build(t, `rules: {action: DENY}`)
	if err != nil {
		t.Fatal(err)
	}
	if r := f.OnRequest(x); r != nil {
		t.Fatalf("DENY without policies: OnRequest() = %+v; want nil", r)
	}
	if got := x.Metadata[Name].GetFields()["enforced_engine_result"].GetStringValue(); got != "allowed" {
		t.Errorf("enforced_engine_result = %q; want allowed", got)
	}
}

func exchange(method, path string, h http.Header) *filter.Exchange {
	if h == nil {
		h = http.Header{}
	}
	return &filter.Exchange{Request: &route.Request{Authority: "example.com", Method: method, Path: path, Scheme: "http", Header: h}}
}

// TestDecisions runs one rule set against requests, checking each matcher's reading of
// the request and the policy that decides.
func TestDecisions(t *testing.T) {
	f, err := build(t, `
rules:
  action: ALLOW
  policies:
    a-admin:
      permissions:
      - and_rules: {rules: [{header: {name: ":method", string_match: {exact: POST}}}, {url_path: {path: {prefix: /admin}}}]}
      principals: [{header: {name: x-role, string_match: {exact: admin}}}]
    b-read:
      permissions:
      - or_rules: {rules: [{header: {name: ":method", string_match: {exact: GET}}}, {header: {name: ":method", string_match: {exact: HEAD}}}]}
      principals: [{not_id: {header: {name: x-banned, present_match: true}}}]
    c-jwt:
      permissions: [{any: true}]
      principals:
      - metadata: {filter: envoy.filters.http.jwt_authn, path: [{key: jwt}, {key: sub}], value: {string_match: {exact: alice}}}
`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path string
		hdr                http.Header
		md                 *structpb.Struct
		allow              bool
		policy             string
	}{
		{"read", "GET", "/x?q=1", nil, nil, true, "b-read"},
		{"banned", "GET", "/x", http.Header{"X-Banned": {"1"}}, nil, false, "none"},
		{"admin post", "POST", "/admin/users?x", http.Header{"X-Role": {"admin"}}, nil, true, "a-admin"},
		{"query is not path", "POST", "/other?/admin", http.Header{"X-Role": {"admin"}}, nil, false, "none"},
		{"post without role", "POST", "/admin", nil, nil, false, "none"},
		{"jwt subject", "DELETE", "/x", nil, mustStruct(t, map[string]any{"jwt": map[string]any{"sub": "alice"}}), true, "c-jwt"},
		{"other subject", "DELETE", "/x", nil, mustStruct(t, map[string]any{"jwt": map[string]any{"sub": "bob"}}), false, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := exchange(tt.method, tt.path, tt.hdr)
			if tt.md != nil {
				x.Metadata = map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": tt.md}
			}
			r := f.OnRequest(x)
			if (r == nil) != tt.allow {
				t.Fatalf("OnRequest() = %+v; want allowed %v", r, tt.allow)
			}
			if r != nil {
				if r.Status != 403 || r.Body != "RBAC: access denied" || r.Details != "rbac_access_denied_matched_policy["+tt.policy+"]" {
					t.Errorf("reply = %d %q %q", r.Status, r.Body, r.Details)
				}
				return
			}
			if got := x.Metadata[Name].GetFields()["enforced_effective_policy_id"].GetStringValue(); got != tt.policy {
				t.Errorf("enforced_effective_policy_id = %q; want %q", got, tt.policy)
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestValueMatchers covers the metadata value matchers.
func TestValueMatchers(t *testing.T) {
	v := func(x any) *structpb.Value {
		val, err := structpb.NewValue(x)
		if err != nil {
			t.Fatal(err)
		}
		return val
	}
	tests := []struct {
		name, yaml string
		val        *structpb.Value
		want       bool
	}{
		{"null", `null_match: {}`, structpb.NewNullValue(), true},
		{"null vs missing", `null_match: {}`, nil, false},
		{"exact", `double_match: {exact: 2}`, v(2.0), true},
		{"range", `double_match: {range: {start: 1, end: 2}}`, v(2.0), false},
		{"bool", `bool_match: true`, v(true), true},
		{"present missing", `present_match: false`, nil, true},
		{"list", `list_match: {one_of: {string_match: {exact: b}}}`, v([]any{"a", "b"}), true},
		{"or", `or_match: {value_matchers: [{bool_match: true}, {string_match: {prefix: x}}]}`, v("xy"), true},
		{"string vs number", `string_match: {exact: "1"}`, v(1.0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pb rbachttpv3.RBAC
			filtertest.FromYAML(t, `rules: {policies: {p: {permissions: [{metadata: {filter: f, path: [{key: k}], value: {`+tt.yaml+`}}}], principals: [{any: true}]}}}`, &pb)
			f, err := New(&pb, &filter.Context{})
			if err != nil {
				t.Fatal(err)
			}
			x := exchange("GET", "/", nil)
			if tt.val != nil {
				x.Metadata = map[string]*structpb.Struct{"f": {Fields: map[string]*structpb.Value{"k": tt.val}}}
			}
			if got := f.OnRequest(x) == nil; got != tt.want {
				t.Errorf("matched = %v; want %v", got, tt.want)
			}
		})
	}
}

// rbacFilter is the http_filters entry of an RBAC filter with the given typed_config body.
func rbacFilter(body string) string {
	return `- name: envoy.filters.http.rbac
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
` + body
}

// TestThroughProxy: requests through a real listener to a real upstream are allowed or
// answered 403 by the rules, counted in http.ingress.rbac.*, a route's RBACPerRoute replaces
// the rules, and shadow rules only count.
func TestThroughProxy(t *testing.T) {
	up := filtertest.Upstream(t)
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		HCM: filtertest.HCM(rbacFilter(`    rules_stat_prefix: enforced.
    rules:
      action: ALLOW
      policies:
        local-get:
          permissions: [{header: {name: ":method", string_match: {exact: GET}}}]
          principals: [{direct_remote_ip: {address_prefix: 127.0.0.0, prefix_len: 8}}, {remote_ip: {address_prefix: 127.0.0.1, prefix_len: 32}}]
    shadow_rules:
      action: DENY
      policies:
        no-secret:
          permissions: [{url_path: {path: {prefix: /secret}}}]
          principals: [{any: true}]
`), `      typed_per_filter_config:
        envoy.filters.http.rbac:
          "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute
          rbac:
            rules:
              action: DENY
              policies:
                port:
                  permissions: [{destination_port_range: {start: 1, end: 65536}}]
                  principals: [{any: true}]`),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	resp, body := p.Get(c, "/public")
	if resp.StatusCode != 200 || body != "upstream" {
		t.Fatalf("GET /public = %d %q; want 200 from the upstream", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+"/public", strings.NewReader("x"))
	resp, body = p.Do(c, req)
	if resp.StatusCode != 403 || body != "RBAC: access denied" {
		t.Fatalf("POST /public = %d %q; want 403 RBAC: access denied", resp.StatusCode, body)
	}
	if resp, _ := p.Get(c, "/secret"); resp.StatusCode != 200 {
		t.Fatalf("GET /secret = %d; shadow rules must not deny", resp.StatusCode)
	}
	if resp, body := p.Get(c, "/other"); resp.StatusCode != 403 || body != "RBAC: access denied" {
		t.Fatalf("GET /other = %d %q; want the route's DENY rules to answer 403", resp.StatusCode, body)
	}
	for name, want := range map[string]uint64{
		"http.ingress.rbac.enforced.allowed": 2,
		"http.ingress.rbac.enforced.denied":  2,
		"http.ingress.rbac.shadow_allowed":   2, // /other's RBACPerRoute has no shadow rules
		"http.ingress.rbac.shadow_denied":    1,
	} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

// TestPerRouteDisables: an RBACPerRoute without rbac leaves its route unchecked.
func TestPerRouteDisables(t *testing.T) {
	up := filtertest.Upstream(t)
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		HCM: filtertest.HCM(rbacFilter(`    rules: {action: ALLOW}
`), `      typed_per_filter_config:
        envoy.filters.http.rbac: {"@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute}`),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	if resp, _ := p.Get(c, "/x"); resp.StatusCode != 403 {
		t.Errorf("GET /x = %d; want 403 (ALLOW without policies)", resp.StatusCode)
	}
	if resp, _ := p.Get(c, "/other"); resp.StatusCode != 200 {
		t.Errorf("GET /other = %d; want 200 (the route disables the filter)", resp.StatusCode)
	}
}

func BenchmarkRBAC(b *testing.B) {
	f, err := build(b, `
rules:
  action: ALLOW
  policies:
    a: {permissions: [{url_path: {path: {prefix: /admin}}}], principals: [{header: {name: x-role, string_match: {exact: admin}}}]}
    b: {permissions: [{header: {name: ":method", string_match: {exact: GET}}}], principals: [{any: true}]}
`)
	if err != nil {
		b.Fatal(err)
	}
	x := exchange("GET", "/x", http.Header{"X-Role": {"user"}})
	b.ReportAllocs()
	for b.Loop() {
		x.Metadata = nil
		if f.OnRequest(x) != nil {
			b.Fatal("denied")
		}
	}
}
