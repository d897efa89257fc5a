package lb_test

import (
	"fmt"
	"testing"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/internal/lbtest"
	"github.com/legateproxy/legate/lb/maglev"
	"github.com/legateproxy/legate/lb/ringhash"
	"github.com/legateproxy/legate/lb/roundrobin"
	"github.com/legateproxy/legate/stats"
)

func TestStatsComplete(t *testing.T) {
	var own stats.HotCounter
	t.Run("nil", func(t *testing.T) {
		s := (*lb.Stats)(nil).Complete()
		if s == nil || s.HealthyPanic == nil || s.ZoneNoCapacityLeft == nil || s.SubsetsActive == nil {
			t.Errorf("Complete() = %+v; want every field set", s)
		}
	})
	t.Run("partial keeps the given counters", func(t *testing.T) {
		in := &lb.Stats{HealthyPanic: &own}
		s := in.Complete()
		if s == in || s.HealthyPanic != &own || s.SubsetsRemoved == nil {
			t.Errorf("Complete() = %+v; want a completed copy keeping HealthyPanic", s)
		}
	})
	t.Run("complete is returned as is", func(t *testing.T) {
		full := (&lb.Stats{}).Complete()
		if got := full.Complete(); got != full {
			t.Errorf("Complete() of a complete Stats = %p; want %p", got, full)
		}
	})
}

// halfHealthy builds one level of 10 hosts with 7 failing active health checks (30% healthy:
// in panic at the default 50% threshold).
func halfHealthy(t *testing.T) *host.PrioritySet {
	t.Helper()
	var hs []*host.Host
	for i := range 10 {
		var f host.HealthFlag
		if i < 7 {
			f = host.FailedActiveHC
		}
		hs = append(hs, lbtest.Host(t, host.Config{Address: fmt.Sprintf("10.0.0.%d:80", i), Health: f}))
	}
	return lbtest.PrioritySet(t, hs)
}

func TestStatsHealthyPanic(t *testing.T) {
	policies := []struct {
		name  string
		build lb.Factory
	}{
		{"round robin", roundrobin.Factory},
		{"ring hash", ringhash.Factory},
		{"maglev", maglev.Factory},
	}
	for _, p := range policies {
		t.Run(p.name, func(t *testing.T) {
			st := (&lb.Stats{}).Complete()
			b, err := p.build(lb.Params{PrioritySet: halfHealthy(t), Rand: lbtest.Rand(1), Stats: st}, nil)
			if err != nil {
				t.Fatal(err)
			}
			const n = 100
			lbtest.Count(t, b, nil, n)
			if got := st.HealthyPanic.Value(); got != n {
				t.Errorf("lb_healthy_panic = %d after %d picks in panic; want %d", got, n, n)
			}
			lbtest.NoAllocs(t, b, nil)
		})
	}
	t.Run("not in panic", func(t *testing.T) {
		st := (&lb.Stats{}).Complete()
		b, err := roundrobin.New(lb.Params{PrioritySet: lbtest.PrioritySet(t, lbtest.Hosts(t, 4)), Stats: st}, nil)
		if err != nil {
			t.Fatal(err)
		}
		lbtest.Count(t, b, nil, 50)
		if got := st.HealthyPanic.Value(); got != 0 {
			t.Errorf("lb_healthy_panic = %d; want 0", got)
		}
	})
}

// unhealthyZonedSet is zonedSet with two hosts per zone, all failing but the first of zone a:
// in panic.
func unhealthyZonedSet(t *testing.T, prefix string) *host.PrioritySet {
	t.Helper()
	return zonedSetHealth(t, prefix, [3]int{2, 2, 2}, func(zone, i int) host.HealthFlag {
		if zone == 0 && i == 0 {
			return 0
		}
		return host.FailedActiveHC
	})
}

func TestStatsZoneRouting(t *testing.T) {
	const picks = 10000
	type counts struct {
		Recalculate, TooSmall, NotOK, Direct, Sampled, CrossZone, NoCapacity uint64
	}
	tests := []struct {
		name    string
		local   func(t *testing.T) *host.PrioritySet
		minSize *uint64
		want    func(got counts) bool
		wantMsg string
	}{
		{
			name:    "all directly",
			local:   func(t *testing.T) *host.PrioritySet { return zonedSet(t, "20", [3]int{1, 1, 1}) },
			want:    func(c counts) bool { return c == counts{Recalculate: 1, Direct: picks} },
			wantMsg: "recalculate 1, all directly every pick",
		},
		{
			// Local a holds 50%, upstream a 33.33%: 66.66% sampled locally, the rest cross zone.
			name:  "sampled and cross zone",
			local: func(t *testing.T) *host.PrioritySet { return zonedSet(t, "20", [3]int{1, 1, 0}) },
			want: func(c counts) bool {
				return c.Recalculate == 1 && c.Sampled+c.CrossZone == picks && c.Sampled > 6300 && c.Sampled < 7000 && c.Direct == 0
			},
			wantMsg: "recalculate 1, about 6666 sampled and the rest cross zone",
		},
		{
			name:    "cluster too small",
			local:   func(t *testing.T) *host.PrioritySet { return zonedSet(t, "20", [3]int{1, 1, 0}) },
			minSize: ptr(uint64(7)),
			want:    func(c counts) bool { return c == counts{Recalculate: 1, TooSmall: 1} },
			wantMsg: "recalculate 1, too small 1, no routing",
		},
		{
			name:    "local cluster without hosts in this locality",
			local:   func(t *testing.T) *host.PrioritySet { return zonedSet(t, "20", [3]int{0, 1, 1}) },
			want:    func(c counts) bool { return c == counts{Recalculate: 1, NotOK: 1} },
			wantMsg: "recalculate 1, local cluster not ok once (the plan)",
		},
		{
			name:    "local cluster in panic",
			local:   func(t *testing.T) *host.PrioritySet { return unhealthyZonedSet(t, "20") },
			want:    func(c counts) bool { return c == counts{Recalculate: 1, NotOK: picks} },
			wantMsg: "recalculate 1, local cluster not ok on every pick",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := (&lb.Stats{}).Complete()
			b, err := roundrobin.New(lb.Params{PrioritySet: zonedSet(t, "10", [3]int{2, 2, 2}), Local: tc.local(t), Rand: lbtest.Rand(4), Stats: st},
				&lb.Config{ZoneAware: lb.ZoneAwareConfig{MinClusterSize: tc.minSize}})
			if err != nil {
				t.Fatal(err)
			}
			lbtest.Count(t, b, nil, picks)
			got := counts{
				Recalculate: st.RecalculateZoneStructures.Value(), TooSmall: st.ZoneClusterTooSmall.Value(),
				NotOK: st.LocalClusterNotOK.Value(), Direct: st.ZoneRoutingAllDirectly.Value(),
				Sampled: st.ZoneRoutingSampled.Value(), CrossZone: st.ZoneRoutingCrossZone.Value(),
				NoCapacity: st.ZoneNoCapacityLeft.Value(),
			}
			if !tc.want(got) {
				t.Errorf("stats = %+v; want %s", got, tc.wantMsg)
			}
			lbtest.NoAllocs(t, b, nil)
		})
	}
}
