package localratelimit

import (
	"io"
	"net/http"
	"testing"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
)

// TestLocalRateLimitFilter drives envoy.filters.http.local_ratelimit through a listener and an
// upstream: the filter's bucket answers 429 with Envoy's body, headers and stats once empty;
// a route's typed_per_filter_config replaces it (its own bucket, or the filter off); a route
// whose limit is not enforced forwards the request with request_headers_to_add_when_not_enforced.
func TestLocalRateLimitFilter(t *testing.T) {
	p := filtertest.StartPolicy(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Seen-Added", r.Header.Get("X-Added"))
		io.WriteString(w, "up "+r.URL.Path)
	}, Register, `    - match: {prefix: "/free"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.local_ratelimit:
          "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
          stat_prefix: free
    - match: {prefix: "/tight"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.local_ratelimit:
          "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
          stat_prefix: tight
          token_bucket: {max_tokens: 1, fill_interval: 3600s}
          filter_enabled: {default_value: {numerator: 100}}
          filter_enforced: {default_value: {numerator: 0}}
          request_headers_to_add_when_not_enforced: [{header: {key: x-added, value: over-limit}}]
    - match: {prefix: "/"}
      route: {cluster: web}`, `- name: envoy.filters.http.local_ratelimit
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
    stat_prefix: http_local_rate_limiter
    token_bucket: {max_tokens: 2, tokens_per_fill: 2, fill_interval: 3600s}
    filter_enabled: {runtime_key: rl_enabled, default_value: {numerator: 100}}
    filter_enforced: {runtime_key: rl_enforced, default_value: {numerator: 100}}
    response_headers_to_add: [{append_action: OVERWRITE_IF_EXISTS_OR_ADD, header: {key: x-local-rate-limit, value: "true"}}]
    enable_x_ratelimit_headers: DRAFT_VERSION_03`)
	c := p.Client()
	for i, want := range []string{"1", "0"} {
		resp, body := p.Get(c, "/a")
		if resp.StatusCode != 200 || body != "up /a" || resp.Header.Get("X-Ratelimit-Limit") != "2" || resp.Header.Get("X-Ratelimit-Remaining") != want ||
			resp.Header.Get("X-Ratelimit-Reset") == "" {
			t.Fatalf("GET /a #%d = %d %q, x-ratelimit %v; want 200 from up, limit 2, remaining %s", i, resp.StatusCode, body, resp.Header, want)
		}
	}
	resp, body := p.Get(c, "/a")
	if resp.StatusCode != 429 || body != "local_rate_limited" || resp.Header.Get("X-Envoy-Ratelimited") != "true" ||
		resp.Header.Get("X-Local-Rate-Limit") != "true" || resp.Header.Get("X-Ratelimit-Remaining") != "0" {
		t.Errorf("GET /a over the limit = %d %q %v; want 429 local_rate_limited with x-envoy-ratelimited, x-local-rate-limit, remaining 0", resp.StatusCode, body, resp.Header)
	}
	for i := range 3 {
		if resp, body := p.Get(c, "/free"); resp.StatusCode != 200 || body != "up /free" {
			t.Errorf("GET /free #%d = %d %q; want 200: its route turns the filter off", i, resp.StatusCode, body)
		}
	}
	for i, added := range []string{"", "over-limit"} {
		resp, body := p.Get(c, "/tight")
		if resp.StatusCode != 200 || body != "up /tight" || resp.Header.Get("X-Seen-Added") != added {
			t.Errorf("GET /tight #%d = %d %q, upstream saw x-added %q; want 200 and %q (not enforced)", i, resp.StatusCode, body, resp.Header.Get("X-Seen-Added"), added)
		}
	}
	for name, want := range map[string]uint64{
		"http_local_rate_limiter.http_local_rate_limit.enabled":      3,
		"http_local_rate_limiter.http_local_rate_limit.ok":           2,
		"http_local_rate_limiter.http_local_rate_limit.rate_limited": 1,
		"http_local_rate_limiter.http_local_rate_limit.enforced":     1,
		"tight.http_local_rate_limit.enabled":                        2,
		"tight.http_local_rate_limit.rate_limited":                   1,
		"tight.http_local_rate_limit.enforced":                       0,
		"free.http_local_rate_limit.enabled":                         0,
	} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}
