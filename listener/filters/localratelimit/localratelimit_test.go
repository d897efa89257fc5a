package localratelimit

import (
	"strings"
	"testing"
	"time"

	lrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/local_ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// filterOf takes pb through the configuration path's parser, then the factory, on the clock
// now; it returns the chain's context (its stats) and the filter.
func filterOf(t *testing.T, pb *lrlv3.LocalRateLimit, now func() time.Time) (*listener.ChainContext, listener.ConnFilter, error) {
	t.Helper()
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &listener.ChainContext{Stats: st}
	cfg, err := parse(pb)
	if err != nil {
		return ctx, nil, err
	}
	f, err := build(ctx, cfg, now)
	return ctx, f, err
}

// TestBucketRefills: the bucket starts full, each connection takes a token, and
// tokens_per_fill come back per fill_interval passed, never above max_tokens.
func TestBucketRefills(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ctx, f, err := filterOf(t, &lrlv3.LocalRateLimit{StatPrefix: "rl", TokenBucket: &typev3.TokenBucket{MaxTokens: 3, TokensPerFill: wrapperspb.UInt32(2), FillInterval: durationpb.New(time.Second)}}, clock)
	if err != nil {
		t.Fatal(err)
	}
	take := func(n int) (admitted int) {
		for range n {
			if f.OnConnection(nil) {
				admitted++
			}
		}
		return admitted
	}
	if got := take(5); got != 3 {
		t.Fatalf("a full bucket of 3 admitted %d of 5", got)
	}
	now = now.Add(999 * time.Millisecond)
	if got := take(1); got != 0 {
		t.Fatalf("before the interval passed, %d admitted", got)
	}
	now = now.Add(time.Millisecond)
	if got := take(3); got != 2 {
		t.Fatalf("one interval refilled %d tokens; want tokens_per_fill 2", got)
	}
	now = now.Add(time.Hour)
	if got := take(5); got != 3 {
		t.Fatalf("after an hour %d admitted; want max_tokens 3", got)
	}
	if v := ctx.Stats.Counter("local_rate_limit.rl.rate_limited").Value(); v != 6 {
		t.Errorf("rate_limited = %d; want 6", v)
	}
}

// TestRefusals: unimplemented fields and impossible buckets are refused with their names.
func TestRefusals(t *testing.T) {
	tb := &typev3.TokenBucket{MaxTokens: 1, FillInterval: durationpb.New(time.Second)}
	for _, tc := range []struct {
		pb   *lrlv3.LocalRateLimit
		want string
	}{
		{&lrlv3.LocalRateLimit{StatPrefix: "x", TokenBucket: tb, ShareKey: "k"}, "share_key: not implemented by Legate"},
		{&lrlv3.LocalRateLimit{StatPrefix: "x", TokenBucket: &typev3.TokenBucket{MaxTokens: 1, FillInterval: durationpb.New(time.Millisecond)}}, "at least 50ms"},
		{&lrlv3.LocalRateLimit{TokenBucket: tb}, "stat_prefix"},
	} {
		if _, _, err := filterOf(t, tc.pb, time.Now); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error containing %q", tc.pb, err, tc.want)
		}
	}
}
