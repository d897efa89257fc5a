package format

import (
	"fmt"
	"io"
	"net/url"
	"runtime"
	"testing"

	"github.com/legateproxy/legate/stats"
)

// counter10 is ten counters with Envoy-length names.
type counter10 struct {
	A stats.Counter `stat:"upstream_cx_connect_attempts_exceeded_a"`
	B stats.Counter `stat:"upstream_cx_connect_attempts_exceeded_b"`
	C stats.Counter `stat:"upstream_rq_per_try_idle_timeout_total_c"`
	D stats.Counter `stat:"upstream_rq_per_try_idle_timeout_total_d"`
	E stats.Counter `stat:"upstream_cx_destroy_local_with_active_rq_e"`
	F stats.Counter `stat:"upstream_cx_destroy_local_with_active_rq_f"`
	G stats.Counter `stat:"lb_subsets_single_host_per_subset_dup_g"`
	H stats.Counter `stat:"lb_subsets_single_host_per_subset_dup_h"`
	I stats.Counter `stat:"membership_change_with_degraded_hosts_i"`
	J stats.Counter `stat:"membership_change_with_degraded_hosts_j"`
}

// hundred is 100 counters.
type hundred struct {
	G0 counter10 `stat:"g0."`
	G1 counter10 `stat:"g1."`
	G2 counter10 `stat:"g2."`
	G3 counter10 `stat:"g3."`
	G4 counter10 `stat:"g4."`
	G5 counter10 `stat:"g5."`
	G6 counter10 `stat:"g6."`
	G7 counter10 `stat:"g7."`
	G8 counter10 `stat:"g8."`
	G9 counter10 `stat:"g9."`
}

// bigStore is 10,000 clusters × 100 counters (1M counters) with long names.
func bigStore(b *testing.B) *stats.Store {
	s, err := stats.New(stats.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 10000; i++ {
		h := new(hundred)
		s.Register(fmt.Sprintf("cluster.service_%05d_with_a_long_name.", i), h)
		h.G3.C.Add(uint64(i))
	}
	runtime.GC()
	return s
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func benchRender(b *testing.B, query string, prometheus bool, write func(io.Writer, *stats.Store, Query) error) {
	benchRenderWarm(b, query, prometheus, false, write)
}

// benchRenderWarm renders once before timing when warm is set, so the
// per-registration tag-extraction cache is built (a steady-state scrape).
func benchRenderWarm(b *testing.B, query string, prometheus, warm bool, write func(io.Writer, *stats.Store, Query) error) {
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
	for b.Loop() {
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

// BenchmarkRenderPrometheusCold includes the first scrape's tag extraction of
// all 1M names.
func BenchmarkRenderPrometheusCold(b *testing.B) {
	benchRenderWarm(b, "", true, false, WritePrometheus)
}
