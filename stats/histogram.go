package stats

import (
	"sync/atomic"

	"github.com/legateproxy/legate/stats/histogram"
)

// Unit is the unit of a histogram's values (Envoy's Histogram::Unit).
type Unit = histogram.Unit

// Units, as written in a `stat:"name,unit=…"` tag: unspecified, bytes, us, ms,
// percent.
const (
	Unspecified  = histogram.Unspecified
	Bytes        = histogram.Bytes
	Microseconds = histogram.Microseconds
	Milliseconds = histogram.Milliseconds
	Percent      = histogram.Percent
)

func parseUnit(s string) (Unit, bool) {
	switch s {
	case "unspecified":
		return Unspecified, true
	case "bytes":
		return Bytes, true
	case "us":
		return Microseconds, true
	case "ms":
		return Milliseconds, true
	case "percent":
		return Percent, true
	}
	return 0, false
}

// Histogram is a stat field recording a distribution (Envoy's Histogram),
// backed by a circllhist-compatible histogram.Histogram. Registration gives it
// its unit (from the struct tag) and bucket bounds (from
// histogram_bucket_settings); an unregistered zero value records with
// Unspecified unit and default bounds. Record takes no lock and, once the bins
// it touches exist, allocates nothing. Safe for concurrent use.
type Histogram struct {
	p   atomic.Pointer[histogram.Histogram]
	obs atomic.Pointer[histObserver] // the histogram sinks; nil without any
}

func (h *Histogram) init(unit Unit, bounds []float64) {
	h.p.Store(histogram.New(histogram.Options{Unit: unit, Bounds: bounds}))
}

func (h *Histogram) get() *histogram.Histogram {
	if p := h.p.Load(); p != nil {
		return p
	}
	return h.install()
}

// install makes an unregistered histogram's state on its first use (apart from get, which is
// then small enough to be inlined into every Record).
func (h *Histogram) install() *histogram.Histogram {
	h.p.CompareAndSwap(nil, histogram.New(histogram.Options{}))
	return h.p.Load()
}

// Record adds one sample and hands it to the histogram sinks.
func (h *Histogram) Record(v uint64) {
	h.get().Record(v)
	if o := h.obs.Load(); o != nil {
		o.record(v)
	}
}

// RecordOn is Record on line l (ThisLine): the sample is counted on that P's shard without
// finding the P again. The histogram's table of shards grows to a P beyond it, so it gets the
// P's id alone, without the taken mark.
func (h *Histogram) RecordOn(v uint64, l Line) {
	h.get().RecordOn(v, int(l&^taken))
	if o := h.obs.Load(); o != nil {
		o.record(v)
	}
}

// Used reports whether a flush has merged recorded samples.
func (h *Histogram) Used() bool { return h.get().Used() }

// Unit returns the histogram's unit.
func (h *Histogram) Unit() Unit { return h.get().Unit() }

// Bounds returns the bucket bounds, ascending; the slice must not be modified.
func (h *Histogram) Bounds() []float64 { return h.get().Bounds() }

// Snapshots returns the interval and cumulative statistics of the last flush.
func (h *Histogram) Snapshots() (interval, cumulative *histogram.Snapshot) {
	return h.get().Snapshots()
}

// flush merges the samples recorded since the last flush.
func (h *Histogram) flush() { h.get().Flush() }
