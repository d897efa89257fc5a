package outlier

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/runtime"
)

func TestMaxEjectionPercent(t *testing.T) {
	tests := []struct {
		name      string
		hosts     int
		percent   uint32
		alwaysOne bool
		want      int // hosts ejected when every host fails
	}{
		{"10% of 10", 10, 10, false, 1},
		{"10% of 9 ejects none", 9, 10, false, 0},
		{"10% of 9 with always_eject_one_host", 9, 10, true, 1},
		{"10% of 19", 19, 10, false, 1},
		{"10% of 20", 20, 10, false, 2},
		{"15% of 20", 20, 15, false, 3},
		{"50% of 3", 3, 50, false, 1},
		{"33% of 3 ejects none", 3, 33, false, 0},
		{"34% of 3", 3, 34, false, 1},
		{"100% of 4", 4, 100, false, 4},
		{"0% of 4", 4, 0, false, 0},
		{"0% of 4 with always_eject_one_host", 4, 0, true, 1},
		{"50% of 4 with always_eject_one_host", 4, 50, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: tt.hosts, mod: func(s *config.OutlierDetection) {
				s.MaxEjectionPercent = tt.percent
				s.AlwaysEjectOneHost = tt.alwaysOne
			}})
			for i := range tt.hosts {
				f.report(i, HTTPStatus(500), 5)
			}
			got := len(f.ejectedSet())
			if got != tt.want {
				t.Errorf("ejected %d hosts; want %d", got, tt.want)
			}
			s := f.d.Stats()
			if g := s.EjectionsActive.Value(); g != uint64(tt.want) {
				t.Errorf("ejections_active = %d; want %d", g, tt.want)
			}
			if g := s.EjectionsOverflow.Value(); g != uint64(tt.hosts-tt.want) {
				t.Errorf("ejections_overflow = %d; want %d", g, tt.hosts-tt.want)
			}
			// The first hosts in insertion order are the ones ejected.
			for i := range tt.want {
				if !f.ejected(i) {
					t.Errorf("host %d not ejected; want the first %d hosts ejected", i, tt.want)
				}
			}
		})
	}
}

func TestEnforcingPercentages(t *testing.T) {
	tests := []struct {
		name      string
		enforcing uint32
		random    uint64
		want      bool
	}{
		{"0 never", 0, 0, false},
		{"100 always", 100, 99, true},
		{"50 with draw 49", 50, 49, true},
		{"50 with draw 50", 50, 50, false},
		{"50 with draw 149", 50, 149, true},
		{"1 with draw 0", 1, 0, true},
		{"99 with draw 99", 99, 99, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			draws := 0
			buf := &lineBuffer{}
			f := newFixture(t, fixtureOpts{
				hosts:  1,
				log:    NewEventLog(buf),
				random: func() uint64 { draws++; return tt.random },
				mod: func(s *config.OutlierDetection) {
					allowAll(s)
					s.EnforcingConsecutive5xx = tt.enforcing
				},
			})
			f.report(0, HTTPStatus(500), 5)
			if got := f.ejected(0); got != tt.want {
				t.Errorf("ejected = %v; want %v", got, tt.want)
			}
			wantDraws := 1
			if tt.enforcing == 0 || tt.enforcing == 100 {
				wantDraws = 0
			}
			if draws != wantDraws {
				t.Errorf("random draws = %d; want %d", draws, wantDraws)
			}
			s := f.d.Stats()
			if got := s.EjectionsDetectedConsecutive5xx.Value(); got != 1 {
				t.Errorf("ejections_detected_consecutive_5xx = %d; want 1", got)
			}
			wantEnforced := uint64(0)
			if tt.want {
				wantEnforced = 1
			}
			if got := s.EjectionsEnforcedConsecutive5xx.Value(); got != wantEnforced {
				t.Errorf("ejections_enforced_consecutive_5xx = %d; want %d", got, wantEnforced)
			}
			events := buf.events(t)
			if len(events) != 1 || events[0].GetEnforced() != tt.want {
				t.Errorf("event log = %v; want one EJECT with enforced %v", events, tt.want)
			}
		})
	}
}

