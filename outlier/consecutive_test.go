package outlier

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/config"
)

func allowAll(s *config.OutlierDetection) { s.MaxEjectionPercent = 100 }

func TestConsecutive5xx(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*config.OutlierDetection)
		results []Result
		want    bool
	}{
		{"four 500s stay", allowAll, repeat(HTTPStatus(500), 4), false},
		{"five 500s eject", allowAll, repeat(HTTPStatus(500), 5), true},
		{"a 200 resets the run", allowAll, append(append(repeat(HTTPStatus(500), 4), HTTPStatus(200)), repeat(HTTPStatus(500), 4)...), false},
		{"a 404 is not a failure", allowAll, append(append(repeat(HTTPStatus(500), 4), HTTPStatus(404)), repeat(HTTPStatus(500), 4)...), false},
		{"599 counts", allowAll, repeat(HTTPStatus(599), 5), true},
		{"600 does not count", allowAll, repeat(HTTPStatus(600), 10), false},
		{"threshold 3", func(s *config.OutlierDetection) { allowAll(s); s.Consecutive5xx = 3 }, repeat(HTTPStatus(500), 3), true},
		{"threshold 0 disables", func(s *config.OutlierDetection) { allowAll(s); s.Consecutive5xx = 0 }, repeat(HTTPStatus(500), 50), false},
		{"enforcing 0 detects only", func(s *config.OutlierDetection) { allowAll(s); s.EnforcingConsecutive5xx = 0 }, repeat(HTTPStatus(500), 5), false},
		{"max_ejection_percent 10 of one host blocks", nil, repeat(HTTPStatus(500), 5), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: 1, mod: tt.mod})
			for _, r := range tt.results {
				f.report(0, r, 1)
			}
			if got := f.ejected(0); got != tt.want {
				t.Errorf("ejected = %v; want %v", got, tt.want)
			}
		})
	}
}

func repeat(r Result, n int) []Result {
	out := make([]Result, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func TestConsecutive5xxStats(t *testing.T) {
	f := newFixture(t, fixtureOpts{hosts: 2, mod: allowAll})
	f.report(0, HTTPStatus(500), 5)
	s := f.d.Stats()
	got := map[string]uint64{
		"ejections_enforced_total":           s.EjectionsEnforcedTotal.Value(),
		"ejections_active":                   s.EjectionsActive.Value(),
		"ejections_detected_consecutive_5xx": s.EjectionsDetectedConsecutive5xx.Value(),
		"ejections_enforced_consecutive_5xx": s.EjectionsEnforcedConsecutive5xx.Value(),
		"ejections_consecutive_5xx":          s.EjectionsConsecutive5xx.Value(),
		"ejections_total":                    s.EjectionsTotal.Value(),
		"ejections_overflow":                 s.EjectionsOverflow.Value(),
	}
	want := map[string]uint64{
		"ejections_enforced_total":           1,
		"ejections_active":                   1,
		"ejections_detected_consecutive_5xx": 1,
		"ejections_enforced_consecutive_5xx": 1,
		"ejections_consecutive_5xx":          1,
		"ejections_total":                    1,
		"ejections_overflow":                 0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"eject 10.0.0.1:80"}, f.takeChanges()); diff != "" {
		t.Errorf("OnChange calls (-want +got):\n%s", diff)
	}
	if n := f.d.NumEjections(f.hosts[0]); n != 1 {
		t.Errorf("NumEjections = %d; want 1", n)
	}
	// An ejected host keeps counting but is not ejected twice; its counter restarts at 0 on
	// ejection, so five more failures reach the threshold again and are dropped as stale.
	f.report(0, HTTPStatus(500), 5)
	if got := s.EjectionsDetectedConsecutive5xx.Value(); got != 1 {
		t.Errorf("ejections_detected_consecutive_5xx after more failures = %d; want 1", got)
	}
}

func TestGatewayFailure(t *testing.T) {
	tests := []struct {
		name         string
		mod          func(*config.OutlierDetection)
		results      []Result
		wantEjected  bool
		wantDetected [2]uint64 // gateway, 5xx
		wantEnforced [2]uint64
	}{
		{
			name:         "gateway not enforced by default; 5xx ejects",
			mod:          allowAll,
			results:      repeat(HTTPStatus(503), 5),
			wantEjected:  true,
			wantDetected: [2]uint64{1, 1},
			wantEnforced: [2]uint64{0, 1},
		},
		{
			name: "enforced gateway ejects first",
			mod: func(s *config.OutlierDetection) {
				allowAll(s)
				s.EnforcingConsecutiveGatewayFailure = 100
				s.ConsecutiveGatewayFailure = 3
			},
			results:      repeat(HTTPStatus(502), 3),
			wantEjected:  true,
			wantDetected: [2]uint64{1, 0},
			wantEnforced: [2]uint64{1, 0},
		},
		{
			name: "a 500 resets the gateway run but not the 5xx run",
			mod: func(s *config.OutlierDetection) {
				allowAll(s)
				s.EnforcingConsecutiveGatewayFailure = 100
				s.ConsecutiveGatewayFailure = 3
				s.Consecutive5xx = 0
			},
			results:     []Result{HTTPStatus(504), HTTPStatus(504), HTTPStatus(500), HTTPStatus(504), HTTPStatus(504)},
			wantEjected: false,
		},
		{
			name: "gateway at threshold 5 then 5xx at 5 with gateway enforced",
			mod: func(s *config.OutlierDetection) {
				allowAll(s)
				s.EnforcingConsecutiveGatewayFailure = 100
			},
			results:      repeat(HTTPStatus(504), 5),
			wantEjected:  true,
			wantDetected: [2]uint64{1, 0}, // the 5xx notification is stale once the host is out
			wantEnforced: [2]uint64{1, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: 1, mod: tt.mod})
			for _, r := range tt.results {
				f.d.Report(f.hosts[0], r)
			}
			f.d.drainPending()
			if got := f.ejected(0); got != tt.wantEjected {
				t.Errorf("ejected = %v; want %v", got, tt.wantEjected)
			}
			s := f.d.Stats()
			if got := [2]uint64{s.EjectionsDetectedConsecutiveGatewayFailure.Value(), s.EjectionsDetectedConsecutive5xx.Value()}; tt.wantEjected && got != tt.wantDetected {
				t.Errorf("detected (gateway, 5xx) = %v; want %v", got, tt.wantDetected)
			}
			if got := [2]uint64{s.EjectionsEnforcedConsecutiveGatewayFailure.Value(), s.EjectionsEnforcedConsecutive5xx.Value()}; tt.wantEjected && got != tt.wantEnforced {
				t.Errorf("enforced (gateway, 5xx) = %v; want %v", got, tt.wantEnforced)
			}
		})
	}
}

