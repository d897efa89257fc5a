package cluster

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/outlier"
)

// realUpstreams starts one HTTP server per status and returns their addresses in order.
func realUpstreams(t *testing.T, statuses ...int) []string {
	t.Helper()
	var out []string
	for _, code := range statuses {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
		}))
		t.Cleanup(srv.Close)
		out = append(out, srv.Listener.Addr().String())
	}
	return out
}

// clusterOf is a STATIC cluster named web over addrs ("ip:port") with extra YAML appended.
func clusterOf(t *testing.T, addrs []string, extra string) *config.Cluster {
	t.Helper()
	y := "name: web\ncommon_lb_config: {update_merge_window: 0s}\nload_assignment:\n  endpoints:\n  - lb_endpoints:\n"
	for _, a := range addrs {
		var port int
		if _, err := fmt.Sscanf(a, "127.0.0.1:%d", &port); err != nil {
			t.Fatal(err)
		}
		y += fmt.Sprintf("    - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}\n", port)
	}
	return parseCluster(t, y+extra)
}

// send picks a host of c, sends it one real HTTP request and reports the status to the outlier
// detector, as the router does. It returns the host and the status.
func send(t *testing.T, c *Cluster, client *http.Client) (*host.Host, int) {
	t.Helper()
	h, err := c.Pick(&lb.Context{})
	if err != nil {
		t.Fatalf("Pick() = %v", err)
	}
	resp, err := client.Get("http://" + h.Address() + "/")
	if err != nil {
		t.Fatalf("GET %s: %v", h.Address(), err)
	}
	resp.Body.Close()
	c.ReportResult(h, outlier.HTTPStatus(resp.StatusCode))
	return h, resp.StatusCode
}

func hostAt(t *testing.T, c *Cluster, addr string) *host.Host {
	t.Helper()
	for _, s := range c.Snapshot().PrioritySet.Sets() {
		for _, h := range s.Hosts() {
			if h.Address() == addr {
				return h
			}
		}
	}
	t.Fatalf("no host %s", addr)
	return nil
}

// TestConsecutive5xxEjectionWithRealUpstreams sends real requests to four upstreams, one of
// which answers 503: it is ejected after consecutive_5xx failures, receives no traffic while
// ejected, returns after base_ejection_time, and a second ejection lasts base_ejection_time × 2.
func TestConsecutive5xxEjectionWithRealUpstreams(t *testing.T) {
	addrs := realUpstreams(t, 503, 200, 200, 200)
	e := newHCEnv(t)
	od := "outlier_detection: {consecutive_5xx: 3, interval: 10s, base_ejection_time: 30s, max_ejection_percent: 50}\n"
	if err := e.m.AddStatic([]*config.Cluster{clusterOf(t, addrs, od)}); err != nil {
		t.Fatal(err)
	}
	runManager(t, e.testEnv)
	c := e.m.Get("web")
	bad := hostAt(t, c, addrs[0])
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	ejectAfterTraffic := func() {
		t.Helper()
		failures := 0
		for failures < 3 {
			if h, code := send(t, c, client); h == bad && code == 503 {
				failures++
			}
		}
		e.waitEvents(t, 1)
		if !bad.HasHealthFlag(host.FailedOutlierCheck) {
			t.Fatalf("flags = %s after 3 consecutive 503s; want /failed_outlier_check", bad.HealthFlags())
		}
		for range 12 {
			if h, _ := send(t, c, client); h == bad {
				t.Fatalf("an ejected host received a request")
			}
		}
	}
	// sweep moves the clock by d and waits for the detector's interval sweep to finish (it
	// re-arms its timer when done).
	sweep := func(d time.Duration) {
		t.Helper()
		for len(e.clock.added) > 0 {
			<-e.clock.added
		}
		e.clock.Advance(d)
		e.clock.waitTimer(t)
	}

	// stays checks that the host is still out after the sweep at before, and back after the
	// sweep 10 s later.
	stays := func(before, want time.Duration) {
		t.Helper()
		sweep(before)
		if !bad.HasHealthFlag(host.FailedOutlierCheck) {
			t.Fatalf("host returned %v into its ejection; want it out for %v", before, want)
		}
		sweep(10 * time.Second)
		e.waitEvents(t, 1)
		if bad.HasHealthFlag(host.FailedOutlierCheck) {
			t.Fatalf("host still ejected after %v", before+10*time.Second)
		}
	}
	ejectAfterTraffic()
	stays(29*time.Second, 30*time.Second) // base_ejection_time
	ejectAfterTraffic()
	stays(50*time.Second, 60*time.Second) // base_ejection_time × 2
	e.wantStats(t, map[string]uint64{
		"cluster.web.outlier_detection.ejections_enforced_consecutive_5xx": 2,
		"cluster.web.outlier_detection.ejections_active":                   0,
	})
}

