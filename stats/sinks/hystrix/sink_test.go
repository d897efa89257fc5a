package hystrix

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/stats"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixedClock never moves: the store never ticks and the tests flush it themselves.
func fixedClock() *clocktest.Fake { return clocktest.NewFake(time.Unix(1735689600, 0)) }

// upstream holds the stats a router and a cluster would keep for one
// cluster, named as Envoy names them.
type upstream struct {
	Rq2xx           stats.Counter   `stat:"upstream_rq_2xx"`
	Rq4xx           stats.Counter   `stat:"upstream_rq_4xx"`
	Rq5xx           stats.Counter   `stat:"upstream_rq_5xx"`
	Retry4xx        stats.Counter   `stat:"retry.upstream_rq_4xx"`
	Retry5xx        stats.Counter   `stat:"retry.upstream_rq_5xx"`
	Timeout         stats.Counter   `stat:"upstream_rq_timeout"`
	PerTryTimeout   stats.Counter   `stat:"upstream_rq_per_try_timeout"`
	PendingOverflow stats.Counter   `stat:"upstream_rq_pending_overflow"`
	RqTotal         stats.Counter   `stat:"upstream_rq_total"` // not read: Envoy sums the parts
	MembershipTotal stats.Gauge     `stat:"membership_total,never_import"`
	RqTime          stats.Histogram `stat:"upstream_rq_time,unit=ms"`
}

type fixture struct {
	store *stats.Store
	sink  *Sink
}

