package headertometadata

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	h2mv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/registry"
)

func fromYAML(t testing.TB, y string) *anypb.Any {
	t.Helper()
	var pb h2mv3.Config
	filtertest.FromYAML(t, y, &pb)
	a, err := anypb.New(&pb)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestConfig(t *testing.T) {
	f, err := FromAny(nil, nil)
	if err != nil || len(f.rules.request)+len(f.rules.response) != 0 {
		t.Errorf("FromAny(nil) = %v, %v; want a filter without rules", f, err)
	}
	if _, err := PerRouteFromAny(fromYAML(t, "{}")); err == nil || !strings.Contains(err.Error(), "must have request_rules or response_rules") {
		t.Errorf("PerRouteFromAny(empty) = %v; want it refused", err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{`stat_prefix: x`, "typed_config.stat_prefix: the filter's stats are not implemented by Legate"},
		{`request_rules: [{header: a, cookie: b, on_header_present: {key: k}}]`, "request_rules[0]: header and cookie are exclusive"},
		{`request_rules: [{on_header_present: {key: k}}]`, "request_rules[0]: one of header and cookie is required"},
		{`request_rules: [{cookie: c, remove: true, on_header_present: {key: k}}]`, "request_rules[0].remove: cannot remove a cookie"},
		{`response_rules: [{cookie: c, on_header_present: {key: k}}]`, "response_rules[0].cookie: cookies are read from requests only"},
		{`request_rules: [{header: x-a}]`, "request_rules[0]: neither on_header_present nor on_header_missing is set"},
		{`request_rules: [{header: x-a, on_header_present: {key: k, value: v, regex_value_rewrite: {pattern: {regex: a}, substitution: b}}}]`, "value and regex_value_rewrite are exclusive"},
		{`request_rules: [{header: x-a, on_header_missing: {key: k}}]`, "request_rules[0].on_header_missing.value: required"},
		{`request_rules: [{header: x-a, on_header_present: {key: k, regex_value_rewrite: {pattern: {regex: "("}, substitution: b}}}]`, "request_rules[0].on_header_present.regex_value_rewrite.pattern.regex = \"(\": invalid RE2"},
		{`request_rules: [{header: ":path", on_header_present: {key: k}}]`, `request_rules[0].header = ":path": pseudo-headers are not implemented by Legate`},
		{`request_rules: [{header: host, remove: true, on_header_present: {key: k}}]`, "request_rules[0].remove: removing host is not implemented by Legate"},
		{`request_rules: [{header: x-a, on_header_present: {key: ""}}]`, "Key: value length must be at least 1"},
	} {
		if _, err := FromAny(fromYAML(t, tc.yaml), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromAny(%s) = %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}

// TestRules runs each rule kind on a request's headers and checks the metadata it adds.
func TestRules(t *testing.T) {
	pv, _ := proto.Marshal(structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewBoolValue(true)}}))
	f, err := FromAny(fromYAML(t, `request_rules:
- {header: x-version, on_header_present: {metadata_namespace: acme, key: version}, remove: true}
- {header: x-absent, on_header_missing: {metadata_namespace: acme, key: absent, value: none}}
- {header: x-absent, on_header_present: {metadata_namespace: acme, key: never}}
- {header: x-fixed, on_header_present: {key: fixed, value: constant}}
- {header: x-num, on_header_present: {metadata_namespace: acme, key: num, type: NUMBER}}
- {header: x-bad-num, on_header_present: {metadata_namespace: acme, key: badnum, type: NUMBER}}
- {header: x-b64, on_header_present: {metadata_namespace: acme, key: b64, encode: BASE64}}
- {header: x-bad-b64, on_header_present: {metadata_namespace: acme, key: badb64, encode: BASE64}}
- {header: x-pv, on_header_present: {metadata_namespace: acme, key: pv, type: PROTOBUF_VALUE, encode: BASE64}}
- {header: x-empty, on_header_present: {metadata_namespace: acme, key: empty}}
- {header: x-long, on_header_present: {metadata_namespace: acme, key: long}}
- {header: x-multi, on_header_present: {metadata_namespace: acme, key: multi}}
- {header: x-path, on_header_present: {metadata_namespace: acme, key: cluster, regex_value_rewrite: {pattern: {regex: "^/(\\w+)/.*$"}, substitution: "\\1"}}}
- {cookie: session, on_header_present: {metadata_namespace: acme, key: session}}
- {header: host, on_header_present: {metadata_namespace: acme, key: host}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{
		"X-Version": {"v2"}, "X-Fixed": {"anything"}, "X-Num": {" 12.5 "}, "X-Bad-Num": {"twelve"},
		"X-B64": {base64.RawStdEncoding.EncodeToString([]byte("hello"))}, "X-Bad-B64": {"!!"},
		"X-Pv": {base64.StdEncoding.EncodeToString(pv)}, "X-Empty": {""}, "X-Long": {strings.Repeat("a", maxValueLen)},
		"X-Multi": {"a", "b"}, "X-Path": {"/shop/cart"}, "Cookie": {`theme=dark; session="abc"`},
	}
	x := &filter.Exchange{Request: &route.Request{Authority: "example.com", Header: h}}
	f.OnRequest(x)
	got := map[string]any{}
	for k, v := range x.Metadata["acme"].GetFields() {
		got[k] = v.AsInterface()
	}
	want := map[string]any{"version": "v2", "absent": "none", "num": 12.5, "b64": "hello",
		"pv": []any{true}, "multi": "a,b", "cluster": "shop", "session": "abc", "host": "example.com"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("acme metadata = %v; want %v", got, want)
	}
	if v := x.Metadata[Name].GetFields()["fixed"].GetStringValue(); v != "constant" {
		t.Errorf("default namespace's fixed = %q; want constant", v)
	}
	if _, ok := h["X-Version"]; ok {
		t.Error("x-version was kept; remove: true removes it")
	}
}

// TestThroughProxy runs the filter in a listener with a real upstream: request and response
// rules write metadata the access log prints, a removed header does not reach the upstream,
// and a route's typed_per_filter_config replaces the filter's rules.
func TestThroughProxy(t *testing.T) {
	up := filtertest.Upstream(t, "x-tenant", "x-version")
	logPath := filepath.Join(t.TempDir(), "access.log")
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up)},
		Register: []func(*registry.Builder){Register},
		HCM: fmt.Sprintf(`stat_prefix: ingress
access_log:
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: %s
    log_format: {text_format_source: {inline_string: "%%REQ(:PATH)%% tenant=%%DYNAMIC_METADATA(acme:tenant)%% version=%%DYNAMIC_METADATA(acme:version)%% server=%%DYNAMIC_METADATA(envoy.filters.http.header_to_metadata:server)%%\n"}}
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/other"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.header_to_metadata:
          "@type": type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config
          request_rules: [{header: x-version, on_header_present: {metadata_namespace: acme, key: version}}]
    - match: {prefix: "/"}
      route: {cluster: web}
http_filters:
- name: envoy.filters.http.header_to_metadata
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config
    request_rules:
    - {header: x-tenant, remove: true, on_header_present: {metadata_namespace: acme, key: tenant}, on_header_missing: {metadata_namespace: acme, key: tenant, value: anonymous}}
    response_rules:
    - {header: content-type, on_header_present: {key: server}}
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, logPath),
	})
	c := p.Client()
	resp, body := p.Get(c, "/a", "x-tenant", "blue", "x-version", "v1")
	if resp.StatusCode != 200 || body != "upstream" {
		t.Fatalf("GET /a = %d %q; want 200 upstream", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Echo-X-Tenant"); got != "" {
		t.Errorf("upstream saw x-tenant %q; want it removed", got)
	}
	p.Get(c, "/b")
	p.Get(c, "/other", "x-tenant", "green", "x-version", "v3")
	filtertest.WaitLog(t, logPath, []string{
		"/a tenant=blue version=- server=text/plain; charset=utf-8",
		"/b tenant=anonymous version=- server=text/plain; charset=utf-8",
		"/other tenant=- version=v3 server=-",
	})
}

// BenchmarkHeaderToMetadata is the filter's cost for a request with two rules (a present
// header and a missing one).
func BenchmarkHeaderToMetadata(b *testing.B) {
	f, err := FromAny(fromYAML(b, `request_rules:
- {header: x-tenant, on_header_present: {metadata_namespace: acme, key: tenant}}
- {header: x-version, on_header_missing: {metadata_namespace: acme, key: version, value: v1}}
`), nil)
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{"X-Tenant": {"blue"}}
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: &route.Request{Header: h}}
		f.OnRequest(&x)
	}
}
