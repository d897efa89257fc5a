package route

import (
	"fmt"
	"testing"
)

func TestRedirectLocation(t *testing.T) {
	tests := []struct {
		redirect, scheme, authority, path, want string
		code                                    int
	}{
		{"{https_redirect: true}", "http", "example.com", "/a?b=1", "https://example.com/a?b=1", 301},
		{"{https_redirect: true}", "http", "example.com:80", "/a", "https://example.com/a", 301},
		{"{https_redirect: true}", "http", "example.com:8080", "/a", "https://example.com:8080/a", 301},
		{"{scheme_redirect: http}", "https", "example.com:443", "/a", "http://example.com/a", 301},
		{"{scheme_redirect: HTTPS, port_redirect: 8443}", "http", "example.com:80", "/a", "https://example.com:8443/a", 301},
		{"{port_redirect: 9000}", "http", "example.com:8080", "/a", "http://example.com:9000/a", 301},
		{"{port_redirect: 9000}", "http", "[::1]:8080", "/a", "http://[::1]:9000/a", 301},
		{"{host_redirect: other.com}", "http", "example.com:8080", "/a", "http://other.com/a", 301},
		{"{host_redirect: other.com, port_redirect: 81}", "http", "example.com", "/a", "http://other.com:81/a", 301},
		{"{path_redirect: /new, response_code: FOUND}", "http", "h", "/old?q=1", "http://h/new?q=1", 302},
		{"{path_redirect: /new, strip_query: true, response_code: SEE_OTHER}", "http", "h", "/old?q=1", "http://h/new", 303},
		{"{path_redirect: \"/new?x=y\", strip_query: true, response_code: PERMANENT_REDIRECT}", "http", "h", "/old?q=1", "http://h/new?x=y", 308},
		{"{prefix_rewrite: /v2/}", "http", "h", "/v1/items?q=1", "http://h/v2/items?q=1", 301},
		{"{prefix_rewrite: /v2/, strip_query: true}", "http", "h", "/v1/items?q=1", "http://h/v2/items", 301},
		{"{regex_rewrite: {pattern: {regex: \"^/v1/(.*)$\"}, substitution: \"/api/\\\\1\"}}", "http", "h", "/v1/x/y?z", "http://h/api/x/y?z", 301},
	}
	for _, tt := range tests {
		t.Run(tt.redirect+" "+tt.authority+tt.path, func(t *testing.T) {
			tbl := mustCompile(t, fmt.Sprintf(`
virtual_hosts:
- name: v
  domains: ["*"]
  routes: [{match: {prefix: "/v1/"}, redirect: %s}, {match: {prefix: "/"}, redirect: %s}]`, tt.redirect, tt.redirect), Options{})
			r := req(tt.authority, tt.path)
			r.Scheme = tt.scheme
			m := tbl.Route(r)
			if got := m.Route.RedirectLocation(r); got != tt.want {
				t.Errorf("RedirectLocation() = %q; want %q", got, tt.want)
			}
			if got := m.Route.Redirect.ResponseCode; got != tt.code {
				t.Errorf("ResponseCode = %d; want %d", got, tt.code)
			}
		})
	}
}

func TestRequireTLS(t *testing.T) {
	tests := []struct {
		require, scheme string
		internal        bool
		wantRedirect    bool
	}{
		{"ALL", "http", false, true},
		{"ALL", "http", true, true},
		{"ALL", "https", false, false},
		{"EXTERNAL_ONLY", "http", false, true},
		{"EXTERNAL_ONLY", "http", true, false},
		{"NONE", "http", false, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s internal=%v", tt.require, tt.scheme, tt.internal), func(t *testing.T) {
			tbl := mustCompile(t, `
virtual_hosts:
- name: v
  domains: ["*"]
  require_tls: `+tt.require+`
  routes: [{name: r, match: {prefix: "/"}, route: {cluster: c}}]`, Options{})
			r := req("example.com:80", "/p?q")
			r.Scheme = tt.scheme
			if tt.internal {
				r.Header.Set("X-Envoy-Internal", "true")
			}
			m := tbl.Route(r)
			gotRedirect := m.Route.Kind == ActionRedirect
			if gotRedirect != tt.wantRedirect {
				t.Fatalf("redirect = %v; want %v", gotRedirect, tt.wantRedirect)
			}
			if gotRedirect {
				if got := m.Route.RedirectLocation(r); got != "https://example.com/p?q" || m.Route.Redirect.ResponseCode != 301 {
					t.Errorf("RedirectLocation() = %q (%d); want https://example.com/p?q (301)", got, m.Route.Redirect.ResponseCode)
				}
			}
		})
	}
}
