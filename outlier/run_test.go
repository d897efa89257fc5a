package outlier

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock/clocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

func TestRun(t *testing.T) {
	clk := clocktest.NewFake(epoch)
	hs := hosts(t, 2)
	changes := make(chan string, 8)
	d, err := New(spec(t, allowAll), Options{
		Hosts: hs,
		Clock: clk,
		OnChange: func(h *host.Host) {
			state := "in"
			if h.HasHealthFlag(host.FailedOutlierCheck) {
				state = "out"
			}
			changes <- h.Address() + " " + state
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	armed := make(chan string, 8)
	d.afterArm = func() { armed <- "armed" }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	for range 5 {
		d.Report(hs[1], HTTPStatus(503))
	}
	if got := receive(t, changes, "the ejection"); got != "10.0.0.2:80 out" {
		t.Errorf("change = %q; want 10.0.0.2:80 out", got)
	}
	// Three intervals later the host is back. Each Advance fires the timer Run armed.
	for range 3 {
		receive(t, armed, "the interval timer")
		clk.Advance(10 * time.Second)
	}
	if got := receive(t, changes, "the unejection"); got != "10.0.0.2:80 in" {
		t.Errorf("change = %q; want 10.0.0.2:80 in", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if n := clk.Pending(); n != 0 {
		t.Errorf("pending timers after Run returned = %d; want 0", n)
	}
}

func TestQueueOverflowRescans(t *testing.T) {
	const n = notifyQueue + 44
	f := newFixture(t, fixtureOpts{hosts: n, mod: allowAll})
	for i := range n {
		for range 5 {
			f.d.Report(f.hosts[i], HTTPStatus(500))
		}
	}
	if !f.d.rescan.Load() {
		t.Fatalf("rescan not requested after %d hosts reached their threshold", n)
	}
	f.d.drainPending()
	if got := len(f.ejectedSet()); got != n {
		t.Errorf("ejected %d hosts; want %d", got, n)
	}
}

func TestNewNilConfig(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Errorf("New(nil) error = nil; want an error")
	}
	d, err := New(&config.OutlierDetection{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Report(hosts(t, 1)[0], HTTPStatus(500)) // unknown host: ignored
	if got := d.SuccessRateEjectionThreshold(); got != -1 {
		t.Errorf("SuccessRateEjectionThreshold() = %v; want -1", got)
	}
}
