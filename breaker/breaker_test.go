package breaker

import (
	"errors"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/cputime"
	"github.com/legateproxy/legate/runtime"
	"github.com/legateproxy/legate/stats"
)

func gaugeValues(t *testing.T, store *stats.Store) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	store.Each(stats.KindSet(stats.KindGauge), func(st *stats.Stat) bool {
		out[st.Name()] = st.Value()
		return true
	})
	return out
}

func TestResourceLimits(t *testing.T) {
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cb := config.CircuitBreakers{}
	cb.Thresholds[0] = config.Thresholds{MaxConnections: 2, MaxPendingRequests: 1, MaxRequests: 1, MaxRetries: 1, TrackRemaining: true}
	cb.Thresholds[1] = config.DefaultThresholds()
	b := New(cb, store, "cluster.web.", nil, "web")
	defer b.Close()
	p := b.Priority(config.PriorityDefault)

	for i := range 2 {
		if err := p.Connections.TryAcquire(); err != nil {
			t.Fatalf("TryAcquire #%d = %v; want nil", i, err)
		}
	}
	if err := p.Connections.TryAcquire(); !errors.Is(err, ErrOverflow) {
		t.Fatalf("TryAcquire over the limit = %v; want ErrOverflow", err)
	}
	g := gaugeValues(t, store)
	if got := g["cluster.web.circuit_breakers.default.cx_open"]; got != 1 {
		t.Errorf("cx_open = %d; want 1", got)
	}
	if got := g["cluster.web.circuit_breakers.default.remaining_cx"]; got != 0 {
		t.Errorf("remaining_cx = %d; want 0", got)
	}
	if got, ok := g["cluster.web.circuit_breakers.high.remaining_cx"]; ok {
		t.Errorf("high.remaining_cx = %d; want absent without track_remaining", got)
	}
	if got := g["cluster.web.circuit_breakers.default.remaining_rq"]; got != 1 {
		t.Errorf("remaining_rq = %d; want 1", got)
	}
	p.Connections.Release()
	g = gaugeValues(t, store)
	if got := g["cluster.web.circuit_breakers.default.cx_open"]; got != 0 {
		t.Errorf("cx_open after Release = %d; want 0", got)
	}
	if got := g["cluster.web.circuit_breakers.default.remaining_cx"]; got != 1 {
		t.Errorf("remaining_cx after Release = %d; want 1", got)
	}
	p.Connections.Release()
	p.Connections.Release() // extra release stays at zero
	if got := p.Connections.Count(); got != 0 {
		t.Errorf("Count() = %d; want 0", got)
	}
	b.Close()
	if g := gaugeValues(t, store); len(g) != 0 {
		t.Errorf("gauges after Close = %v; want none", g)
	}
}

func TestRetryBudget(t *testing.T) {
	cb := config.CircuitBreakers{}
	cb.Thresholds[0] = config.DefaultThresholds()
	cb.Thresholds[0].RetryBudget = &config.RetryBudget{BudgetPercent: 50, MinRetryConcurrency: 1}
	b := New(cb, nil, "", nil, "")
	p := b.Priority(config.PriorityDefault)
	tests := []struct {
		name     string
		requests int
		want     uint64
	}{
		{"idle uses min concurrency", 0, 1},
		{"four active allow two", 4, 2},
		{"ten active allow five", 10, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for p.Requests.Count() < uint64(tt.requests) {
				if err := p.Requests.TryAcquire(); err != nil {
					t.Fatal(err)
				}
			}
			if got := p.Retries.Max(); got != tt.want {
				t.Errorf("Retries.Max() = %d; want %d", got, tt.want)
			}
		})
	}
}

func TestConcurrentAcquireNeverExceeds(t *testing.T) {
	cb := config.CircuitBreakers{}
	cb.Thresholds[0] = config.Thresholds{MaxRequests: 10}
	b := New(cb, nil, "", nil, "")
	r := &b.Priority(config.PriorityDefault).Requests
	var wg sync.WaitGroup
	var mu sync.Mutex
	maxSeen := uint64(0)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if r.TryAcquire() == nil {
					c := r.Count()
					mu.Lock()
					maxSeen = max(maxSeen, c)
					mu.Unlock()
					r.Release()
				}
			}
		}()
	}
	wg.Wait()
	if maxSeen > 10 {
		t.Errorf("max count seen = %d; want <= 10", maxSeen)
	}
	if got := r.Count(); got != 0 {
		t.Errorf("Count() after all releases = %d; want 0", got)
	}
}

