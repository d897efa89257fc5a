package ratelimit

import (
	"fmt"
	"net/http"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/ratelimitsvc"
)

// requestType is which requests the filter applies to (request_type).
type requestType uint8

const (
	requestsBoth requestType = iota
	requestsInternal
	requestsExternal
)

// vhOption is RateLimitPerRoute.vh_rate_limits.
type vhOption uint8

const (
	vhOverride vhOption = iota // the virtual host's when the route has none
	vhInclude
	vhIgnore
)

// config is the checked RateLimit.
type config struct {
	domain            string
	stage             uint32
	requests          requestType
	timeout           time.Duration
	failureModeDeny   bool
	failureDenyFrac   *filter.Fraction // failure_mode_deny_percent; nil: failure_mode_deny
	resourceExhausted bool
	xRateLimit        bool
	xEnvoyRateLimited bool
	retryAfter        bool
	limitedStatus     int
	errorStatus       int
	responseHeaders   *route.HeaderOps // response_headers_to_add, on rate-limited replies
	statPrefix        string           // "ratelimit." or "ratelimit.<stat_prefix>."
	enabled, enforced filter.Fraction
	rateLimits        []route.RateLimit // the filter's own; nil: the route's
	metadataNamespace string
	service           ratelimitsvc.Target
}

// compile checks a RateLimit; errors name the field.
func compile(pb *rlv3.RateLimit) (*config, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c := &config{
		domain:            pb.GetDomain(),
		stage:             pb.GetStage(),
		timeout:           ratelimitsvc.DefaultTimeout,
		failureModeDeny:   pb.GetFailureModeDeny(),
		resourceExhausted: pb.GetRateLimitedAsResourceExhausted(),
		xRateLimit:        pb.GetEnableXRatelimitHeaders() == rlv3.RateLimit_DRAFT_VERSION_03,
		xEnvoyRateLimited: !pb.GetDisableXEnvoyRatelimitedHeader(),
		retryAfter:        pb.GetEnableRetryAfterHeader(),
		limitedStatus:     http.StatusTooManyRequests,
		errorStatus:       http.StatusInternalServerError,
		statPrefix:        "ratelimit.",
		metadataNamespace: pb.GetMetadataNamespace(),
	}
	if c.metadataNamespace == "" {
		c.metadataNamespace = Name
	}
	if p := pb.GetStatPrefix(); p != "" {
		c.statPrefix = "ratelimit." + p + "."
	}
	switch pb.GetRequestType() { // validated: "", both, internal or external
	case "internal":
		c.requests = requestsInternal
	case "external":
		c.requests = requestsExternal
	}
	if pb.GetTimeout() != nil {
		c.timeout = pb.GetTimeout().AsDuration()
	}
	if s := int(pb.GetRateLimitedStatus().GetCode()); s >= 400 {
		c.limitedStatus = s // Envoy answers 429 for a status that is not an error
	}
	if s := int(pb.GetStatusOnError().GetCode()); s != 0 {
		c.errorStatus = s
	}
	var err error
	if c.responseHeaders, err = route.CompileHeaderOps(pb.GetResponseHeadersToAdd(), nil, Name+": ", "response_headers"); err != nil {
		return nil, err
	}
	if c.enabled, err = filter.FractionFromProto(pb.GetFilterEnabled(), filter.Fraction{Key: "ratelimit.http_filter_enabled", Numerator: 100, Denominator: 100}, Name+": filter_enabled"); err != nil {
		return nil, err
	}
	if c.enforced, err = filter.FractionFromProto(pb.GetFilterEnforced(), filter.Fraction{Key: "ratelimit.http_filter_enforcing", Numerator: 100, Denominator: 100}, Name+": filter_enforced"); err != nil {
		return nil, err
	}
	if p := pb.GetFailureModeDenyPercent(); p != nil {
		f, err := filter.FractionFromProto(p, filter.Fraction{}, Name+": failure_mode_deny_percent")
		if err != nil {
			return nil, err
		}
		c.failureDenyFrac = &f
	}
	if c.rateLimits, err = compileOwnRateLimits(pb.GetRateLimits(), Name+": rate_limits"); err != nil {
		return nil, err
	}
	if c.service, err = ratelimitsvc.Compile(pb.GetRateLimitService(), Name+": rate_limit_service"); err != nil {
		return nil, err
	}
	return c, nil
}

// compileOwnRateLimits compiles the filter's or a route's own rate_limits, where Envoy reads
// no stage (a set stage is refused rather than ignored).
func compileOwnRateLimits(in []*routev3.RateLimit, path string) ([]route.RateLimit, error) {
	rls, err := route.CompileRateLimits(in, path)
	if err != nil {
		return nil, err
	}
	for i, rl := range in {
		if rl.GetStage() != nil {
			return nil, fmt.Errorf("%s[%d].stage: not read here; Envoy takes this filter's rate_limits whatever their stage", path, i)
		}
		for j, a := range rl.GetActions() {
			if a.GetDynamicMetadata() != nil {
				return nil, fmt.Errorf("%s[%d].actions[%d].dynamic_metadata: not supported here, as in Envoy; use metadata", path, i, j)
			}
		}
	}
	return rls, nil
}

// perRoute is a compiled RateLimitPerRoute.
type perRoute struct {
	vh         vhOption
	rateLimits []route.RateLimit // nil: the filter's or the route's
	domain     string            // "": the filter's
}

// perRouteFromAny compiles a typed_per_filter_config entry.
func perRouteFromAny(a *anypb.Any) (any, error) {
	var pb rlv3.RateLimitPerRoute
	if err := a.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if pb.GetOverrideOption() != rlv3.RateLimitPerRoute_DEFAULT {
		return nil, fmt.Errorf("%s: typed_per_filter_config.override_option: not implemented by Legate", Name)
	}
	p := &perRoute{domain: pb.GetDomain()}
	switch pb.GetVhRateLimits() {
	case rlv3.RateLimitPerRoute_INCLUDE:
		p.vh = vhInclude
	case rlv3.RateLimitPerRoute_IGNORE:
		p.vh = vhIgnore
	}
	var err error
	if p.rateLimits, err = compileOwnRateLimits(pb.GetRateLimits(), Name+": typed_per_filter_config.rate_limits"); err != nil {
		return nil, err
	}
	return p, nil
}
