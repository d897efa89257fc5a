package stats

import (
	"context"
	"time"

	"github.com/legateproxy/legate/stats/histogram"
	"github.com/legateproxy/legate/stats/tags"
)

// Sink receives a Snapshot at every flush (Envoy's Stats::Sink). Flush is
// called on the flushing goroutine, one call at a time; it must not retain s
// after returning and should not block for long.
type Sink interface {
	Flush(s *Snapshot)
}

// Snapshot is what sinks see at one flush: every listed stat with its
// tag-extracted name and tags. Counters carry the increments since the
// previous flush, which /reset_counters does not disturb.
type Snapshot struct {
	Time         time.Time
	Counters     []CounterSample
	Gauges       []GaugeSample
	Histograms   []HistogramSample
	TextReadouts []TextReadoutSample
}

// Metric names a stat in a Snapshot.
type Metric struct {
	Name             string // full name
	TagExtractedName string
	Tags             []tags.Tag
}

// CounterSample is one counter at a flush.
type CounterSample struct {
	Metric
	Value uint64 // as /stats shows it
	Delta uint64 // increments since the previous flush
	Used  bool
}

// GaugeSample is one gauge at a flush.
type GaugeSample struct {
	Metric
	Value uint64
	Mode  ImportMode
	Used  bool
}

// HistogramSample is one histogram after the flush's merge.
type HistogramSample struct {
	Metric
	Interval, Cumulative *histogram.Snapshot
	Bounds               []float64
	Used                 bool
}

// TextReadoutSample is one text readout at a flush.
type TextReadoutSample struct {
	Metric
	Value string
}

// AddSink adds a sink; it receives every later flush and, if it is a HistogramSink, every
// histogram value recorded from now on.
func (s *Store) AddSink(k Sink) {
	s.sinksMu.Lock()
	defer s.sinksMu.Unlock()
	s.sinks = append(s.sinks, k)
	if hk, ok := k.(HistogramSink); ok {
		s.addHistogramSink(hk)
	}
}

// BeforeFlush registers fn to run at the start of every flush, before
// histograms merge (the server refreshes uptime, memory and the other
// server.* gauges there).
func (s *Store) BeforeFlush(fn func()) {
	s.sinksMu.Lock()
	defer s.sinksMu.Unlock()
	s.hooks = append(s.hooks, fn)
}

// FlushInterval is the configured stats_flush_interval.
func (s *Store) FlushInterval() time.Duration { return s.cfg.FlushInterval }

// Run flushes every stats_flush_interval until ctx is done (it returns
// nil then). With stats_flush_on_admin no timer runs and Run only waits.
func (s *Store) Run(ctx context.Context) error {
	if s.cfg.FlushOnAdmin {
		<-ctx.Done()
		return nil
	}
	tick := s.cfg.Clock.NewTicker(s.cfg.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
			s.Flush()
		}
	}
}

// FlushForAdmin is called by the admin handlers before rendering stats: it
// flushes when stats_flush_on_admin is set and does nothing otherwise.
func (s *Store) FlushForAdmin() {
	if s.cfg.FlushOnAdmin {
		s.Flush()
	}
}

// Flush merges every histogram's interval, latches counter deltas and hands a
// Snapshot to each sink. Calls are serialized.
func (s *Store) Flush() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.sinksMu.Lock()
	hooks := append([]func(){}, s.hooks...)
	sinks := append([]Sink{}, s.sinks...)
	s.sinksMu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	regs := s.snapshotRegs()
	for _, r := range regs {
		for i := range r.layout.fields {
			if f := &r.layout.fields[i]; f.kind == KindHistogram {
				at[Histogram](r.base, f).flush()
			}
		}
	}
	if len(sinks) == 0 {
		for _, r := range regs { // keep deltas meaning "since the previous flush"
			for i := range r.layout.fields {
				if f := &r.layout.fields[i]; f.kind == KindCounter {
					at[Counter](r.base, f).latchDelta()
				}
			}
		}
		return
	}
	snap := &Snapshot{Time: s.cfg.Clock.Now()}
	var buf []tags.Tag
	metric := func(st *Stat) Metric {
		name := st.Name()
		var extracted string
		extracted, buf = s.tagger.Extract(name, buf[:0])
		return Metric{Name: name, TagExtractedName: extracted, Tags: append([]tags.Tag(nil), buf...)}
	}
	s.Each(KindSet(KindCounter, KindGauge, KindHistogram, KindTextReadout), func(st *Stat) bool {
		switch st.Kind() {
		case KindCounter:
			c := counterAt(st.reg.base, st.f)
			snap.Counters = append(snap.Counters, CounterSample{Metric: metric(st), Value: c.Value(), Delta: c.latchDelta(), Used: c.Used()})
		case KindGauge:
			snap.Gauges = append(snap.Gauges, GaugeSample{Metric: metric(st), Value: st.Value(), Mode: st.ImportMode(), Used: st.Used()})
		case KindHistogram:
			h := st.Histogram()
			iv, cu := h.Snapshots()
			snap.Histograms = append(snap.Histograms, HistogramSample{Metric: metric(st), Interval: iv, Cumulative: cu, Bounds: h.Bounds(), Used: h.Used()})
		case KindTextReadout:
			snap.TextReadouts = append(snap.TextReadouts, TextReadoutSample{Metric: metric(st), Value: st.Text()})
		}
		return true
	})
	for _, k := range sinks {
		k.Flush(snap)
	}
}
