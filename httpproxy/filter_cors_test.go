package httpproxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/cors"
)

// send sends a request with the given method through the proxy and returns the response with
// its body read. hdr are name, value pairs; "host" sets the request's Host.
func (e *env) send(c *http.Client, method, path string, body io.Reader, hdr ...string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.addr+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, string(b)
}

const corsHCM = `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: api
    domains: ["api"]
    typed_per_filter_config:
      envoy.filters.http.cors:
        "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
        allow_origin_string_match: [{exact: "https://good.example"}, {suffix: ".trusted.example"}]
        allow_methods: "GET, PUT"
        allow_headers: "x-custom"
        expose_headers: "x-upstream"
        max_age: "600"
        allow_credentials: true
    routes:
    - match: {prefix: "/strict"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.cors:
          "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
          allow_methods: "*"
          forward_not_matching_preflights: false
    - match: {prefix: "/"}
      route: {cluster: web}
  - name: shadow
    domains: ["shadow"]
    typed_per_filter_config:
      envoy.filters.http.cors:
        "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
        allow_origin_string_match: [{exact: "https://good.example"}]
        filter_enabled: {default_value: {numerator: 0}}
        shadow_enabled: {default_value: {numerator: 100}}
    routes:
    - match: {prefix: "/"}
      route: {cluster: web}
  - name: legacy
    domains: ["legacy"]
    cors: {allow_origin_string_match: [{prefix: "https://"}], allow_methods: "POST"}
    routes:
    - match: {prefix: "/"}
      route: {cluster: web, cors: {allow_headers: "x-legacy"}}
http_filters:
- name: envoy.filters.http.cors
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

// TestCORSFilter drives envoy.filters.http.cors through a listener and an upstream: simple
// requests get the allow headers of the most specific policy, preflights are answered by the
// proxy (or forwarded when the origin does not match, unless the policy says not to), shadow
// mode only counts, and the deprecated route fields are policies too.
func TestCORSFilter(t *testing.T) {
	up := echo(t, "up")
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      corsHCM,
		filters:  filtersOf(t, nil, cors.Register),
	})
	c := e.client()
	tests := []struct {
		name, method, host, path string
		hdr                      []string
		wantBody                 string // the upstream's answer, or "" for the proxy's preflight
		want                     map[string]string
	}{
		{name: "simple allowed", method: "GET", host: "api", path: "/x", hdr: []string{"Origin", "https://good.example"},
			wantBody: "up /x", want: map[string]string{"Access-Control-Allow-Origin": "https://good.example",
				"Access-Control-Allow-Credentials": "true", "Access-Control-Expose-Headers": "x-upstream"}},
		{name: "simple by suffix", method: "GET", host: "api", path: "/x", hdr: []string{"Origin", "https://a.trusted.example"},
			wantBody: "up /x", want: map[string]string{"Access-Control-Allow-Origin": "https://a.trusted.example"}},
		{name: "simple refused", method: "GET", host: "api", path: "/x", hdr: []string{"Origin", "https://evil.example"},
			wantBody: "up /x", want: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": ""}},
		{name: "no origin", method: "GET", host: "api", path: "/x",
			wantBody: "up /x", want: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "preflight", method: "OPTIONS", host: "api", path: "/x",
			hdr: []string{"Origin", "https://good.example", "Access-Control-Request-Method", "PUT"},
			want: map[string]string{"Access-Control-Allow-Origin": "https://good.example", "Access-Control-Allow-Methods": "GET, PUT",
				"Access-Control-Allow-Headers": "x-custom", "Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": "true"}},
		{name: "options without request method is forwarded", method: "OPTIONS", host: "api", path: "/x",
			hdr: []string{"Origin", "https://good.example"}, wantBody: "up /x",
			want: map[string]string{"Access-Control-Allow-Origin": "https://good.example"}},
		{name: "preflight refused origin is forwarded", method: "OPTIONS", host: "api", path: "/x",
			hdr: []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "PUT"}, wantBody: "up /x",
			want: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "route policy echoes the method", method: "OPTIONS", host: "api", path: "/strict",
			hdr:  []string{"Origin", "https://good.example", "Access-Control-Request-Method", "PATCH"},
			want: map[string]string{"Access-Control-Allow-Methods": "PATCH", "Access-Control-Allow-Headers": "x-custom"}},
		{name: "route policy answers a refused preflight", method: "OPTIONS", host: "api", path: "/strict",
			hdr:  []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "PATCH"},
			want: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": "PATCH"}},
		{name: "shadow only counts", method: "OPTIONS", host: "shadow", path: "/s",
			hdr: []string{"Origin", "https://good.example", "Access-Control-Request-Method", "PUT"}, wantBody: "up /s",
			want: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "legacy fields", method: "OPTIONS", host: "legacy", path: "/l",
			hdr: []string{"Origin", "https://old.example", "Access-Control-Request-Method", "POST"},
			want: map[string]string{"Access-Control-Allow-Origin": "https://old.example", "Access-Control-Allow-Methods": "POST",
				"Access-Control-Allow-Headers": "x-legacy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.send(c, tt.method, tt.path, nil, append([]string{"host", tt.host}, tt.hdr...)...)
			if resp.StatusCode != 200 || body != tt.wantBody {
				t.Errorf("%s %s = %d %q; want 200 %q", tt.method, tt.path, resp.StatusCode, body, tt.wantBody)
			}
			for k, v := range tt.want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q; want %q", k, got, v)
				}
			}
		})
	}
	// Valid: simple allowed, suffix, preflight, options, two /strict (one valid), shadow, legacy.
	if v, inv := e.stat("http.ingress.cors.origin_valid"), e.stat("http.ingress.cors.origin_invalid"); v != 7 || inv != 3 {
		t.Errorf("cors.origin_valid, origin_invalid = %d, %d; want 7, 3", v, inv)
	}
}
