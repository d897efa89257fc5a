// Package localratelimit is Envoy's envoy.filters.network.local_ratelimit network filter
// (extensions.filters.network.local_ratelimit.v3.LocalRateLimit): a non-terminal filter with a
// token bucket; each new connection of its filter chain takes a token, and a connection that
// finds none is closed at once.
//
// Fields: stat_prefix and token_bucket (max_tokens, tokens_per_fill, default 1, and
// fill_interval) are implemented; the bucket starts full and gains tokens_per_fill every
// fill_interval, up to max_tokens. runtime_enabled and share_key are refused with "not
// implemented by Legate".
//
// Stats, as Envoy's: local_rate_limit.<stat_prefix>.rate_limited (Envoy's source spells it so; its
// documentation says local_ratelimit).
package localratelimit

import (
	"fmt"
	"sync"
	"time"

	lrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/local_ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.local_ratelimit"

// settings are the filter's configuration as the configuration path converts it.
type settings struct {
	statPrefix   string
	max, perFill uint32
	fillInterval time.Duration
}

// parse is the filter's config.NetworkFilterParser.
func parse(m proto.Message) (any, error) {
	pb := m.(*lrlv3.LocalRateLimit)
	tb := pb.GetTokenBucket()
	switch {
	case pb.GetRuntimeEnabled() != nil:
		return nil, fmt.Errorf("%s: runtime_enabled: not implemented by Legate", Name)
	case pb.GetShareKey() != "":
		return nil, fmt.Errorf("%s: share_key: not implemented by Legate", Name)
	case pb.GetStatPrefix() == "":
		return nil, fmt.Errorf("%s: stat_prefix: empty; it is required", Name)
	case tb == nil || tb.GetMaxTokens() < 1:
		return nil, fmt.Errorf("%s: token_bucket.max_tokens: must be at least 1", Name)
	case tb.GetFillInterval().AsDuration() < 50*time.Millisecond:
		return nil, fmt.Errorf("%s: token_bucket.fill_interval: %v; must be at least 50ms", Name, tb.GetFillInterval().AsDuration())
	}
	perFill := uint32(1)
	if v := tb.GetTokensPerFill(); v != nil {
		perFill = v.GetValue()
	}
	return &settings{statPrefix: pb.GetStatPrefix(), max: tb.GetMaxTokens(), perFill: perFill, fillInterval: tb.GetFillInterval().AsDuration()}, nil
}

// build makes the filter's bucket, full, on the clock now.
func build(ctx *listener.ChainContext, config any, now func() time.Time) (listener.ConnFilter, error) {
	s, err := listener.ConfigOf[*settings](Name, config)
	if err != nil {
		return nil, err
	}
	return &bucket{
		now: now, max: s.max, perFill: s.perFill, interval: s.fillInterval,
		tokens: s.max, last: now(),
		limited: ctx.Stats.Counter(stats.PrefixJoin("local_rate_limit."+s.statPrefix, "rate_limited")),
	}, nil
}

// bucket is one filter's token bucket.
type bucket struct {
	now      func() time.Time
	max      uint32
	perFill  uint32
	interval time.Duration
	limited  *stats.Counter

	mu     sync.Mutex // guards tokens and last
	tokens uint32
	last   time.Time // the last fill
}

// OnConnection takes a token for c, refilling first for the intervals that passed.
func (b *bucket) OnConnection(*listener.Conn) bool {
	b.mu.Lock()
	now := b.now()
	if fills := now.Sub(b.last) / b.interval; fills > 0 {
		b.tokens = uint32(min(uint64(b.max), uint64(b.tokens)+uint64(fills)*uint64(b.perFill)))
		b.last = b.last.Add(fills * b.interval)
	}
	ok := b.tokens > 0
	if ok {
		b.tokens--
	}
	b.mu.Unlock()
	if !ok {
		b.limited.Inc()
	}
	return ok
}
