package health

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	datav3 "github.com/envoyproxy/go-control-plane/envoy/data/core/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/runtime"
)

const wait = 5 * time.Second

// fakeProber hands every Check to the test through calls; the test answers on the call.
type fakeProber struct {
	calls  chan *call
	mu     sync.Mutex
	closed map[*host.Host]int
}

type call struct {
	h      *host.Host
	ctx    context.Context
	result chan Result
}

func newFakeProber() *fakeProber {
	return &fakeProber{calls: make(chan *call, 16), closed: map[*host.Host]int{}}
}

func (p *fakeProber) Session(h *host.Host) ProbeSession { return &fakeSession{p: p, h: h} }

func (p *fakeProber) closes(h *host.Host) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed[h]
}

type fakeSession struct {
	p *fakeProber
	h *host.Host
}

func (s *fakeSession) Check(ctx context.Context) Result {
	c := &call{h: s.h, ctx: ctx, result: make(chan Result, 1)}
	s.p.calls <- c
	select {
	case r := <-c.result:
		return r
	case <-ctx.Done():
		return failed(Network, ctx.Err())
	}
}

func (s *fakeSession) Close() {
	s.p.mu.Lock()
	s.p.closed[s.h]++
	s.p.mu.Unlock()
}

type change struct {
	h       *host.Host
	changed bool
}

