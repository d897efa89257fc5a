package hystrix

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/legateproxy/legate/stats"
)

// BenchmarkFlush measures one flush of 100 clusters (about 1,100 stats) to
// one connected client: collecting, the rolling windows and the events.
func BenchmarkFlush(b *testing.B) {
	for _, clients := range []int{0, 1} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			f := newFixture(b, 0)
			for i := range 100 {
				u := f.cluster(fmt.Sprintf("service_%03d", i))
				u.Rq2xx.Add(uint64(i))
				u.RqTime.Record(uint64(i))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			if clients == 1 {
				go func() { f.sink.Stream(ctx, io.Discard, nil); close(done) }()
				waitClients(b, f.sink, 1)
			} else {
				close(done)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f.store.Flush()
			}
			b.StopTimer()
			cancel()
			<-done
		})
	}
}

type keepSnapshot struct{ snap *stats.Snapshot }

func (k *keepSnapshot) Flush(s *stats.Snapshot) { k.snap = s }

// BenchmarkSinkFlush is the sink's own share of a flush: 100 clusters, one
// client, the store's snapshot built once outside the loop.
func BenchmarkSinkFlush(b *testing.B) {
	f := newFixture(b, 0)
	for i := range 100 {
		u := f.cluster(fmt.Sprintf("service_%03d", i))
		u.Rq2xx.Add(uint64(i))
		u.RqTime.Record(uint64(i))
	}
	keep := new(keepSnapshot)
	f.store.AddSink(keep)
	f.store.Flush()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.sink.Stream(ctx, io.Discard, nil); close(done) }()
	waitClients(b, f.sink, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f.sink.Flush(keep.snap)
	}
	b.StopTimer()
	cancel()
	<-done
}
