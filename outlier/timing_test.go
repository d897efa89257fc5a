package outlier

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
)

// ejectionLengths ejects host 0 by consecutive 5xx once per round, right after it returns, and
// records how long each ejection lasted, sweeping every interval.
func ejectionLengths(t *testing.T, f *fixture, rounds int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for range rounds {
		f.report(0, HTTPStatus(500), 5)
		if !f.ejected(0) {
			t.Fatalf("host not ejected after 5 failures")
		}
		start := f.clk.Now()
		for f.ejected(0) {
			f.sweepAfter(f.d.cfg.Interval)
			if f.clk.Now().Sub(start) > time.Hour {
				t.Fatalf("host still ejected after an hour")
			}
		}
		out = append(out, f.clk.Now().Sub(start))
	}
	return out
}

func TestEjectionTimeBackoff(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*config.OutlierDetection)
		want []time.Duration
	}{
		{
			name: "base × n",
			mod:  allowAll,
			want: []time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second, 120 * time.Second},
		},
		{
			name: "capped by max_ejection_time",
			mod:  func(s *config.OutlierDetection) { allowAll(s); s.MaxEjectionTime = 70 * time.Second },
			want: []time.Duration{30 * time.Second, 60 * time.Second, 70 * time.Second, 70 * time.Second, 70 * time.Second},
		},
		{
			name: "sweeps at 10 s round the end up",
			mod:  func(s *config.OutlierDetection) { allowAll(s); s.BaseEjectionTime = 25 * time.Second },
			want: []time.Duration{30 * time.Second, 50 * time.Second, 80 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: 1, mod: tt.mod})
			if diff := cmp.Diff(tt.want, ejectionLengths(t, f, len(tt.want))); diff != "" {
				t.Errorf("ejection lengths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(interleave(len(tt.want)), f.takeChanges()); diff != "" {
				t.Errorf("OnChange calls (-want +got):\n%s", diff)
			}
		})
	}
}

func interleave(n int) []string {
	var out []string
	for range n {
		out = append(out, "eject 10.0.0.1:80", "uneject 10.0.0.1:80")
	}
	return out
}

func TestBackoffDecrementsWhileHealthy(t *testing.T) {
	// Two ejections make the multiplier 2. Each full interval in service after the unejection
	// takes one off, so after two more intervals the next ejection lasts base × 1 again.
	f := newFixture(t, fixtureOpts{hosts: 1, mod: allowAll})
	if diff := cmp.Diff([]time.Duration{30 * time.Second, 60 * time.Second}, ejectionLengths(t, f, 2)); diff != "" {
		t.Fatalf("first ejections (-want +got):\n%s", diff)
	}
	// Unejected at this sweep; the multiplier is 2. One interval later it is 1, two later 0.
	f.sweepAfter(10 * time.Second)
	f.sweepAfter(10 * time.Second)
	if diff := cmp.Diff([]time.Duration{30 * time.Second}, ejectionLengths(t, f, 1)); diff != "" {
		t.Errorf("ejection after two healthy intervals (-want +got):\n%s", diff)
	}
}

func TestBackoffOvershootsCapByOne(t *testing.T) {
	// base 30 s, max 60 s: the multiplier grows while 30 × n < 90, to 3. After the third ejection
	// one healthy interval brings it to 2 (still 60 s) and a second to 1 (30 s).
	f := newFixture(t, fixtureOpts{hosts: 1, mod: func(s *config.OutlierDetection) { allowAll(s); s.MaxEjectionTime = 60 * time.Second }})
	ejectionLengths(t, f, 4)
	if got := f.d.monitors[f.hosts[0]].backoff; got != 3 {
		t.Fatalf("backoff after four ejections = %d; want 3", got)
	}
	f.sweepAfter(10 * time.Second)
	if diff := cmp.Diff([]time.Duration{60 * time.Second}, ejectionLengths(t, f, 1)); diff != "" {
		t.Errorf("after one healthy interval (-want +got):\n%s", diff)
	}
}

func TestJitter(t *testing.T) {
	const maxJitter = 5 * time.Second
	tests := []struct {
		name   string
		random uint64
		jitter time.Duration
		length time.Duration
	}{
		{"zero draw", 0, 0, 30 * time.Second},
		{"mid draw", 12345, 2343 * time.Millisecond, 40 * time.Second}, // 12345 % 5001
		{"largest draw", 5000, 5 * time.Second, 40 * time.Second},
		{"wraps", 5001, 0, 30 * time.Second},
		{"max uint64", ^uint64(0), time.Duration(^uint64(0)%5001) * time.Millisecond, 40 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{
				hosts:  1,
				random: func() uint64 { return tt.random },
				mod:    func(s *config.OutlierDetection) { allowAll(s); s.MaxEjectionTimeJitter = maxJitter },
			})
			got := ejectionLengths(t, f, 1)
			if j := f.d.monitors[f.hosts[0]].jitter; j != tt.jitter || j < 0 || j > maxJitter {
				t.Errorf("jitter = %v; want %v within [0, %v]", j, tt.jitter, maxJitter)
			}
			if got[0] != tt.length {
				t.Errorf("ejection length = %v; want %v", got[0], tt.length)
			}
		})
	}
}

func TestJitterBounds(t *testing.T) {
	var next uint64
	f := newFixture(t, fixtureOpts{
		hosts:  1,
		random: func() uint64 { next = next*6364136223846793005 + 1442695040888963407; return next },
		mod:    func(s *config.OutlierDetection) { allowAll(s); s.MaxEjectionTimeJitter = 1500 * time.Millisecond },
	})
	m := f.d.monitors[f.hosts[0]]
	for i := range 500 {
		f.report(0, HTTPStatus(500), 5)
		if m.jitter < 0 || m.jitter > 1500*time.Millisecond || m.jitter%time.Millisecond != 0 {
			t.Fatalf("draw %d: jitter = %v; want whole milliseconds in [0, 1.5s]", i, m.jitter)
		}
		f.d.ActiveHealthCheckPassed(f.hosts[0])
	}
}