func newRuntime(t testing.TB, values map[string]string) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(runtime.Config{Layers: []runtime.LayerConfig{{Name: "admin", Admin: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Modify(values); err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestRuntimeOverrides(t *testing.T) {
	split := func(s *config.OutlierDetection) { allowAll(s); s.SplitExternalLocalOriginErrors = true }
	tests := []struct {
		name    string
		hosts   int
		mod     func(*config.OutlierDetection)
		values  map[string]string
		traffic func(f *fixture)
		want    []int
	}{
		{
			name: "consecutive_5xx", hosts: 1, mod: allowAll,
			values:  map[string]string{runtime.KeyOutlierConsecutive5xx: "2"},
			traffic: func(f *fixture) { f.report(0, HTTPStatus(500), 2) },
			want:    []int{0},
		},
		{
			name: "consecutive_gateway_failure and its enforcing", hosts: 1, mod: allowAll,
			values: map[string]string{
				runtime.KeyOutlierConsecutiveGatewayFailure:          "2",
				runtime.KeyOutlierEnforcingConsecutiveGatewayFailure: "100",
			},
			traffic: func(f *fixture) { f.report(0, HTTPStatus(502), 2) },
			want:    []int{0},
		},
		{
			name: "consecutive_local_origin_failure", hosts: 1, mod: split,
			values:  map[string]string{runtime.KeyOutlierConsecutiveLocalOriginFailure: "1"},
			traffic: func(f *fixture) { f.report(0, ConnectFailed, 1) },
			want:    []int{0},
		},
		{
			name: "enforcing_consecutive_local_origin_failure 0", hosts: 1, mod: split,
			values:  map[string]string{runtime.KeyOutlierEnforcingConsecutiveLocalOriginFailure: "0"},
			traffic: func(f *fixture) { f.report(0, ConnectFailed, 5) },
		},
		{
			name: "enforcing_consecutive_5xx 0", hosts: 1, mod: allowAll,
			values:  map[string]string{runtime.KeyOutlierEnforcingConsecutive5xx: "0"},
			traffic: func(f *fixture) { f.report(0, HTTPStatus(500), 5) },
		},
		{
			name: "max_ejection_percent above 100 is 100", hosts: 2,
			values:  map[string]string{runtime.KeyOutlierMaxEjectionPercent: "500"},
			traffic: func(f *fixture) { f.report(0, HTTPStatus(500), 5); f.report(1, HTTPStatus(500), 5) },
			want:    []int{0, 1},
		},
		{
			name: "success rate keys", hosts: 3, mod: noConsecutive,
			values: map[string]string{
				runtime.KeyOutlierSuccessRateMinimumHosts:  "3",
				runtime.KeyOutlierSuccessRateRequestVolume: "10",
				runtime.KeyOutlierSuccessRateStdevFactor:   "1000",
				runtime.KeyOutlierMaxEjectionPercent:       "50",
				runtime.KeyOutlierEnforcingSuccessRate:     "100",
			},
			traffic: func(f *fixture) {
				f.requests(0, 10, 0)
				f.requests(1, 10, 10)
				f.requests(2, 10, 10)
				f.sweepAfter(10 * time.Second)
			},
			want: []int{0},
		},
		{
			name: "enforcing_local_origin_success_rate 0", hosts: 3,
			mod: func(s *config.OutlierDetection) { noConsecutive(s); split(s); s.SuccessRateMinimumHosts = 3 },
			values: map[string]string{
				runtime.KeyOutlierSuccessRateRequestVolume:        "10",
				runtime.KeyOutlierEnforcingLocalOriginSuccessRate: "0",
			},
			traffic: func(f *fixture) {
				f.report(0, ConnectFailed, 10)
				f.report(1, ConnectSuccess, 10)
				f.report(2, ConnectSuccess, 10)
				f.sweepAfter(10 * time.Second)
			},
		},
		{
			name: "failure percentage keys", hosts: 2, mod: noConsecutive,
			values: map[string]string{
				runtime.KeyOutlierFailurePercentageMinimumHosts:  "2",
				runtime.KeyOutlierFailurePercentageRequestVolume: "10",
				runtime.KeyOutlierFailurePercentageThreshold:     "40",
				runtime.KeyOutlierEnforcingFailurePercentage:     "100",
				runtime.KeyOutlierMaxEjectionPercent:             "50",
			},
			traffic: func(f *fixture) {
				f.requests(0, 10, 6)
				f.requests(1, 10, 7)
				f.sweepAfter(10 * time.Second)
			},
			want: []int{0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: tt.hosts, mod: tt.mod, rt: newRuntime(t, tt.values)})
			tt.traffic(f)
			if diff := cmp.Diff(tt.want, f.ejectedSet()); diff != "" {
				t.Errorf("ejected (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuntimeTimes(t *testing.T) {
	f := newFixture(t, fixtureOpts{hosts: 1, mod: allowAll, random: func() uint64 { return 1000 },
		rt: newRuntime(t, map[string]string{
			runtime.KeyOutlierBaseEjectionTimeMs:      "15000",
			runtime.KeyOutlierMaxEjectionTimeMs:       "20000",
			runtime.KeyOutlierMaxEjectionTimeJitterMs: "3000",
			runtime.KeyOutlierIntervalMs:              "2500",
		})})
	if got := f.d.interval(f.d.snapshot()); got != 2500*time.Millisecond {
		t.Errorf("interval = %v; want 2.5s", got)
	}
	// ejectionLengths sweeps every configured 10 s. 15 s + 1 s jitter ends at the 20 s sweep;
	// then min(30, 20) + 1 = 21 s ends at the 30 s sweep.
	if diff := cmp.Diff([]time.Duration{20 * time.Second, 30 * time.Second}, ejectionLengths(t, f, 2)); diff != "" {
		t.Errorf("ejection lengths (-want +got):\n%s", diff)
	}
}

func TestActiveHealthCheckUneject(t *testing.T) {
	tests := []struct {
		name      string
		uneject   bool
		failedHC  bool
		wantEject bool
	}{
		{"default unejects", true, false, false},
		{"host failing active HC stays out", true, true, true},
		{"option off", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: 1, mod: func(s *config.OutlierDetection) {
				allowAll(s)
				s.SuccessfulActiveHealthCheckUnejectHost = tt.uneject
			}})
			f.report(0, HTTPStatus(500), 4)
			f.report(0, HTTPStatus(500), 1)
			if tt.failedHC {
				f.hosts[0].SetHealthFlag(host.FailedActiveHC)
			}
			f.takeChanges()
			f.d.ActiveHealthCheckPassed(f.hosts[0])
			if got := f.ejected(0); got != tt.wantEject {
				t.Errorf("ejected = %v; want %v", got, tt.wantEject)
			}
			if tt.wantEject {
				return
			}
			if diff := cmp.Diff([]string{"uneject 10.0.0.1:80"}, f.takeChanges()); diff != "" {
				t.Errorf("OnChange (-want +got):\n%s", diff)
			}
			if got := f.d.Stats().EjectionsActive.Value(); got != 0 {
				t.Errorf("ejections_active = %d; want 0", got)
			}
			// Counters were reset: four more failures do not eject.
			f.report(0, HTTPStatus(500), 4)
			if f.ejected(0) {
				t.Errorf("ejected after 4 failures following an active HC unejection")
			}
		})
	}
	t.Run("healthy host is left alone", func(t *testing.T) {
		f := newFixture(t, fixtureOpts{hosts: 1, mod: allowAll})
		f.d.ActiveHealthCheckPassed(f.hosts[0])
		if c := f.takeChanges(); c != nil {
			t.Errorf("OnChange calls = %v; want none", c)
		}
	})
}

func TestHostRemoval(t *testing.T) {
	f := newFixture(t, fixtureOpts{hosts: 3, mod: allowAll})
	f.report(0, HTTPStatus(500), 5)
	f.d.Report(f.hosts[1], HTTPStatus(500))
	for range 4 {
		f.d.Report(f.hosts[1], HTTPStatus(500))
	}
	// Host 1 reached its threshold but the control path has not run yet; it is removed first.
	f.d.UpdateHosts(nil, f.hosts[:2])
	f.d.drainPending()
	if f.ejected(1) {
		t.Errorf("removed host ejected by a stale notification")
	}
	s := f.d.Stats()
	if got := s.EjectionsActive.Value(); got != 0 {
		t.Errorf("ejections_active after removing the ejected host = %d; want 0", got)
	}
	if got := s.EjectionsDetectedConsecutive5xx.Value(); got != 1 {
		t.Errorf("ejections_detected_consecutive_5xx = %d; want 1", got)
	}
	if got := f.d.SuccessRate(f.hosts[0]); got != -1 {
		t.Errorf("SuccessRate(removed) = %v; want -1", got)
	}
	f.d.Report(f.hosts[0], HTTPStatus(500)) // ignored, must not panic

	// One host left: with max_ejection_percent 100 it can be ejected alone.
	f.report(2, HTTPStatus(500), 5)
	if !f.ejected(2) {
		t.Errorf("remaining host not ejected")
	}
	// Re-adding a host gives it a fresh monitor.
	extra := hosts(t, 4)[3]
	f.d.UpdateHosts([]*host.Host{extra, f.hosts[2]}, hosts(t, 1))
	if n := len(f.d.order); n != 2 {
		t.Errorf("hosts after update = %d; want 2", n)
	}
}