// TestIntervalEjectionsWithRealUpstreams runs success-rate and failure-percentage detection over
// mixed populations of real upstreams, with max_ejection_percent bounding the ejections.
func TestIntervalEjectionsWithRealUpstreams(t *testing.T) {
	tests := []struct {
		name     string
		statuses []int
		od       string
		// wantEjected is how many of the failing hosts end up ejected.
		wantEjected int
		wantStats   map[string]uint64
	}{
		{
			name:     "success rate",
			statuses: []int{200, 200, 200, 200, 500},
			od:       "{consecutive_5xx: 1000, success_rate_request_volume: 10, max_ejection_percent: 20}",
			// mean 80, stdev 40: threshold 80 - 1.9 × 40 = 4; the failing host (0) is below.
			wantEjected: 1,
			wantStats: map[string]uint64{
				"cluster.web.outlier_detection.ejections_enforced_success_rate": 1,
				"cluster.web.outlier_detection.ejections_active":                1,
			},
		},
		{
			name:     "failure percentage bounded by max_ejection_percent",
			statuses: []int{200, 200, 200, 503, 503},
			od: "{consecutive_5xx: 1000, enforcing_success_rate: 0, failure_percentage_threshold: 40, " +
				"enforcing_failure_percentage: 100, failure_percentage_request_volume: 10, max_ejection_percent: 20}",
			// Both failing hosts are above 40% failures; 20% of five hosts allows one ejection.
			wantEjected: 1,
			wantStats: map[string]uint64{
				"cluster.web.outlier_detection.ejections_enforced_failure_percentage": 1,
				"cluster.web.outlier_detection.ejections_overflow":                    1,
				"cluster.web.outlier_detection.ejections_active":                      1,
			},
		},
		{
			name:        "failure percentage under the threshold",
			statuses:    []int{200, 200, 200, 200, 200},
			od:          "{consecutive_5xx: 1000, enforcing_success_rate: 0, failure_percentage_threshold: 40, enforcing_failure_percentage: 100, failure_percentage_request_volume: 10}",
			wantEjected: 0,
			wantStats:   map[string]uint64{"cluster.web.outlier_detection.ejections_active": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addrs := realUpstreams(t, tt.statuses...)
			e := newHCEnv(t)
			if err := e.m.AddStatic([]*config.Cluster{clusterOf(t, addrs, "outlier_detection: "+tt.od+"\n")}); err != nil {
				t.Fatal(err)
			}
			runManager(t, e.testEnv)
			e.clock.waitTimer(t) // the detector armed its interval timer
			c := e.m.Get("web")
			client := &http.Client{Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			for range 100 { // round robin: 20 requests per host
				send(t, c, client)
			}
			e.clock.Advance(10 * time.Second)
			e.clock.waitTimer(t) // the sweep is done once the next one is armed
			e.waitEvents(t, tt.wantEjected)
			ejected := 0
			for i, a := range addrs {
				if hostAt(t, c, a).HasHealthFlag(host.FailedOutlierCheck) {
					if tt.statuses[i] < 500 {
						t.Errorf("healthy upstream %s was ejected", a)
					}
					ejected++
				}
			}
			if ejected != tt.wantEjected {
				t.Errorf("ejected hosts = %d; want %d", ejected, tt.wantEjected)
			}
			e.wantStats(t, tt.wantStats)
		})
	}
}

// BenchmarkReportResult is the router's per-request outlier report through the cluster.
func BenchmarkReportResult(b *testing.B) {
	e := newEnv(b, nil)
	y := staticYAML("web", "10.0.0.1", "10.0.0.2", "10.0.0.3") + "outlier_detection: {consecutive_5xx: 1000000}\n"
	if err := e.m.AddStatic([]*config.Cluster{parseCluster(b, y)}); err != nil {
		b.Fatal(err)
	}
	c := e.m.Get("web")
	h := c.Snapshot().PrioritySet.Sets()[0].Hosts()[0]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Snapshot().Outlier().Report(h, outlier.HTTPStatus(200))
		}
	})
}
