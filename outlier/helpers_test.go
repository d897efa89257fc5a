package outlier

import (
	"fmt"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock/clocktest"
)

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// spec returns the default spec (built from an empty proto, so Envoy's defaults) changed by mod.
func spec(t testing.TB, mod func(*config.OutlierDetection)) *config.OutlierDetection {
	t.Helper()
	s, err := config.OutlierDetectionFromProto(&clusterv3.OutlierDetection{})
	if err != nil {
		t.Fatalf("OutlierDetectionFromProto({}) error: %v", err)
	}
	if mod != nil {
		mod(s)
	}
	return s
}

func hosts(t testing.TB, n int) []*host.Host {
	t.Helper()
	out := make([]*host.Host, n)
	for i := range out {
		h, err := host.New(host.Config{Address: fmt.Sprintf("10.0.0.%d:80", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = h
	}
	return out
}

// fixture is a detector driven by hand: no Run goroutine, a fake clock, and helpers that do what
// Run would do, synchronously.
type fixture struct {
	t     testing.TB
	d     *Detector
	clk   *clocktest.Fake
	hosts []*host.Host

	mu      sync.Mutex
	changes []string // "eject 10.0.0.1:80" / "uneject ..."
}

type fixtureOpts struct {
	hosts  int
	mod    func(*config.OutlierDetection)
	random func() uint64
	rt     Runtime
	log    *EventLog
}

func newFixture(t testing.TB, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: clocktest.NewFake(epoch), hosts: hosts(t, o.hosts)}
	random := o.random
	if random == nil {
		random = func() uint64 { t.Helper(); t.Fatalf("unexpected random draw"); return 0 }
	}
	d, err := New(spec(t, o.mod), Options{
		ClusterName: "web",
		Hosts:       f.hosts,
		Runtime:     o.rt,
		Clock:       f.clk,
		Random:      random,
		EventLog:    o.log,
		OnChange: func(h *host.Host) {
			f.mu.Lock()
			defer f.mu.Unlock()
			what := "uneject "
			if h.HasHealthFlag(host.FailedOutlierCheck) {
				what = "eject "
			}
			f.changes = append(f.changes, what+h.Address())
		},
	})
	if err != nil {
		t.Fatalf("New() error: %v", err)
	}
	f.d = d
	return f
}

// report sends r to host i n times and lets the control path handle what it queued.
func (f *fixture) report(i int, r Result, n int) {
	for range n {
		f.d.Report(f.hosts[i], r)
	}
	f.d.drainPending()
}

// sweepAfter advances the clock by d and runs one interval sweep, as Run's timer would.
func (f *fixture) sweepAfter(d time.Duration) {
	f.clk.Advance(d)
	f.d.drainPending()
	f.d.sweep()
}

func (f *fixture) ejected(i int) bool { return f.hosts[i].HasHealthFlag(host.FailedOutlierCheck) }

func (f *fixture) ejectedSet() []int {
	var out []int
	for i := range f.hosts {
		if f.ejected(i) {
			out = append(out, i)
		}
	}
	return out
}

func (f *fixture) takeChanges() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.changes
	f.changes = nil
	return c
}

// requests reports total results to host i of which success are 200 and the rest 500,
// interleaved so that no run of 5xx is longer than needed.
func (f *fixture) requests(i int, total, success int) {
	failures := total - success
	for k := range total {
		// Spread failures evenly: request k fails when it moves the failure count up.
		if (k+1)*failures/total > k*failures/total {
			f.d.Report(f.hosts[i], HTTPStatus(500))
		} else {
			f.d.Report(f.hosts[i], HTTPStatus(200))
		}
	}
	f.d.drainPending()
}
