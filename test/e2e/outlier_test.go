package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// switchUpstream answers 200 "ok" while healthy is true and 503 otherwise, counting the
// requests it receives.
type switchUpstream struct {
	srv     *httptest.Server
	healthy atomic.Bool
	hits    atomic.Int64
}

func newSwitchUpstream(t *testing.T, healthy bool) *switchUpstream {
	t.Helper()
	u := &switchUpstream{}
	u.healthy.Store(healthy)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if !u.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *switchUpstream) addr() string { return u.srv.Listener.Addr().String() }

// outlierConfig is routeAllConfig (listener "http" routing everything to cluster "backend")
// with retryPolicy (a RetryPolicy in flow YAML, or "") on the route, and round robin over
// upstreams with outlier_detection od on the cluster.
func outlierConfig(od, retryPolicy string, upstreams ...string) string {
	cfg := routeAllConfig("http://"+upstreams[0], "")
	if retryPolicy != "" {
		cfg = strings.Replace(cfg, "route: {cluster: backend}", "route: {cluster: backend, retry_policy: "+retryPolicy+"}", 1)
	}
	cfg = strings.Replace(cfg, "    connect_timeout: 1s\n", "    connect_timeout: 1s\n    common_lb_config: {update_merge_window: 0s}\n    outlier_detection: "+od+"\n", 1)
	var more strings.Builder
	for _, a := range upstreams[1:] {
		host, port, _ := strings.Cut(a, ":")
		fmt.Fprintf(&more, ", {endpoint: {address: {socket_address: {address: %s, port_value: %s}}}}", host, port)
	}
	return strings.Replace(cfg, "}}}}]}]", "}}}}"+more.String()+"]}]", 1)
}

