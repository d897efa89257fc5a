package outlier

import (
	"fmt"
	"testing"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/cputime"
)

// BenchmarkReport measures the request path: one result for one of 100 hosts.
func BenchmarkReport(b *testing.B) {
	cases := []struct {
		name string
		mod  func(*config.OutlierDetection)
		r    Result
	}{
		{"200", nil, HTTPStatus(200)},
		{"500", func(s *config.OutlierDetection) { s.Consecutive5xx = 0 }, HTTPStatus(500)},
		{"503", func(s *config.OutlierDetection) { s.Consecutive5xx = 0; s.ConsecutiveGatewayFailure = 0 }, HTTPStatus(503)},
		{"split_connect_failed", func(s *config.OutlierDetection) {
			s.SplitExternalLocalOriginErrors = true
			s.ConsecutiveLocalOriginFailure = 0
		}, ConnectFailed},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b, fixtureOpts{hosts: 100, mod: c.mod})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				f.d.Report(f.hosts[i%100], c.r)
				i++
			}
		})
		b.Run(c.name+"_runtime", func(b *testing.B) {
			// A runtime with unrelated keys: every failure looks its threshold up in a snapshot.
			f := newFixture(b, fixtureOpts{hosts: 100, mod: c.mod, rt: newRuntime(b, map[string]string{"a.b": "1", "c.d": "2"})})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				f.d.Report(f.hosts[i%100], c.r)
				i++
			}
		})
		for _, n := range []int{3, 100} {
			// The process CPU per result: a line every core writes shows up as more CPU in
			// parallel than serially, the more so the fewer the hosts.
			b.Run(fmt.Sprintf("%s_hosts=%d_parallel", c.name, n), func(b *testing.B) {
				f := newFixture(b, fixtureOpts{hosts: n, mod: c.mod})
				b.ReportAllocs()
				cputime.Report(b, func() {
					b.RunParallel(func(pb *testing.PB) {
						i := 0
						for pb.Next() {
							f.d.Report(f.hosts[i%n], c.r)
							i++
						}
					})
				})
			})
		}
	}
}

func TestReportAllocatesNothing(t *testing.T) {
	f := newFixture(t, fixtureOpts{hosts: 3, mod: func(s *config.OutlierDetection) { s.Consecutive5xx = 7 }})
	results := []Result{HTTPStatus(200), HTTPStatus(500), HTTPStatus(503), ConnectFailed, Timeout.WithStatus(504), RequestSuccess}
	allocs := testing.AllocsPerRun(200, func() {
		for i, r := range results {
			f.d.Report(f.hosts[i%3], r)
		}
	})
	if allocs != 0 {
		t.Errorf("Report allocates %v times per run; want 0", allocs)
	}
}
