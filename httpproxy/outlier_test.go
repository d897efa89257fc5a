package httpproxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/nettest"
)

// statusServer is an upstream answering every request with status (and, for 200, "ok").
func statusServer(t testing.TB, status int, hdr ...string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(status)
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// hostAt finds the host at addr in cluster name's current snapshot.
func (e *env) hostAt(name, addr string) *host.Host {
	e.t.Helper()
	for _, s := range e.clusters.Get(name).Snapshot().PrioritySet.Sets() {
		for _, h := range s.Hosts() {
			if h.Address() == addr {
				return h
			}
		}
	}
	e.t.Fatalf("cluster %q has no host %s", name, addr)
	return nil
}

// expectStatus sends n GETs for / and fails unless each is answered with status.
func (e *env) expectStatus(c *http.Client, n, status int) {
	e.t.Helper()
	for i := range n {
		if resp, _ := e.get(c, "/"); resp.StatusCode != status {
			e.t.Fatalf("request %d = %d; want %d", i, resp.StatusCode, status)
		}
	}
}

// waitFlag polls until h has flag (the outlier detector and health checker set flags on
// their own goroutines).
func waitFlag(t *testing.T, h *host.Host, flag host.HealthFlag) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !h.HasHealthFlag(flag) {
		if time.Now().After(deadline) {
			t.Fatalf("host %s flags = %v; want %v set within %v", h.Address(), h.HealthFlags(), flag, wait)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// TestRouterReportsOutliers: the router reports every attempt to the cluster's outlier
// detector, so a host that answers 5xx, refuses connections or times out is ejected while
// the client, retried onto the healthy host, sees only 200s.
func TestRouterReportsOutliers(t *testing.T) {
	good := statusServer(t, http.StatusOK)
	tests := []struct {
		name    string
		bad     func(t testing.TB) string
		outlier string
		route   string
		stat    string // the enforced-ejection counter
	}{{
		name:    "5xx responses",
		bad:     func(t testing.TB) string { return statusServer(t, http.StatusInternalServerError) },
		outlier: "{consecutive_5xx: 3, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 50}",
		route:   ", retry_policy: {retry_on: 5xx, num_retries: 3}",
		stat:    "ejections_enforced_consecutive_5xx",
	}, {
		name:    "gateway errors",
		bad:     func(t testing.TB) string { return statusServer(t, http.StatusBadGateway) },
		outlier: "{consecutive_5xx: 100, consecutive_gateway_failure: 2, enforcing_consecutive_gateway_failure: 100, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 50}",
		route:   ", retry_policy: {retry_on: gateway-error, num_retries: 3}",
		stat:    "ejections_enforced_consecutive_gateway_failure",
	}, {
		name:    "connect failures counted as 503 without split",
		bad:     deadAddr,
		outlier: "{consecutive_5xx: 2, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 50}",
		route:   ", retry_policy: {retry_on: connect-failure, num_retries: 3}",
		stat:    "ejections_enforced_consecutive_5xx",
	}, {
		name:    "connect failures are local-origin with split",
		bad:     deadAddr,
		outlier: "{split_external_local_origin_errors: true, consecutive_local_origin_failure: 2, consecutive_5xx: 100, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 50}",
		route:   ", retry_policy: {retry_on: connect-failure, num_retries: 3}",
		stat:    "ejections_enforced_consecutive_local_origin_failure",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := tt.bad(t)
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", "outlier_detection: "+tt.outlier, good, bad)},
				hcm:      simpleHCM("web", tt.route),
			})
			c := e.client()
			for i := range 8 {
				if resp, body := e.get(c, "/"); resp.StatusCode != http.StatusOK || body != "ok" {
					t.Fatalf("request %d = %d %q; want 200 \"ok\" (retried onto the good host)", i, resp.StatusCode, body)
				}
			}
			waitFlag(t, e.hostAt("web", bad), host.FailedOutlierCheck)
			if got := e.stat("cluster.web.outlier_detection." + tt.stat); got != 1 {
				t.Errorf("%s = %d; want 1", tt.stat, got)
			}
			if h := e.hostAt("web", good); h.HealthFlags() != 0 {
				t.Errorf("good host flags = %v; want none", h.HealthFlags())
			}
		})
	}
}

