package tracing

import (
	"sync"
	"time"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
)

// batcher is an exporter's span queue and goroutine: Export only queues (dropping when the
// bounded channel is full), the goroutine hands send a batch once <prefix>min_flush_spans spans
// wait or at each <prefix>flush_interval_ms, as Envoy's tracers flush.
type batcher struct {
	prefix       string // the runtime keys' and stats' prefix, "tracing.<provider>."
	runtime      func(string, uint64) uint64
	clock        clock.Clock
	send         func([]*Span)
	timerFlushed *stats.Counter
	dropped      *stats.Counter

	in   chan *Span
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func (b *batcher) start(buffer int) {
	if b.clock == nil {
		b.clock = clock.Real()
	}
	b.in, b.stop, b.done = make(chan *Span, buffer), make(chan struct{}), make(chan struct{})
	go b.run()
}

// Export queues a finished span without blocking; a full buffer drops it.
func (b *batcher) Export(s *Span) {
	select {
	case b.in <- s:
	default:
		b.dropped.Inc()
	}
}

// close sends the spans still queued, stops the goroutine, then calls after.
func (b *batcher) close(after func()) {
	b.once.Do(func() {
		close(b.stop)
		<-b.done
		after()
	})
}

func (b *batcher) setting(key string, def uint64) uint64 {
	if b.runtime == nil {
		return def
	}
	return b.runtime(b.prefix+key, def)
}

func (b *batcher) run() {
	defer close(b.done)
	tick := b.clock.NewTicker(time.Duration(max(b.setting("flush_interval_ms", 5000), 1)) * time.Millisecond)
	defer tick.Stop()
	var batch []*Span
	flush := func() {
		if len(batch) > 0 {
			b.send(batch)
		}
		clear(batch)
		batch = batch[:0]
	}
	for {
		select {
		case s := <-b.in:
			batch = append(batch, s)
			if uint64(len(batch)) >= b.setting("min_flush_spans", 5) {
				flush()
			}
		case <-tick.C():
			b.timerFlushed.Inc()
			flush()
		case <-b.stop:
			for n := len(b.in); n > 0; n-- {
				batch = append(batch, <-b.in)
			}
			flush()
			return
		}
	}
}

// statsShare shares an exporter kind's server-wide counters (one set per store and prefix,
// as Envoy's are per server) between the exporters of every connection manager.
var (
	statsMu    sync.Mutex
	statsShare = map[statsKey]*sharedStats{}
)

type statsKey struct {
	store  *stats.Store
	prefix string
}

type sharedStats struct {
	st   any // *OTelStats or *ZipkinStats
	refs int
	reg  *stats.Registration
}

// acquireStats returns the counters under prefix, made with fresh the first time.
func acquireStats(s *stats.Store, prefix string, fresh func() any) any {
	statsMu.Lock()
	defer statsMu.Unlock()
	k := statsKey{s, prefix}
	sh := statsShare[k]
	if sh == nil {
		sh = &sharedStats{st: fresh()}
		if s != nil {
			sh.reg = s.Register(prefix, sh.st)
		}
		statsShare[k] = sh
	}
	sh.refs++
	return sh.st
}

func releaseStats(s *stats.Store, prefix string) {
	statsMu.Lock()
	defer statsMu.Unlock()
	k := statsKey{s, prefix}
	if sh := statsShare[k]; sh != nil {
		if sh.refs--; sh.refs == 0 {
			if sh.reg != nil {
				sh.reg.Unregister()
			}
			delete(statsShare, k)
		}
	}
}

// defaultBuffer is how many finished spans wait for their exporter before more are dropped
// (OpenTelemetry's max_cache_size default).
const defaultBuffer = 1024
