package stats

import (
	"sync"
	"sync/atomic"
	"testing"
)

type pickStats struct {
	Selected HotCounter `stat:"lb_subsets_selected"`
	Plain    Counter    `stat:"lb_subsets_fallback"`
}

// TestHotCounter checks that a HotCounter counts increments from many goroutines exactly and
// reads like a Counter everywhere: /stats values, usedonly, flush deltas and /reset_counters.
func TestHotCounter(t *testing.T) {
	s := newStore(t, Config{})
	var c pickStats
	s.Register("cluster.web.", &c)
	if c.Selected.Used() {
		t.Fatal("fresh HotCounter reports used")
	}
	const goroutines, incs = 8, 10_000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range incs {
				c.Selected.Inc()
			}
		})
	}
	wg.Wait()
	value := func() (uint64, bool) {
		var v uint64
		var used, found bool
		s.Each(KindSet(KindCounter), func(st *Stat) bool {
			if st.Name() == "cluster.web.lb_subsets_selected" {
				v, used, found = st.Value(), st.Used(), true
			}
			return true
		})
		if !found {
			t.Fatal("cluster.web.lb_subsets_selected not listed")
		}
		return v, used
	}
	if v, used := value(); v != goroutines*incs || !used {
		t.Errorf("listed value, used = %d, %v; want %d, true", v, used, goroutines*incs)
	}
	sink := make(chanSink, 1)
	s.AddSink(sink)
	c.Selected.Inc()
	s.Flush()
	for _, cs := range recv(t, sink).Counters {
		if cs.Name == "cluster.web.lb_subsets_selected" && (cs.Delta != goroutines*incs+1 || cs.Value != goroutines*incs+1) {
			t.Errorf("flushed delta, value = %d, %d; want %d both", cs.Delta, cs.Value, goroutines*incs+1)
		}
	}
	c.Selected.Inc()
	s.ResetCounters()
	if v, used := value(); v != 0 || !used {
		t.Errorf("after reset: value, used = %d, %v; want 0, true", v, used)
	}
	c.Selected.Inc()
	if got := c.Selected.Value(); got != 1 {
		t.Errorf("Value() after reset and Inc = %d; want 1", got)
	}
}

type activeStats struct {
	Bytes  HotCounter `stat:"downstream_cx_rx_bytes_total"`
	Active HotGauge   `stat:"downstream_rq_active,accumulate"`
}

// TestHotGauge checks that a HotGauge moved up and down from many goroutines reads exactly
// like a Gauge (its listed value, usedonly, a hot-restart parent's import added to it), and
// that HotCounter.Add sums byte counts exactly.
func TestHotGauge(t *testing.T) {
	s := newStore(t, Config{})
	var a activeStats
	s.Register("http.ingress.", &a)
	if a.Active.Used() {
		t.Fatal("fresh HotGauge reports used")
	}
	const goroutines, moves = 8, 10_000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range moves {
				a.Active.Inc()
				a.Bytes.Add(uint64(i % 7))
				if i%2 == 0 || g == 0 {
					a.Active.Dec() // goroutine 0 ends where it began, the others half up
				}
			}
		})
	}
	wg.Wait()
	want := uint64((goroutines - 1) * moves / 2)
	listed := func(name string) (uint64, bool) {
		var v uint64
		var used bool
		s.Each(KindSet(KindCounter, KindGauge), func(st *Stat) bool {
			if st.Name() == name {
				v, used = st.Value(), st.Used()
			}
			return true
		})
		return v, used
	}
	if v, used := listed("http.ingress.downstream_rq_active"); v != want || !used {
		t.Errorf("listed gauge, used = %d, %v; want %d, true", v, used, want)
	}
	var bytes uint64
	for i := range moves {
		bytes += uint64(i % 7)
	}
	if v, _ := listed("http.ingress.downstream_cx_rx_bytes_total"); v != goroutines*bytes {
		t.Errorf("listed counter = %d; want %d", v, goroutines*bytes)
	}
	a.Active.Sub(want)
	a.Active.Add(3)
	a.Active.Gauge.Add(10) // a parent's value, imported into the gauge itself
	if got := a.Active.Value(); got != 13 {
		t.Errorf("Value() after Sub, Add and an import = %d; want 13", got)
	}
	a.Active.Inc()
	a.Active.Set(5)
	if got := a.Active.Value(); got != 5 {
		t.Errorf("Value() after Set(5) = %d; want 5", got)
	}
}

