package route

import (
	"testing"
)

const matchConfig = `
virtual_hosts:
- name: v
  domains: ["*"]
  routes:
  - {name: exact, match: {path: "/exact"}, route: {cluster: c}}
  - {name: exact-ci, match: {path: "/Exact-CI", case_sensitive: false}, route: {cluster: c}}
  - {name: sep, match: {path_separated_prefix: "/sep"}, route: {cluster: c}}
  - {name: regex, match: {safe_regex: {regex: "/re/[0-9]+"}}, route: {cluster: c}}
  - {name: prefix-ci, match: {prefix: "/CI/", case_sensitive: false}, route: {cluster: c}}
  - name: hdr-exact
    match: {prefix: "/h/exact", headers: [{name: x-a, exact_match: "1"}]}
    route: {cluster: c}
  - name: hdr-legacy-empty-exact
    match: {prefix: "/h/anyvalue", headers: [{name: x-a, exact_match: ""}]}
    route: {cluster: c}
  - name: hdr-string-ci
    match: {prefix: "/h/sm", headers: [{name: x-a, string_match: {prefix: "AbC", ignore_case: true}}]}
    route: {cluster: c}
  - name: hdr-suffix-contains
    match: {prefix: "/h/sc", headers: [{name: x-a, suffix_match: "z"}, {name: x-b, contains_match: "mid"}]}
    route: {cluster: c}
  - name: hdr-regex
    match: {prefix: "/h/re", headers: [{name: x-a, safe_regex_match: {regex: "v[0-9]"}}]}
    route: {cluster: c}
  - name: hdr-range
    match: {prefix: "/h/range", headers: [{name: x-a, range_match: {start: -10, end: 10}}]}
    route: {cluster: c}
  - name: hdr-present
    match: {prefix: "/h/present", headers: [{name: x-a, present_match: true}]}
    route: {cluster: c}
  - name: hdr-absent
    match: {prefix: "/h/absent", headers: [{name: x-a, present_match: false}]}
    route: {cluster: c}
  - name: hdr-no-specifier
    match: {prefix: "/h/nospec", headers: [{name: x-a}]}
    route: {cluster: c}
  - name: hdr-invert
    match: {prefix: "/h/invert", headers: [{name: x-a, exact_match: "no", invert_match: true}]}
    route: {cluster: c}
  - name: hdr-missing-empty
    match: {prefix: "/h/empty", headers: [{name: x-a, string_match: {exact: ""}, treat_missing_header_as_empty: true}]}
    route: {cluster: c}
  - name: hdr-method
    match: {prefix: "/h/method", headers: [{name: ":method", exact_match: "POST"}]}
    route: {cluster: c}
  - name: hdr-multi
    match: {prefix: "/h/multi", headers: [{name: x-a, exact_match: "1,2"}]}
    route: {cluster: c}
  - name: query
    match: {prefix: "/q", query_parameters: [{name: debug, present_match: true}, {name: v, string_match: {exact: "a b"}}]}
    route: {cluster: c}
  - name: grpc
    match: {prefix: "/g", grpc: {}}
    route: {cluster: c}
  - name: fraction
    match: {prefix: "/f", runtime_fraction: {default_value: {numerator: 30, denominator: HUNDRED}, runtime_key: k}}
    route: {cluster: c}
  - {name: connect, match: {connect_matcher: {}}, route: {cluster: c}}
  - {name: fallback, match: {prefix: "/"}, route: {cluster: c}}
`

