package cluster

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/cputime"
	"github.com/legateproxy/legate/stats"
)

// benchClusters returns n STATIC clusters of 10 hosts each.
func benchClusters(b *testing.B, n int) []*config.Cluster {
	b.Helper()
	out := make([]*config.Cluster, n)
	for i := range out {
		addrs := make([]string, 10)
		for j := range addrs {
			addrs[j] = fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j+1)
		}
		out[i] = parseCluster(b, staticYAML(fmt.Sprintf("cluster_%05d", i), addrs...))
	}
	return out
}

// BenchmarkLoadStatic10k loads 10,000 STATIC clusters of 10 hosts and reports the load time and
// the heap kept per cluster (configuration excluded: it is measured after the configs are built)
// including stats, breakers, hosts, per-host stats and balancers.
func BenchmarkLoadStatic10k(b *testing.B) {
	const n = 10000
	cfgs := benchClusters(b, n)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		store, _ := stats.New(stats.Config{})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		m, err := NewManager(ManagerConfig{Stats: store})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.AddStatic(cfgs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perCluster := float64(after.HeapAlloc-before.HeapAlloc) / n
		b.ReportMetric(perCluster, "B/cluster")
		b.ReportMetric(perCluster/10, "B/host-all-in")
		runtime.KeepAlive(m)
		b.StartTimer()
	}
}

// BenchmarkHostHeap measures the heap a host adds: one cluster of 10 hosts versus one of 1010.
func BenchmarkHostHeap(b *testing.B) {
	build := func(hosts int) *config.Cluster {
		addrs := make([]string, hosts)
		for j := range addrs {
			addrs[j] = fmt.Sprintf("10.1.%d.%d", j/250, j%250+1)
		}
		return parseCluster(b, staticYAML("c", addrs...))
	}
	small, big := build(10), build(1010)
	measure := func(cfg *config.Cluster) uint64 {
		store, _ := stats.New(stats.Config{})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, _ := NewManager(ManagerConfig{Stats: store})
		if err := m.AddStatic([]*config.Cluster{cfg}); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(m)
		return after.HeapAlloc - before.HeapAlloc
	}
	for range b.N {
		perHost := float64(measure(big)-measure(small)) / 1000
		b.ReportMetric(perHost, "B/host")
	}
}

// BenchmarkHostStatsRq counts a request's start and end on a host's lines from every P, as the
// pool's exchange does for each request (run with -cpu 1,2, CPU per op from cputime): "fresh"
// has lines made at the benchmark's GOMAXPROCS, "made-at-1" lines made at GOMAXPROCS 1 before
// it rose, which all Ps shared while the table could not grow.
func BenchmarkHostStatsRq(b *testing.B) {
	for _, at1 := range []bool{false, true} {
		name := "fresh"
		if at1 {
			name = "made-at-1"
		}
		b.Run(name, func(b *testing.B) {
			var hs HostStats
			if at1 {
				procs := runtime.GOMAXPROCS(1)
				hs.RqStarted(stats.ThisLine()).RqEnded(RqSucceeded)
				runtime.GOMAXPROCS(procs)
			}
			cputime.Report(b, func() {
				b.RunParallel(func(pb *testing.PB) {
					l := stats.ThisLine()
					for pb.Next() {
						hs.RqStarted(l).RqEnded(RqSucceeded)
					}
				})
			})
		})
	}
}
