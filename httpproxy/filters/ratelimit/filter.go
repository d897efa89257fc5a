package ratelimit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/ratelimitsvc"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name selects the filter in http_filters and its RateLimitPerRoute in typed_per_filter_config.
const Name = "envoy.filters.http.ratelimit"

// What Envoy's filter answers and records.
const (
	detailsLimited      = "request_rate_limited"
	detailsError        = "rate_limiter_error"
	hdrEnvoyRateLimited = "X-Envoy-Ratelimited"
	hdrLimit            = "X-Ratelimit-Limit"
	hdrRemaining        = "X-Ratelimit-Remaining"
	hdrReset            = "X-Ratelimit-Reset"
	hdrRetryAfter       = "Retry-After"
	hdrInternal         = "X-Envoy-Internal"
)

// Register registers the filter and its per-route configuration.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &rlv3.RateLimit{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       perRouteFromAny,
		PerRouteConfig: &rlv3.RateLimitPerRoute{},
	})
}

// clusterStats are cluster.<route cluster>.ratelimit[.<stat_prefix>].*, as Envoy counts them in
// the route's cluster's scope.
type clusterStats struct {
	ok, overLimit, err, failureModeAllowed *stats.Counter
}

// Filter is one configured rate limit filter. Immutable after New but for its cache of
// per-cluster stats; safe for concurrent use.
type Filter struct {
	name   string // the key of its typed_per_filter_config entries
	ctx    *filter.Context
	cfg    *config
	client *ratelimitsvc.Client
	stats  sync.Map // route cluster name → *clusterStats
}

// FromAny builds the filter from its typed_config, which is required (domain is).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s: typed_config is required (domain, rate_limit_service)", Name)
	}
	var pb rlv3.RateLimit
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
	}
	return New(&pb, ctx)
}

// New builds the filter. Its channel to the service dials through ctx.Pools; without pools
// every call fails (failure_mode_deny decides).
func New(pb *rlv3.RateLimit, ctx *filter.Context) (*Filter, error) {
	c, err := compile(pb)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = &filter.Context{}
	}
	f := &Filter{name: ctx.Name, ctx: ctx, cfg: c}
	if f.name == "" {
		f.name = Name
	}
	var dial grpcclient.Dial
	if pools := ctx.Pools; pools != nil {
		dial = func(dctx context.Context, cluster string) (net.Conn, error) { return filter.Dial(dctx, pools, cluster) }
	}
	if f.client, err = ratelimitsvc.New(c.service, dial); err != nil {
		return nil, fmt.Errorf("%s: rate_limit_service: %w", Name, err)
	}
	return f, nil
}

// Close closes the channel to the service.
func (f *Filter) Close() error { return f.client.Close() }

// statsOf returns the stats of a route's cluster, listing them on the cluster's first call.
func (f *Filter) statsOf(cluster string) *clusterStats {
	if s, ok := f.stats.Load(cluster); ok {
		return s.(*clusterStats)
	}
	p := "cluster." + cluster + "." + f.cfg.statPrefix
	s, _ := f.stats.LoadOrStore(cluster, &clusterStats{
		ok:                 f.ctx.Stats.Counter(p + "ok"),
		overLimit:          f.ctx.Stats.Counter(p + "over_limit"),
		err:                f.ctx.Stats.Counter(p + "error"),
		failureModeAllowed: f.ctx.Stats.Counter(p + "failure_mode_allowed"),
	})
	return s.(*clusterStats)
}

// appliesTo reports whether request_type covers req (internal: x-envoy-internal: true).
func (f *Filter) appliesTo(req *route.Request) bool {
	switch f.cfg.requests {
	case requestsInternal:
		return req.Header.Get(hdrInternal) == "true"
	case requestsExternal:
		return req.Header.Get(hdrInternal) != "true"
	}
	return true
}

// OnRequest asks the service about the request's descriptors and answers the request locally
// when it is over the limit (and the limit is enforced) or, with failure_mode_deny, when the
// service failed. Requests without a routed cluster or without descriptors are not checked.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	c := f.cfg
	if !f.appliesTo(x.Request) || !c.enabled.Enabled(f.ctx) || x.Downstream == nil {
		return nil
	}
	m := x.Downstream.Route()
	if m == nil || m.Route == nil || m.Cluster == "" {
		return nil
	}
	pr := f.perRoute(x)
	descriptors := f.descriptors(x, m, pr)
	if len(descriptors) == 0 {
		return nil
	}
	domain := c.domain
	if pr != nil && pr.domain != "" {
		domain = pr.domain
	}
	resp, err := f.client.ShouldRateLimit(context.Background(), domain, descriptors, c.timeout)
	st := f.statsOf(m.Cluster)
	if err != nil {
		st.err.Inc()
		if !f.failureModeDeny() {
			st.failureModeAllowed.Inc()
			return nil
		}
		return f.reply(x, c.errorStatus, "", nil, detailsError, accesslog.RateLimitServiceError)
	}
	if md := resp.GetDynamicMetadata(); len(md.GetFields()) > 0 {
		x.SetMetadata(c.metadataNamespace, md.GetFields())
	}
	h := f.responseHeaders(resp)
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		st.overLimit.Inc()
		if c.enforced.Enabled(f.ctx) {
			return f.limited(x, resp, h)
		}
	} else {
		st.ok.Inc()
	}
	for _, hv := range resp.GetRequestHeadersToAdd() {
		x.Request.Header.Add(hv.GetKey(), headerValue(hv))
	}
	if h != nil {
		x.Keep(f, h)
	}
	return nil
}