// TestDynamicHotCounter checks that a dynamic counter taken as a HotCounter (a cluster's
// upstream_rq_<code>) is the same stat as the Counter of that name: increments through either,
// and a hot-restart parent's import, all show in /stats and in the flushed delta.
func TestDynamicHotCounter(t *testing.T) {
	s := newStore(t, Config{})
	var c pickStats
	reg := s.Register("cluster.web.", &c)
	hot := reg.HotCounter("upstream_rq_200")
	const goroutines, incs = 8, 10_000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range incs {
				hot.Inc()
			}
		})
	}
	wg.Wait()
	reg.Counter("upstream_rq_200").Inc()
	imp := s.NewParentImport()
	imp.Apply(ParentValues{Counters: map[string]uint64{"cluster.web.upstream_rq_200": 5}})
	want := uint64(goroutines*incs + 1 + 5)
	var listed uint64
	s.Each(KindSet(KindCounter), func(st *Stat) bool {
		if st.Name() == "cluster.web.upstream_rq_200" {
			listed = st.Value()
		}
		return true
	})
	if listed != want {
		t.Errorf("listed upstream_rq_200 = %d; want %d", listed, want)
	}
	if again := reg.HotCounter("upstream_rq_200"); again != hot {
		t.Error("a second HotCounter lookup made another counter")
	}
	sink := make(chanSink, 1)
	s.AddSink(sink)
	hot.Inc()
	s.Flush()
	found := false
	for _, cs := range recv(t, sink).Counters {
		if cs.Name == "cluster.web.upstream_rq_200" {
			found = true
			if cs.Delta != want+1 || cs.Value != want+1 {
				t.Errorf("flushed delta, value = %d, %d; want %d both", cs.Delta, cs.Value, want+1)
			}
		}
	}
	if !found {
		t.Error("upstream_rq_200 not flushed")
	}
}

func BenchmarkHotCounterInc(b *testing.B) {
	b.Run("Counter", func(b *testing.B) {
		var c Counter
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Inc()
			}
		})
	})
	b.Run("HotCounter", func(b *testing.B) {
		var c HotCounter
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Inc()
			}
		})
	})
}

// TestHotLines checks changes made on a line taken once (ThisLine, IncOn, DecOn), as a stream
// makes them: from goroutines that may have moved to another P since, and on lines beyond the
// table's (a P added later), every change lands and /stats reads them exactly, mixed with
// Inc and Dec, and the gauge is used.
func TestHotLines(t *testing.T) {
	s := newStore(t, Config{})
	var c struct {
		Total  HotCounter `stat:"downstream_rq_total"`
		Active HotGauge   `stat:"downstream_rq_active"`
	}
	s.Register("http.ingress.", &c)
	const goroutines, incs = 8, 10_000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := ThisLine()
			if g%2 == 1 {
				l += Line(g * 1000) // beyond the table: shares a line
			}
			for i := range incs {
				c.Total.IncOn(l)
				c.Active.IncOn(l)
				if i%2 == 0 {
					c.Total.Inc()
					c.Active.DecOn(l)
				}
			}
		})
	}
	wg.Wait()
	if got, want := c.Total.Value(), uint64(goroutines*incs*3/2); got != want {
		t.Errorf("Total.Value() = %d; want %d", got, want)
	}
	if got, want := c.Active.Value(), uint64(goroutines*incs/2); got != want {
		t.Errorf("Active.Value() = %d; want %d", got, want)
	}
	if !c.Active.Used() {
		t.Error("Active.Used() = false after IncOn; want true")
	}
	var listed uint64
	s.Each(KindSet(KindCounter), func(st *Stat) bool {
		if st.Name() == "http.ingress.downstream_rq_total" {
			listed = st.Value()
		}
		return true
	})
	if want := uint64(goroutines * incs * 3 / 2); listed != want {
		t.Errorf("listed downstream_rq_total = %d; want %d", listed, want)
	}
}

// TestAddOnAndRecordOn checks the line-taking forms a stream's pool exchange and byte counters
// use: HotCounter.AddOn and Histogram.RecordOn from goroutines on every P (run with -cpu 1,2),
// some on lines beyond the tables' (a P added later, sharing a line), sum every byte and
// sample exactly; and ThisLine never returns NoLine, which callers read as none taken.
func TestAddOnAndRecordOn(t *testing.T) {
	var c struct {
		Bytes HotCounter `stat:"downstream_cx_rx_bytes_total"`
		Time  Histogram  `stat:"downstream_rq_time,unit=ms"`
	}
	s := newStore(t, Config{})
	s.Register("http.ingress.", &c)
	const goroutines, adds = 8, 5_000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			if ThisLine() == NoLine {
				t.Error("ThisLine() = NoLine")
			}
			l := testLine(g)
			for i := range adds {
				c.Bytes.AddOn(l, uint64(i%7))
				c.Time.RecordOn(uint64(i%300), l)
			}
		})
	}
	wg.Wait()
	var perGoroutine uint64
	for i := range adds {
		perGoroutine += uint64(i % 7)
	}
	if got, want := c.Bytes.Value(), goroutines*perGoroutine; got != want {
		t.Errorf("Bytes.Value() = %d; want %d", got, want)
	}
	s.Flush()
	if _, cum := c.Time.Snapshots(); cum.Count() != goroutines*adds {
		t.Errorf("Time sample count = %d; want %d", cum.Count(), goroutines*adds)
	}
}

