package format

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// osRunDelay is the time the process's threads spent runnable but waiting
// for a CPU (the second field of each /proc/self/task/*/schedstat), or 0
// where that file does not exist.
func osRunDelay() time.Duration {
	files, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var total int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(b)); len(fields) >= 2 {
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			total += n
		}
	}
	return time.Duration(total)
}

// histMax returns the upper bound of the highest non-empty bucket of a
// runtime/metrics histogram that got counts since before.
func histMax(before, after *metrics.Float64Histogram) float64 {
	for i := len(after.Counts) - 1; i >= 0; i-- {
		if after.Counts[i] > before.Counts[i] {
			return after.Buckets[i+1]
		}
	}
	return 0
}

func copyHist(h *metrics.Float64Histogram) *metrics.Float64Histogram {
	return &metrics.Float64Histogram{Counts: slices.Clone(h.Counts), Buckets: h.Buckets}
}

// BenchmarkReadyDuringRender attributes the latency of a trivial handler
// (/ready) while 1M counters render over HTTP in the same process. Besides
// the render and /ready's worst and median latency it reports the worst Go
// scheduling delay (/sched/latencies: runnable goroutine waiting for a P),
// the worst GC stop-the-world pause, and the time the process's threads
// waited for a CPU in the kernel per render. "burn" replaces the render by
// a loop of the same length that touches no stats code: what the machine
// and the Go runtime alone cost /ready.
func BenchmarkReadyDuringRender(b *testing.B) {
	s := bigStore(b)
	q, err := ParseQuery(nil, true)
	if err != nil {
		b.Fatal(err)
	}
	WritePrometheus(io.Discard, s, q) // warm the tag cache
	var renderTime time.Duration
	for _, mode := range []string{"prometheus", "text", "burn"} {
		b.Run(mode, func(b *testing.B) {
			mux := http.NewServeMux()
			mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "LIVE\n") })
			mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
				switch mode {
				case "prometheus":
					WritePrometheus(w, s, q)
				case "text":
					WriteText(w, s, Query{})
				default:
					burn(w, renderTime)
				}
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer client.CloseIdleConnections()
			get := func(path string) {
				resp, err := client.Get(srv.URL + path)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			samples := []metrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/sched/pauses/total/gc:seconds"}, {Name: "/sched/pauses/stopping/gc:seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
			var lat []time.Duration
			var render, osDelay time.Duration
			var schedMax, pauseMax, stopMax float64
			var gcs uint64
			runtime.GC()
			for b.Loop() {
				metrics.Read(samples)
				// metrics.Read reuses the histograms; keep copies.
				sched0, pause0 := copyHist(samples[0].Value.Float64Histogram()), copyHist(samples[1].Value.Float64Histogram())
				stop0, gc0 := copyHist(samples[2].Value.Float64Histogram()), samples[3].Value.Uint64()
				os0 := osRunDelay()
				done := make(chan time.Duration)
				go func() {
					start := time.Now()
					get("/stats")
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
					lat = append(lat, time.Since(start))
				}
				osDelay += osRunDelay() - os0
				metrics.Read(samples)
				schedMax = max(schedMax, histMax(sched0, samples[0].Value.Float64Histogram()))
				pauseMax = max(pauseMax, histMax(pause0, samples[1].Value.Float64Histogram()))
				stopMax = max(stopMax, histMax(stop0, samples[2].Value.Float64Histogram()))
				gcs += samples[3].Value.Uint64() - gc0
			}
			if mode == "prometheus" {
				renderTime = render / time.Duration(b.N)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(render.Milliseconds())/float64(b.N), "render-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ready-max-ms")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ready-p50-ms")
			b.ReportMetric(schedMax*1000, "sched-max-ms")
			b.ReportMetric(pauseMax*1000, "gc-pause-max-ms")
			b.ReportMetric(stopMax*1000, "gc-stopping-max-ms")
			b.ReportMetric(float64(gcs)/float64(b.N), "gcs/op")
			b.ReportMetric(float64(osDelay.Milliseconds())/float64(b.N), "os-wait-ms")
		})
	}
}

// burn writes 64 KiB chunks of a constant for about d, touching no stats.
func burn(w io.Writer, d time.Duration) {
	chunk := make([]byte, 64<<10)
	for start := time.Now(); time.Since(start) < d; {
		for i := range chunk {
			chunk[i] = byte(i)
		}
		w.Write(chunk)
	}
}
