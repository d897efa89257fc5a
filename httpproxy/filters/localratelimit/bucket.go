package localratelimit

import (
	"sync"
	"time"
)

// bucket is a token bucket refilled by tokensPerFill every fillInterval, up to maxTokens, as
// Envoy's local rate limiter's fill timer does (computed when a token is asked for).
type bucket struct {
	maxTokens, tokensPerFill uint32
	fillInterval             time.Duration

	mu       sync.Mutex
	tokens   uint32
	lastFill time.Time
}

// newBucket returns a full bucket; its fill clock starts at its first take, so that it is
// built without a clock (per-route configurations are compiled with the route table).
func newBucket(maxTokens, tokensPerFill uint32, fillInterval time.Duration) *bucket {
	return &bucket{maxTokens: maxTokens, tokensPerFill: tokensPerFill, fillInterval: fillInterval, tokens: maxTokens}
}

// take refills the bucket for the intervals passed and takes one token if there is one; it
// returns the tokens left and the time to the next fill.
func (b *bucket) take(now time.Time) (ok bool, left uint32, reset time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastFill.IsZero() {
		b.lastFill = now
	}
	if fills := now.Sub(b.lastFill) / b.fillInterval; fills > 0 {
		added := uint64(fills) * uint64(b.tokensPerFill)
		b.tokens = uint32(min(uint64(b.maxTokens), uint64(b.tokens)+added))
		b.lastFill = b.lastFill.Add(fills * b.fillInterval)
	}
	if b.tokens > 0 {
		b.tokens--
		ok = true
	}
	return ok, b.tokens, b.lastFill.Add(b.fillInterval).Sub(now)
}
