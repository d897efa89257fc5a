package stats

// HistogramSink is a Sink that also receives each histogram value as it is recorded (Envoy's
// Sink::onHistogramComplete), on the recording goroutine, which may be a request's: it must be
// safe for concurrent use, must not block and should not allocate.
type HistogramSink interface {
	Sink
	OnHistogramComplete(m *Metric, unit Unit, v uint64)
}

// histObserver is what a histogram hands its values to once a HistogramSink is added: its
// name and tags, computed once, and the sinks.
type histObserver struct {
	metric Metric
	unit   Unit
	sinks  []HistogramSink
}

func (o *histObserver) record(v uint64) {
	for _, k := range o.sinks {
		k.OnHistogramComplete(&o.metric, o.unit, v)
	}
}

// addHistogramSink makes every histogram, listed now or later, report its values to k.
// Histograms registered concurrently are covered: register lists a histogram before it reads
// histSinks, and this stores histSinks before it walks the listed ones.
func (s *Store) addHistogramSink(k HistogramSink) {
	var sinks []HistogramSink
	if p := s.histSinks.Load(); p != nil {
		sinks = append(sinks, *p...)
	}
	sinks = append(sinks, k)
	s.histSinks.Store(&sinks)
	s.Each(KindSet(KindHistogram), func(st *Stat) bool {
		s.observe(st.Histogram(), st.Name())
		return true
	})
}

// observe connects h, called name, to the histogram sinks, if any.
func (s *Store) observe(h *Histogram, name string) {
	p := s.histSinks.Load()
	if p == nil {
		return
	}
	extracted, tags := s.tagger.Extract(name, nil)
	h.obs.Store(&histObserver{metric: Metric{Name: name, TagExtractedName: extracted, Tags: tags}, unit: h.Unit(), sinks: *p})
}
