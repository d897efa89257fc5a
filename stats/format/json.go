package format

import (
	"bufio"
	"io"
	"strconv"
	"unsafe"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/histogram"
)

// jsonQuantiles is supported_quantiles / supported_percentiles.
const jsonQuantiles = "[0,25,50,75,90,95,99,99.5,99.9,100]"

// WriteJSON streams /stats?format=json: Envoy's compact JSON, one
// {"stats":[…]} object with text readouts, counters and gauges in the text
// order and all histograms in one final element. It returns the first write
// error.
func WriteJSON(w io.Writer, s *stats.Store, q Query) error {
	bw := bufio.NewWriterSize(yieldWriter{w}, 64<<10)
	bw.WriteString(`{"stats":[`)
	sel := selector{q: &q}
	var b []byte
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	textKinds, cgKinds, hist := q.phases()
	each := func(kinds stats.Kinds, fn func(st *stats.Stat)) {
		if kinds == 0 {
			return
		}
		s.Each(kinds, func(st *stats.Stat) bool {
			if sel.keep(st) {
				b = b[:0]
				fn(st)
				bw.Write(b)
			}
			return true
		})
	}
	entry := func(st *stats.Stat) {
		sep()
		b = append(b, `{"name":`...)
		b = appendJSONString(b, bytesString(sel.buf))
		b = append(b, `,"value":`...)
	}
	each(textKinds, func(st *stats.Stat) {
		entry(st)
		b = appendJSONString(b, st.Text())
		b = append(b, '}')
	})
	each(cgKinds, func(st *stats.Stat) {
		entry(st)
		b = strconv.AppendUint(b, st.Value(), 10)
		b = append(b, '}')
	})
	if hist {
		h := 0
		each(stats.KindSet(stats.KindHistogram), func(st *stats.Stat) {
			if h == 0 {
				sep()
				switch q.Buckets {
				case BucketsCumulative, BucketsDisjoint:
					b = append(b, `{"histograms":[`...)
				case BucketsDetailed:
					b = append(b, `{"histograms":{"supported_percentiles":`+jsonQuantiles+`,"details":[`...)
				default:
					b = append(b, `{"histograms":{"supported_quantiles":`+jsonQuantiles+`,"computed_quantiles":[`...)
				}
			} else {
				b = append(b, ',')
			}
			h++
			b = appendJSONHistogram(b, bytesString(sel.buf), st.Histogram(), q.Buckets)
		})
		if h > 0 {
			if q.Buckets == BucketsCumulative || q.Buckets == BucketsDisjoint {
				bw.WriteString("]}")
			} else {
				bw.WriteString("]}}")
			}
		}
	}
	bw.WriteString("]}")
	return bw.Flush()
}

func appendJSONHistogram(b []byte, name string, h *stats.Histogram, mode BucketMode) []byte {
	iv, cu := h.Snapshots()
	b = append(b, `{"name":`...)
	b = appendJSONString(b, name)
	switch mode {
	case BucketsCumulative, BucketsDisjoint:
		bounds, ic, cc := bucketCounts(h, mode)
		b = append(b, `,"buckets":[`...)
		for i, bound := range bounds {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"upper_bound":`...)
			b = appendJSONDouble(b, bound)
			b = append(b, `,"interval":`...)
			b = strconv.AppendUint(b, ic[i], 10)
			b = append(b, `,"cumulative":`...)
			b = strconv.AppendUint(b, cc[i], 10)
			b = append(b, '}')
		}
		return append(b, "]}"...)
	case BucketsDetailed:
		b = append(b, `,"totals":`...)
		b = appendJSONBins(b, cu.Detailed())
		b = append(b, `,"intervals":`...)
		b = appendJSONBins(b, iv.Detailed())
		b = append(b, `,"percentiles":`...)
		b = appendJSONQuantiles(b, iv, cu)
		return append(b, '}')
	}
	b = append(b, `,"values":`...)
	b = appendJSONQuantiles(b, iv, cu)
	return append(b, '}')
}

func appendJSONQuantiles(b []byte, iv, cu *histogram.Snapshot) []byte {
	iq, cq := iv.Quantiles(supported), cu.Quantiles(supported)
	b = append(b, '[')
	for i := range iq {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"cumulative":`...)
		b = appendJSONDouble(b, cq[i])
		b = append(b, `,"interval":`...)
		b = appendJSONDouble(b, iq[i])
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendJSONBins(b []byte, bins []histogram.Bin) []byte {
	b = append(b, '[')
	for i, bin := range bins {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"lower_bound":`...)
		b = appendJSONDouble(b, bin.LowerBound)
		b = append(b, `,"width":`...)
		b = appendJSONDouble(b, bin.Width)
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, bin.Count, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// bytesString views b as a string without copying; the caller must not
// modify b while the string is in use.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