// harness runs a Checker on a fake clock with a fake prober.
type harness struct {
	t       *testing.T
	clk     *clocktest.Fake
	prober  *fakeProber
	st      *Stats
	c       *Checker
	changes chan change
	events  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var epoch = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

func spec(mod func(*config.HealthCheck)) *config.HealthCheck {
	s := &config.HealthCheck{
		Timeout:                  time.Second,
		Interval:                 10 * time.Second,
		UnhealthyThreshold:       3,
		HealthyThreshold:         2,
		ReuseConnection:          true,
		NoTrafficInterval:        60 * time.Second,
		NoTrafficHealthyInterval: 60 * time.Second,
		UnhealthyInterval:        10 * time.Second,
		UnhealthyEdgeInterval:    10 * time.Second,
		HealthyEdgeInterval:      10 * time.Second,
		Kind:                     config.TCPHealthCheckKind,
		TCP:                      &config.TCPHealthCheck{},
	}
	if mod != nil {
		mod(s)
	}
	return s
}

func newHarness(t *testing.T, s *config.HealthCheck, mod func(*Options)) *harness {
	t.Helper()
	hs := &harness{t: t, clk: clocktest.NewFake(epoch), prober: newFakeProber(), st: &Stats{},
		changes: make(chan change, 64), events: &syncBuffer{}}
	opts := Options{
		ClusterName: "web",
		Stats:       hs.st,
		Clock:       hs.clk,
		Prober:      hs.prober,
		Rand:        func() uint64 { return 0 },
		EventLog:    hs.events,
		OnChange:    func(h *host.Host, changed bool) { hs.changes <- change{h, changed} },
	}
	if mod != nil {
		mod(&opts)
	}
	c, err := New(s, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	hs.c = c
	t.Cleanup(func() { c.Close() })
	return hs
}

func newHost(t testing.TB, addr string, flags host.HealthFlag) *host.Host {
	t.Helper()
	h, err := host.New(host.Config{Address: addr, Health: flags, Locality: host.Locality{Zone: "z1"}})
	if err != nil {
		t.Fatalf("host.New: %v", err)
	}
	return h
}

func (hs *harness) nextCall() *call {
	hs.t.Helper()
	select {
	case c := <-hs.prober.calls:
		return c
	case <-time.After(wait):
		hs.t.Fatalf("no check started within %v", wait)
		return nil
	}
}

func (hs *harness) nextChange() change {
	hs.t.Helper()
	select {
	case ch := <-hs.changes:
		return ch
	case <-time.After(wait):
		hs.t.Fatalf("no OnChange within %v", wait)
		return change{}
	}
}

// check waits for the next check, answers it and waits for its OnChange.
func (hs *harness) check(r Result) change {
	hs.t.Helper()
	hs.nextCall().result <- r
	return hs.nextChange()
}

// advanceToNext moves the fake clock to the next timer and returns the delay it waited.
func (hs *harness) advanceToNext() time.Duration {
	hs.t.Helper()
	d, ok := hs.clk.Next()
	if !ok {
		hs.t.Fatalf("no timer pending")
	}
	hs.clk.Advance(d)
	return d
}

var (
	ok      = Result{Outcome: Succeeded}
	degr    = Result{Outcome: SucceededDegraded}
	netFail = Result{Outcome: Failed, Failure: Network, Err: errors.New("refused")}
	badCode = Result{Outcome: Failed, Failure: Active, Err: errors.New("503")}
	retry   = Result{Outcome: Failed, Failure: Active, Retriable: true}
)

func TestMain(m *testing.M) {
	if upstreamMain() {
		return
	}
	goleak.VerifyTestMain(m)
}

func TestThresholds(t *testing.T) {
	type step struct {
		r       Result
		want    host.HealthFlag
		changed bool
	}
	for _, tc := range []struct {
		name  string
		start host.HealthFlag
		steps []step
	}{
		{"first success decides at once", host.FailedActiveHC, []step{{ok, 0, true}}},
		{"first failure keeps failed", host.FailedActiveHC, []step{{netFail, host.FailedActiveHC, false}}},
		{"network failures need the threshold", host.FailedActiveHC, []step{
			{ok, 0, true}, {netFail, 0, false}, {netFail, 0, false}, {netFail, host.FailedActiveHC, true}}},
		{"a success resets the failure count", 0, []step{
			{netFail, 0, false}, {netFail, 0, false}, {ok, 0, false}, {netFail, 0, false}, {netFail, 0, false},
			{netFail, host.FailedActiveHC, true}}},
		{"active failure fails at once", 0, []step{{ok, 0, false}, {badCode, host.FailedActiveHC, true}}},
		{"retriable statuses count", 0, []step{{retry, 0, false}, {retry, 0, false}, {retry, host.FailedActiveHC, true}}},
		{"healthy threshold", 0, []step{
			{badCode, host.FailedActiveHC, true}, {ok, host.FailedActiveHC, false}, {netFail, host.FailedActiveHC, false},
			{ok, host.FailedActiveHC, false}, {ok, 0, true}}},
		{"pending cleared by first result", host.FailedActiveHC | host.PendingActiveHC, []step{
			{netFail, host.FailedActiveHC, true}}},
		{"degraded flips", 0, []step{
			{degr, host.DegradedActiveHC, true}, {degr, host.DegradedActiveHC, false}, {ok, 0, true}}},
		{"degraded stays while failed", 0, []step{
			{degr, host.DegradedActiveHC, true}, {badCode, host.FailedActiveHC | host.DegradedActiveHC, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, spec(nil), nil)
			h := newHost(t, "127.0.0.1:1", tc.start)
			hs.c.SetHosts([]*host.Host{h})
			hs.c.Start()
			for i, st := range tc.steps {
				if i > 0 {
					hs.advanceToNext()
				}
				ch := hs.check(st.r)
				if got := h.HealthFlags(); got != st.want || ch.changed != st.changed {
					t.Fatalf("step %d (%+v): flags %v, changed %v; want %v, %v", i, st.r, got, ch.changed, st.want, st.changed)
				}
			}
		})
	}
}

func TestStats(t *testing.T) {
	hs := newHarness(t, spec(nil), nil)
	a := newHost(t, "127.0.0.1:1", host.FailedActiveHC)
	b := newHost(t, "127.0.0.1:2", 0)
	hs.c.SetHosts([]*host.Host{a})
	if got := hs.st.Healthy.Value(); got != 0 {
		t.Errorf("healthy gauge = %d with one failed host; want 0", got)
	}
	hs.c.Start()
	hs.check(degr)
	hs.c.SetHosts([]*host.Host{a, b})
	hs.check(netFail)
	got := map[string]uint64{
		"attempt": hs.st.Attempt.Value(), "success": hs.st.Success.Value(), "failure": hs.st.Failure.Value(),
		"network_failure": hs.st.NetworkFailure.Value(), "healthy": hs.st.Healthy.Value(), "degraded": hs.st.Degraded.Value(),
	}
	want := map[string]uint64{"attempt": 2, "success": 1, "failure": 1, "network_failure": 1, "healthy": 2, "degraded": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	hs.c.SetHosts([]*host.Host{b})
	if h, d := hs.st.Healthy.Value(), hs.st.Degraded.Value(); h != 1 || d != 0 {
		t.Errorf("after removing the degraded host: healthy %d, degraded %d; want 1, 0", h, d)
	}
	if n := hs.prober.closes(a); n != 1 {
		t.Errorf("removed host's probe closed %d times; want 1", n)
	}
}

func TestIntervals(t *testing.T) {
	s := spec(func(s *config.HealthCheck) {
		s.Interval = 10 * time.Second
		s.UnhealthyInterval = 20 * time.Second
		s.UnhealthyEdgeInterval = 3 * time.Second
		s.HealthyEdgeInterval = 4 * time.Second
		s.NoTrafficInterval = 60 * time.Second
		s.NoTrafficHealthyInterval = 90 * time.Second
	})
	type step struct {
		r    Result
		want time.Duration
	}
	for _, tc := range []struct {
		name    string
		traffic bool
		steps   []step
	}{
		{"healthy", true, []step{{ok, 10 * time.Second}, {ok, 10 * time.Second}}},
		{"unhealthy edge then unhealthy", true, []step{
			{ok, 10 * time.Second}, {netFail, 3 * time.Second}, {netFail, 3 * time.Second}, {netFail, 20 * time.Second},
			{netFail, 20 * time.Second}}},
		{"healthy edge then healthy", true, []step{
			{badCode, 20 * time.Second}, {ok, 4 * time.Second}, {ok, 10 * time.Second}}},
		{"no traffic", false, []step{
			{ok, 90 * time.Second}, {netFail, 60 * time.Second}, {ok, 90 * time.Second}, {badCode, 60 * time.Second},
			{ok, 60 * time.Second}, {ok, 90 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			traffic := tc.traffic
			hs := newHarness(t, s, func(o *Options) { o.HadTraffic = func() bool { return traffic } })
			h := newHost(t, "127.0.0.1:1", host.FailedActiveHC)
			hs.c.SetHosts([]*host.Host{h})
			hs.c.Start()
			for i, st := range tc.steps {
				hs.check(st.r)
				if got := hs.advanceToNext(); got != st.want {
					t.Fatalf("step %d: next check after %v; want %v", i, got, st.want)
				}
			}
		})
	}
}

func TestJitter(t *testing.T) {
	staticRuntime := func(t *testing.T, values map[string]any) RuntimeSource {
		rt, err := runtime.New(runtime.Config{Layers: []runtime.LayerConfig{{Name: "static", Static: values}}})
		if err != nil {
			t.Fatalf("runtime.New: %v", err)
		}
		return rt
	}
	for _, tc := range []struct {
		name    string
		mod     func(*config.HealthCheck)
		rand    uint64
		runtime map[string]any
		first   time.Duration // delay of the first check
		next    time.Duration // delay after a passing check
	}{
		{"none", nil, 12345, nil, 0, 10 * time.Second},
		{"interval_jitter", func(s *config.HealthCheck) { s.IntervalJitter = time.Second }, 1700, nil, 0, 10*time.Second + 700*time.Millisecond},
		{"interval_jitter_percent", func(s *config.HealthCheck) { s.IntervalJitterPercent = 10 }, 1700, nil, 0, 10700 * time.Millisecond},
		{"both", func(s *config.HealthCheck) { s.IntervalJitterPercent = 10; s.IntervalJitter = time.Second },
			1500, nil, 0, 11 * time.Second},
		{"initial_jitter", func(s *config.HealthCheck) { s.InitialJitter = 2 * time.Second }, 2500, nil, 500 * time.Millisecond, 10 * time.Second},
		{"runtime max_interval", nil, 0, map[string]any{"health_check": map[string]any{"max_interval": 4000.0}}, 0, 4 * time.Second},
		{"runtime min_interval", nil, 0, map[string]any{"health_check": map[string]any{"min_interval": 15000.0}}, 0, 15 * time.Second},
		{"initial jitter raised to min_interval", func(s *config.HealthCheck) { s.InitialJitter = time.Second }, 0,
			map[string]any{"health_check": map[string]any{"min_interval": 3000.0}}, 3 * time.Second, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rand
			hs := newHarness(t, spec(tc.mod), func(o *Options) {
				o.Rand = func() uint64 { return r }
				if tc.runtime != nil {
					o.Runtime = staticRuntime(t, tc.runtime)
				}
			})
			h := newHost(t, "127.0.0.1:1", host.FailedActiveHC)
			hs.c.SetHosts([]*host.Host{h})
			hs.c.Start()
			if tc.first > 0 {
				if got := hs.advanceToNext(); got != tc.first {
					t.Errorf("first check after %v; want %v", got, tc.first)
				}
			}
			hs.check(ok)
			if got := hs.advanceToNext(); got != tc.next {
				t.Errorf("next check after %v; want %v", got, tc.next)
			}
		})
	}
}

func TestTimeoutIsNetworkFailure(t *testing.T) {
	hs := newHarness(t, spec(func(s *config.HealthCheck) { s.UnhealthyThreshold = 2 }), nil)
	h := newHost(t, "127.0.0.1:1", host.FailedActiveHC)
	hs.c.SetHosts([]*host.Host{h})
	hs.c.Start()
	hs.check(ok)
	for i, want := range []host.HealthFlag{0, host.FailedActiveHC | host.ActiveHCTimeout} {
		hs.advanceToNext()
		c := hs.nextCall()
		hs.clk.Advance(time.Second) // the timeout
		hs.nextChange()
		select {
		case <-c.ctx.Done():
		case <-time.After(wait):
			t.Fatalf("timed-out check's context not cancelled")
		}
		if got := h.HealthFlags(); got != want {
			t.Errorf("after timeout %d: flags %v; want %v", i+1, got, want)
		}
	}
	if n := hs.st.NetworkFailure.Value(); n != 2 {
		t.Errorf("network_failure = %d; want 2", n)
	}
	// A later non-timeout failure clears /active_hc_timeout; a late answer to a timed-out check
	// is ignored.
	hs.advanceToNext()
	hs.check(netFail)
	if got := h.HealthFlags(); got != host.FailedActiveHC {
		t.Errorf("after a network failure: flags %v; want /failed_active_hc", got)
	}
	hs.advanceToNext()
	hs.check(ok)
	hs.advanceToNext()
	hs.check(ok)
	if got := h.HealthFlags(); got != 0 {
		t.Errorf("after healthy_threshold passes: flags %v; want healthy", got)
	}
}

func TestPassiveFailure(t *testing.T) {
	hs := newHarness(t, spec(nil), nil)
	h := newHost(t, "127.0.0.1:1", host.FailedActiveHC)
	hs.c.SetHosts([]*host.Host{h})
	hs.c.Start()
	hs.check(ok)
	hs.c.ReportPassiveFailure(h, true)
	if ch := hs.nextChange(); !ch.changed {
		t.Errorf("passive failure: changed = false; want true")
	}
	if got, want := h.HealthFlags(), host.FailedActiveHC|host.ExcludedViaImmediateHCFail; got != want {
		t.Errorf("flags %v; want %v", got, want)
	}
	if n := hs.st.PassiveFailure.Value(); n != 1 {
		t.Errorf("passive_failure = %d; want 1", n)
	}
	// Two passes (healthy_threshold) clear both flags.
	for range 2 {
		hs.advanceToNext()
		hs.check(ok)
	}
	if got := h.HealthFlags(); got != 0 {
		t.Errorf("after recovery: flags %v; want healthy", got)
	}
}

func TestImmediateFailFlag(t *testing.T) {
	hs := newHarness(t, spec(nil), nil)
	h := newHost(t, "127.0.0.1:1", 0)
	hs.c.SetHosts([]*host.Host{h})
	hs.c.Start()
	hs.check(Result{Outcome: Failed, Failure: Active, ImmediateFail: true})
	if got, want := h.HealthFlags(), host.FailedActiveHC|host.ExcludedViaImmediateHCFail; got != want {
		t.Errorf("flags %v; want %v", got, want)
	}
}

func TestRemovedBeforeFirstCheck(t *testing.T) {
	hs := newHarness(t, spec(func(s *config.HealthCheck) { s.InitialJitter = time.Minute }), func(o *Options) {
		o.Rand = func() uint64 { return 30000 }
	})
	h := newHost(t, "127.0.0.1:1", host.FailedActiveHC)
	hs.c.SetHosts([]*host.Host{h})
	hs.c.Start()
	if n := hs.clk.Pending(); n != 1 {
		t.Fatalf("pending timers = %d; want the first check's", n)
	}
	hs.c.SetHosts(nil)
	if ch := hs.nextChange(); ch.h != h || ch.changed {
		t.Errorf("OnChange(%v, %v); want (%v, false) for a host removed before its first check", ch.h, ch.changed, h)
	}
	if n := hs.clk.Pending(); n != 0 {
		t.Errorf("pending timers after removal = %d; want 0", n)
	}
	if n := hs.prober.closes(h); n != 1 {
		t.Errorf("probe closed %d times; want 1", n)
	}
}

func TestRemovedDuringCheck(t *testing.T) {
	hs := newHarness(t, spec(nil), nil)
	h := newHost(t, "127.0.0.1:1", host.FailedActiveHC)
	hs.c.SetHosts([]*host.Host{h})
	hs.c.Start()
	c := hs.nextCall()
	hs.c.SetHosts(nil)
	hs.nextChange()
	select {
	case <-c.ctx.Done():
	case <-time.After(wait):
		t.Fatal("check of a removed host not cancelled")
	}
	if err := hs.c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := hs.prober.closes(h); n != 1 {
		t.Errorf("probe closed %d times; want 1", n)
	}
	if h.HealthFlags() != host.FailedActiveHC {
		t.Errorf("flags changed by a cancelled check: %v", h.HealthFlags())
	}
}

func TestEventLog(t *testing.T) {
	hs := newHarness(t, spec(func(s *config.HealthCheck) {
		s.UnhealthyThreshold = 1
		s.AlwaysLogHealthCheckFailures = true
	}), nil)
	h := newHost(t, "127.0.0.1:8080", host.FailedActiveHC)
	hs.c.SetHosts([]*host.Host{h})
	hs.c.Start()
	hs.check(netFail) // first check fails: health_check_failure_event, first_check true
	hs.advanceToNext()
	hs.check(ok) // add_healthy_event
	hs.advanceToNext()
	hs.check(degr) // degraded_healthy_host
	hs.advanceToNext()
	hs.check(netFail) // eject_unhealthy_event and health_check_failure_event

	var got []string
	sc := bufio.NewScanner(bytes.NewBufferString(hs.events.String()))
	for sc.Scan() {
		var ev datav3.HealthCheckEvent
		if err := protojson.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q is not a HealthCheckEvent: %v", sc.Text(), err)
		}
		if ev.GetClusterName() != "web" || ev.GetHost().GetSocketAddress().GetPortValue() != 8080 ||
			ev.GetHealthCheckerType() != datav3.HealthCheckerType_TCP || ev.GetLocality().GetZone() != "z1" ||
			!ev.GetTimestamp().AsTime().Equal(hs.clk.Now()) && ev.GetTimestamp().AsTime().Before(epoch) {
			t.Errorf("event fields wrong: %s", sc.Text())
		}
		got = append(got, fmt.Sprintf("%T", ev.GetEvent()))
	}
	want := []string{
		"*corev3.HealthCheckEvent_HealthCheckFailureEvent",
		"*corev3.HealthCheckEvent_AddHealthyEvent",
		"*corev3.HealthCheckEvent_DegradedHealthyHost",
		"*corev3.HealthCheckEvent_EjectUnhealthyEvent",
		"*corev3.HealthCheckEvent_HealthCheckFailureEvent",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s\nlog:\n%s", diff, hs.events.String())
	}
	first := bytes.SplitN([]byte(hs.events.String()), []byte("\n"), 2)[0]
	wantFirst := `{"health_checker_type":"TCP","host":{"socket_address":{"protocol":"TCP","address":"127.0.0.1","port_value":8080,"resolver_name":"","ipv4_compat":false,"network_namespace_filepath":""}},"cluster_name":"web","health_check_failure_event":{"failure_type":"NETWORK","first_check":true,"http_status_code":0},"timestamp":"2026-11-22T08:00:00Z","locality":{"region":"","zone":"z1","sub_zone":""}}`
	if string(first) != wantFirst {
		t.Errorf("first line = %s\nwant         %s", first, wantFirst)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	hs := newHarness(t, spec(nil), nil)
	hosts := []*host.Host{newHost(t, "127.0.0.1:1", host.FailedActiveHC), newHost(t, "127.0.0.1:2", host.FailedActiveHC)}
	hs.c.SetHosts(hosts)
	hs.c.Start()
	hs.nextCall()
	hs.nextCall()
	if err := hs.c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := hs.c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	hs.c.SetHosts(hosts[:1])
	hs.c.Start()
	hs.clk.Advance(time.Hour)
	select {
	case c := <-hs.prober.calls:
		t.Fatalf("check of %v after Close", c.h)
	default:
	}
	for _, h := range hosts {
		if n := hs.prober.closes(h); n != 1 {
			t.Errorf("%v: probe closed %d times; want 1", h, n)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, Options{Stats: &Stats{}}); err == nil {
		t.Errorf("New(nil spec) succeeded")
	}
	if _, err := New(spec(nil), Options{}); err == nil {
		t.Errorf("New without Stats succeeded")
	}
	if _, err := New(spec(func(s *config.HealthCheck) { s.EventLogPath = t.TempDir() + "/no/such/dir/log" }), Options{Stats: &Stats{}}); err == nil {
		t.Errorf("New with an unopenable event_log_path succeeded")
	}
}

func TestInitialFlags(t *testing.T) {
	for _, tc := range []struct {
		later, ignore bool
		want          host.HealthFlag
	}{
		{false, false, host.FailedActiveHC},
		{false, true, host.FailedActiveHC},
		{true, false, host.FailedActiveHC},
		{true, true, host.FailedActiveHC | host.PendingActiveHC},
	} {
		t.Run(fmt.Sprintf("later=%v,ignore=%v", tc.later, tc.ignore), func(t *testing.T) {
			if got := InitialFlags(tc.later, tc.ignore); got != tc.want {
				t.Errorf("InitialFlags = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestOnResult(t *testing.T) {
	results := make(chan bool, 8)
	hs := newHarness(t, spec(nil), func(o *Options) {
		o.OnResult = func(_ *host.Host, passed bool) { results <- passed }
	})
	h := newHost(t, "127.0.0.1:1", host.FailedActiveHC)
	hs.c.SetHosts([]*host.Host{h})
	hs.c.Start()
	hs.check(ok)
	hs.advanceToNext()
	hs.check(netFail)
	hs.c.ReportPassiveFailure(h, false)
	hs.nextChange()
	var got []bool
	for range 3 {
		got = append(got, <-results)
	}
	if diff := cmp.Diff([]bool{true, false, false}, got); diff != "" {
		t.Errorf("OnResult passed values (-want +got):\n%s", diff)
	}
}
