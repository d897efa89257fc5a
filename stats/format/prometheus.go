package format

import (
	"bufio"
	"io"
	"strconv"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/tags"
)

// promQuantiles are the quantile="…" labels of summary output.
var promQuantiles = [...]string{"0", "0.25", "0.5", "0.75", "0.9", "0.95", "0.99", "0.995", "0.999", "1"}

// WritePrometheus streams Prometheus text exposition 0.0.4 as Envoy's
// /stats/prometheus does: counters, gauges, text readouts (with
// q.TextReadouts) and histograms, each kind grouped by tag-extracted name in
// token order, metric names "envoy_" + the sanitized tag-extracted name, tags
// as labels in extraction order, no HELP lines. Histograms are Prometheus
// histograms over the cumulative data, or summaries over the last interval
// with histogram_buckets=summary. It returns the first write error.
func WritePrometheus(w io.Writer, s *stats.Store, q Query) error {
	bw := bufio.NewWriterSize(yieldWriter{w}, 64<<10)
	sel := selector{q: &q}
	keep := sel.keep
	var b, metric []byte
	// Series of one registration share one tag slice; render its labels once.
	labelCache := make(map[*tags.Tag][]byte)
	labelsOf := func(ts []tags.Tag) []byte {
		if len(ts) == 0 {
			return nil
		}
		l, ok := labelCache[&ts[0]]
		if !ok {
			l = appendLabels(nil, ts)
			labelCache[&ts[0]] = l
		}
		return l
	}
	group := func(st *stats.TaggedStat, first bool, typ string) {
		if first {
			metric = appendSanitized(append(metric[:0], "envoy_"...), st.TagExtractedName)
			b = append(b, "# TYPE "...)
			b = append(b, metric...)
			b = append(b, ' ')
			b = append(b, typ...)
			b = append(b, '\n')
		}
	}
	for _, k := range []struct {
		kind stats.Kind
		typ  string
	}{{stats.KindCounter, "counter"}, {stats.KindGauge, "gauge"}} {
		s.EachTagged(k.kind, keep, func(st *stats.TaggedStat, first bool) bool {
			b = b[:0]
			group(st, first, k.typ)
			b = append(b, metric...)
			b = append(append(b, '{'), labelsOf(st.Tags)...)
			b = append(b, "} "...)
			b = strconv.AppendUint(b, st.Value(), 10)
			b = append(b, '\n')
			bw.Write(b)
			return true
		})
	}
	if q.TextReadouts {
		s.EachTagged(stats.KindTextReadout, keep, func(st *stats.TaggedStat, first bool) bool {
			b = b[:0]
			group(st, first, "gauge")
			b = append(b, metric...)
			b = append(append(b, '{'), labelsOf(st.Tags)...)
			if len(st.Tags) > 0 {
				b = append(b, ',')
			}
			b = append(b, `text_value="`...)
			b = appendLabelValue(b, st.Text())
			b = append(b, "\"} 0\n"...)
			bw.Write(b)
			return true
		})
	}
	summary := q.Buckets == BucketsSummary
	typ := "histogram"
	if summary {
		typ = "summary"
	}
	s.EachTagged(stats.KindHistogram, keep, func(st *stats.TaggedStat, first bool) bool {
		b = b[:0]
		group(st, first, typ)
		labels := labelsOf(st.Tags)
		h := st.Histogram()
		iv, cu := h.Snapshots()
		series := func(suffix string) {
			b = append(b, metric...)
			b = append(b, suffix...)
			b = append(b, '{')
			b = append(b, labels...)
		}
		sep := func() {
			if len(labels) > 0 {
				b = append(b, ',')
			}
		}
		data := cu
		if summary {
			data = iv
			qs := data.Quantiles(supported)
			for i, v := range qs {
				series("")
				sep()
				b = append(b, `quantile="`...)
				b = append(b, promQuantiles[i]...)
				b = append(b, "\"} "...)
				b = appendG(b, v, 32)
				b = append(b, '\n')
			}
		} else {
			bounds := h.Bounds()
			counts := data.CumulativeBuckets(bounds)

			for i, bound := range bounds {
				series("_bucket")
				sep()
				b = append(b, `le="`...)
				b = appendG(b, bound, 32)
				b = append(b, "\"} "...)
				b = strconv.AppendUint(b, counts[i], 10)
				b = append(b, '\n')
			}
			series("_bucket")
			sep()
			b = append(b, `le="+Inf"} `...)
			b = strconv.AppendUint(b, data.Count(), 10)
			b = append(b, '\n')
		}
		series("_sum")
		b = append(b, "} "...)
		b = appendG(b, data.Sum(), 32)
		b = append(b, '\n')
		series("_count")
		b = append(b, "} "...)
		b = strconv.AppendUint(b, data.Count(), 10)
		b = append(b, '\n')
		bw.Write(b)
		return true
	})
	return bw.Flush()
}

// appendSanitized appends name with every byte outside [a-zA-Z0-9_]
// replaced by '_'.
func appendSanitized(b []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			c = '_'
		}
		b = append(b, c)
	}
	return b
}

// appendLabels appends name="value" pairs joined by ','.
func appendLabels(b []byte, ts []tags.Tag) []byte {
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSanitized(b, t.Name)
		b = append(b, `="`...)
		b = appendLabelValue(b, t.Value)
		b = append(b, '"')
	}
	return b
}

// appendLabelValue escapes \ " and newline, and nothing else.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}
