package outlier

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
)

// noConsecutive turns off consecutive-failure ejection so that rate tests see only rates.
func noConsecutive(s *config.OutlierDetection) {
	s.Consecutive5xx = 0
	s.ConsecutiveGatewayFailure = 0
	s.ConsecutiveLocalOriginFailure = 0
}

func TestSuccessRate(t *testing.T) {
	// Ten hosts: nine at 100% and one at 50% over 100 requests. mean = 95, variance = 225,
	// stdev = 15, threshold = 95 - 1.9 × 15 = 66.5. An eleventh host with 60 requests is below
	// success_rate_request_volume (100) but above failure_percentage_request_volume (50): its
	// rate is shown and does not count.
	f := newFixture(t, fixtureOpts{hosts: 12, mod: noConsecutive})
	f.sweepAfter(10 * time.Second) // start a fresh interval
	for i := range 9 {
		f.requests(i, 100, 100)
	}
	f.requests(9, 100, 50)
	f.requests(10, 60, 30)
	f.requests(11, 49, 0)
	f.sweepAfter(10 * time.Second)

	if diff := cmp.Diff([]int{9}, f.ejectedSet()); diff != "" {
		t.Errorf("ejected hosts (-want +got):\n%s", diff)
	}
	if got := f.d.SuccessRateAverage(); got != 95 {
		t.Errorf("SuccessRateAverage() = %v; want 95", got)
	}
	if got := f.d.SuccessRateEjectionThreshold(); got != 66.5 {
		t.Errorf("SuccessRateEjectionThreshold() = %v; want 66.5", got)
	}
	wantRates := []float64{100, 100, 100, 100, 100, 100, 100, 100, 100, 50, 50, -1}
	var gotRates []float64
	for _, h := range f.hosts {
		gotRates = append(gotRates, f.d.SuccessRate(h))
	}
	if diff := cmp.Diff(wantRates, gotRates); diff != "" {
		t.Errorf("SuccessRate per host (-want +got):\n%s", diff)
	}
	if got := f.d.LocalOriginSuccessRateAverage(); got != -1 {
		t.Errorf("LocalOriginSuccessRateAverage() = %v; want -1", got)
	}
	s := f.d.Stats()
	if got := [3]uint64{s.EjectionsDetectedSuccessRate.Value(), s.EjectionsEnforcedSuccessRate.Value(), s.EjectionsSuccessRate.Value()}; got != [3]uint64{1, 1, 1} {
		t.Errorf("success rate detected/enforced/deprecated = %v; want [1 1 1]", got)
	}

	// The next interval has no traffic: every value reads -1 again.
	f.sweepAfter(10 * time.Second)
	if got := f.d.SuccessRateAverage(); got != -1 {
		t.Errorf("SuccessRateAverage() after an idle interval = %v; want -1", got)
	}
	if got := f.d.SuccessRate(f.hosts[0]); got != -1 {
		t.Errorf("SuccessRate() after an idle interval = %v; want -1", got)
	}
}

func TestSuccessRateThresholdBoundary(t *testing.T) {
	// Rates {50, 100, 100, 100, 100}: mean 90, stdev 20. A factor of 2.000 puts the threshold at
	// exactly 50, which does not eject (strictly below ejects); 1.999 puts it just above.
	tests := []struct {
		factor uint32
		want   []int
	}{
		{2000, nil},
		{1999, []int{0}},
		{1900, []int{0}},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatUint(uint64(tt.factor), 10), func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: 5, mod: func(s *config.OutlierDetection) {
				noConsecutive(s)
				s.SuccessRateStdevFactor = tt.factor
				s.MaxEjectionPercent = 20
			}})
			f.requests(0, 100, 50)
			for i := 1; i < 5; i++ {
				f.requests(i, 100, 100)
			}
			f.sweepAfter(10 * time.Second)
			if diff := cmp.Diff(tt.want, f.ejectedSet()); diff != "" {
				t.Errorf("ejected hosts (-want +got):\n%s", diff)
			}
			if got := f.d.SuccessRateAverage(); got != 90 {
				t.Errorf("SuccessRateAverage() = %v; want 90", got)
			}
		})
	}
}

func TestSuccessRateMinimumHosts(t *testing.T) {
	// Four hosts have enough volume, one does not: success rate needs five.
	f := newFixture(t, fixtureOpts{hosts: 5, mod: func(s *config.OutlierDetection) { noConsecutive(s); allowAll(s) }})
	f.requests(0, 100, 0)
	for i := 1; i < 4; i++ {
		f.requests(i, 100, 100)
	}
	f.requests(4, 99, 99)
	f.sweepAfter(10 * time.Second)
	if got := f.ejectedSet(); got != nil {
		t.Errorf("ejected hosts = %v; want none", got)
	}
	if got := f.d.SuccessRateAverage(); got != -1 {
		t.Errorf("SuccessRateAverage() = %v; want -1", got)
	}
	if got := f.d.SuccessRate(f.hosts[0]); got != 0 {
		t.Errorf("SuccessRate(host 0) = %v; want 0 (volume above 50)", got)
	}
}

