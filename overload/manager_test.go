package overload

import (
	"context"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/statstest"
)

func newStore(t *testing.T) *stats.Store {
	t.Helper()
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func wantStat(t *testing.T, st *stats.Store, name string, want uint64) {
	t.Helper()
	if got, ok := statstest.Value(st, name); !ok || got != want {
		t.Errorf("%s = %d (exists: %v); want %d", name, got, ok, want)
	}
}

// TestManagerStatsAndStates drives a heap monitor through a scaled and a threshold trigger and
// checks the published action states and Envoy's overload.* stats.
func TestManagerStatsAndStates(t *testing.T) {
	st := newStore(t)
	cfg := &Config{
		RefreshInterval: time.Second,
		Monitors:        []Monitor{{Name: FixedHeap, MaxHeapBytes: 1000}},
		Actions: []Action{
			{Name: StopAcceptingRequests, Triggers: []Trigger{{Monitor: FixedHeap, Scaling: 0.95, Saturation: 0.95}}},
			{Name: DisableHTTPKeepalive, Triggers: []Trigger{{Monitor: FixedHeap, Scaling: 0.5, Saturation: 1}}},
		},
	}
	m := New(cfg, st, clocktest.NewFake(time.Unix(0, 0)))
	defer m.Close()
	var heap atomic.Uint64
	fail := false
	m.heap = func() (uint64, bool) { return heap.Load(), !fail }
	s := m.State()

	heap.Store(750) // keepalive scaled to 50 %, requests not stopped
	m.Refresh()
	wantStat(t, st, "overload.envoy.resource_monitors.fixed_heap.pressure", 75)
	wantStat(t, st, "overload.envoy.overload_actions.disable_http_keepalive.scale_percent", 50)
	wantStat(t, st, "overload.envoy.overload_actions.disable_http_keepalive.active", 0)
	wantStat(t, st, "overload.envoy.overload_actions.stop_accepting_requests.active", 0)
	if s.StopAcceptingRequests() {
		t.Error("StopAcceptingRequests at 75 % pressure")
	}
	if got := s.disableKeepalive.Load(); got != scaleOne/2 {
		t.Errorf("disable_http_keepalive state = %d; want %d", got, scaleOne/2)
	}

	heap.Store(960)
	m.Refresh()
	wantStat(t, st, "overload.envoy.resource_monitors.fixed_heap.pressure", 96)
	wantStat(t, st, "overload.envoy.overload_actions.stop_accepting_requests.active", 1)
	wantStat(t, st, "overload.envoy.overload_actions.stop_accepting_requests.scale_percent", 100)
	wantStat(t, st, "overload.envoy.overload_actions.disable_http_keepalive.active", 0)
	wantStat(t, st, "overload.envoy.overload_actions.disable_http_keepalive.scale_percent", 92)
	if !s.StopAcceptingRequests() {
		t.Error("saturated actions not published")
	}

	fail = true // a failed read keeps the last pressure
	m.Refresh()
	wantStat(t, st, "overload.envoy.resource_monitors.fixed_heap.failed_updates", 1)
	wantStat(t, st, "overload.envoy.resource_monitors.fixed_heap.skipped_updates", 0)
	if !s.StopAcceptingRequests() {
		t.Error("a failed update released the action")
	}

	fail = false
	heap.Store(100)
	m.Refresh()
	wantStat(t, st, "overload.envoy.overload_actions.stop_accepting_requests.active", 0)
	wantStat(t, st, "overload.envoy.overload_actions.disable_http_keepalive.scale_percent", 0)
	if s.StopAcceptingRequests() || s.DisableKeepalive() {
		t.Error("actions still set at 10 % pressure")
	}
}

// TestManagerRunsEveryRefreshInterval checks that Run reads the monitors every
// refresh_interval of the (fake) clock.
func TestManagerRunsEveryRefreshInterval(t *testing.T) {
	clk := clocktest.NewFake(time.Unix(0, 0))
	m := New(&Config{RefreshInterval: 250 * time.Millisecond, Monitors: []Monitor{{Name: FixedHeap, MaxHeapBytes: 1000}}}, newStore(t), clk)
	defer m.Close()
	reads := make(chan struct{}, 10)
	m.heap = func() (uint64, bool) { reads <- struct{}{}; return 1, true }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for i := 0; i < 3; i++ {
		<-reads // the first read is at once, each next one a refresh interval later
		for clk.Pending() == 0 {
			runtime.Gosched()
		}
		if d, _ := clk.Next(); d != 250*time.Millisecond {
			t.Fatalf("next refresh in %v; want 250ms", d)
		}
		clk.Advance(250 * time.Millisecond)
	}
}

// TestFixedHeapFromHeldMemory checks the fixed_heap monitor against the Go heap: holding
// 64 MiB in the test raises its pressure past a threshold that the heap did not reach before,
// which saturates shrink_heap, which returns memory to the OS.
func TestFixedHeapFromHeldMemory(t *testing.T) {
	runtime.GC()
	base, ok := readHeap()
	if !ok {
		t.Fatal("the runtime does not report " + heapMetric)
	}
	const hold = 64 << 20
	limit := base + hold
	st := newStore(t)
	m := New(&Config{
		RefreshInterval: time.Second,
		Monitors:        []Monitor{{Name: FixedHeap, MaxHeapBytes: limit}},
		// base/limit is under 0.5 as long as the heap was under 64 MiB; base+hold is over 0.9
		Actions: []Action{{Name: ShrinkHeap, Triggers: []Trigger{{Monitor: FixedHeap, Scaling: 0.9, Saturation: 0.9}}}},
	}, st, nil)
	defer m.Close()
	shrunk := 0
	m.freeOSMemory = func() { shrunk++ }
	if float64(base)/float64(limit) >= 0.5 {
		t.Skipf("the test process already holds %d heap bytes", base)
	}
	m.Refresh()
	wantStat(t, st, "overload.envoy.overload_actions.shrink_heap.active", 0)
	held := make([]byte, hold)
	for i := range held {
		held[i] = 1
	}
	m.Refresh()
	wantStat(t, st, "overload.envoy.overload_actions.shrink_heap.active", 1)
	if p, _ := statstest.Value(st, "overload.envoy.resource_monitors.fixed_heap.pressure"); p < 90 {
		t.Errorf("pressure = %d holding %d bytes of %d; want >= 90", p, hold, limit)
	}
	if shrunk != 1 {
		t.Errorf("shrink_heap freed memory %d times; want 1", shrunk)
	}
	runtime.KeepAlive(held)
}

// TestGlobalConnectionLimit checks that the counted connections stop at the limit and that
// their count is the monitor's pressure.
func TestGlobalConnectionLimit(t *testing.T) {
	st := newStore(t)
	m := New(&Config{RefreshInterval: time.Second, Monitors: []Monitor{{Name: GlobalConnections, MaxConnections: 2}}}, st, nil)
	defer m.Close()
	s := m.State()
	if !s.AcquireConnection() || !s.AcquireConnection() {
		t.Fatal("connections under the limit refused")
	}
	if s.AcquireConnection() {
		t.Fatal("a third connection allowed with a limit of 2")
	}
	m.Refresh()
	wantStat(t, st, "overload.envoy.resource_monitors.global_downstream_max_connections.pressure", 100)
	s.ReleaseConnection()
	m.Refresh()
	wantStat(t, st, "overload.envoy.resource_monitors.global_downstream_max_connections.pressure", 50)
	if !s.AcquireConnection() {
		t.Error("a connection refused after one closed")
	}
	var none *State
	if !none.AcquireConnection() || none.StopAcceptingRequests() || none.AcceptPaused() != nil {
		t.Error("a nil State sheds load")
	}
}

// TestLimitListener checks the admin's limited socket with real connections: one over the
// limit is closed at accept, and closing an accepted one frees its place.
func TestLimitListener(t *testing.T) {
	m := New(&Config{RefreshInterval: time.Second, Monitors: []Monitor{{Name: GlobalConnections, MaxConnections: 1}}}, newStore(t), nil)
	defer m.Close()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := m.State().LimitListener(raw)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	c1 := dial()
	defer c1.Close()
	s1 := <-accepted
	c2 := dial()
	defer c2.Close()
	if _, err := c2.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the connection over the limit: read error %v; want EOF", err)
	}
	s1.Close()
	s1.Close() // released once
	if n := m.State().Connections(); n != 0 {
		t.Fatalf("connections = %d after the only one closed", n)
	}
	c3 := dial()
	defer c3.Close()
	(<-accepted).Close()
}

