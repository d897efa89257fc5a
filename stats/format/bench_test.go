package format

import (
	"io"
	"net/url"
	"runtime"
	"testing"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/statstest"
)

// bigStore is 10,000 clusters × 100 counters (1M counters) with long names.
func bigStore(b *testing.B) *stats.Store { return statstest.Million(b) }

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func benchRender(b *testing.B, query string, prometheus bool, write func(io.Writer, *stats.Store, Query) error) {
	benchRenderWarm(b, query, prometheus, false, write)
}

// benchRenderWarm renders once before timing when warm is set, so the
// per-registration tag-extraction cache is built (a steady-state scrape).
// With cold set, every iteration renders a new store (built untimed), so
// each one pays the first scrape's tag extraction.
func benchRenderWarm(b *testing.B, query string, prometheus, warm bool, write func(io.Writer, *stats.Store, Query) error) {
	benchRenderStore(b, query, prometheus, warm, false, write)
}

func benchRenderStore(b *testing.B, query string, prometheus, warm, cold bool, write func(io.Writer, *stats.Store, Query) error) {
	s := bigStore(b)
	vals, _ := url.ParseQuery(query)
	q, err := ParseQuery(vals, prometheus)
	if err != nil {
		b.Fatal(err)
	}
	var w countingWriter
	if warm {
		if err := write(&w, s, q); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if cold && i > 0 {
			// Every iteration is a first scrape: a fresh store has no
			// tag-extraction cache.
			b.StopTimer()
			s = nil
			s = bigStore(b)
			b.StartTimer()
		}
		w.n = 0
		if err := write(&w, s, q); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w.n), "bytes")
}

func BenchmarkRenderText(b *testing.B) { benchRender(b, "", false, WriteText) }

func BenchmarkRenderTextFilter(b *testing.B) {
	benchRender(b, `filter=service_0012[0-9].*\.g3\.`, false, WriteText)
}

func BenchmarkRenderTextFilterLiteral(b *testing.B) {
	benchRender(b, `filter=upstream_rq_per_try_idle_timeout_total_c`, false, WriteText)
}

func BenchmarkRenderJSON(b *testing.B) { benchRender(b, "format=json", false, WriteJSON) }

// BenchmarkRenderPrometheus is a steady-state scrape: tag extraction was
// done by an earlier scrape.
func BenchmarkRenderPrometheus(b *testing.B) {
	benchRenderWarm(b, "", true, true, WritePrometheus)
}

// BenchmarkRenderPrometheusCold is the first scrape of a store, including the
// tag extraction of all 1M names, in every iteration.
func BenchmarkRenderPrometheusCold(b *testing.B) {
	benchRenderStore(b, "", true, false, true, WritePrometheus)
}
