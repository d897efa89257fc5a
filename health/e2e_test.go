package health

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

type flagChange struct {
	at      time.Time
	flags   host.HealthFlag
	changed bool
}

// TestUpstreamProcessKilled checks a real upstream process over HTTP with the real clock: killed,
// it is marked unhealthy within interval × unhealthy_threshold + timeout; restarted on the same
// port, it returns after healthy_threshold passes.
func TestUpstreamProcessKilled(t *testing.T) {
	const (
		interval  = 200 * time.Millisecond
		timeout   = 100 * time.Millisecond
		unhealthy = 2
		healthy   = 2
		// slack covers goroutine scheduling on a loaded two-core machine under -race.
		slack = 250 * time.Millisecond
	)
	up := startUpstream(t, "http:127.0.0.1:0")
	addr := up.addrs[0]
	s := httpSpec(nil)
	s.Interval, s.Timeout = interval, timeout
	s.UnhealthyInterval, s.UnhealthyEdgeInterval, s.HealthyEdgeInterval = interval, interval, interval
	s.UnhealthyThreshold, s.HealthyThreshold = unhealthy, healthy

	changes := make(chan flagChange, 1024)
	var st Stats
	c, err := New(s, Options{ClusterName: "web", Stats: &st, OnChange: func(h *host.Host, changed bool) {
		changes <- flagChange{time.Now(), h.HealthFlags(), changed}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := newHost(t, addr, InitialFlags(false, false))
	c.SetHosts([]*host.Host{h})
	c.Start()

	waitFor := func(what string, ok func(flagChange) bool) flagChange {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ch := <-changes:
				if ok(ch) {
					return ch
				}
			case <-deadline:
				t.Fatalf("%s: not seen within 10s (flags now %v)", what, h.HealthFlags())
			}
		}
	}
	waitFor("first check passes", func(ch flagChange) bool { return ch.flags == 0 })

	up.kill()
	killed := time.Now()
	down := waitFor("marked unhealthy", func(ch flagChange) bool { return ch.flags&host.FailedActiveHC != 0 })
	bound := interval*unhealthy + timeout
	took := down.at.Sub(killed)
	t.Logf("killed upstream marked /failed_active_hc after %v (bound %v)", took, bound)
	if took > bound+slack {
		t.Errorf("unhealthy after %v; want <= interval×unhealthy_threshold + timeout = %v (+%v slack)", took, bound, slack)
	}
	if n := st.NetworkFailure.Value(); n < unhealthy {
		t.Errorf("network_failure = %d; want >= %d", n, unhealthy)
	}

	// Drain what arrived while down, then bring the upstream back on the same address.
	for len(changes) > 0 {
		<-changes
	}
	startUpstream(t, "http:"+addr)
	restarted := time.Now()
	var passes int
	back := waitFor("healthy again", func(ch flagChange) bool {
		if ch.flags&host.FailedActiveHC != 0 && !ch.changed && st.Success.Value() > 1 {
			passes++
		}
		return ch.flags == 0
	})
	t.Logf("restarted upstream healthy after %v", back.at.Sub(restarted))
	if passes != healthy-1 {
		t.Errorf("passes while still failed = %d; want %d (healthy_threshold %d)", passes, healthy-1, healthy)
	}
	if took := back.at.Sub(restarted); took > interval*healthy+slack {
		t.Errorf("healthy again after %v; want <= %v", took, interval*healthy+slack)
	}
}

// TestEventLogFile writes event_log_path through the real file path.
func TestEventLogFile(t *testing.T) {
	path := t.TempDir() + "/hc.log"
	hs := newHarness(t, spec(func(s *config.HealthCheck) { s.EventLogPath = path }), func(o *Options) { o.EventLog = nil })
	h := newHost(t, "127.0.0.1:9", host.FailedActiveHC)
	hs.c.SetHosts([]*host.Host{h})
	hs.c.Start()
	hs.check(ok)
	if err := hs.c.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"add_healthy_event":{"first_check":true}`; !strings.Contains(string(b), want) {
		t.Errorf("event log %q does not contain %s", b, want)
	}
}