// getStatus sends a GET through the listener and returns its status.
func getStatus(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// healthFlags returns the backend host's health_flags line value from /clusters.
func healthFlags(p *proc, addr string) string {
	p.t.Helper()
	_, _, body := p.get("/clusters")
	for _, l := range lines(body) {
		if v, ok := strings.CutPrefix(l, "backend::"+addr+"::health_flags::"); ok {
			return v
		}
	}
	p.t.Fatalf("/clusters has no health_flags line for %s:\n%s", addr, body)
	return ""
}

// TestOutlierConsecutive5xx: of two upstreams, one answers 503. After 3 consecutive 5xx it is
// ejected (/failed_outlier_check in /clusters) and all traffic goes to the healthy one; with
// a retry policy, clients never see the 503s. Once it is healthy again it returns after
// base_ejection_time.
func TestOutlierConsecutive5xx(t *testing.T) {
	good, bad := newSwitchUpstream(t, true), newSwitchUpstream(t, false)
	p := start(t, "-c", writeConfig(t, outlierConfig(
		"{consecutive_5xx: 3, interval: 0.2s, base_ejection_time: 1s, max_ejection_percent: 50}",
		"{retry_on: 5xx, num_retries: 3, retry_back_off: {base_interval: 0.001s}}",
		good.addr(), bad.addr())))
	url := "http://" + p.listenerAddr("http") + "/"
	c := &http.Client{Timeout: 10 * time.Second}

	start := time.Now()
	for i := range 10 {
		if got := getStatus(t, c, url); got != http.StatusOK {
			t.Fatalf("request %d = %d; want 200 (the 503s are retried on the healthy host)", i, got)
		}
	}
	p.waitLine("/clusters", "backend::"+bad.addr()+"::health_flags::/failed_outlier_check", 5*time.Second)
	// The ejection happens on the detector's goroutine just after the third 5xx, so a request
	// or two more may reach the host first.
	if got := bad.hits.Load(); got < 3 || got > 5 {
		t.Errorf("requests that reached the failing upstream = %d; want 3 to 5 (ejected at consecutive_5xx: 3)", got)
	}
	if n, _ := p.stat("cluster.backend.outlier_detection.ejections_enforced_consecutive_5xx"); n != 1 {
		t.Errorf("ejections_enforced_consecutive_5xx = %d; want 1", n)
	}
	if n, _ := p.stat("cluster.backend.outlier_detection.ejections_active"); n != 1 {
		t.Errorf("ejections_active = %d; want 1", n)
	}

	// While ejected, traffic goes to the healthy host only.
	bad.healthy.Store(true)
	before := bad.hits.Load()
	for i := range 10 {
		if got := getStatus(t, c, url); got != http.StatusOK {
			t.Fatalf("request %d while ejected = %d; want 200", i, got)
		}
	}
	if flags := healthFlags(p, bad.addr()); flags == "/failed_outlier_check" {
		if got := bad.hits.Load() - before; got != 0 {
			t.Errorf("requests to the ejected host = %d; want 0", got)
		}
	}

	// base_ejection_time (1s) after the ejection, at the next interval sweep, it is back.
	p.waitLine("/clusters", "backend::"+bad.addr()+"::health_flags::healthy", 5*time.Second)
	if took := time.Since(start); took < time.Second {
		t.Errorf("host back %v after the first request; want at least base_ejection_time (1s)", took)
	}
	before = bad.hits.Load()
	for range 10 {
		getStatus(t, c, url)
	}
	if got := bad.hits.Load() - before; got == 0 {
		t.Errorf("requests to the returned host = 0; want some (round robin over both)")
	}
}

// TestOutlierSuccessRate: of five upstreams one fails every request; the success-rate rule
// (mean − stdev × factor over hosts with enough volume in an interval) ejects it while the
// consecutive rules are not enforced.
func TestOutlierSuccessRate(t *testing.T) {
	var addrs []string
	var bad *switchUpstream
	for i := range 5 {
		u := newSwitchUpstream(t, i != 0)
		if i == 0 {
			bad = u
		}
		addrs = append(addrs, u.addr())
	}
	p := start(t, "-c", writeConfig(t, outlierConfig(
		"{consecutive_5xx: 1000, enforcing_consecutive_5xx: 0, interval: 0.5s, base_ejection_time: 30s, max_ejection_percent: 50, success_rate_minimum_hosts: 5, success_rate_request_volume: 10, success_rate_stdev_factor: 1000}",
		"{retry_on: 5xx, num_retries: 3, retry_back_off: {base_interval: 0.001s}}",
		addrs...)))
	url := "http://" + p.listenerAddr("http") + "/"
	c := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for healthFlags(p, bad.addr()) != "/failed_outlier_check" {
		if time.Now().After(deadline) {
			_, _, body := p.get("/clusters")
			t.Fatalf("the failing host was not ejected by success rate within 15s:\n%s", body)
		}
		for range 25 { // one round of traffic: enough volume for every host in an interval
			if got := getStatus(t, c, url); got != http.StatusOK {
				t.Fatalf("request = %d; want 200 (retried)", got)
			}
		}
	}
	if n, _ := p.stat("cluster.backend.outlier_detection.ejections_enforced_success_rate"); n != 1 {
		t.Errorf("ejections_enforced_success_rate = %d; want 1", n)
	}
	if n, _ := p.stat("cluster.backend.outlier_detection.ejections_enforced_consecutive_5xx"); n != 0 {
		t.Errorf("ejections_enforced_consecutive_5xx = %d; want 0 (not enforced)", n)
	}
	for _, a := range addrs[1:] {
		if flags := healthFlags(p, a); flags != "healthy" {
			t.Errorf("healthy upstream %s: health_flags %s; want healthy", a, flags)
		}
	}
}

// TestOutlierMaxEjectionPercent: with three of four upstreams failing and
// max_ejection_percent 50, only two are ejected; the third detection overflows.
func TestOutlierMaxEjectionPercent(t *testing.T) {
	good := newSwitchUpstream(t, true)
	bads := []*switchUpstream{newSwitchUpstream(t, false), newSwitchUpstream(t, false), newSwitchUpstream(t, false)}
	addrs := []string{good.addr()}
	for _, b := range bads {
		addrs = append(addrs, b.addr())
	}
	p := start(t, "-c", writeConfig(t, outlierConfig(
		"{consecutive_5xx: 2, interval: 0.2s, base_ejection_time: 30s, max_ejection_percent: 50}", "", addrs...)))
	url := "http://" + p.listenerAddr("http") + "/"
	c := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, _ := p.stat("cluster.backend.outlier_detection.ejections_overflow"); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			_, _, body := p.get("/clusters")
			t.Fatalf("no ejections_overflow within 10s:\n%s", body)
		}
		for range 8 {
			getStatus(t, c, url)
		}
	}
	ejected := 0
	for _, b := range bads {
		if healthFlags(p, b.addr()) == "/failed_outlier_check" {
			ejected++
		}
	}
	if ejected != 2 {
		_, _, body := p.get("/clusters")
		t.Errorf("ejected hosts = %d; want 2 (50%% of 4)\n%s", ejected, body)
	}
	if n, _ := p.stat("cluster.backend.outlier_detection.ejections_active"); n != 2 {
		t.Errorf("ejections_active = %d; want 2", n)
	}
	if flags := healthFlags(p, good.addr()); flags != "healthy" {
		t.Errorf("healthy upstream: health_flags %s; want healthy", flags)
	}
}