func TestLocalOriginSplit(t *testing.T) {
	split := func(s *config.OutlierDetection) { allowAll(s); s.SplitExternalLocalOriginErrors = true }
	tests := []struct {
		name    string
		mod     func(*config.OutlierDetection)
		results []Result
		want    EjectionType
		ejected bool
	}{
		{"no split: connect failures are 503s", allowAll, repeat(ConnectFailed, 5), Consecutive5xx, true},
		{"no split: timeouts are 504s", allowAll, repeat(Timeout, 5), Consecutive5xx, true},
		{"no split: attached status counts", allowAll, repeat(Timeout.WithStatus(200), 5), 0, false},
		{"no split: connect success is ignored", allowAll, append(append(repeat(ConnectFailed, 4), ConnectSuccess), ConnectFailed), Consecutive5xx, true},
		{"no split: final connect success is a 200", allowAll, append(append(repeat(ConnectFailed, 4), ConnectSuccessFinal), ConnectFailed), 0, false},
		{"no split: request failed is a 500", allowAll, repeat(RequestFailed, 5), Consecutive5xx, true},
		{"split: connect failures are local origin", split, repeat(ConnectFailed, 5), ConsecutiveLocalOriginFailure, true},
		{"split: timeouts are local origin", split, repeat(Timeout.WithStatus(504), 5), ConsecutiveLocalOriginFailure, true},
		{"split: an HTTP 200 does not reset local origin", split, append(append(repeat(ConnectFailed, 4), HTTPStatus(200)), ConnectFailed), ConsecutiveLocalOriginFailure, true},
		{"split: connect success resets local origin", split, append(append(repeat(ConnectFailed, 4), ConnectSuccess), ConnectFailed), 0, false},
		{"split: request failed is a 503", split, repeat(RequestFailed, 5), Consecutive5xx, true},
		{"split: request success resets both", split, append(append(repeat(ConnectFailed, 4), RequestSuccess), ConnectFailed), 0, false},
		{"split: local origin threshold 0 disables", func(s *config.OutlierDetection) { split(s); s.ConsecutiveLocalOriginFailure = 0 }, repeat(ConnectFailed, 20), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{hosts: 1, mod: tt.mod})
			for _, r := range tt.results {
				f.d.Report(f.hosts[0], r)
			}
			f.d.drainPending()
			if got := f.ejected(0); got != tt.ejected {
				t.Fatalf("ejected = %v; want %v", got, tt.ejected)
			}
			if !tt.ejected {
				return
			}
			s := f.d.Stats()
			if got := s.enforced(tt.want).Value(); got != 1 {
				t.Errorf("enforced %v = %d; want 1", tt.want, got)
			}
		})
	}
}

func TestResult(t *testing.T) {
	tests := []struct {
		r    Result
		want string
	}{
		{HTTPStatus(503), "http(503)"},
		{HTTPStatus(-1), "http"},
		{HTTPStatus(70000), "http"},
		{Timeout, "timeout"},
		{Timeout.WithStatus(504), "timeout(504)"},
		{Timeout.WithStatus(504).WithStatus(502), "timeout(502)"},
		{ConnectFailed.WithStatus(0), "connect_failed"},
		{Result(99 << kindShift), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.r.String(); got != tt.want {
				t.Errorf("String() = %q; want %q", got, tt.want)
			}
		})
	}
}
