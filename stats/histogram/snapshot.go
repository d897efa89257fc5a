package histogram

import "math"

// Snapshot is an immutable set of histogram bins: the interval or
// cumulative statistics of a Histogram at one Flush. Every method is safe
// for concurrent use. It implements Envoy's HistogramStatisticsImpl on top
// of libcircllhist's 2019 arithmetic, so quantiles, sums and bucket counts
// match Envoy's to the last bit. A nil *Snapshot behaves as an empty one
// with Unspecified unit.
type Snapshot struct {
	unit  Unit
	bins  []bin // ascending by key, every count > 0
	count uint64
	sum   float64 // unscaled
}

// bin is one non-empty log-linear bin.
type bin struct {
	count uint64
	key   int16
}

// Bin is one raw log-linear bin, as listed by histogram_buckets=detailed:
// it covers [LowerBound, LowerBound+Width). The zero bin has LowerBound 0
// and Width 0.
type Bin struct {
	LowerBound float64
	Width      float64
	Count      uint64
}

func newSnapshot(unit Unit, bins []bin) *Snapshot {
	s := &Snapshot{unit: unit, bins: bins}
	for _, b := range bins {
		s.count = addSaturating(s.count, b.count)
		// hist_approx_sum; the conversion keeps the product from being
		// fused into the addition, which would change the rounding.
		s.sum += float64(midpoint(b.key) * float64(b.count))
	}
	return s
}

func (s *Snapshot) binList() []bin {
	if s == nil {
		return nil
	}
	return s.bins
}

// Unit returns the unit of the histogram the snapshot came from.
func (s *Snapshot) Unit() Unit {
	if s == nil {
		return Unspecified
	}
	return s.unit
}

// Count returns the number of samples (hist_sample_count; it saturates at
// math.MaxUint64).
func (s *Snapshot) Count() uint64 {
	if s == nil {
		return 0
	}
	return s.count
}

// Sum returns the approximate sum of the samples: each bin contributes its
// count times its midpoint, so one sample of 200 sums to 205. Percent
// histograms divide it by PercentScale.
func (s *Snapshot) Sum() float64 {
	if s == nil {
		return 0
	}
	if s.unit == Percent {
		return s.sum / PercentScale
	}
	return s.sum
}

// Quantiles returns hist_approx_quantile's estimate for each q in qs
// (fractions, e.g. 0.99), divided by PercentScale for Percent histograms.
// An empty snapshot gives NaN for every q, as does a q that is NaN or
// outside [0, 1]. The qs need not be sorted.
func (s *Snapshot) Quantiles(qs []float64) []float64 {
	out := make([]float64, len(qs))
	bins := s.binList()
	total := 0.0
	for _, b := range bins {
		total += float64(b.count)
	}
	w := walker{bins: bins}
	prev := math.Inf(1)
	for i, q := range qs {
		if total == 0 || !(q >= 0 && q <= 1) {
			out[i] = math.NaN()
			continue
		}
		if q < prev {
			// circllhist walks bins and sorted quantiles together; a
			// smaller quantile starts the walk over, giving the same
			// answer it would give in sorted order.
			w.start()
		}
		prev = q
		out[i] = w.quantile(total * q)
		if s.Unit() == Percent {
			out[i] /= PercentScale
		}
	}
	return out
}

// walker holds the state hist_approx_quantile keeps while it walks the
// bins: the current bin, its left edge and width, and the sample counts
// below and up to it, all as doubles.
type walker struct {
	bins         []bin
	i            int
	left, width  float64
	lower, upper float64
}

func (w *walker) start() {
	w.i, w.upper = 0, 0
	w.track()
}

func (w *walker) track() {
	b := w.bins[w.i]
	w.width = binWidth(b.key)
	w.left = leftEdge(b.key)
	w.lower = w.upper
	w.upper = w.lower + float64(b.count)
}

// quantile returns the value below which target samples lie.
func (w *walker) quantile(target float64) float64 {
	for w.i < len(w.bins)-1 && w.upper < target {
		w.i++
		w.track()
	}
	switch {
	case w.lower == target:
		return w.left
	case w.upper == target:
		return w.left + w.width
	case w.width == 0:
		return w.left
	}
	// The conversion stops the multiply from fusing with the addition.
	return w.left + float64((target-w.lower)/(w.upper-w.lower)*w.width)
}

// CumulativeBuckets returns, for each bound, the number of samples in bins
// whose upper edge is at most the bound (hist_approx_count_below): the
// B<bound> and le="<bound>" figures. A sample of 250 sits in [250, 260), so
// it is not counted under 250; a sample of 0 counts under every bound.
// Percent histograms compare against bound × PercentScale.
func (s *Snapshot) CumulativeBuckets(bounds []float64) []uint64 {
	out := make([]uint64, len(bounds))
	bins := s.binList()
	scale := 1.0
	if s.Unit() == Percent {
		scale = PercentScale
	}
	// i and running carry over between ascending bounds.
	i, running := 0, uint64(0)
	prev := math.Inf(-1)
	for j, bound := range bounds {
		threshold := bound * scale
		if !(threshold >= prev) {
			i, running = 0, 0
		}
		prev = threshold
		for i < len(bins) && upperEdge(bins[i].key) <= threshold {
			running = addSaturating(running, bins[i].count)
			i++
		}
		out[j] = running
	}
	return out
}

// DisjointBuckets returns the count of each bucket alone, for
// histogram_buckets=disjoint: each cumulative count minus the one before
// it. bounds are expected ascending, as Histogram.Bounds returns them.
func (s *Snapshot) DisjointBuckets(bounds []float64) []uint64 {
	out := s.CumulativeBuckets(bounds)
	prev := uint64(0)
	for i, c := range out {
		out[i] = c - prev
		prev = c
	}
	return out
}

// Detailed returns the raw bins in ascending order, for
// histogram_buckets=detailed. As in Envoy, bounds and widths are the
// recorded integers' and are not scaled for Percent histograms.
func (s *Snapshot) Detailed() []Bin {
	bins := s.binList()
	out := make([]Bin, len(bins))
	for i, b := range bins {
		out[i] = Bin{LowerBound: lowerValue(b.key), Width: binWidth(b.key), Count: b.count}
	}
	return out
}
