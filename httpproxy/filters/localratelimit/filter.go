package localratelimit

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	lrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/registry"
)

// Name and TypeURL select the filter in http_filters and its per-route configuration (the
// same message) in typed_per_filter_config.
const (
	Name    = "envoy.filters.http.local_ratelimit"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit"
)

// What a rate-limited request is answered with.
const (
	replyBody         = "local_rate_limited"
	replyDetails      = "local_rate_limited"
	hdrRateLimited    = "X-Envoy-Ratelimited"
	hdrXRateLimit     = "X-Ratelimit-Limit"
	hdrXRateRemaining = "X-Ratelimit-Remaining"
	hdrXRateReset     = "X-Ratelimit-Reset"
	maxDescriptors    = 8 // descriptors a request makes without allocating
)

// Register registers the filter; its per-route configuration is its own message.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &lrlv3.LocalRateLimit{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return configFromAny(cfg, "typed_per_filter_config") },
		PerRouteConfig: &lrlv3.LocalRateLimit{},
	})
}

// Filter is one configured local rate limit filter. Safe for concurrent use.
type Filter struct {
	name    string
	ctx     *filter.Context
	now     func() time.Time
	cfg     *Config
	release func()
}

// FromAny builds the filter from its typed_config, which is required (stat_prefix is).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s: typed_config is required (stat_prefix)", Name)
	}
	c, err := configFromAny(cfg, "typed_config")
	if err != nil {
		return nil, err
	}
	return New(c, ctx), nil
}

// New builds the filter around a compiled configuration.
func New(c *Config, ctx *filter.Context) *Filter {
	if ctx == nil {
		ctx = &filter.Context{}
	}
	f := &Filter{name: ctx.Name, ctx: ctx, now: ctx.Clock(), cfg: c}
	if f.name == "" {
		f.name = Name
	}
	c.stats, f.release = filter.AcquireStats[Stats](ctx.Stats, c.statPrefix)
	c.statsOnce.Do(func() {}) // the filter's own configuration has its stats
	return f
}

// Close drops the filter's hold on its stats.
func (f *Filter) Close() error {
	f.release()
	return nil
}

// config is the request's configuration: the most specific per-route one, else the filter's.
func (f *Filter) config(x *filter.Exchange) *Config {
	if pc, ok := x.PerFilterConfig(f.name); ok {
		if c, ok := pc.Config.(*Config); ok {
			c.statsOnce.Do(func() {
				// A per-route configuration's stats are listed on its first request and kept:
				// route tables do not tell when they are dropped.
				c.stats, _ = filter.AcquireStats[Stats](f.ctx.Stats, c.statPrefix)
			})
			return c
		}
	}
	return f.cfg
}

// decision is what the request's check found, kept for the response's x-ratelimit headers.
type decision struct {
	limit, left uint32
	reset       time.Duration
}

// OnRequest takes the request's tokens and answers it locally when it is over its limits and
// the limit is enforced.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	c := f.config(x)
	if !c.enabled.Enabled(f.ctx) {
		return nil
	}
	c.stats.Enabled.Inc()
	allowed, d := f.take(c, x)
	if c.xRateLimitHeader && d != nil {
		x.Keep(f, d)
	}
	if allowed {
		c.stats.OK.Inc()
		return nil
	}
	c.stats.RateLimited.Inc()
	if !c.enforced.Enabled(f.ctx) {
		c.requestHeaders.Apply(x.Request.Header)
		return nil
	}
	c.stats.Enforced.Inc()
	h := http.Header{hdrRateLimited: {"true"}}
	c.responseHeaders.Apply(h)
	return &filter.Reply{Status: c.status, Body: replyBody, Details: replyDetails, Flags: accesslog.RateLimited, Header: h}
}

// take checks the request's descriptors' buckets, slowest first, then the default bucket
// (unless a descriptor matched and always_consume_default_token_bucket is off). The decision
// is the bucket that refused the request, or else the last one that allowed it; nil when no
// bucket applies.
func (f *Filter) take(c *Config, x *filter.Exchange) (allowed bool, d *decision) {
	now := f.now()
	matched := false
	if len(c.descriptors) > 0 {
		for _, db := range c.matchedDescriptors(x, f.ctx.LocalClusterName) {
			matched = true
			ok, left, reset := db.bucket.take(now)
			if c.xRateLimitHeader {
				d = &decision{db.bucket.maxTokens, left, reset}
			}
			if !ok {
				return false, d
			}
		}
	}
	if c.bucket != nil && (!matched || c.consumeDefault) {
		ok, left, reset := c.bucket.take(now)
		if c.xRateLimitHeader {
			d = &decision{c.bucket.maxTokens, left, reset}
		}
		return ok, d
	}
	return true, d
}

// matchedDescriptors returns the configured descriptors that one of the request's
// descriptors (one per rate_limits entry whose actions all apply) matches, in the
// configuration's order (slowest first).
func (c *Config) matchedDescriptors(x *filter.Exchange, localCluster string) []*descriptorBucket {
	in := route.DescriptorInput{Request: x.Request, ClientIP: x.ClientIP, LocalCluster: localCluster, Metadata: x.Metadata}
	if x.Downstream != nil {
		in.Match = x.Downstream.Route()
	}
	var flat [maxDescriptors * 2]route.DescriptorEntry
	var spans [maxDescriptors][2]int
	buf, n := flat[:0], 0
	for j := range c.rateLimits {
		start := len(buf)
		var ok bool
		if buf, ok = c.rateLimits[j].Descriptor(&in, buf); !ok {
			continue
		}
		if n < len(spans) {
			spans[n] = [2]int{start, len(buf)}
			n++
		}
	}
	var out []*descriptorBucket
	for i := range c.descriptors {
		for _, sp := range spans[:n] {
			if c.descriptors[i].matches(buf[sp[0]:sp[1]]) {
				out = append(out, &c.descriptors[i])
				break
			}
		}
	}
	return out
}

// OnResponse adds the x-ratelimit headers of the bucket that decided.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	d, ok := x.Kept(f).(*decision)
	if !ok || d == nil {
		return
	}
	h.Set(hdrXRateLimit, strconv.FormatUint(uint64(d.limit), 10))
	h.Set(hdrXRateRemaining, strconv.FormatUint(uint64(d.left), 10))
	secs := (d.reset + time.Second - 1) / time.Second
	h.Set(hdrXRateReset, strconv.FormatInt(int64(secs), 10))
}