// TestRouterSplitResponsesAreExternal: with split_external_local_origin_errors, 5xx
// responses do not count as local-origin failures (the connection succeeded), so only the
// consecutive-5xx rule sees them.
func TestRouterSplitResponsesAreExternal(t *testing.T) {
	bad := statusServer(t, http.StatusServiceUnavailable)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "outlier_detection: {split_external_local_origin_errors: true, consecutive_local_origin_failure: 1, consecutive_5xx: 4, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 100}", bad)},
		hcm:      simpleHCM("web", ""),
	})
	c := e.client()
	e.expectStatus(c, 3, http.StatusServiceUnavailable)
	if got := e.stat("cluster.web.outlier_detection.ejections_enforced_total"); got != 0 {
		t.Fatalf("ejections after 3 responses = %d; want 0 (a 503 response is no local-origin failure)", got)
	}
	e.get(c, "/")
	waitFlag(t, e.hostAt("web", bad), host.FailedOutlierCheck)
	if got := e.stat("cluster.web.outlier_detection.ejections_enforced_consecutive_5xx"); got != 1 {
		t.Errorf("ejections_enforced_consecutive_5xx = %d; want 1", got)
	}
}

// TestRouterResponseCutIsOutlierResult: an upstream that closes its connection in the middle
// of a response body, after its head was forwarded, is reported as a local-origin failure
// (the router keeps the body's read error, which the copy of a body nothing watches keeps
// itself: copyFrom's upErr).
func TestRouterResponseCutIsOutlierResult(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.ServeHTTP1(t, ln, func(c net.Conn, _, _ string) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
		c.Close() // 90 bytes short
	})
	addr := ln.Addr().String()
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "outlier_detection: {split_external_local_origin_errors: true, consecutive_local_origin_failure: 1, consecutive_5xx: 100, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 100}", addr)},
		hcm:      simpleHCM("web", ""),
	})
	resp, err := e.client().Get("http://" + e.addr + "/")
	if err != nil {
		t.Fatalf("GET /: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil {
		t.Fatalf("GET / = %d, %q, %v; want 200 and a body cut short", resp.StatusCode, b, err)
	}
	waitFlag(t, e.hostAt("web", addr), host.FailedOutlierCheck)
	if got := e.stat("cluster.web.outlier_detection.ejections_enforced_consecutive_local_origin_failure"); got != 1 {
		t.Errorf("ejections_enforced_consecutive_local_origin_failure = %d; want 1", got)
	}
}

// TestRouterTimeoutIsOutlierResult: the route's timeout is reported as a 504 (a gateway
// failure).
func TestRouterTimeoutIsOutlierResult(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	addr := slow.Listener.Addr().String()
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "outlier_detection: {consecutive_gateway_failure: 2, enforcing_consecutive_gateway_failure: 100, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 100}", addr)},
		hcm:      simpleHCM("web", ", timeout: 0.1s"),
	})
	e.expectStatus(e.client(), 2, http.StatusGatewayTimeout)
	waitFlag(t, e.hostAt("web", addr), host.FailedOutlierCheck)
}