func newFixture(t testing.TB, numBuckets int64) *fixture {
	t.Helper()
	store, err := stats.New(stats.Config{Clock: fixedClock(), FlushInterval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := New(&metricsv3.HystrixSink{NumBuckets: numBuckets}, store.FlushInterval())
	if err != nil {
		t.Fatal(err)
	}
	store.AddSink(sink)
	t.Cleanup(sink.Close)
	return &fixture{store: store, sink: sink}
}

func (f *fixture) cluster(name string) *upstream {
	u := new(upstream)
	f.store.Register("cluster."+name+".", u)
	return u
}

// chanWriter hands every Write to the test as one block.
type chanWriter chan []byte

func (c chanWriter) Write(p []byte) (int, error) {
	c <- append([]byte(nil), p...)
	return len(p), nil
}

// viewer is a Stream running on its own goroutine, as a request would.
type viewer struct {
	blocks chanWriter
	cancel context.CancelFunc
	done   chan error
}

func (f *fixture) connect(t *testing.T) *viewer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	v := &viewer{blocks: make(chanWriter, 64), cancel: cancel, done: make(chan error, 1)}
	before := f.sink.Clients()
	go func() { v.done <- f.sink.Stream(ctx, v.blocks, nil) }()
	waitClients(t, f.sink, before+1)
	return v
}

// waitClients waits until the sink has n clients. Registration happens on
// the Stream goroutine; this yields to it without sleeping.
func waitClients(t testing.TB, s *Sink, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.Clients() != n {
		if time.Now().After(deadline) {
			t.Fatalf("Clients() = %d after 5s; want %d", s.Clients(), n)
		}
		runtime.Gosched()
	}
}

func (v *viewer) next(t *testing.T) string {
	t.Helper()
	select {
	case b := <-v.blocks:
		return string(b)
	case <-time.After(5 * time.Second):
		t.Fatal("no frames within 5s")
		return ""
	}
}

func (v *viewer) close(t *testing.T) {
	t.Helper()
	v.cancel()
	select {
	case err := <-v.done:
		if err != nil {
			t.Errorf("Stream() = %v; want nil after cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stream did not return within 5s of cancel")
	}
}

// idleFrame is §22's example frame, byte for byte.
const idleFrame = `data: {"type": "HystrixCommand", "name": "service_a", "group": "NA", "currentTime": 1735689600, "isCircuitBreakerOpen": false, "errorPercentage": 0, "errorCount": 0, "requestCount": 0, "rollingCountCollapsedRequests": 0, "rollingCountExceptionsThrown": 0, "rollingCountFailure": 0, "rollingCountFallbackFailure": 0, "rollingCountFallbackRejection": 0, "rollingCountFallbackSuccess": 0, "rollingCountResponsesFromCache": 0, "rollingCountSemaphoreRejected": 0, "rollingCountShortCircuited": 0, "rollingCountSuccess": 0, "rollingCountThreadPoolRejected": 0, "rollingCountTimeout": 0, "rollingCountBadRequests": 0, "currentConcurrentExecutionCount": 0, "latencyExecute_mean": "null", "latencyExecute": {}, "propertyValue_circuitBreakerRequestVolumeThreshold": 0, "propertyValue_circuitBreakerSleepWindowInMilliseconds": 0, "propertyValue_circuitBreakerErrorThresholdPercentage": 0, "propertyValue_circuitBreakerForceOpen": false, "propertyValue_circuitBreakerForceClosed": true, "propertyValue_executionIsolationStrategy": "SEMAPHORE", "propertyValue_executionIsolationThreadTimeoutInMilliseconds": 0, "propertyValue_executionIsolationThreadInterruptOnTimeout": false, "propertyValue_executionIsolationSemaphoreMaxConcurrentRequests": 1024, "propertyValue_fallbackIsolationSemaphoreMaxConcurrentRequests": 0, "propertyValue_requestCacheEnabled": false, "propertyValue_requestLogEnabled": true, "reportingHosts": 1, "propertyValue_metricsRollingStatisticalWindowInMilliseconds": 5000}

data: {"currentPoolSize": 0, "rollingMaxActiveThreads": 0, "currentActiveCount": 0, "currentCompletedTaskCount": 0, "propertyValue_queueSizeRejectionThreshold": 1024, "type": "HystrixThreadPool", "reportingHosts": 1, "propertyValue_metricsRollingStatisticalWindowInMilliseconds": 5000, "name": "service_a", "currentLargestPoolSize": 0, "currentCorePoolSize": 0, "currentQueueSize": 0, "currentTaskCount": 0, "rollingCountThreadsExecuted": 0, "currentMaximumPoolSize": 0}

:

`

func TestIdleClusterMatchesReference(t *testing.T) {
	f := newFixture(t, 0)
	f.cluster("service_a").MembershipTotal.Set(1)
	v := f.connect(t)
	defer v.close(t)
	f.store.Flush()
	if got := v.next(t); got != idleFrame {
		t.Errorf("frame mismatch (-want +got):\n%s", cmp.Diff(idleFrame, got))
	}
}

func TestLatency(t *testing.T) {
	f := newFixture(t, 0)
	u := f.cluster("service_a")
	for ms := uint64(1); ms <= 9; ms++ {
		u.RqTime.Record(ms)
	}
	v := f.connect(t)
	defer v.close(t)
	f.store.Flush()
	// Envoy's circllhist quantiles of 1..9 ms, one sample each (bins are
	// [v, v+0.1)), printed with %f.
	const want = `"latencyExecute": {"0": 1.000000, "25": 3.025000, "50": 5.050000, "75": 7.075000, "90": 9.010000, "95": 9.055000, "99": 9.091000, "99.5": 9.095500, "100": 9.100000}`
	if got := v.next(t); !strings.Contains(got, want) {
		t.Errorf("frame = %s\nwant it to contain %s", got, want)
	}
	// The next interval has no samples: NaN quantiles are left out.
	f.store.Flush()
	if got := v.next(t); !strings.Contains(got, `"latencyExecute": {}`) {
		t.Errorf("idle interval frame = %s\nwant latencyExecute {}", got)
	}
}

func TestLatencyFormatMatchesReference(t *testing.T) {
	q := []float64{1, 2.25, 4.5, 6.75, 8.1, 8.55, 8.91, 8.955, 9}
	const want = `{"0": 1.000000, "25": 2.250000, "50": 4.500000, "75": 6.750000, "90": 8.100000, "95": 8.550000, "99": 8.910000, "99.5": 8.955000, "100": 9.000000}`
	if got := string(appendLatency(nil, q)); got != want {
		t.Errorf("appendLatency() = %s; want %s", got, want)
	}
	q[0], q[8] = math.NaN(), math.NaN()
	const wantNaN = `{"25": 2.250000, "50": 4.500000, "75": 6.750000, "90": 8.100000, "95": 8.550000, "99": 8.910000, "99.5": 8.955000}`
	if got := string(appendLatency(nil, q)); got != wantNaN {
		t.Errorf("appendLatency() with NaNs = %s; want %s", got, wantNaN)
	}
}

// command is the part of a HystrixCommand the rolling-window test checks.
type command struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	ErrorPct   uint64 `json:"errorPercentage"`
	Errors     uint64 `json:"errorCount"`
	Requests   uint64 `json:"requestCount"`
	Failure    uint64 `json:"rollingCountFailure"`
	Rejected   uint64 `json:"rollingCountSemaphoreRejected"`
	Success    uint64 `json:"rollingCountSuccess"`
	Timeouts   uint64 `json:"rollingCountTimeout"`
	Reporting  uint64 `json:"reportingHosts"`
	MaxPending uint64 `json:"propertyValue_executionIsolationSemaphoreMaxConcurrentRequests"`
}

// parseBlock splits one flush's block into its events, checks the framing
// and decodes the HystrixCommand events by cluster name.
func parseBlock(t *testing.T, block string) map[string]command {
	t.Helper()
	body, ok := strings.CutSuffix(block, ping)
	if !ok {
		t.Fatalf("block does not end with the keep-alive ping: %q", block)
	}
	out := map[string]command{}
	for _, ev := range strings.SplitAfter(body, "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || !strings.HasSuffix(data, "}\n\n") {
			t.Fatalf("malformed event %q", ev)
		}
		var c command
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event is not JSON: %v\n%s", err, data)
		}
		if c.Type == "HystrixCommand" {
			out[c.Name] = c
		}
	}
	return out
}

