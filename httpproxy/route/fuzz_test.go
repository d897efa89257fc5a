package route

import (
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

const indexConfig = `
virtual_hosts:
- name: v
  domains: ["*"]
  routes:
  - {name: exact-root, match: {path: "/"}, route: {cluster: c}}
  - {name: exact-one, match: {path: "/one"}, route: {cluster: c}}
  - {name: exact-two, match: {path: "/one/two"}, route: {cluster: c}}
  - {name: short-prefix, match: {prefix: "/o"}, route: {cluster: c}}
  - {name: seg-prefix, match: {prefix: "/one/", headers: [{name: x-a, present_match: true}]}, route: {cluster: c}}
  - {name: ci-prefix, match: {prefix: "/CI/", case_sensitive: false}, route: {cluster: c}}
  - {name: sep, match: {path_separated_prefix: "/sep/x"}, route: {cluster: c}}
  - {name: regex-lit, match: {safe_regex: {regex: "/re/[a-z]+"}}, route: {cluster: c}}
  - {name: regex-alt, match: {safe_regex: {regex: "/(re|one)/.*"}}, route: {cluster: c}}
  - {name: regex-ci, match: {safe_regex: {regex: "(?i)/UP/.*"}}, route: {cluster: c}}
  - {name: empty-prefix, match: {prefix: ""}, route: {cluster: c}}
  - {name: never, match: {prefix: "/"}, route: {cluster: c}}
`

// linearRoute is the reference: every route of the virtual host in order.
func linearRoute(t *Table, r *Request) *Route {
	vh := t.findVirtualHost(r.Authority)
	if vh == nil {
		return nil
	}
	p := pathOnly(r.Path)
	for _, rt := range vh.Routes {
		if rt.match.matches(r, p) {
			return rt
		}
	}
	return nil
}

func checkIndexed(t *testing.T, tbl *Table, r *Request) {
	m := tbl.Route(r)
	want := linearRoute(tbl, r)
	var got *Route
	if m != nil {
		got = m.Route
	}
	if got != want {
		t.Errorf("Route(%q) = %v; linear scan gives %v", r.Path, got, want)
	}
}

func TestIndexMatchesLinearScan(t *testing.T) {
	tbl := mustCompile(t, indexConfig, Options{})
	paths := []string{"", "/", "//", "/o", "/one", "/one?x", "/one/", "/one/two", "/one/two/", "/onex", "/ci/a", "/Ci/A",
		"/sep/x", "/sep/x/y", "/sep/xy", "/re/abc", "/re/abc/", "/re/", "/up/x", "/UP/x", "/other/thing", "x", "?/one/"}
	for _, p := range paths {
		for _, hdr := range []bool{false, true} {
			r := req("h", p)
			if hdr {
				r.Header.Set("X-A", "1")
			}
			checkIndexed(t, tbl, r)
		}
	}
}

func FuzzRoute(f *testing.F) {
	rc, err := decodeYAML(indexConfig)
	if err != nil {
		f.Fatal(err)
	}
	tbl, err := Compile(rc, Options{})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"/", "/one/two", "/re/abc", "/CI/x", "/sep/x/", "/q?a=b&c", "/%41"} {
		f.Add("h", s, "x")
	}
	f.Fuzz(func(t *testing.T, host, path, hv string) {
		r := &Request{Authority: host, Path: path, Method: "GET", Header: http.Header{"X-A": {hv}}}
		checkIndexed(t, tbl, r)
		queryParam(path, hv)
	})
}

// FuzzCompile feeds arbitrary JSON route configurations to Compile: it must return a table
// or an error, never panic, and the table must route without panicking.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`{"virtual_hosts":[{"name":"v","domains":["*"],"routes":[{"match":{"prefix":"/"},"route":{"cluster":"c"}}]}]}`,
		`{"virtual_hosts":[{"name":"v","domains":["*.a","b*"],"routes":[{"match":{"safe_regex":{"regex":"/x+"}},"route":{"weighted_clusters":{"clusters":[{"name":"a","weight":1}]}}}]}]}`,
		`{"virtual_hosts":[{"name":"v","domains":["a"],"routes":[{"match":{"path":"/r"},"redirect":{"prefix_rewrite":"/n","https_redirect":true}}]}]}`,
		`{"request_headers_to_add":[{"header":{"key":"x","value":"%REQ(y)%"}}],"virtual_hosts":[]}`,
	} {
		f.Add([]byte(s), "a", "/r/x?y=1")
	}
	f.Fuzz(func(t *testing.T, js []byte, host, path string) {
		rc := &routev3.RouteConfiguration{}
		if protojson.Unmarshal(js, rc) != nil {
			return
		}
		tbl, err := Compile(rc, Options{ReadFile: func(string) ([]byte, error) { return nil, nil }})
		if err != nil {
			return
		}
		r := &Request{Authority: host, Path: path, Header: http.Header{}}
		m := tbl.Route(r)
		if m == nil {
			return
		}
		m.FinalizeRequestHeaders(http.Header{}, nil)
		m.Route.RewritePath(path)
		m.Route.RedirectLocation(r)
		m.Route.HashKey(r, "1.2.3.4")
	})
}
