package format

import (
	"bufio"
	"io"
	"strconv"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/histogram"
)

// quantileNames are the text labels of histogram.SupportedQuantiles.
var quantileNames = [...]string{"P0", "P25", "P50", "P75", "P90", "P95", "P99", "P99.5", "P99.9", "P100"}

var supported = histogram.SupportedQuantiles()

// selector applies usedonly, hidden and filter; it reuses one name buffer.
type selector struct {
	q   *Query
	buf []byte
}

// keep reports whether st is shown; on true, s.buf holds the full name.
func (s *selector) keep(st *stats.Stat) bool {
	if s.q.UsedOnly && !st.Used() {
		return false
	}
	switch h := st.Hidden(); s.q.Hidden {
	case HiddenExclude:
		if h {
			return false
		}
	case HiddenOnly:
		if !h {
			return false
		}
	}
	s.buf = st.AppendName(s.buf[:0])
	return s.q.Filter == nil || s.q.Filter.Match(s.buf)
}

// phases returns which of the three /stats phases the type selects.
func (q *Query) phases() (text, countersGauges stats.Kinds, histograms bool) {
	switch q.Type {
	case All:
		return stats.KindSet(stats.KindTextReadout), stats.KindSet(stats.KindCounter, stats.KindGauge), true
	case Counters:
		return 0, stats.KindSet(stats.KindCounter), false
	case Gauges:
		return 0, stats.KindSet(stats.KindGauge), false
	case Histograms:
		return 0, 0, true
	}
	return stats.KindSet(stats.KindTextReadout), 0, false
}

// WriteText streams the /stats text format: text readouts, then counters and
// gauges interleaved in byte order, then histograms, each phase sorted by
// name. It returns the first write error.
func WriteText(w io.Writer, s *stats.Store, q Query) error {
	bw := bufio.NewWriterSize(yieldWriter{w}, 64<<10)
	sel := selector{q: &q}
	var line []byte
	textKinds, cgKinds, hist := q.phases()
	each := func(kinds stats.Kinds, fn func(st *stats.Stat)) {
		if kinds == 0 {
			return
		}
		s.Each(kinds, func(st *stats.Stat) bool {
			if sel.keep(st) {
				fn(st)
			}
			return true
		})
	}
	each(textKinds, func(st *stats.Stat) {
		line = append(append(sel.buf, `: "`...), st.Text()...)
		line = append(line, "\"\n"...)
		bw.Write(line)
	})
	each(cgKinds, func(st *stats.Stat) {
		line = append(sel.buf, ": "...)
		line = strconv.AppendUint(line, st.Value(), 10)
		line = append(line, '\n')
		bw.Write(line)
	})
	if hist {
		each(stats.KindSet(stats.KindHistogram), func(st *stats.Stat) {
			line = appendTextHistogram(append(sel.buf, ':'), st.Histogram(), q.Buckets)
			bw.Write(line)
		})
	}
	return bw.Flush()
}

// appendTextHistogram appends what follows "<name>:" for one histogram.
func appendTextHistogram(b []byte, h *stats.Histogram, mode BucketMode) []byte {
	if !h.Used() {
		return append(b, " No recorded values\n"...)
	}
	iv, cu := h.Snapshots()
	switch mode {
	case BucketsCumulative, BucketsDisjoint:
		bounds, ic, cc := bucketCounts(h, mode)
		for i, bound := range bounds {
			b = append(b, " B"...)
			b = appendG(b, bound, 6)
			b = append(b, '(')
			b = strconv.AppendUint(b, ic[i], 10)
			b = append(b, ',')
			b = strconv.AppendUint(b, cc[i], 10)
			b = append(b, ')')
		}
		return append(b, '\n')
	case BucketsDetailed:
		b = append(b, "\n  totals="...)
		b = appendTextBins(b, cu.Detailed())
		b = append(b, "\n  intervals="...)
		b = appendTextBins(b, iv.Detailed())
		b = append(b, "\n  summary="...)
		b = appendTextQuantiles(b, iv, cu)
		return append(b, '\n')
	}
	b = append(b, ' ')
	b = appendTextQuantiles(b, iv, cu)
	return append(b, '\n')
}

func appendTextQuantiles(b []byte, iv, cu *histogram.Snapshot) []byte {
	iq, cq := iv.Quantiles(supported), cu.Quantiles(supported)
	for i, name := range quantileNames {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, name...)
		b = append(b, '(')
		b = appendShortest(b, iq[i])
		b = append(b, ',')
		b = appendShortest(b, cq[i])
		b = append(b, ')')
	}
	return b
}

func appendTextBins(b []byte, bins []histogram.Bin) []byte {
	for i, bin := range bins {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendG(b, bin.LowerBound, 15)
		b = append(b, ',')
		b = appendG(b, bin.Width, 15)
		b = append(b, ':')
		b = strconv.AppendUint(b, bin.Count, 10)
	}
	return b
}

// bucketCounts returns the bounds and the interval and cumulative counts of
// h for the cumulative or disjoint mode.
func bucketCounts(h *stats.Histogram, mode BucketMode) (bounds []float64, interval, cumulative []uint64) {
	iv, cu := h.Snapshots()
	bounds = h.Bounds()
	if mode == BucketsCumulative {
		return bounds, iv.CumulativeBuckets(bounds), cu.CumulativeBuckets(bounds)
	}
	return bounds, iv.DisjointBuckets(bounds), cu.DisjointBuckets(bounds)
}
