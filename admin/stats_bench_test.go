package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/legateproxy/legate/stats/statstest"
)

// BenchmarkReadyDuringStats renders /stats (and /stats/prometheus) over
// 1M counters through a real HTTP server while a second client polls
// /ready, as Envoy's /stats is known to block /ready for seconds. It
// reports the render time, /ready's worst and median latency during the
// render, and how much the live heap grew while the body streamed.
func BenchmarkReadyDuringStats(b *testing.B) {
	for _, path := range []string{"/stats", "/stats?format=json", "/stats/prometheus"} {
		b.Run(path, func(b *testing.B) {
			store := statstest.Million(b)
			ready := Endpoint{Path: "/ready", Help: "ready", Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				io.WriteString(w, "LIVE\n")
			}}
			reg := NewRegistry()
			for _, e := range append(StatsEndpoints(store), ready) {
				if err := reg.Register(e); err != nil {
					b.Fatal(err)
				}
			}
			srv := httptest.NewServer(New(Config{}, reg))
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			get := func(path string) {
				resp, err := client.Get(srv.URL + path)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			get(path) // warm caches (tag extraction for Prometheus)
			heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			var worst, render time.Duration
			var lat []time.Duration
			var growth uint64
			b.ResetTimer()
			for b.Loop() {
				metrics.Read(heap)
				base := heap[0].Value.Uint64()
				done := make(chan time.Duration)
				go func() {
					start := time.Now()
					get(path)
					done <- time.Since(start)
				}()
			poll:
				for {
					select {
					case d := <-done:
						render += d
						break poll
					default:
					}
					start := time.Now()
					get("/ready")
					d := time.Since(start)
					lat = append(lat, d)
					worst = max(worst, d)
					metrics.Read(heap)
					if h := heap[0].Value.Uint64(); h > base {
						growth = max(growth, h-base)
					}
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(render.Milliseconds())/float64(b.N), "render-ms")
			b.ReportMetric(float64(worst.Microseconds())/1000, "ready-max-ms")
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ready-p50-ms")
			}
			b.ReportMetric(float64(growth)/(1<<20), "heap-growth-MiB")
		})
	}
}
