package outlier

import (
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

// FuzzDetector drives a detector with an arbitrary sequence of results, sweeps, health-check
// passes and host removals and checks its invariants after every step: ejections_active equals
// the number of known hosts carrying FailedOutlierCheck, and (without removals shrinking the
// cluster afterwards) never exceeds max_ejection_percent.
func FuzzDetector(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 4, 8, 12, 3, 3, 3, 3, 1, 2})
	f.Add([]byte{1, 5, 9, 13, 17, 21, 25, 3, 3, 3, 3, 3, 3, 3, 3})
	f.Add([]byte{0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 2, 3, 6, 3, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const n = 7
		fx := newFixture(t, fixtureOpts{hosts: n, mod: func(s *config.OutlierDetection) {
			s.MaxEjectionPercent = 30
			s.Consecutive5xx = 3
			s.SuccessRateMinimumHosts = 2
			s.SuccessRateRequestVolume = 3
			s.FailurePercentageMinimumHosts = 2
			s.FailurePercentageRequestVolume = 3
			s.FailurePercentageThreshold = 50
			s.EnforcingFailurePercentage = 100
			s.EnforcingConsecutiveGatewayFailure = 100
			s.SplitExternalLocalOriginErrors = true
		}})
		removed := map[*host.Host]bool{}
		results := []Result{HTTPStatus(500), HTTPStatus(200), HTTPStatus(503), ConnectFailed, ConnectSuccess, Timeout, RequestSuccess}
		for _, op := range ops {
			h := fx.hosts[int(op>>3)%n]
			switch op & 7 {
			case 0, 1, 2, 4:
				fx.d.Report(h, results[int(op>>3)%len(results)])
				fx.d.Report(h, results[(int(op>>3)+int(op&7))%len(results)])
				fx.d.drainPending()
			case 3:
				fx.sweepAfter(10 * time.Second)
			case 5:
				fx.d.ActiveHealthCheckPassed(h)
			case 6:
				if len(removed) < 2 {
					removed[h] = true
					fx.d.UpdateHosts(nil, []*host.Host{h})
				}
			case 7:
				fx.clk.Advance(time.Duration(op) * time.Second)
			}
			ejected := 0
			for _, h := range fx.hosts {
				if !removed[h] && h.HasHealthFlag(host.FailedOutlierCheck) {
					ejected++
				}
			}
			if got := fx.d.Stats().EjectionsActive.Value(); got != uint64(ejected) {
				t.Fatalf("ejections_active = %d; want %d flagged hosts", got, ejected)
			}
			if len(removed) == 0 && 100*ejected > 30*n {
				t.Fatalf("%d of %d hosts ejected; max_ejection_percent is 30", ejected, n)
			}
		}
	})
}