// TestReduceTimeoutsScalesTimers drives reduce_timeouts through a scaled trigger and checks
// the timeouts ScaleTimer gives at each state (Envoy's scaled range: the minimum plus the
// rest scaled down by the state), the stat, and that TimersChanged fires on each change
// only.
func TestReduceTimeoutsScalesTimers(t *testing.T) {
	st := newStore(t)
	cfg := &Config{
		RefreshInterval: time.Second,
		Monitors:        []Monitor{{Name: FixedHeap, MaxHeapBytes: 1000}},
		Actions: []Action{{
			Name:     ReduceTimeouts,
			Triggers: []Trigger{{Monitor: FixedHeap, Scaling: 0.5, Saturation: 1}},
			Timers: [numTimers]TimerMinimum{
				ConnectionIdle: {Set: true, Absolute: 2 * time.Second},
				StreamIdle:     {Set: true, Scale: 0.25, IsScale: true},
			},
		}},
	}
	m := New(cfg, st, clocktest.NewFake(time.Unix(0, 0)))
	defer m.Close()
	var heap atomic.Uint64
	m.heap = func() (uint64, bool) { return heap.Load(), true }
	s := m.State()
	if !s.ScalesTimer(ConnectionIdle) || !s.ScalesTimer(StreamIdle) || s.ScalesTimer(TransportSocketConnect) {
		t.Error("ScalesTimer does not follow the configured timers")
	}
	check := func(what string, timer Timer, d, want time.Duration) {
		t.Helper()
		if got := s.ScaleTimer(timer, d); got != want {
			t.Errorf("%s: ScaleTimer(%d, %v) = %v; want %v", what, timer, d, got, want)
		}
	}
	changed := s.TimersChanged()

	heap.Store(100) // below the scaling threshold: nothing moves
	m.Refresh()
	check("off", ConnectionIdle, 10*time.Second, 10*time.Second)
	wantStat(t, st, "overload.envoy.overload_actions.reduce_timeouts.scale_percent", 0)
	select {
	case <-changed:
		t.Error("TimersChanged fired without a change")
	default:
	}

	heap.Store(750) // half way
	m.Refresh()
	wantStat(t, st, "overload.envoy.overload_actions.reduce_timeouts.scale_percent", 50)
	wantStat(t, st, "overload.envoy.overload_actions.reduce_timeouts.active", 0)
	check("50 %, min_timeout", ConnectionIdle, 10*time.Second, 6*time.Second)
	check("50 %, min_timeout above the timeout", ConnectionIdle, time.Second, time.Second)
	check("50 %, min_scale", StreamIdle, 8*time.Second, 5*time.Second)
	check("50 %, timer not configured", TransportSocketConnect, 8*time.Second, 8*time.Second)
	check("50 %, timer disabled", StreamIdle, 0, 0)
	select {
	case <-changed:
	default:
		t.Error("TimersChanged did not fire when the state moved")
	}

	heap.Store(1000) // saturated: the minimums
	m.Refresh()
	wantStat(t, st, "overload.envoy.overload_actions.reduce_timeouts.scale_percent", 100)
	wantStat(t, st, "overload.envoy.overload_actions.reduce_timeouts.active", 1)
	check("saturated, min_timeout", ConnectionIdle, 10*time.Second, 2*time.Second)
	check("saturated, min_scale", StreamIdle, 8*time.Second, 2*time.Second)

	heap.Store(0)
	m.Refresh()
	check("released", ConnectionIdle, 10*time.Second, 10*time.Second)

	var none *State
	if none.ScaleTimer(StreamIdle, time.Second) != time.Second || none.TimersChanged() != nil || none.ScalesTimer(StreamIdle) {
		t.Error("a nil State scales timers")
	}
}