// BenchmarkTryAcquireRelease takes and returns a max_requests unit per iteration, as every
// request does, with the default limit (1024): serially, and in parallel on every P (b.RunParallel)
// reporting the process CPU per iteration, where a line written by every core shows up as
// more CPU per iteration than serially even when other load on the machine hides it in ns/op.
func BenchmarkTryAcquireRelease(b *testing.B) {
	cb := config.CircuitBreakers{}
	cb.Thresholds[0] = config.DefaultThresholds()
	br := New(cb, nil, "", nil, "")
	r := &br.Priority(config.PriorityDefault).Requests
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		cputime.Report(b, func() {
			for b.Loop() {
				if r.TryAcquire() == nil {
					r.Release()
				}
			}
		})
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		cputime.Report(b, func() {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r.TryAcquire() == nil {
						r.Release()
					}
				}
			})
		})
	})
}

// TestRuntimeOverrides: circuit_breakers.<cluster>.<priority>.max_* in the runtime override the
// configured thresholds, and a /runtime_modify change (an admin layer Modify) applies to the
// next acquisition.
func TestRuntimeOverrides(t *testing.T) {
	rt, err := runtime.New(runtime.Config{Layers: []runtime.LayerConfig{{Name: "admin", Admin: true}}})
	if err != nil {
		t.Fatal(err)
	}
	cb := config.CircuitBreakers{}
	cb.Thresholds[0] = config.DefaultThresholds()
	cb.Thresholds[1] = config.DefaultThresholds()
	b := New(cb, nil, "", rt, "web")
	if err := rt.Modify(map[string]string{
		"circuit_breakers.web.default.max_connections":      "1",
		"circuit_breakers.web.default.max_pending_requests": "2",
		"circuit_breakers.web.default.max_requests":         "3",
		"circuit_breakers.web.default.max_retries":          "4",
		"circuit_breakers.web.high.max_requests":            "5",
		"circuit_breakers.other.default.max_connections":    "9",
	}); err != nil {
		t.Fatal(err)
	}
	def, high := b.Priority(config.PriorityDefault), b.Priority(config.PriorityHigh)
	for _, tc := range []struct {
		name string
		r    *Resource
		want uint64
	}{
		{"default max_connections", &def.Connections, 1},
		{"default max_pending_requests", &def.PendingRequests, 2},
		{"default max_requests", &def.Requests, 3},
		{"default max_retries", &def.Retries, 4},
		{"high max_requests", &high.Requests, 5},
		{"high max_connections (no key)", &high.Connections, 1024},
	} {
		if got := tc.r.Max(); got != tc.want {
			t.Errorf("%s: Max() = %d; want %d", tc.name, got, tc.want)
		}
	}
	if err := def.Connections.TryAcquire(); err != nil {
		t.Fatalf("TryAcquire = %v; want nil", err)
	}
	if err := def.Connections.TryAcquire(); !errors.Is(err, ErrOverflow) {
		t.Fatalf("TryAcquire over the runtime limit = %v; want ErrOverflow", err)
	}
	if err := rt.Modify(map[string]string{"circuit_breakers.web.default.max_connections": "2"}); err != nil {
		t.Fatal(err)
	}
	if err := def.Connections.TryAcquire(); err != nil {
		t.Fatalf("TryAcquire after raising the limit = %v; want nil", err)
	}
	if err := rt.Modify(map[string]string{"circuit_breakers.web.default.max_connections": ""}); err != nil {
		t.Fatal(err)
	}
	if got := def.Connections.Max(); got != 1024 {
		t.Errorf("Max() after the key is removed = %d; want the configured 1024", got)
	}
}