func TestFailurePercentage(t *testing.T) {
	base := func(s *config.OutlierDetection) {
		noConsecutive(s)
		allowAll(s)
		s.SuccessRateMinimumHosts = 100 // success rate off
		s.EnforcingFailurePercentage = 100
		s.EnforcingFailurePercentageLocalOrigin = 100
	}
	tests := []struct {
		name    string
		mod     func(*config.OutlierDetection)
		hosts   int
		traffic func(f *fixture)
		want    []int
		stat    func(*Stats) uint64
	}{
		{
			name:  "85% failures eject, 84% do not",
			mod:   base,
			hosts: 5,
			traffic: func(f *fixture) {
				f.requests(0, 100, 15)
				f.requests(1, 100, 16)
				f.requests(2, 100, 100)
				f.requests(3, 100, 100)
				f.requests(4, 100, 100)
			},
			want: []int{0},
			stat: func(s *Stats) uint64 { return s.EjectionsEnforcedFailurePercentage.Value() },
		},
		{
			name:  "below request volume is not judged",
			mod:   base,
			hosts: 5,
			traffic: func(f *fixture) {
				f.requests(0, 49, 0)
				for i := 1; i < 5; i++ {
					f.requests(i, 50, 50)
				}
			},
			want: nil,
		},
		{
			name:  "too few hosts with volume",
			mod:   base,
			hosts: 5,
			traffic: func(f *fixture) {
				f.requests(0, 50, 0)
				for i := 1; i < 4; i++ {
					f.requests(i, 50, 50)
				}
			},
			want: nil,
		},
		{
			name:  "enforcing 0 by default",
			mod:   func(s *config.OutlierDetection) { base(s); s.EnforcingFailurePercentage = 0 },
			hosts: 5,
			traffic: func(f *fixture) {
				f.requests(0, 100, 0)
				for i := 1; i < 5; i++ {
					f.requests(i, 100, 100)
				}
			},
			want: nil,
			stat: func(s *Stats) uint64 { return s.EjectionsDetectedFailurePercentage.Value() },
		},
		{
			name:  "threshold from config",
			mod:   func(s *config.OutlierDetection) { base(s); s.FailurePercentageThreshold = 30 },
			hosts: 5,
			traffic: func(f *fixture) {
				f.requests(0, 100, 70)
				f.requests(1, 100, 71)
				for i := 2; i < 5; i++ {
					f.requests(i, 100, 100)
				}
			},
			want: []int{0},
		},
		{
			name:  "local origin",
			mod:   func(s *config.OutlierDetection) { base(s); s.SplitExternalLocalOriginErrors = true },
			hosts: 5,
			traffic: func(f *fixture) {
				for range 90 {
					f.d.Report(f.hosts[0], ConnectFailed)
				}
				for range 10 {
					f.d.Report(f.hosts[0], ConnectSuccess)
				}
				for i := 1; i < 5; i++ {
					f.report(i, ConnectSuccess, 100)
				}
			},
			want: []int{0},
			stat: func(s *Stats) uint64 { return s.EjectionsEnforcedLocalOriginFailurePercent.Value() },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: tt.hosts, mod: tt.mod})
			tt.traffic(f)
			f.sweepAfter(10 * time.Second)
			if diff := cmp.Diff(tt.want, f.ejectedSet()); diff != "" {
				t.Errorf("ejected hosts (-want +got):\n%s", diff)
			}
			if tt.stat != nil {
				if got := tt.stat(f.d.Stats()); got != 1 {
					t.Errorf("stat = %d; want 1", got)
				}
			}
		})
	}
}

func TestLocalOriginSuccessRate(t *testing.T) {
	f := newFixture(t, fixtureOpts{hosts: 5, mod: func(s *config.OutlierDetection) {
		noConsecutive(s)
		s.SplitExternalLocalOriginErrors = true
		s.MaxEjectionPercent = 20
	}})
	// Local origin: host 0 fails half its connections. External: everyone answers 200.
	for k := range 100 {
		r := ConnectSuccess
		if k%2 == 0 {
			r = ConnectFailed
		}
		f.d.Report(f.hosts[0], r)
	}
	for i := 1; i < 5; i++ {
		f.report(i, ConnectSuccess, 100)
	}
	for i := range 5 {
		f.report(i, HTTPStatus(200), 100)
	}
	f.sweepAfter(10 * time.Second)
	if diff := cmp.Diff([]int{0}, f.ejectedSet()); diff != "" {
		t.Errorf("ejected hosts (-want +got):\n%s", diff)
	}
	got := []float64{
		f.d.LocalOriginSuccessRateAverage(), f.d.LocalOriginSuccessRateEjectionThreshold(),
		f.d.LocalOriginSuccessRate(f.hosts[0]), f.d.LocalOriginSuccessRate(f.hosts[1]),
		f.d.SuccessRateAverage(), f.d.SuccessRate(f.hosts[1]),
	}
	// mean 90, stdev 20, threshold 90 - 38 = 52. Host 0 is ejected by the external pass? No: its
	// external rate is 100; the local pass ejects it.
	want := []float64{90, 52, 50, 100, 100, 100}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rates (-want +got):\n%s", diff)
	}
	if got := f.d.Stats().EjectionsEnforcedLocalOriginSuccessRate.Value(); got != 1 {
		t.Errorf("ejections_enforced_local_origin_success_rate = %d; want 1", got)
	}
}