// TestShrinkHeapEveryInterval checks shrink_heap's timing, as Envoy's heap shrinker's: while
// saturated it runs at once and then every timer_interval (fake clock), counting
// shrink_count each time and returning memory to the OS only when the free heap holds at
// least max_unfreed_memory_bytes; it stops when the action does.
func TestShrinkHeapEveryInterval(t *testing.T) {
	st := newStore(t)
	clk := clocktest.NewFake(time.Unix(0, 0))
	m := New(&Config{
		RefreshInterval: time.Second,
		Monitors:        []Monitor{{Name: FixedHeap, MaxHeapBytes: 1000}},
		Actions: []Action{{Name: ShrinkHeap, Triggers: []Trigger{{Monitor: FixedHeap, Scaling: 0.9, Saturation: 0.9}},
			ShrinkInterval: 10 * time.Second, MaxUnfreedBytes: 500}},
	}, st, clk)
	defer m.Close()
	var heap, free atomic.Uint64
	m.heap = func() (uint64, bool) { return heap.Load(), true }
	m.heapFree = free.Load
	freed := 0
	m.freeOSMemory = func() { freed++ }
	step := func(d time.Duration, wantCount uint64, wantFreed int) {
		t.Helper()
		clk.Advance(d)
		m.Refresh()
		wantStat(t, st, "overload.envoy.overload_actions.shrink_heap.shrink_count", wantCount)
		if freed != wantFreed {
			t.Errorf("memory returned %d times; want %d", freed, wantFreed)
		}
	}
	heap.Store(100)
	step(0, 0, 0) // not saturated
	heap.Store(950)
	free.Store(600)
	step(time.Second, 1, 1) // saturated: runs at once
	step(5*time.Second, 1, 1)
	free.Store(100) // under max_unfreed_memory_bytes: counted, nothing returned
	step(5*time.Second, 2, 1)
	free.Store(600)
	step(10*time.Second, 3, 2)
	heap.Store(100)
	step(10*time.Second, 3, 2) // the action stopped
}