func TestRouteMatching(t *testing.T) {
	tbl := mustCompile(t, matchConfig, Options{})
	tests := []struct {
		name string
		req  *Request
		want string
	}{
		{"path exact", req("h", "/exact"), "exact"},
		{"path exact with query", req("h", "/exact?x=1"), "exact"},
		{"path exact longer", req("h", "/exact/more"), "fallback"},
		{"path case sensitive", req("h", "/EXACT"), "fallback"},
		{"path case insensitive", req("h", "/exact-ci"), "exact-ci"},
		{"separated prefix equal", req("h", "/sep"), "sep"},
		{"separated prefix slash", req("h", "/sep/x"), "sep"},
		{"separated prefix query", req("h", "/sep?x"), "sep"},
		{"separated prefix no separator", req("h", "/separate"), "fallback"},
		{"regex full match", req("h", "/re/123"), "regex"},
		{"regex ignores query", req("h", "/re/123?a=b"), "regex"},
		{"regex partial", req("h", "/re/123x"), "fallback"},
		{"prefix case insensitive", req("h", "/ci/x"), "prefix-ci"},
		{"header exact", req("h", "/h/exact", "X-A", "1"), "hdr-exact"},
		{"header exact mismatch", req("h", "/h/exact", "X-A", "2"), "fallback"},
		{"header exact missing", req("h", "/h/exact"), "fallback"},
		{"legacy empty exact matches any", req("h", "/h/anyvalue", "X-A", "zzz"), "hdr-legacy-empty-exact"},
		{"string match ignore case", req("h", "/h/sm", "X-A", "aBcdef"), "hdr-string-ci"},
		{"suffix and contains", req("h", "/h/sc", "X-A", "xyz", "X-B", "a-mid-b"), "hdr-suffix-contains"},
		{"suffix and contains one fails", req("h", "/h/sc", "X-A", "xyz", "X-B", "a-b"), "fallback"},
		{"header regex", req("h", "/h/re", "X-A", "v2"), "hdr-regex"},
		{"header regex full match only", req("h", "/h/re", "X-A", "v22"), "fallback"},
		{"range inside", req("h", "/h/range", "X-A", "-10"), "hdr-range"},
		{"range end exclusive", req("h", "/h/range", "X-A", "10"), "fallback"},
		{"range not a number", req("h", "/h/range", "X-A", "5x"), "fallback"},
		{"present", req("h", "/h/present", "X-A", ""), "hdr-present"},
		{"present missing", req("h", "/h/present"), "fallback"},
		{"present false matches absence", req("h", "/h/absent"), "hdr-absent"},
		{"present false present", req("h", "/h/absent", "X-A", "1"), "fallback"},
		{"no specifier means present", req("h", "/h/nospec", "X-A", "1"), "hdr-no-specifier"},
		{"invert match", req("h", "/h/invert", "X-A", "yes"), "hdr-invert"},
		{"invert match equal", req("h", "/h/invert", "X-A", "no"), "fallback"},
		{"invert match missing header", req("h", "/h/invert"), "fallback"},
		{"missing as empty", req("h", "/h/empty"), "hdr-missing-empty"},
		{"pseudo header", &Request{Authority: "h", Path: "/h/method", Method: "POST"}, "hdr-method"},
		{"multiple values joined", req("h", "/h/multi", "X-A", "1", "X-A", "2"), "hdr-multi"},
		{"query", req("h", "/q?debug&v=a+b"), "query"},
		{"query percent", req("h", "/q?v=a%20b&debug="), "query"},
		{"query first value wins", req("h", "/q?debug&v=x&v=a+b"), "fallback"},
		{"query missing", req("h", "/q?v=a+b"), "fallback"},
		{"grpc", req("h", "/g", "Content-Type", "application/grpc+proto"), "grpc"},
		{"not grpc", req("h", "/g", "Content-Type", "text/plain"), "fallback"},
		{"connect", &Request{Authority: "h", Method: "CONNECT"}, "connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := routeName(tbl.Route(tt.req)); got != "v/"+tt.want {
				t.Errorf("Route(%s) = %q; want %q", tt.req.Path, got, "v/"+tt.want)
			}
		})
	}
	t.Run("runtime fraction", func(t *testing.T) {
		for _, tc := range []struct {
			random uint64
			want   string
		}{{0, "fraction"}, {29, "fraction"}, {30, "fallback"}, {129, "fraction"}, {199, "fallback"}} {
			r := req("h", "/f")
			r.Random = tc.random
			if got := routeName(tbl.Route(r)); got != "v/"+tc.want {
				t.Errorf("Route(random %d) = %q; want %q", tc.random, got, "v/"+tc.want)
			}
		}
	})
	t.Run("runtime override", func(t *testing.T) {
		var gotKey string
		tbl := mustCompile(t, matchConfig, Options{FeatureEnabled: func(key string, num, den, random uint64) bool {
			gotKey = key
			return num == 30 && den == 100 && random == 7
		}})
		r := req("h", "/f")
		r.Random = 7
		if got := routeName(tbl.Route(r)); got != "v/fraction" || gotKey != "k" {
			t.Errorf("Route = %q with key %q; want v/fraction with key k", got, gotKey)
		}
	})
}

func TestQueryParam(t *testing.T) {
	tests := []struct {
		path, name, want string
		ok               bool
	}{
		{"/p?a=1&b=2", "b", "2", true},
		{"/p?a=1&b=2", "c", "", false},
		{"/p?a", "a", "", true},
		{"/p?a=", "a", "", true},
		{"/p?%61=x", "a", "x", true},
		{"/p?a=%zz", "a", "%zz", true},
		{"/p?a=1#frag&b=2", "b", "", false},
		{"/p", "a", "", false},
		{"/p?&&a=1", "a", "1", true},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.name, func(t *testing.T) {
			got, ok := queryParam(tt.path, tt.name)
			if got != tt.want || ok != tt.ok {
				t.Errorf("queryParam(%q, %q) = %q, %v; want %q, %v", tt.path, tt.name, got, ok, tt.want, tt.ok)
			}
		})
	}
}
