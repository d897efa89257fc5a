package xds

import "time"

// Envoy's defaults for the xDS gRPC stream's reconnect backoff.
const (
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultBackoffMax  = 30 * time.Second
)

// backoff is Envoy's jittered exponential backoff: the n-th retry waits a uniformly random time
// in [0, min(base·(2ⁿ−1), max)), at least 1 ms. Not safe for concurrent use; each stream owns
// one.
type backoff struct {
	base, max time.Duration
	rand      func() uint64
	n         uint
}

// next returns the delay before the next retry.
func (b *backoff) next() time.Duration {
	if b.n < 32 {
		b.n++
	}
	ceil := b.base * time.Duration((uint64(1)<<b.n)-1)
	if ceil <= 0 || ceil > b.max || ceil/time.Duration((uint64(1)<<b.n)-1) != b.base {
		ceil = b.max
	}
	d := time.Duration(b.rand() % uint64(ceil))
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

// reset starts over after a stream that received a response.
func (b *backoff) reset() { b.n = 0 }
