package csrf

import (
	"io"
	"net/http"
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
)

// TestCSRFFilter drives envoy.filters.http.csrf through a listener and an upstream: a
// cross-origin POST is refused with 403, a same-origin one and a route whose policy is shadow
// only reach the upstream, and the csrf.* stats count them.
func TestCSRFFilter(t *testing.T) {
	p := filtertest.StartPolicy(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "up "+r.URL.Path)
	}, Register, `    - match: {prefix: "/shadow"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.csrf:
          "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
          filter_enabled: {default_value: {numerator: 0}}
          shadow_enabled: {default_value: {numerator: 100}}
    - match: {prefix: "/"}
      route: {cluster: web}`, `- name: envoy.filters.http.csrf
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
    filter_enabled: {default_value: {numerator: 100}}`)
	c := p.Client()
	tests := []struct {
		name, path, origin string
		wantCode           int
		wantBody           string
	}{
		{"same origin", "/a", "http://app.example", 200, "up /a"},
		{"cross origin", "/a", "http://evil.example", 403, "Invalid origin"},
		{"shadow route", "/shadow", "http://evil.example", 200, "up /shadow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := p.Send(c, http.MethodPost, tt.path, nil, "host", "app.example", "Origin", tt.origin)
			if resp.StatusCode != tt.wantCode || body != tt.wantBody {
				t.Errorf("POST %s from %s = %d %q; want %d %q", tt.path, tt.origin, resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	for name, want := range map[string]uint64{"http.ingress.csrf.request_valid": 1, "http.ingress.csrf.request_invalid": 2} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}
