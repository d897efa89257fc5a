package lb_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// level builds a priority level of healthy, degraded, unhealthy and excluded hosts.
func level(t testing.TB, prio uint32, healthy, degraded, unhealthy, excluded int) *host.Set {
	t.Helper()
	var hs []*host.Host
	add := func(n int, f host.HealthFlag) {
		for range n {
			h, err := host.New(host.Config{Address: fmt.Sprintf("10.%d.0.%d:80", prio, len(hs)), Priority: prio, Health: f})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
	}
	add(healthy, 0)
	add(degraded, host.DegradedActiveHC)
	add(unhealthy, host.FailedActiveHC)
	add(excluded, host.PendingActiveHC|host.FailedActiveHC)
	s, err := host.NewSet(host.SetConfig{Priority: prio, Hosts: hs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestComputePriorityLoad(t *testing.T) {
	tests := []struct {
		name      string
		sets      func(t *testing.T) []*host.Set
		threshold uint32
		want      lb.PriorityLoad
	}{
		{
			// Envoy's priority-level table (arch overview): P1 takes what P0's health, times
			// the 1.4 overprovisioning factor, leaves.
			name: "P0 100% healthy",
			sets: func(t *testing.T) []*host.Set {
				return []*host.Set{level(t, 0, 100, 0, 0, 0), level(t, 1, 100, 0, 0, 0)}
			},
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{100, 0}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			name: "P0 72% healthy",
			sets: func(t *testing.T) []*host.Set {
				return []*host.Set{level(t, 0, 72, 0, 28, 0), level(t, 1, 100, 0, 0, 0)}
			},
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{100, 0}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			name: "P0 71% healthy",
			sets: func(t *testing.T) []*host.Set {
				return []*host.Set{level(t, 0, 71, 0, 29, 0), level(t, 1, 100, 0, 0, 0)}
			},
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{99, 1}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			name: "P0 50% healthy",
			sets: func(t *testing.T) []*host.Set {
				return []*host.Set{level(t, 0, 50, 0, 50, 0), level(t, 1, 100, 0, 0, 0)}
			},
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{70, 30}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			name: "P0 25% healthy",
			sets: func(t *testing.T) []*host.Set {
				return []*host.Set{level(t, 0, 25, 0, 75, 0), level(t, 1, 100, 0, 0, 0)}
			},
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{35, 65}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			name: "P0 0% healthy",
			sets: func(t *testing.T) []*host.Set {
				return []*host.Set{level(t, 0, 0, 0, 100, 0), level(t, 1, 100, 0, 0, 0)}
			},
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{0, 100}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			// Envoy's comment in recalculatePerPriorityState: health 10/20/10 and degraded
			// 20/10/0 give 16/28/14 healthy and 28/14/0 degraded load.
			name: "healthy and degraded split",
			sets: func(t *testing.T) []*host.Set {
				return []*host.Set{level(t, 0, 1, 2, 11, 0), level(t, 1, 2, 1, 11, 0), level(t, 2, 1, 0, 13, 0)}
			},
			threshold: 0,
			want:      lb.PriorityLoad{Healthy: []uint32{16, 28, 14}, Degraded: []uint32{28, 14, 0}, Panic: []bool{false, false, false}},
		},
		{
			// Panic docs: 20% healthy in both levels is total panic; load by host count.
			name:      "total panic",
			sets:      func(t *testing.T) []*host.Set { return []*host.Set{level(t, 0, 2, 0, 8, 0), level(t, 1, 2, 0, 8, 0)} },
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{50, 50}, Degraded: []uint32{0, 0}, Panic: []bool{true, true}},
		},
		{
			// Panic docs: P0 in panic, P1 not: P0 keeps its share and uses all its hosts.
			name:      "P0 in panic only",
			sets:      func(t *testing.T) []*host.Set { return []*host.Set{level(t, 0, 2, 0, 8, 0), level(t, 1, 5, 0, 5, 0)} },
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{29, 71}, Degraded: []uint32{0, 0}, Panic: []bool{true, false}},
		},
		{
			// Never panic when the levels together are fully available.
			name:      "no panic at full total availability",
			sets:      func(t *testing.T) []*host.Set { return []*host.Set{level(t, 0, 2, 0, 8, 0), level(t, 1, 6, 0, 4, 0)} },
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{28, 72}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			// Excluded-hosts docs: P0 {healthy, excluded, excluded}, P1 {healthy, healthy}: all
			// traffic stays in P0, as 1/(3-2) = 1.
			name:      "excluded hosts leave the denominator",
			sets:      func(t *testing.T) []*host.Set { return []*host.Set{level(t, 0, 1, 0, 0, 2), level(t, 1, 2, 0, 0, 0)} },
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{100, 0}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			name:      "nothing available, panic disabled",
			sets:      func(t *testing.T) []*host.Set { return []*host.Set{level(t, 0, 0, 0, 3, 0), level(t, 1, 0, 0, 3, 0)} },
			threshold: 0,
			want:      lb.PriorityLoad{Healthy: []uint32{100, 0}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			// Healthy load is placed over all levels before degraded load.
			name:      "healthy P1 before degraded P0",
			sets:      func(t *testing.T) []*host.Set { return []*host.Set{level(t, 0, 0, 10, 0, 0), level(t, 1, 10, 0, 0, 0)} },
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{0, 100}, Degraded: []uint32{0, 0}, Panic: []bool{false, false}},
		},
		{
			name:      "all degraded",
			sets:      func(t *testing.T) []*host.Set { return []*host.Set{level(t, 0, 0, 10, 0, 0), level(t, 1, 0, 0, 10, 0)} },
			threshold: 50,
			want:      lb.PriorityLoad{Healthy: []uint32{0, 0}, Degraded: []uint32{100, 0}, Panic: []bool{false, false}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := lb.ComputePriorityLoad(tc.sets(t), tc.threshold)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ComputePriorityLoad() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChoosePriority(t *testing.T) {
	pl := lb.PriorityLoad{Healthy: []uint32{70, 20}, Degraded: []uint32{0, 10}, Panic: []bool{false, false}}
	for _, tc := range []struct {
		hash         uint64
		wantPrio     int
		wantDegraded bool
	}{
		{0, 0, false}, {69, 0, false}, {70, 1, false}, {89, 1, false}, {90, 1, true}, {99, 1, true}, {100, 0, false},
	} {
		t.Run(fmt.Sprint(tc.hash), func(t *testing.T) {
			p, d := pl.ChoosePriority(tc.hash)
			if p != tc.wantPrio || d != tc.wantDegraded {
				t.Errorf("ChoosePriority(%d) = %d, %v; want %d, %v", tc.hash, p, d, tc.wantPrio, tc.wantDegraded)
			}
		})
	}
}

func TestPanicThresholdTruncation(t *testing.T) {
	for _, tc := range []struct {
		in   *float64
		want uint32
	}{
		{nil, 50}, {ptr(33.9), 33}, {ptr(0.0), 0}, {ptr(100.0), 100},
	} {
		t.Run(fmt.Sprint(tc.want), func(t *testing.T) {
			c := &lb.Config{HealthyPanicThreshold: tc.in}
			if got := c.PanicThreshold(); got != tc.want {
				t.Errorf("PanicThreshold() = %d; want %d", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  lb.Config
		ok   bool
	}{
		{"defaults", lb.Config{}, true},
		{"panic above 100", lb.Config{HealthyPanicThreshold: ptr(120.0)}, false},
		{"choice count 1", lb.Config{LeastRequest: lb.LeastRequestConfig{ChoiceCount: 1}}, false},
		{"negative bias", lb.Config{LeastRequest: lb.LeastRequestConfig{ActiveRequestBias: ptr(-1.0)}}, false},
		{"ring above 8M", lb.Config{RingHash: lb.RingHashConfig{MaximumRingSize: lb.MaxRingSize + 1}}, false},
		{"maglev not prime", lb.Config{Maglev: lb.MaglevConfig{TableSize: 65536}}, false},
		{"maglev prime", lb.Config{Maglev: lb.MaglevConfig{TableSize: 17}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v; want ok %v", err, tc.ok)
			}
		})
	}
}
