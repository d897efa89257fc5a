package httpproxy

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestRouteAttemptCountAndGRPCTimeout checks three route options real control planes set
// (Istio sets the first two on every route): include_request_attempt_count and
// include_attempt_count_in_response (x-envoy-attempt-count on each attempt and the response),
// max_stream_duration's grpc_timeout_header_max (a gRPC request's timeout is its grpc-timeout,
// capped; none without the header), and cluster_not_found_response_code.
func TestRouteAttemptCountAndGRPCTimeout(t *testing.T) {
	var calls atomic.Int32
	seen := make(chan string, 8)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("X-Envoy-Attempt-Count")
		w.Header().Set("X-Seen-Expected", r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
		if r.URL.Path == "/retry" && calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: `stat_prefix: ingress
route_config:
  validate_clusters: false
  virtual_hosts:
  - name: all
    domains: ["*"]
    include_request_attempt_count: true
    include_attempt_count_in_response: true
    routes:
    - match: {prefix: "/retry"}
      route: {cluster: web, retry_policy: {retry_on: 5xx, num_retries: 1}}
    - match: {prefix: "/capped"}
      route: {cluster: web, max_stream_duration: {grpc_timeout_header_max: 0.1s}}
    - match: {prefix: "/grpc"}
      route: {cluster: web, max_stream_duration: {max_stream_duration: 0s, grpc_timeout_header_max: 0s}}
    - match: {prefix: "/missing"}
      route: {cluster: nope, cluster_not_found_response_code: NOT_FOUND}
`})
	c := e.client()
	resp, _ := e.get(c, "/retry")
	if first, second := <-seen, <-seen; first != "1" || second != "2" || resp.Header.Get("X-Envoy-Attempt-Count") != "2" {
		t.Errorf("attempts saw %q, %q, response says %q; want 1, 2 and 2", first, second, resp.Header.Get("X-Envoy-Attempt-Count"))
	}
	for _, tc := range []struct {
		path, ctype, grpcTimeout, want string
	}{
		{"/grpc", "application/grpc", "250m", "250"},
		{"/grpc", "application/grpc", "", ""}, // no header: no timeout, as Envoy with max 0
		{"/grpc", "text/plain", "250m", "15000"},
		{"/capped", "application/grpc", "2S", "100"},
		{"/capped", "application/grpc", "", "100"},
	} {
		hdr := []string{"content-type", tc.ctype}
		if tc.grpcTimeout != "" {
			hdr = append(hdr, "grpc-timeout", tc.grpcTimeout)
		}
		resp, _ := e.get(c, tc.path, hdr...)
		<-seen
		if got := resp.Header.Get("X-Seen-Expected"); got != tc.want {
			t.Errorf("%s %s grpc-timeout %q: upstream's x-envoy-expected-rq-timeout-ms %q; want %q", tc.path, tc.ctype, tc.grpcTimeout, got, tc.want)
		}
	}
	if resp, _ := e.get(c, "/missing"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing cluster answered %d; want 404 (cluster_not_found_response_code)", resp.StatusCode)
	}
}
