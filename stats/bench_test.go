package stats

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"
)

func BenchmarkCounterInc(b *testing.B) {
	s := newStore(b, Config{})
	var c clusterStats
	s.Register("cluster.web.", &c)
	b.ReportAllocs()
	for b.Loop() {
		c.UpstreamRqTotal.Inc()
	}
}

func BenchmarkCounterIncParallel(b *testing.B) {
	s := newStore(b, Config{})
	var c clusterStats
	s.Register("cluster.web.", &c)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.UpstreamRqTotal.Inc()
		}
	})
}

func BenchmarkGaugeSet(b *testing.B) {
	var g Gauge
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		g.Set(i)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	s := newStore(b, Config{})
	var c clusterStats
	s.Register("cluster.web.", &c)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		c.UpstreamRqTime.Record(i & 1023)
	}
}

// Counter10 is ten counters with long names.
type Counter10 struct {
	A Counter `stat:"upstream_cx_connect_attempts_exceeded_a"`
	B Counter `stat:"upstream_cx_connect_attempts_exceeded_b"`
	C Counter `stat:"upstream_rq_per_try_idle_timeout_total_c"`
	D Counter `stat:"upstream_rq_per_try_idle_timeout_total_d"`
	E Counter `stat:"upstream_cx_destroy_local_with_active_rq_e"`
	F Counter `stat:"upstream_cx_destroy_local_with_active_rq_f"`
	G Counter `stat:"lb_subsets_single_host_per_subset_dup_g"`
	H Counter `stat:"lb_subsets_single_host_per_subset_dup_h"`
	I Counter `stat:"membership_change_with_degraded_hosts_i"`
	J Counter `stat:"membership_change_with_degraded_hosts_j"`
}

// HundredCounters is 100 counters: ten Counter10 groups under sub-prefixes.
type HundredCounters struct {
	G0 Counter10 `stat:"g0."`
	G1 Counter10 `stat:"g1."`
	G2 Counter10 `stat:"g2."`
	G3 Counter10 `stat:"g3."`
	G4 Counter10 `stat:"g4."`
	G5 Counter10 `stat:"g5."`
	G6 Counter10 `stat:"g6."`
	G7 Counter10 `stat:"g7."`
	G8 Counter10 `stat:"g8."`
	G9 Counter10 `stat:"g9."`
}

// bigStore registers clusters × 100 counters.
func bigStore(tb testing.TB, clusters int) (*Store, []*HundredCounters) {
	s := newStore(tb, Config{})
	all := make([]*HundredCounters, clusters)
	for i := range all {
		all[i] = new(HundredCounters)
		s.Register(fmt.Sprintf("cluster.service_%05d_with_a_long_name.", i), all[i])
		all[i].G3.C.Add(uint64(i))
	}
	return s, all
}

// BenchmarkHeapPerCounter reports the heap bytes each registered counter
// costs, field included, for 10,000 clusters × 100 counters.
func BenchmarkHeapPerCounter(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, all := bigStore(b, 10000)
		s.Each(KindSet(KindCounter), func(*Stat) bool { return false }) // build the sorted view too
		runtime.GC()
		runtime.ReadMemStats(&after)
		n := float64(len(all) * 100)
		total := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(total/n, "heapB/counter")
		b.ReportMetric(total/n-float64(unsafeSizeofCounter), "overheadB/counter")
		// The tag-extraction cache built by the first Prometheus scrape.
		s.EachTagged(KindCounter, func(*Stat) bool { return false }, func(*TaggedStat, bool) bool { return false })
		for _, r := range s.snapshotRegs() {
			r.tagCache()
		}
		runtime.GC()
		var tagged runtime.MemStats
		runtime.ReadMemStats(&tagged)
		b.ReportMetric(float64(tagged.HeapAlloc-before.HeapAlloc)/n-float64(unsafeSizeofCounter), "overheadB/counter-tagged")
		runtime.KeepAlive(s)
		runtime.KeepAlive(all)
	}
}

var unsafeSizeofCounter = unsafe.Sizeof(Counter{})

// BenchmarkAtomicAddBaseline is a bare atomic.Uint64.Add, the floor for
// BenchmarkCounterInc (Counter.Inc compiles to the same single LOCK XADDQ).
func BenchmarkAtomicAddBaseline(b *testing.B) {
	var v atomic.Uint64
	for b.Loop() {
		v.Add(1)
	}
}
