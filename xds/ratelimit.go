package xds

import (
	"time"

	"github.com/legateproxy/legate/xds/resource"
)

// tokenBucket is api_config_source.rate_limit_settings: each round of requests takes a token;
// tokens refill at fillRate per second up to max. Guarded by mux.mu.
type tokenBucket struct {
	max, tokens float64
	fillRate    float64
	last        time.Time
	// pending is set while requests wait for a token (control_plane.pending_requests).
	pending bool
}

func newTokenBucket(rl *resource.RateLimit, now time.Time) *tokenBucket {
	if rl == nil {
		return nil
	}
	return &tokenBucket{max: float64(rl.MaxTokens), tokens: float64(rl.MaxTokens), fillRate: rl.FillRate, last: now}
}

// limitWait returns how long requests that are due must wait for a token, or 0 when they may go
// now (taking the token). A wait counts control_plane.rate_limit_enforced.
func (m *mux) limitWait() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	tb := m.limiter
	if tb == nil {
		return 0
	}
	due := 0
	for _, w := range m.watches {
		if w.dirty {
			due++
		}
	}
	if due == 0 {
		return 0
	}
	now := m.c.clock.Now()
	tb.tokens = min(tb.max, tb.tokens+now.Sub(tb.last).Seconds()*tb.fillRate)
	tb.last = now
	st := &m.c.cpStats
	if tb.tokens >= 1 {
		tb.tokens--
		if tb.pending {
			tb.pending = false
			st.PendingRequests.Sub(1)
		}
		return 0
	}
	st.RateLimitEnforced.Inc()
	if !tb.pending {
		tb.pending = true
		st.PendingRequests.Add(1)
	}
	wait := time.Duration((1 - tb.tokens) / tb.fillRate * float64(time.Second))
	return max(wait, time.Millisecond)
}
