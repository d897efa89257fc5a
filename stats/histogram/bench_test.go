package histogram

import (
	"math/rand/v2"
	"testing"
)

// latencies returns n values shaped like request times in milliseconds.
func latencies(n int) []uint64 {
	r := rand.New(rand.NewPCG(5, 6))
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(r.ExpFloat64() * 50)
	}
	return out
}

func BenchmarkRecord(b *testing.B) {
	h := New(Options{})
	values := latencies(1024)
	for _, v := range values {
		h.Record(v)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		h.Record(values[i&1023])
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	h := New(Options{})
	values := latencies(1024)
	for _, v := range values {
		h.Record(v)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			h.Record(values[i&1023])
		}
	})
}

func BenchmarkFlush(b *testing.B) {
	b.Run("idle", func(b *testing.B) {
		h := New(Options{})
		h.Record(1)
		h.Flush()
		for b.Loop() {
			h.Flush()
		}
	})
	b.Run("64 records", func(b *testing.B) {
		h := New(Options{})
		values := latencies(64)
		for b.Loop() {
			for _, v := range values {
				h.Record(v)
			}
			h.Flush()
		}
	})
}

// latencySnapshot returns the statistics of 100000 latencies.
func latencySnapshot() *Snapshot {
	return flushedWith(Milliseconds, latencies(100000)...).Cumulative()
}

func BenchmarkQuantiles(b *testing.B) {
	s := latencySnapshot()
	qs := SupportedQuantiles()
	for b.Loop() {
		s.Quantiles(qs)
	}
	b.ReportMetric(float64(len(s.bins)), "bins")
}

func BenchmarkCumulativeBuckets(b *testing.B) {
	s := latencySnapshot()
	bounds := DefaultBuckets()
	for b.Loop() {
		s.CumulativeBuckets(bounds)
	}
}

// BenchmarkFootprint reports, as B/op, what a histogram costs in memory:
// unused, and after one record (shard table, one shard, one decade).
func BenchmarkFootprint(b *testing.B) {
	b.Run("unused", func(b *testing.B) {
		for b.Loop() {
			New(Options{})
		}
	})
	b.Run("one record", func(b *testing.B) {
		for b.Loop() {
			New(Options{}).Record(42)
		}
	})
}
