package admin

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/outlier"
	"github.com/legateproxy/legate/stats"
)

// outlierFixture runs a manager with one cluster of five hosts under success-rate detection,
// reports one interval of traffic (10.0.0.5 fails every request) and waits for the sweep that
// ejects it.
func outlierFixture(t *testing.T) *cluster.Manager {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.NewFake(time.Unix(1700000000, 0))
	m, err := cluster.NewManager(cluster.ManagerConfig{Stats: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	y := "name: sr\noutlier_detection: {success_rate_request_volume: 10, max_ejection_percent: 100, consecutive_5xx: 1000}\n" +
		"load_assignment:\n  endpoints:\n  - lb_endpoints:\n"
	for i := 1; i <= 5; i++ {
		y += "    - endpoint: {address: {socket_address: {address: 10.0.0." + string(rune('0'+i)) + ", port_value: 80}}}\n"
	}
	if err := m.AddStatic([]*config.Cluster{clusterConfig(t, y)}); err != nil {
		t.Fatal(err)
	}
	ejected := make(chan *host.Host, 5)
	defer m.OnHostHealthFailure(func(h *host.Host, _ bool) { ejected <- h })()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// The detector's Run arms its interval timer; wait for it before moving the clock.
	deadline := time.Now().Add(10 * time.Second)
	for clk.Pending() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the outlier detector never armed its interval timer")
		}
		goruntime.Gosched()
	}
	c := m.Get("sr")
	for _, h := range c.Snapshot().PrioritySet.Sets()[0].Hosts() {
		code := 200
		if h.Address() == "10.0.0.5:80" {
			code = 500
		}
		for range 10 {
			c.ReportResult(h, outlier.HTTPStatus(code))
		}
	}
	clk.Advance(10 * time.Second)
	select {
	case h := <-ejected:
		if h.Address() != "10.0.0.5:80" {
			t.Fatalf("ejected %s; want 10.0.0.5:80", h.Address())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no success-rate ejection within 10s")
	}
	return m
}

func TestClustersOutlierRates(t *testing.T) {
	m := outlierFixture(t)
	t.Run("text", func(t *testing.T) {
		golden(t, "clusters_outlier.golden", serveClusters(t, m, "").Body.Bytes())
	})
	t.Run("json", func(t *testing.T) {
		body := serveClusters(t, m, "format=json").Body.Bytes()
		golden(t, "clusters_outlier_json.golden", body)
		var got adminv3.Clusters
		if err := (protojson.UnmarshalOptions{}).Unmarshal(body, &got); err != nil {
			t.Fatalf("strict decode into adminv3.Clusters: %v", err)
		}
		cs := got.GetClusterStatuses()[0]
		if v := cs.GetSuccessRateEjectionThreshold().GetValue(); v != 4 {
			t.Errorf("success_rate_ejection_threshold = %v; want 4 (mean 80 - 1.9 × stdev 40)", v)
		}
		if cs.LocalOriginSuccessRateEjectionThreshold != nil {
			t.Errorf("local_origin_success_rate_ejection_threshold = %v; want absent", cs.LocalOriginSuccessRateEjectionThreshold)
		}
		var rates []float64
		for _, h := range cs.GetHostStatuses() {
			rates = append(rates, h.GetSuccessRate().GetValue())
			if h.LocalOriginSuccessRate != nil {
				t.Errorf("local_origin_success_rate = %v; want absent without split errors", h.LocalOriginSuccessRate)
			}
		}
		if diff := cmp.Diff([]float64{100, 100, 100, 100, 0}, rates); diff != "" {
			t.Errorf("host success rates (-want +got):\n%s", diff)
		}
	})
}