// TestRouterImmediateHealthCheckFail: a response with x-envoy-immediate-health-check-fail
// fails the host's active health check at once and excludes it from load balancing.
func TestRouterImmediateHealthCheckFail(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.Header().Set("X-Envoy-Immediate-Health-Check-Fail", "true")
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(up.Close)
	addr := up.Listener.Addr().String()
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", `health_checks:
- timeout: 1s
  interval: 60s
  unhealthy_threshold: 3
  healthy_threshold: 1
  http_health_check: {path: /healthz}`, addr)},
		// cluster_header: the route is not checked against the clusters, since this one is
		// warming (until its first health check) when the listener starts.
		hcm: strings.Replace(simpleHCM("web", ""), "cluster: web", "cluster_header: x-cluster", 1),
	})
	deadline := time.Now().Add(wait)
	for e.clusters.Get("web") == nil || e.hostAt("web", addr).HealthFlags() != 0 { // warm after the first check
		if time.Now().After(deadline) {
			t.Fatalf("cluster web is not warm and healthy after %v", wait)
		}
		<-time.After(5 * time.Millisecond)
	}
	h := e.hostAt("web", addr)
	c := e.client()
	if resp, _ := e.get(c, "/ok", "x-cluster", "web"); resp.StatusCode != http.StatusOK || h.HealthFlags() != 0 {
		t.Fatalf("GET /ok = %d, host flags %v; want 200 and healthy", resp.StatusCode, h.HealthFlags())
	}
	if resp, _ := e.get(c, "/fail", "x-cluster", "web"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /fail = %d; want 200 (the response itself passes through)", resp.StatusCode)
	}
	if got, want := h.HealthFlags(), host.FailedActiveHC|host.ExcludedViaImmediateHCFail; got != want {
		t.Errorf("host flags after x-envoy-immediate-health-check-fail = %v; want %v", got, want)
	}
	if got := e.stat("cluster.web.health_check.passive_failure"); got != 1 {
		t.Errorf("health_check.passive_failure = %d; want 1", got)
	}
}

// BenchmarkProxyOutlier is BenchmarkProxy with outlier detection on the cluster, so that
// every request reports its result to the detector.
func BenchmarkProxyOutlier(b *testing.B) { benchClients(b, outlierClients(b)) }

// outlierClients serves BenchmarkProxyOutlier's proxy and returns how to connect a client to it.
func outlierClients(tb testing.TB) func() *rawClient {
	e := newEnv(tb, envOptions{
		clusters: []string{staticCluster("web", "outlier_detection: {split_external_local_origin_errors: true}", rawUpstream(tb))},
		hcm:      simpleHCM("web", ""),
	})
	return func() *rawClient { return newRawClient(tb, e.addr, "/") }
}

// TestRouterGRPCStatusIsOutlierResult: for a gRPC request, a grpc-status in the response
// headers (a trailers-only response) counts as the HTTP status it maps to: UNAVAILABLE behind a
// 200 is a 503 for outlier detection; the same response to a plain request is a success.
func TestRouterGRPCStatusIsOutlierResult(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		wantEjected bool
	}{
		{"grpc request", "application/grpc", true},
		{"grpc+proto request", "application/grpc+proto", true},
		{"plain request", "application/json", false},
		{"grpc-web request", "application/grpc-web", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := statusServer(t, http.StatusOK, "Grpc-Status", "14")
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", "outlier_detection: {consecutive_5xx: 3, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 100}", addr)},
				hcm:      simpleHCM("web", ""),
			})
			c := e.client()
			for range 3 {
				if resp, _ := e.get(c, "/", "Content-Type", tt.contentType); resp.StatusCode != http.StatusOK {
					t.Fatalf("GET = %d; want 200", resp.StatusCode)
				}
			}
			if tt.wantEjected {
				waitFlag(t, e.hostAt("web", addr), host.FailedOutlierCheck)
				return
			}
			if got := e.stat("cluster.web.outlier_detection.ejections_detected_consecutive_5xx"); got != 0 {
				t.Errorf("ejections_detected_consecutive_5xx = %d; want 0 (200 without gRPC is a success)", got)
			}
		})
	}
}

func TestGRPCToHTTPStatus(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"0", 200}, {"1", 499}, {"2", 500}, {"3", 400}, {"4", 504}, {"5", 404}, {"6", 409},
		{"7", 403}, {"8", 429}, {"9", 400}, {"10", 409}, {"11", 400}, {"12", 501}, {"13", 500},
		{"14", 503}, {"15", 500}, {"16", 401}, {"014", 503},
		{"17", 500}, {"", 500}, {"x", 500}, {"-1", 500}, {"99999999999999999999", 500},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := grpcToHTTPStatus([]byte(tt.in)); got != tt.want {
				t.Errorf("grpcToHTTPStatus(%q) = %d; want %d", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzGRPCStatus: any grpc-status value maps to one of the statuses of the mapping.
func FuzzGRPCStatus(f *testing.F) {
	for _, s := range []string{"0", "14", "16", "17", "", "abc", "0014"} {
		f.Add([]byte(s))
	}
	valid := map[int]bool{200: true, 499: true, 500: true, 400: true, 504: true, 404: true, 409: true, 403: true, 429: true, 501: true, 503: true, 401: true}
	f.Fuzz(func(t *testing.T, v []byte) {
		if got := grpcToHTTPStatus(v); !valid[got] {
			t.Errorf("grpcToHTTPStatus(%q) = %d; not a status of the mapping", v, got)
		}
	})
}
