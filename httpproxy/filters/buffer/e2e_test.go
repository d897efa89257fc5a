package buffer

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
)

// TestBufferFilter drives envoy.filters.http.buffer through a listener and an upstream: a
// chunked body within the limit reaches the upstream whole with its content-length, one over
// the limit is answered 413 without reaching it, and a route may disable the filter or set
// its own limit.
func TestBufferFilter(t *testing.T) {
	p := filtertest.StartPolicy(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "len=%d cl=%d te=%v", len(b), r.ContentLength, r.TransferEncoding)
	}, Register, `    - match: {prefix: "/stream"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.buffer:
          "@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute
          disabled: true
    - match: {prefix: "/small"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.buffer:
          "@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute
          buffer: {max_request_bytes: 10}
    - match: {prefix: "/"}
      route: {cluster: web}`, `- name: envoy.filters.http.buffer
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer
    max_request_bytes: 1024`)
	c := p.Client()
	chunked := func(n int) io.Reader { return io.MultiReader(strings.NewReader(strings.Repeat("b", n))) } // no length: sent chunked
	tests := []struct {
		name, path string
		body       io.Reader
		wantCode   int
		wantBody   string
	}{
		{"chunked within the limit", "/a", chunked(100), 200, "len=100 cl=100 te=[]"},
		{"chunked over the limit", "/a", chunked(2000), 413, "Payload Too Large"},
		{"content-length over the limit", "/a", strings.NewReader(strings.Repeat("b", 2000)), 413, "Payload Too Large"},
		{"disabled route streams", "/stream", chunked(2000), 200, "len=2000 cl=-1 te=[chunked]"},
		{"route's own limit", "/small", chunked(100), 413, "Payload Too Large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := p.Send(c, http.MethodPost, tt.path, tt.body)
			if resp.StatusCode != tt.wantCode || body != tt.wantBody {
				t.Errorf("POST %s = %d %q; want %d %q", tt.path, resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	if got := p.Stat("http.ingress.downstream_rq_too_large"); got != 3 {
		t.Errorf("downstream_rq_too_large = %d; want 3", got)
	}
}