// TestHotBlock checks counters bound to a HotBlock, as a connection manager binds its request
// totals: fields added on lines taken once (some beyond the table, shared) from goroutines on
// every P (run with -cpu 1,2), mixed with the counters' own Inc and IncOn, read exactly as
// the bound counters' values, listings, flush deltas and resets; two fields of one line stay
// apart; and a counter bound after counting on lines of its own keeps those counts.
func TestHotBlock(t *testing.T) {
	type line struct{ a, b atomic.Uint64 }
	var c struct {
		A HotCounter `stat:"downstream_rq_total"`
		B HotCounter `stat:"rq_total"`
	}
	blk := NewHotBlock[line]()
	BindCounter(&c.A, blk, func(l *line) *atomic.Uint64 { return &l.a })
	BindCounter(&c.B, blk, func(l *line) *atomic.Uint64 { return &l.b })
	s := newStore(t, Config{})
	s.Register("http.ingress.", &c)
	const goroutines, incs = 8, 10_000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := testLine(g)
			for i := range incs {
				blk.On(l).a.Add(1)
				if i%2 == 0 {
					blk.On(l).b.Add(2)
					c.A.Inc()
					c.B.IncOn(l)
				}
			}
		})
	}
	wg.Wait()
	wantA, wantB := uint64(goroutines*incs*3/2), uint64(goroutines*incs*3/2)
	listed := map[string]uint64{}
	s.Each(KindSet(KindCounter), func(st *Stat) bool {
		listed[st.Name()] = st.Value()
		return true
	})
	if listed["http.ingress.downstream_rq_total"] != wantA || listed["http.ingress.rq_total"] != wantB {
		t.Errorf("listed = %v; want downstream_rq_total %d, rq_total %d", listed, wantA, wantB)
	}
	sink := make(chanSink, 1)
	s.AddSink(sink)
	blk.On(ThisLine()).a.Add(1)
	s.Flush()
	for _, cs := range recv(t, sink).Counters {
		if cs.Name == "http.ingress.downstream_rq_total" && (cs.Delta != wantA+1 || cs.Value != wantA+1) {
			t.Errorf("flushed delta, value = %d, %d; want %d both", cs.Delta, cs.Value, wantA+1)
		}
	}
	s.ResetCounters()
	blk.On(ThisLine()).b.Add(1)
	if a, b := c.A.Value(), c.B.Value(); a != 0 || b != 1 {
		t.Errorf("after reset and one add to b: A, B = %d, %d; want 0, 1", a, b)
	}
	// A counter that already counts on lines of its own (a cluster's upstream_rq_total,
	// which the TCP proxy increments, bound when the cluster's first HTTP request comes)
	// keeps what it counted, and counts on the block from then on, Inc included.
	var own HotCounter
	own.Inc()
	own.IncOn(ThisLine())
	other := NewHotBlock[line]()
	BindCounter(&own, other, func(l *line) *atomic.Uint64 { return &l.b })
	own.Inc()
	other.On(ThisLine()).b.Add(3)
	if got := own.Value(); got != 6 {
		t.Errorf("bound after counting: Value() = %d; want 6", got)
	}
	if got := other.On(0).b.Load() + other.On(1).b.Load(); got != 0 {
		t.Errorf("the block's lines hold %d after the read; want 0 (folded in)", got)
	}
}

// TestHotGaugeMovedOnLinesIsUsed checks that a HotGauge moved only on lines (IncOn, DecOn,
// which no longer mark it used themselves) back to 0 is listed as used, and an unmoved one
// is not, as Envoy's usedonly tells them.
func TestHotGaugeMovedOnLinesIsUsed(t *testing.T) {
	s := newStore(t, Config{})
	var g struct {
		Moved HotGauge `stat:"downstream_rq_active"`
		Still HotGauge `stat:"upstream_rq_active"`
	}
	s.Register("http.ingress.", &g)
	l := ThisLine()
	g.Moved.IncOn(l)
	g.Moved.DecOn(l)
	used := map[string]bool{}
	s.Each(KindSet(KindGauge), func(st *Stat) bool {
		used[st.Name()] = st.Used()
		return true
	})
	if !used["http.ingress.downstream_rq_active"] || used["http.ingress.upstream_rq_active"] {
		t.Errorf("listed used = %v; want downstream_rq_active used, upstream_rq_active not", used)
	}
}

// testLine is the line goroutine g counts on: its P's, or for odd g one far beyond the tables
// (the lines a P past them would take, shared), so that both kinds are summed.
func testLine(g int) Line {
	l := ThisLine()
	if g%2 == 1 {
		l += Line(g * 1000)
	}
	return l
}
