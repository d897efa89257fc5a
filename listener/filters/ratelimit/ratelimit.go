// Package ratelimit is Envoy's envoy.filters.network.ratelimit network filter
// (extensions.filters.network.ratelimit.v3.RateLimit): a non-terminal filter that asks the
// global rate limit service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over
// gRPC, through internal/ratelimitsvc, on a channel dialled through the service's cluster)
// about the filter's descriptors for each new connection of its filter chain, before the
// terminal filter (the TCP proxy) has it. OVER_LIMIT closes the connection; a failed or
// timed-out call closes it with failure_mode_deny and lets it on otherwise.
//
// Implemented: stat_prefix, domain, descriptors (their entries; at least one), timeout (20 ms by default, 0
// none), failure_mode_deny and rate_limit_service (envoy_grpc with authority and
// initial_metadata, transport_api_version V3). The decision is enforced for every connection
// (Envoy's ratelimit.tcp_filter_enabled and ratelimit.tcp_filter_enforcing runtime keys are not
// read). Refused with "not implemented by Legate": google_grpc, retry policies, the service's
// grpc_service.timeout (the filter's timeout bounds the call), a descriptor's limit and
// hits_addend, and entry values with substitution formats (%...%).
//
// Stats, as Envoy's: ratelimit.<stat_prefix>.total, ok, over_limit, error, cx_closed,
// failure_mode_allowed, and the gauge active (calls in flight).
//
// Concurrency: a filter is immutable; the call blocks only the connection's goroutine. The
// filter's gRPC channel is closed with its filter chain.
package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"time"

	commonrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	netrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/ratelimitsvc"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.ratelimit"

// Register registers the filter's parser and factory with the extension registry. The
// chain's Dial reaches the service's cluster (nil: every call fails, and the failure mode
// decides).
func Register(b *registry.Builder) {
	registry.Add(b, config.NetworkFilterConfigs, Name, &netrlv3.RateLimit{}, parse)
	registry.Add(b, listener.ConnFilters, Name, &netrlv3.RateLimit{}, func(ctx *listener.ChainContext, config any) (listener.ConnFilter, error) {
		return build(ctx, config, ctx.Dial)
	})
}

// settings are the filter's configuration as the configuration path converts it.
type settings struct {
	statPrefix  string
	domain      string
	descriptors []*commonrlv3.RateLimitDescriptor
	timeout     time.Duration
	deny        bool
	service     ratelimitsvc.Target
}

// filterStats are ratelimit.<stat_prefix>.*.
type filterStats struct {
	total, ok, overLimit, err, cxClosed, failureModeAllowed *stats.Counter
	active                                                  *stats.Gauge
}

// filter is one configured network rate limit filter.
type filter struct {
	domain      string
	descriptors []*commonrlv3.RateLimitDescriptor
	timeout     time.Duration
	deny        bool
	client      *ratelimitsvc.Client
	stats       filterStats
}

// parse is the filter's config.NetworkFilterParser: a *settings.
func parse(m proto.Message) (any, error) {
	if err := config.Validate(Name, m); err != nil {
		return nil, err
	}
	pb := m.(*netrlv3.RateLimit)
	s := &settings{statPrefix: pb.GetStatPrefix(), domain: pb.GetDomain(), timeout: ratelimitsvc.DefaultTimeout, deny: pb.GetFailureModeDeny()}
	if pb.GetTimeout() != nil {
		s.timeout = pb.GetTimeout().AsDuration()
	}
	for j, d := range pb.GetDescriptors() {
		nd, err := descriptor(d, fmt.Sprintf("%s: descriptors[%d]", Name, j))
		if err != nil {
			return nil, err
		}
		s.descriptors = append(s.descriptors, nd)
	}
	var err error
	if s.service, err = ratelimitsvc.Compile(pb.GetRateLimitService(), Name+": rate_limit_service"); err != nil {
		return nil, err
	}
	return s, nil
}

// build makes the filter and its channel to the service.
func build(ctx *listener.ChainContext, config any, dial grpcclient.Dial) (listener.ConnFilter, error) {
	s, err := listener.ConfigOf[*settings](Name, config)
	if err != nil {
		return nil, err
	}
	f := &filter{domain: s.domain, descriptors: s.descriptors, timeout: s.timeout, deny: s.deny}
	if f.client, err = ratelimitsvc.New(s.service, dial); err != nil {
		return nil, fmt.Errorf("%s: rate_limit_service: %w", Name, err)
	}
	p := "ratelimit." + s.statPrefix + "."
	f.stats = filterStats{
		total:              ctx.Stats.Counter(p + "total"),
		ok:                 ctx.Stats.Counter(p + "ok"),
		overLimit:          ctx.Stats.Counter(p + "over_limit"),
		err:                ctx.Stats.Counter(p + "error"),
		cxClosed:           ctx.Stats.Counter(p + "cx_closed"),
		failureModeAllowed: ctx.Stats.Counter(p + "failure_mode_allowed"),
		active:             ctx.Stats.Gauge(p+"active", stats.Accumulate),
	}
	return f, nil
}

// descriptor checks a configured descriptor and keeps its entries, which is what Envoy's
// network filter sends.
func descriptor(d *commonrlv3.RateLimitDescriptor, path string) (*commonrlv3.RateLimitDescriptor, error) {
	switch {
	case d.GetLimit() != nil:
		return nil, fmt.Errorf("%s.limit: not implemented by Legate", path)
	case d.GetHitsAddend() != nil:
		return nil, fmt.Errorf("%s.hits_addend: not implemented by Legate", path)
	}
	nd := &commonrlv3.RateLimitDescriptor{}
	for k, e := range d.GetEntries() {
		if strings.Contains(e.GetValue(), "%") {
			return nil, fmt.Errorf("%s.entries[%d].value = %q: substitution formats are not implemented by Legate", path, k, e.GetValue())
		}
		nd.Entries = append(nd.Entries, &commonrlv3.RateLimitDescriptor_Entry{Key: e.GetKey(), Value: e.GetValue()})
	}
	return nd, nil
}

// OnConnection asks the service about the filter's descriptors and closes an over-limit
// connection, or one whose call failed with failure_mode_deny.
func (f *filter) OnConnection(*listener.Conn) bool {
	f.stats.total.Inc()
	f.stats.active.Inc()
	resp, err := f.client.ShouldRateLimit(context.Background(), f.domain, f.descriptors, f.timeout)
	f.stats.active.Dec()
	switch {
	case err != nil:
		f.stats.err.Inc()
		if !f.deny {
			f.stats.failureModeAllowed.Inc()
			return true
		}
	case resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
		f.stats.overLimit.Inc()
	default:
		f.stats.ok.Inc()
		return true
	}
	f.stats.cxClosed.Inc()
	return false
}

// Close closes the channel to the service.
func (f *filter) Close() error { return f.client.Close() }