func (f *Filter) failureModeDeny() bool {
	if p := f.cfg.failureDenyFrac; p != nil {
		return p.Enabled(f.ctx)
	}
	return f.cfg.failureModeDeny
}

func (f *Filter) perRoute(x *filter.Exchange) *perRoute {
	if pc, ok := x.PerFilterConfig(f.name); ok {
		if p, ok := pc.Config.(*perRoute); ok {
			return p
		}
	}
	return nil
}

// descriptors makes the request's descriptors: from the route's per-filter rate_limits, else
// the filter's, else the route's of the filter's stage with the virtual host's as
// include_vh_rate_limits and vh_rate_limits say (Envoy's populateRateLimitDescriptors).
func (f *Filter) descriptors(x *filter.Exchange, m *route.Match, pr *perRoute) []*commonrlv3.RateLimitDescriptor {
	in := route.DescriptorInput{Request: x.Request, Match: m, ClientIP: x.ClientIP, LocalCluster: f.ctx.LocalClusterName, Metadata: x.Metadata}
	var out []*commonrlv3.RateLimitDescriptor
	switch {
	case pr != nil && pr.rateLimits != nil:
		return appendDescriptors(out, pr.rateLimits, &in, -1)
	case f.cfg.rateLimits != nil:
		return appendDescriptors(out, f.cfg.rateLimits, &in, -1)
	}
	stage := int(f.cfg.stage)
	out = appendDescriptors(out, m.Route.RateLimits, &in, stage)
	opt := vhOverride
	switch {
	case m.Route.IncludeVhRateLimits:
		opt = vhInclude
	case pr != nil:
		opt = pr.vh
	}
	if vh := m.VirtualHost; vh != nil && (opt == vhInclude || opt == vhOverride && len(m.Route.RateLimits) == 0) {
		out = appendDescriptors(out, vh.RateLimits, &in, stage)
	}
	return out
}

// appendDescriptors appends the descriptors of the rate limits of stage (-1: every one).
func appendDescriptors(out []*commonrlv3.RateLimitDescriptor, rls []route.RateLimit, in *route.DescriptorInput, stage int) []*commonrlv3.RateLimitDescriptor {
	var buf [8]route.DescriptorEntry
	for i := range rls {
		if stage >= 0 && rls[i].Stage != uint32(stage) {
			continue
		}
		entries, ok := rls[i].Descriptor(in, buf[:0])
		if !ok || len(entries) == 0 {
			continue
		}
		d := &commonrlv3.RateLimitDescriptor{Entries: make([]*commonrlv3.RateLimitDescriptor_Entry, len(entries))}
		for j, e := range entries {
			d.Entries[j] = &commonrlv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value}
		}
		out = append(out, d)
	}
	return out
}

// responseHeaders are the headers the response gets: the service's response_headers_to_add
// and, with enable_x_ratelimit_headers, the x-ratelimit-* headers; nil when none.
func (f *Filter) responseHeaders(resp *rlsv3.RateLimitResponse) http.Header {
	var h http.Header
	for _, hv := range resp.GetResponseHeadersToAdd() {
		if h == nil {
			h = http.Header{}
		}
		h.Add(hv.GetKey(), headerValue(hv))
	}
	if f.cfg.xRateLimit {
		if limit, remaining, reset, ok := xRateLimit(resp.GetStatuses()); ok {
			if h == nil {
				h = http.Header{}
			}
			h.Set(hdrLimit, limit)
			h.Set(hdrRemaining, remaining)
			h.Set(hdrReset, reset)
		}
	}
	return h
}

func headerValue(hv *corev3.HeaderValue) string {
	if v := hv.GetValue(); v != "" {
		return v
	}
	return string(hv.GetRawValue())
}

// windowSeconds is a rate limit unit's window, for the quota policy of x-ratelimit-limit.
var windowSeconds = map[rlsv3.RateLimitResponse_RateLimit_Unit]uint64{
	rlsv3.RateLimitResponse_RateLimit_SECOND: 1,
	rlsv3.RateLimitResponse_RateLimit_MINUTE: 60,
	rlsv3.RateLimitResponse_RateLimit_HOUR:   3600,
	rlsv3.RateLimitResponse_RateLimit_DAY:    86400,
	rlsv3.RateLimitResponse_RateLimit_WEEK:   7 * 86400,
	rlsv3.RateLimitResponse_RateLimit_MONTH:  30 * 86400,
	rlsv3.RateLimitResponse_RateLimit_YEAR:   365 * 86400,
}