// TestLeasedLimitIsExact: with a limit large enough for Ps to lease units in batches, units in
// use never pass max_requests under concurrency, and one goroutine can then take exactly the
// limit, free units parked on other Ps' lines included; rq_open follows the exact count.
func TestLeasedLimitIsExact(t *testing.T) {
	const limit = 256
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cb := config.CircuitBreakers{}
	cb.Thresholds[0] = config.Thresholds{MaxConnections: 1, MaxPendingRequests: 1, MaxRequests: limit, MaxRetries: 1}
	cb.Thresholds[1] = config.DefaultThresholds()
	b := New(cb, store, "cluster.web.", nil, "web")
	defer b.Close()
	r := &b.Priority(config.PriorityDefault).Requests
	if r.batch(limit) < 2 {
		t.Fatalf("batch(%d) = %d; want leasing on", limit, r.batch(limit))
	}

	var inUse, maxSeen atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held := 0
			for i := range 3000 {
				if r.TryAcquire() == nil {
					n := inUse.Add(1)
					for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
					}
					held++
				}
				// Each goroutine holds up to 25+4g units (312 in all), so that the eight push
				// past the limit and overflow while others hold leases.
				if held > 24+4*g || (held > 0 && i%3 == 0) {
					inUse.Add(-1)
					r.Release()
					held--
				}
			}
			for ; held > 0; held-- {
				inUse.Add(-1)
				r.Release()
			}
		}()
	}
	wg.Wait()
	if got := maxSeen.Load(); got > limit {
		t.Errorf("units in use reached %d; want <= %d", got, limit)
	}
	if got := r.Count(); got != 0 {
		t.Fatalf("Count() after all releases = %d; want 0", got)
	}

	// Park free units on every line from goroutines, then take the whole limit from one.
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.TryAcquire() == nil {
				r.Release()
			}
		}()
	}
	wg.Wait()
	taken := 0
	for r.TryAcquire() == nil {
		taken++
		if taken > limit {
			t.Fatalf("took more than %d units", limit)
		}
	}
	if taken != limit {
		t.Errorf("one goroutine took %d units from idle; want exactly %d", taken, limit)
	}
	open := "cluster.web.circuit_breakers.default.rq_open"
	if got := gaugeValues(t, store)[open]; got != 1 {
		t.Errorf("rq_open at the limit = %d; want 1", got)
	}
	r.Release()
	if got := gaugeValues(t, store)[open]; got != 0 {
		t.Errorf("rq_open after one release = %d; want 0", got)
	}
	if err := r.TryAcquire(); err != nil {
		t.Errorf("TryAcquire after one release = %v; want nil", err)
	}
	if err := r.TryAcquire(); !errors.Is(err, ErrOverflow) {
		t.Errorf("TryAcquire at the limit = %v; want ErrOverflow", err)
	}
	for range limit {
		r.Release()
	}
	if got := r.Count(); got != 0 {
		t.Errorf("Count() after releasing everything = %d; want 0", got)
	}
}

// TestLeaseLinesFollowGOMAXPROCS raises GOMAXPROCS after a Resource leased on the one line of
// GOMAXPROCS 1: the lines grow to a line per P and the batch shrinks to match (an eighth of the
// limit over the lines), while units in use never pass max_requests and every unit comes back.
func TestLeaseLinesFollowGOMAXPROCS(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	const limit, procs = 256, 4
	cb := config.CircuitBreakers{}
	cb.Thresholds[0] = config.Thresholds{MaxConnections: 1, MaxPendingRequests: 1, MaxRequests: limit, MaxRetries: 1}
	b := New(cb, nil, "", nil, "")
	r := &b.Priority(config.PriorityDefault).Requests
	if r.TryAcquire() != nil {
		t.Fatal("the first acquisition failed")
	}
	r.Release()
	if n, batch := r.lines.Load().Len(), r.batch(limit); n != 1 || batch != 32 {
		t.Fatalf("at GOMAXPROCS 1: %d lines, batch %d; want 1 line, batch 32", n, batch)
	}
	goruntime.GOMAXPROCS(procs)
	// Goroutines take and hold units 6000 times each, and on until the lines grew to one per P
	// (the runtime starts the idle Ps' threads when goroutines are runnable): bounded, not timed.
	var inUse, maxSeen atomic.Int64
	var wg sync.WaitGroup
	for g := range 2 * procs {
		wg.Go(func() {
			held := 0
			for i := 0; i < 6000 || i < 200_000 && r.lines.Load().Len() < procs; i++ {
				if r.TryAcquire() == nil {
					n := inUse.Add(1)
					for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
					}
					held++
				}
				// Phases of few units held, where Ps lease batches, and of more than the limit
				// held in all, where acquisitions overflow and reclaim the Ps' free units.
				bound := 4
				if i/2000%2 == 1 {
					bound = 30 + 2*g
				}
				if held > bound || (held > 0 && i%3 == 0) {
					inUse.Add(-1)
					r.Release()
					held--
				}
				if i%64 == 0 {
					goruntime.Gosched()
				}
			}
			for ; held > 0; held-- {
				inUse.Add(-1)
				r.Release()
			}
		})
	}
	wg.Wait()
	if n := r.lines.Load().Len(); n != procs {
		t.Fatalf("after acquisitions on %d Ps the lease lines are %d; want one per P", procs, n)
	}
	if got := r.batch(limit); got != limit/(8*procs) {
		t.Errorf("batch on %d lines = %d; want %d", procs, got, limit/(8*procs))
	}
	if got := maxSeen.Load(); got > limit {
		t.Errorf("units in use reached %d; want <= %d", got, limit)
	}
	if got := r.Count(); got != 0 {
		t.Fatalf("Count() after all releases = %d; want 0", got)
	}
	taken := 0
	for r.TryAcquire() == nil {
		if taken++; taken > limit {
			t.Fatalf("took more than %d units", limit)
		}
	}
	if taken != limit {
		t.Errorf("one goroutine took %d units after the growth; want the whole limit, %d", taken, limit)
	}
}