func TestRollingWindow(t *testing.T) {
	f := newFixture(t, 2) // a window of 2 flushes: wraps on the third
	a := f.cluster("service_a")
	b := f.cluster("b.dotted.name") // dots in a name must not confuse the lookup
	a.MembershipTotal.Set(3)
	b.MembershipTotal.Set(1)
	f.sink.SetMaxPendingRequests(func(c string) uint64 {
		if c == "service_a" {
			return 7
		}
		return 1024
	})
	v := f.connect(t)
	defer v.close(t)

	// Each step changes counters, then flushes; want is service_a's
	// rolling counts after that flush.
	steps := []struct {
		name   string
		change func()
		want   command
	}{
		{
			name: "first flush fills the window",
			change: func() {
				a.Rq2xx.Add(10)
				a.Rq5xx.Add(3)
			},
			want: command{},
		},
		{
			name: "one interval",
			change: func() {
				a.Rq2xx.Add(5)
				a.Rq5xx.Add(2)
				a.Retry5xx.Inc()
				a.Rq4xx.Inc()
				for _, ms := range []uint64{12, 30, 30, 250} {
					a.RqTime.Record(ms)
				}
			},
			// errors 2+1+1 = 4, total 4+5 = 9, 100*4/9 = 44
			want: command{ErrorPct: 44, Errors: 4, Requests: 9, Failure: 4, Success: 5},
		},
		{
			name: "two intervals: a timeout is a 5xx taken out of errors",
			change: func() {
				a.Rq2xx.Add(2)
				a.Timeout.Inc()
				a.Rq5xx.Inc()
				a.PerTryTimeout.Inc()
			},
			// since flush 1: errors 4, timeouts 2, success 7, total 13
			want: command{ErrorPct: 46, Errors: 4, Requests: 13, Failure: 4, Success: 7, Timeouts: 2},
		},
		{
			name: "window wraps: flush 1's interval leaves",
			change: func() {
				a.PendingOverflow.Add(4)
				a.Retry4xx.Inc()
				b.RqTime.Record(1500)
			},
			// since flush 2: errors 1 (retry 4xx), timeouts 2, success 2,
			// rejected 4, total 9; 100*7/9 = 77
			want: command{ErrorPct: 77, Errors: 1, Requests: 9, Failure: 1, Success: 2, Timeouts: 2, Rejected: 4},
		},
		{
			name:   "idle interval",
			change: func() {},
			// since flush 3: rejected 4, errors 1
			want: command{ErrorPct: 100, Errors: 1, Requests: 5, Failure: 1, Rejected: 4},
		},
		{
			name:   "window drains",
			change: func() {},
			want:   command{},
		},
		{
			name: "reset counters: values went backwards, rolling counts are 0",
			change: func() {
				a.Rq2xx.Inc()
				f.store.ResetCounters()
			},
			want: command{},
		},
		{
			name:   "after a reset: 0 while the window still holds pre-reset values",
			change: func() { a.Rq2xx.Add(3) },
			want:   command{},
		},
		{
			name:   "a window after the reset counts again",
			change: func() { a.Rq2xx.Inc() },
			want:   command{Requests: 4, Success: 4},
		},
	}
	var golden bytes.Buffer
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change()
			f.store.Flush()
			block := v.next(t)
			golden.WriteString(block)
			cmds := parseBlock(t, block)
			if diff := cmp.Diff([]string{"b.dotted.name", "service_a"}, keys(cmds)); diff != "" {
				t.Fatalf("clusters (-want +got):\n%s", diff)
			}
			got := cmds["service_a"]
			got.Type, got.Name = "", ""
			st.want.Reporting, st.want.MaxPending = 3, 7
			if diff := cmp.Diff(st.want, got); diff != "" {
				t.Errorf("service_a (-want +got):\n%s", diff)
			}
			if got, want := cmds["b.dotted.name"], (command{Type: "HystrixCommand", Name: "b.dotted.name", Reporting: 1, MaxPending: 1024}); got != want {
				t.Errorf("b.dotted.name = %+v; want %+v", got, want)
			}
		})
	}
	checkGolden(t, "rolling.golden", golden.Bytes())
}

