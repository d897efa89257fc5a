package localratelimit

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	commonrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	lrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/stats"
)

// minFillInterval is the shortest fill_interval Envoy accepts.
const minFillInterval = 50 * time.Millisecond

// Stats are one configuration's stats (<stat_prefix>.http_local_rate_limit.*).
type Stats struct {
	Enabled     stats.Counter `stat:"enabled"`
	Enforced    stats.Counter `stat:"enforced"`
	RateLimited stats.Counter `stat:"rate_limited"`
	OK          stats.Counter `stat:"ok"`
}

// descriptorBucket is one configured descriptor and its bucket.
type descriptorBucket struct {
	entries []route.DescriptorEntry
	bucket  *bucket
}

// matches reports whether a request's descriptor is this one: the same keys in order, each
// value equal or the configured one empty (any value).
func (d *descriptorBucket) matches(req []route.DescriptorEntry) bool {
	if len(req) != len(d.entries) {
		return false
	}
	for i, e := range d.entries {
		if e.Key != req[i].Key || (e.Value != "" && e.Value != req[i].Value) {
			return false
		}
	}
	return true
}

// Config is one compiled LocalRateLimit (the filter's or a route's). Immutable but for its
// buckets and its stats, which are listed on first use.
type Config struct {
	statPrefix       string
	status           int
	bucket           *bucket // nil: no default bucket
	enabled          filter.Fraction
	enforced         filter.Fraction
	requestHeaders   *route.HeaderOps
	responseHeaders  *route.HeaderOps
	descriptors      []descriptorBucket // in order of their fill rate, slowest first
	rateLimits       []route.RateLimit  // those of the filter's stage
	consumeDefault   bool
	xRateLimitHeader bool

	statsOnce sync.Once
	stats     *Stats
}

// compile checks and compiles a LocalRateLimit; path names it in errors.
func compile(pb *lrlv3.LocalRateLimit, path string) (*Config, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := refuse(pb, path); err != nil {
		return nil, err
	}
	c := &Config{
		statPrefix:       pb.GetStatPrefix() + ".http_local_rate_limit.",
		status:           http.StatusTooManyRequests,
		consumeDefault:   pb.GetAlwaysConsumeDefaultTokenBucket() == nil || pb.GetAlwaysConsumeDefaultTokenBucket().GetValue(),
		xRateLimitHeader: pb.GetEnableXRatelimitHeaders() == commonrlv3.XRateLimitHeadersRFCVersion_DRAFT_VERSION_03,
	}
	if code := int(pb.GetStatus().GetCode()); code >= 400 {
		c.status = code // Envoy answers 429 for a status that is not an error
	}
	var err error
	if pb.GetTokenBucket() != nil {
		if c.bucket, err = compileBucket(pb.GetTokenBucket(), path+".token_bucket"); err != nil {
			return nil, err
		}
	}
	off := filter.Fraction{Denominator: 100}
	if c.enabled, err = filter.FractionFromProto(pb.GetFilterEnabled(), off, path+".filter_enabled"); err != nil {
		return nil, err
	}
	if c.enforced, err = filter.FractionFromProto(pb.GetFilterEnforced(), off, path+".filter_enforced"); err != nil {
		return nil, err
	}
	if c.requestHeaders, err = route.CompileHeaderOps(pb.GetRequestHeadersToAddWhenNotEnforced(), nil, path+".", "request_headers_to_add_when_not_enforced"); err != nil {
		return nil, err
	}
	if c.responseHeaders, err = route.CompileHeaderOps(pb.GetResponseHeadersToAdd(), nil, path+".", "response_headers"); err != nil {
		return nil, err
	}
	rateLimits, err := route.CompileRateLimits(pb.GetRateLimits(), path+".rate_limits")
	if err != nil {
		return nil, err
	}
	for _, rl := range rateLimits {
		if rl.Stage == pb.GetStage() {
			c.rateLimits = append(c.rateLimits, rl)
		}
	}
	for i, d := range pb.GetDescriptors() {
		db, err := compileDescriptor(d, fmt.Sprintf("%s.descriptors[%d]", path, i))
		if err != nil {
			return nil, err
		}
		c.descriptors = append(c.descriptors, db)
	}
	// Envoy takes the tokens of the matched descriptors slowest-filling first, so that a
	// request refused by a tight limit does not spend a looser one's token.
	slices.SortStableFunc(c.descriptors, func(a, b descriptorBucket) int {
		ra := float64(a.bucket.tokensPerFill) / a.bucket.fillInterval.Seconds()
		rb := float64(b.bucket.tokensPerFill) / b.bucket.fillInterval.Seconds()
		switch {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	return c, nil
}

// refuse rejects the fields Legate does not implement.
func refuse(pb *lrlv3.LocalRateLimit, path string) error {
	switch {
	case pb.GetLocalRateLimitPerDownstreamConnection():
		return fmt.Errorf("%s.local_rate_limit_per_downstream_connection: not implemented by Legate", path)
	case pb.GetLocalClusterRateLimit() != nil:
		return fmt.Errorf("%s.local_cluster_rate_limit: not implemented by Legate", path)
	case pb.GetRateLimitedAsResourceExhausted():
		return fmt.Errorf("%s.rate_limited_as_resource_exhausted: not implemented by Legate", path)
	case pb.GetVhRateLimits() != commonrlv3.VhRateLimitsOptions_OVERRIDE:
		return fmt.Errorf("%s.vh_rate_limits: %v: not implemented by Legate (route rate_limits are not read)", path, pb.GetVhRateLimits())
	case len(pb.GetDescriptors()) > 0 && len(pb.GetRateLimits()) == 0:
		return fmt.Errorf("%s.descriptors: descriptors from the route's rate_limits are not implemented by Legate; set the filter's rate_limits", path)
	}
	return nil
}

func compileBucket(tb *typev3.TokenBucket, path string) (*bucket, error) {
	interval := tb.GetFillInterval().AsDuration()
	if interval < minFillInterval {
		return nil, fmt.Errorf("%s.fill_interval = %v: must be at least %v", path, interval, minFillInterval)
	}
	perFill := uint32(1)
	if tb.GetTokensPerFill() != nil {
		perFill = tb.GetTokensPerFill().GetValue()
	}
	return newBucket(tb.GetMaxTokens(), perFill, interval), nil
}

func compileDescriptor(d *commonrlv3.LocalRateLimitDescriptor, path string) (descriptorBucket, error) {
	if d.GetShadowMode() {
		return descriptorBucket{}, fmt.Errorf("%s.shadow_mode: not implemented by Legate", path)
	}
	var db descriptorBucket
	for _, e := range d.GetEntries() {
		db.entries = append(db.entries, route.DescriptorEntry{Key: e.GetKey(), Value: e.GetValue()})
	}
	var err error
	db.bucket, err = compileBucket(d.GetTokenBucket(), path+".token_bucket")
	return db, err
}

// configFromAny unmarshals and compiles a LocalRateLimit.
func configFromAny(cfg *anypb.Any, path string) (*Config, error) {
	if cfg.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("%s: %s: type %q; want %s", Name, path, cfg.GetTypeUrl(), TypeURL)
	}
	var pb lrlv3.LocalRateLimit
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", Name, path, err)
	}
	c, err := compile(&pb, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return c, nil
}