// xRateLimit makes the draft-03 headers from the descriptor statuses: the status with the
// fewest requests left gives the limit, remaining and reset; every limit with a known window
// adds its quota policy ("10, 10;w=1;name=\"per-ip\", 1000;w=3600"). ok is false when no
// status has a limit.
func xRateLimit(statuses []*rlsv3.RateLimitResponse_DescriptorStatus) (limit, remaining, reset string, ok bool) {
	var min *rlsv3.RateLimitResponse_DescriptorStatus
	var policy strings.Builder
	for _, s := range statuses {
		cl := s.GetCurrentLimit()
		if cl == nil {
			continue
		}
		if min == nil || s.GetLimitRemaining() < min.GetLimitRemaining() {
			min = s
		}
		if w := windowSeconds[cl.GetUnit()]; w != 0 {
			fmt.Fprintf(&policy, ", %d;w=%d", cl.GetRequestsPerUnit(), w)
			if n := cl.GetName(); n != "" {
				fmt.Fprintf(&policy, ";name=%q", n)
			}
		}
	}
	if min == nil {
		return "", "", "", false
	}
	return strconv.FormatUint(uint64(min.GetCurrentLimit().GetRequestsPerUnit()), 10) + policy.String(),
		strconv.FormatUint(uint64(min.GetLimitRemaining()), 10),
		strconv.FormatInt(min.GetDurationUntilReset().GetSeconds(), 10), true
}

// limited answers an over-limit request: rate_limited_status with the service's raw_body,
// its response headers, response_headers_to_add, x-envoy-ratelimited and Retry-After.
func (f *Filter) limited(x *filter.Exchange, resp *rlsv3.RateLimitResponse, h http.Header) *filter.Reply {
	c := f.cfg
	if h == nil {
		h = http.Header{}
	}
	c.responseHeaders.Apply(h)
	if c.xEnvoyRateLimited {
		h.Set(hdrEnvoyRateLimited, "true")
	}
	if c.retryAfter && c.limitedStatus == http.StatusTooManyRequests && h.Get(hdrRetryAfter) == "" {
		var secs int64
		found := false
		for _, s := range resp.GetStatuses() {
			if s.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
				found = true
				secs = max(secs, s.GetDurationUntilReset().GetSeconds())
			}
		}
		if found {
			h.Set(hdrRetryAfter, strconv.FormatInt(max(secs, 1), 10))
		}
	}
	return f.reply(x, c.limitedStatus, string(resp.GetRawBody()), h, detailsLimited, accesslog.RateLimited)
}

// reply is the filter's local reply. A gRPC request is answered as Envoy's local replies to
// gRPC: status 200 with grpc-status (from the HTTP status, or RESOURCE_EXHAUSTED for a rate
// limit with rate_limited_as_resource_exhausted) and the body as grpc-message.
func (f *Filter) reply(x *filter.Exchange, status int, body string, h http.Header, details string, flags accesslog.ResponseFlags) *filter.Reply {
	if !strings.HasPrefix(x.Request.Header.Get("Content-Type"), "application/grpc") {
		return &filter.Reply{Status: status, Body: body, Header: h, Details: details, Flags: flags}
	}
	code := grpcStatus(status)
	if flags == accesslog.RateLimited && f.cfg.resourceExhausted {
		code = grpcResourceExhausted
	}
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(code))
	if body != "" {
		h.Set("Grpc-Message", body)
	}
	return &filter.Reply{Status: http.StatusOK, Header: h, Details: details, Flags: flags}
}

// gRPC status codes the replies use.
const (
	grpcUnknown           = 2
	grpcResourceExhausted = 8
	grpcInternal          = 13
	grpcUnavailable       = 14
	grpcUnauthenticated   = 16
	grpcPermissionDenied  = 7
	grpcUnimplemented     = 12
)

// grpcStatus maps an HTTP status to a gRPC status as Envoy's httpToGrpcStatus.
func grpcStatus(status int) int {
	switch status {
	case 400:
		return grpcInternal
	case 401:
		return grpcUnauthenticated
	case 403:
		return grpcPermissionDenied
	case 404:
		return grpcUnimplemented
	case 429, 502, 503, 504:
		return grpcUnavailable
	}
	return grpcUnknown
}

// OnResponse adds the service's response headers and the x-ratelimit headers to the
// response of a request the service let through.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	add, ok := x.Kept(f).(http.Header)
	if !ok {
		return
	}
	for k, vs := range add {
		h[k] = append(h[k], vs...)
	}
}