func keys(m map[string]command) []string { return slices.Sorted(maps.Keys(m)) }

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s mismatch (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

func TestClusterOrderAndRemoval(t *testing.T) {
	f := newFixture(t, 0)
	for _, name := range []string{"zeta", "alpha", "mid"} {
		f.cluster(name)
	}
	reg := f.store.Register("cluster.gone.", new(upstream))
	f.store.Register("listener.x.", new(upstream)) // not a cluster
	v := f.connect(t)
	defer v.close(t)
	f.store.Flush()
	if got, want := eventNames(v.next(t)), []string{"alpha", "alpha", "gone", "gone", "mid", "mid", "zeta", "zeta"}; !cmp.Equal(got, want) {
		t.Errorf("events by name = %v; want %v", got, want)
	}
	reg.Unregister()
	f.store.Flush()
	if got, want := eventNames(v.next(t)), []string{"alpha", "alpha", "mid", "mid", "zeta", "zeta"}; !cmp.Equal(got, want) {
		t.Errorf("after removal, events by name = %v; want %v", got, want)
	}
	f.sink.mu.Lock()
	n := len(f.sink.windows)
	f.sink.mu.Unlock()
	if n != 3 {
		t.Errorf("windows kept = %d; want 3 (the removed cluster's window dropped)", n)
	}
}

func eventNames(block string) []string {
	var names []string
	for _, ev := range strings.Split(block, "\n\n") {
		var e struct{ Name string }
		if data, ok := strings.CutPrefix(ev, "data: "); ok && json.Unmarshal([]byte(data), &e) == nil {
			names = append(names, e.Name)
		}
	}
	return names
}

func TestLastClientLeavingResetsWindow(t *testing.T) {
	f := newFixture(t, 0)
	a := f.cluster("service_a")
	v := f.connect(t)
	f.store.Flush()
	v.next(t)
	a.Rq2xx.Add(4)
	f.store.Flush()
	if got := parseBlock(t, v.next(t))["service_a"].Requests; got != 4 {
		t.Fatalf("requestCount = %d; want 4", got)
	}
	v.close(t)
	if got := f.sink.Clients(); got != 0 {
		t.Fatalf("Clients() = %d after the client left; want 0", got)
	}
	a.Rq2xx.Add(4)
	f.store.Flush() // nobody watches: no sample taken

	v = f.connect(t)
	defer v.close(t)
	f.store.Flush()
	if got := parseBlock(t, v.next(t))["service_a"].Requests; got != 0 {
		t.Errorf("first requestCount after reconnecting = %d; want 0 (a fresh window)", got)
	}
}

func TestNoClientNoWork(t *testing.T) {
	f := newFixture(t, 0)
	f.cluster("service_a")
	f.store.Flush()
	f.sink.mu.Lock()
	n, idx := len(f.sink.windows), f.sink.index
	f.sink.mu.Unlock()
	if n != 0 || idx != DefaultNumBuckets {
		t.Errorf("after a flush with no client: %d windows, index %d; want 0 and %d", n, idx, DefaultNumBuckets)
	}
}

func TestSlowClientDropsFrames(t *testing.T) {
	f := newFixture(t, 0)
	f.cluster("service_a")
	// A writer that blocks until released stands for a client whose
	// socket is full.
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	w := writerFunc(func(p []byte) (int, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return len(p), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.sink.Stream(ctx, w, nil) }()
	waitClients(t, f.sink, 1)
	f.store.Flush()
	<-entered // the client holds one block in Write
	for range ClientBuffer + 5 {
		f.store.Flush() // must not block
	}
	if got, want := f.sink.Dropped(), uint64(5); got != want {
		t.Errorf("Dropped() = %d; want %d", got, want)
	}
	cancel()
	close(release)
	if err := <-done; err != nil {
		t.Errorf("Stream() = %v; want nil", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestWriteErrorEndsStream(t *testing.T) {
	f := newFixture(t, 0)
	f.cluster("service_a")
	errGone := os.ErrClosed
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- f.sink.Stream(ctx, writerFunc(func([]byte) (int, error) { return 0, errGone }), nil)
	}()
	waitClients(t, f.sink, 1)
	f.store.Flush()
	if err := <-done; err != errGone {
		t.Errorf("Stream() = %v; want %v", err, errGone)
	}
	if got := f.sink.Clients(); got != 0 {
		t.Errorf("Clients() = %d; want 0", got)
	}
}

func TestCloseEndsStreams(t *testing.T) {
	f := newFixture(t, 0)
	v1, v2 := f.connect(t), f.connect(t)
	f.sink.Close()
	for _, v := range []*viewer{v1, v2} {
		if err := <-v.done; err != nil {
			t.Errorf("Stream() = %v after Close; want nil", err)
		}
		v.cancel()
	}
	if err := f.sink.Stream(context.Background(), chanWriter(make(chan []byte)), nil); err != ErrClosed {
		t.Errorf("Stream() after Close = %v; want ErrClosed", err)
	}
	f.sink.Close() // twice is harmless
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		cfg      *metricsv3.HystrixSink
		interval time.Duration
		wantErr  string
		wantSize int
		wantMs   int64
	}{
		{name: "nil config takes defaults", wantSize: 11, wantMs: 5000},
		{name: "num_buckets", cfg: &metricsv3.HystrixSink{NumBuckets: 3}, interval: 250 * time.Millisecond, wantSize: 4, wantMs: 250},
		{name: "negative", cfg: &metricsv3.HystrixSink{NumBuckets: -1}, wantErr: "hystrix sink: num_buckets = -1; must be >= 0"},
		{name: "too large", cfg: &metricsv3.HystrixSink{NumBuckets: 1 << 40}, wantErr: "hystrix sink: num_buckets = 1099511627776; must be <= 65536"},
		{name: "negative interval", interval: -time.Second, wantErr: "hystrix sink: stats_flush_interval = -1s; must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg, tc.interval)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("New() error = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.windowSize != tc.wantSize || s.flushMs != tc.wantMs {
				t.Errorf("window %d, flush %d ms; want %d, %d", s.windowSize, s.flushMs, tc.wantSize, tc.wantMs)
			}
		})
	}
}

// FuzzCommandJSON checks that any cluster name gives well-formed events.
func FuzzCommandJSON(f *testing.F) {
	for _, s := range []string{"service_a", `a"b\c`, "tab\there", "\xff\xfe", "é.ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		b := appendCommand(nil, commandFields{name: name, latency: []float64{1, 2}})
		b = appendThreadPool(b, name, 1, 2, 3)
		for _, ev := range strings.SplitAfter(string(b), "}\n\n") {
			if ev == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &m); err != nil {
				t.Fatalf("name %q: invalid JSON: %v\n%s", name, err, ev)
			}
			if got, _ := m["name"].(string); !strings.ContainsRune(name, 0xfffd) && utf8.ValidString(name) && got != name {
				t.Errorf("name = %q; want %q", got, name)
			}
		}
	})
}

// TestClusterFoundByTag covers a stats_matcher that rejects
// membership_total: the cluster is still found through the
// envoy.cluster_name tag of its counters, and reports 0 hosts.
func TestClusterFoundByTag(t *testing.T) {
	store, err := stats.New(stats.Config{
		Clock:   fixedClock(),
		Matcher: &stats.Matcher{Exclusion: []stats.StringMatcher{stats.SuffixMatcher(".membership_total")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := New(nil, store.FlushInterval())
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	store.AddSink(sink)
	f := &fixture{store: store, sink: sink}
	web := f.cluster("web")
	web.MembershipTotal.Set(4)
	dotted := f.cluster("a.b") // its tag is "a": not found without the gauge
	dotted.Rq2xx.Inc()
	v := f.connect(t)
	defer v.close(t)
	store.Flush()
	web.Rq2xx.Add(2)
	store.Flush()
	v.next(t) // the first flush fills the window
	cmds := parseBlock(t, v.next(t))
	want := map[string]command{"web": {Type: "HystrixCommand", Name: "web", Requests: 2, Success: 2, MaxPending: 1024}}
	if diff := cmp.Diff(want, cmds); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}
