package pool

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/cluster"
)

// ErrMaxStreamDuration: the cluster's common_http_protocol_options.max_stream_duration ended
// the exchange. Envoy resets the upstream stream and answers 408 (504 once the request was
// whole) with "upstream max stream duration reached", or resets the downstream stream when
// the response had started.
var ErrMaxStreamDuration = errors.New("upstream max stream duration reached")

// streamClock is the max_stream_duration of one exchange, from the moment it has a
// connection (Envoy starts it when the pool is ready). When it runs out, abort resets the
// exchange's stream: it closes an HTTP/1.1 connection, cancels an HTTP/2 stream. It is
// allocated only for clusters that set the option.
type streamClock struct {
	timer *time.Timer
	fired atomic.Bool
	abort func()
	st    *cluster.Stats
}

// startClock starts the clock of an exchange; nil when the cluster has no
// max_stream_duration.
func (m *Manager) startClock(abort func()) *streamClock {
	if m.streamDuration <= 0 {
		return nil
	}
	c := &streamClock{abort: abort, st: m.st}
	// Real clock: request path (see internal/clock/direct_test.go's allowedDirect).
	c.timer = time.AfterFunc(m.streamDuration, c.expire)
	return c
}

func (c *streamClock) expire() {
	c.fired.Store(true)
	c.st.UpstreamRqMaxDurationReached.Inc()
	c.abort()
}

// stop ends the clock and reports whether it ran out (or is running out now): the stream it
// guarded is reset or about to be.
func (c *streamClock) stop() bool {
	return c != nil && !c.timer.Stop()
}

// expired returns the error of an exchange whose clock ran out.
func expired(addr string) error {
	return fmt.Errorf("%w: %s", ErrMaxStreamDuration, addr)
}
