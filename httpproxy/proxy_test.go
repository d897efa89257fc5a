package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// echo is an upstream that answers with its name, the request path and selected headers.
func echo(t testing.TB, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Upstream", name)
		w.Header().Set("X-Seen-Host", r.Host)
		w.Header().Set("X-Seen-Path", r.URL.RequestURI())
		w.Header().Set("X-Seen-Xff", r.Header.Get("X-Forwarded-For"))
		w.Header().Set("X-Seen-Request-Id", r.Header.Get("X-Request-Id"))
		w.Header().Set("X-Seen-Traceparent", r.Header.Get("Traceparent"))
		for _, k := range []string{"X-B3-Traceid", "X-B3-Spanid", "X-B3-Parentspanid", "X-B3-Sampled"} {
			w.Header().Set("X-Seen-"+k, r.Header.Get(k))
		}
		w.Header().Set("X-Seen-Proto", r.Proto)
		w.Header().Set("X-Seen-Added", r.Header.Get("X-Added"))
		w.Header().Set("X-Seen-Remove-Me", r.Header.Get("X-Remove-Me"))
		if v := r.Header.Get("X-Status"); v != "" {
			var code int
			fmt.Sscan(v, &code)
			w.WriteHeader(code)
		}
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestProxyBasic(t *testing.T) {
	up := echo(t, "a")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	c := e.client()
	resp, body := e.get(c, "/hello?x=1")
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d; want 200", resp.StatusCode)
	}
	if body != "a /hello" {
		t.Errorf("body = %q; want %q", body, "a /hello")
	}
	if got := resp.Header.Get("Server"); got != "envoy" {
		t.Errorf("server = %q; want envoy", got)
	}
	if got := resp.Header.Get("X-Seen-Path"); got != "/hello?x=1" {
		t.Errorf("upstream path = %q; want /hello?x=1", got)
	}
	if got := resp.Header.Get("X-Seen-Request-Id"); len(got) != 36 {
		t.Errorf("x-request-id = %q; want a UUID", got)
	}
	if got := resp.Header.Get("X-Envoy-Upstream-Service-Time"); got == "" {
		t.Errorf("x-envoy-upstream-service-time missing")
	}
	for range 5 {
		e.get(c, "/again")
	}
	hs := e.hostStats("web", up.Listener.Addr().String())
	if got := hs.Rq().Total; got != 6 {
		t.Errorf("rq_total = %d; want 6", got)
	}
	if got := hs.Rq().Success; got != 6 {
		t.Errorf("rq_success = %d; want 6", got)
	}
	for name, want := range map[string]uint64{
		"http.ingress.downstream_rq_total":       6,
		"http.ingress.downstream_rq_2xx":         6,
		"http.ingress.downstream_cx_total":       1,
		"cluster.web.upstream_rq_200":            6,
		"cluster.web.upstream_rq_2xx":            6,
		"cluster.web.upstream_rq_completed":      6,
		"http.ingress.rq_total":                  6,
		"http.ingress.downstream_rq_http1_total": 6,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

func TestRoutingMatrix(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	hcm := `stat_prefix: ingress
route_config:
  name: local
  virtual_hosts:
  - name: direct
    domains: ["direct.example"]
    routes:
    - match: {prefix: "/"}
      direct_response: {status: 418, body: {inline_string: "teapot"}}
  - name: all
    domains: ["*"]
    response_headers_to_add:
    - header: {key: x-vh, value: all}
    routes:
    - match: {path: "/exact"}
      route: {cluster: a}
    - match: {prefix: "/b/", headers: [{name: x-pick, string_match: {exact: b}}]}
      route: {cluster: b}
    - match: {prefix: "/rewrite/"}
      route: {cluster: a, prefix_rewrite: "/new/", host_rewrite_literal: "rewritten.example"}
    - match: {prefix: "/redirect"}
      redirect: {host_redirect: "elsewhere.example", response_code: FOUND}
    - match: {prefix: "/hdr"}
      route: {cluster_header: x-cluster}
      request_headers_to_add: [{header: {key: x-added, value: "yes"}}]
      request_headers_to_remove: [x-remove-me]
      response_headers_to_remove: [x-upstream]
    - match: {prefix: "/b/"}
      route: {cluster: a}
    - match: {safe_regex: {regex: "/re/[0-9]+"}}
      route: {cluster: b}
    - match: {prefix: "/q", query_parameters: [{name: v, string_match: {exact: "2"}}]}
      route: {cluster: b}
http_filters:
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("a", "", a.Listener.Addr().String()), staticCluster("b", "", b.Listener.Addr().String())},
		hcm:      hcm,
	})
	c := e.client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	tests := []struct {
		name, path string
		hdr        []string
		status     int
		body       string
		headers    map[string]string // "" means absent
	}{
		{name: "exact path", path: "/exact", status: 200, body: "a /exact", headers: map[string]string{"X-Vh": "all"}},
		{name: "no route", path: "/exact/more", status: 404, body: "", headers: map[string]string{"X-Vh": ""}},
		{name: "header match", path: "/b/x", hdr: []string{"x-pick", "b"}, status: 200, body: "b /b/x"},
		{name: "header mismatch falls through", path: "/b/x", hdr: []string{"x-pick", "c"}, status: 200, body: "a /b/x"},
		{name: "prefix and host rewrite", path: "/rewrite/x?y=1", status: 200, body: "a /new/x",
			headers: map[string]string{"X-Seen-Path": "/new/x?y=1", "X-Seen-Host": "rewritten.example"}},
		{name: "redirect", path: "/redirect", status: 302, headers: map[string]string{"Location": "http://elsewhere.example/redirect"}},
		{name: "cluster header", path: "/hdr", hdr: []string{"x-cluster", "b", "x-remove-me", "1"}, status: 200, body: "b /hdr",
			headers: map[string]string{"X-Seen-Added": "yes", "X-Seen-Remove-Me": "", "X-Upstream": "", "X-Vh": "all"}},
		{name: "cluster header absent", path: "/hdr", status: 503, body: ""},
		{name: "cluster header unknown", path: "/hdr", hdr: []string{"x-cluster", "nope"}, status: 503, body: ""},
		{name: "direct response by host", path: "/any", hdr: []string{"host", "direct.example"}, status: 418, body: "teapot",
			headers: map[string]string{"Content-Type": "text/plain", "Server": "envoy"}},
		{name: "regex", path: "/re/123", status: 200, body: "b /re/123"},
		{name: "regex mismatch", path: "/re/abc", status: 404},
		{name: "query parameter", path: "/q?v=2", status: 200, body: "b /q"},
		{name: "query parameter mismatch", path: "/q?v=3", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(c, tt.path, tt.hdr...)
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d; want %d", resp.StatusCode, tt.status)
			}
			if tt.status != 302 && body != tt.body {
				t.Errorf("body = %q; want %q", body, tt.body)
			}
			for k, want := range tt.headers {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("header %s = %q; want %q", k, got, want)
				}
			}
		})
	}
	for name, want := range map[string]uint64{
		"http.ingress.no_route":           3,
		"http.ingress.no_cluster":         2,
		"http.ingress.rq_redirect":        1,
		"http.ingress.rq_direct_response": 1,
		"http.ingress.downstream_rq_4xx":  4,
		"http.ingress.downstream_rq_5xx":  2,
		"http.ingress.downstream_rq_3xx":  1,
	} {
		if got := e.stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}
