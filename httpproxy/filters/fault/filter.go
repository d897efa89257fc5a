package fault

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/stats"
)

// Name and TypeURL select the filter in http_filters and its per-route settings (the same
// message) in typed_per_filter_config.
const (
	Name    = "envoy.filters.http.fault"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"
)

// The request headers that control faults (canonical form).
const (
	hdrDelay             = "X-Envoy-Fault-Delay-Request"
	hdrDelayPercent      = "X-Envoy-Fault-Delay-Request-Percentage"
	hdrAbort             = "X-Envoy-Fault-Abort-Request"
	hdrAbortGRPC         = "X-Envoy-Fault-Abort-Grpc-Request"
	hdrAbortPercent      = "X-Envoy-Fault-Abort-Request-Percentage"
	hdrThroughput        = "X-Envoy-Fault-Throughput-Response"
	hdrThroughputPercent = "X-Envoy-Fault-Throughput-Response-Percentage"
	hdrDownstreamNode    = "X-Envoy-Downstream-Service-Node"
	hdrDownstreamCluster = "X-Envoy-Downstream-Service-Cluster"
	detailsAbort         = "fault_filter_abort"
)

// Stats are the filter's stats (http.<stat_prefix>.fault.*).
type Stats struct {
	DelaysInjected     stats.Counter `stat:"delays_injected"`
	AbortsInjected     stats.Counter `stat:"aborts_injected"`
	ResponseRLInjected stats.Counter `stat:"response_rl_injected"`
	FaultsOverflow     stats.Counter `stat:"faults_overflow"`
	ActiveFaults       stats.Gauge   `stat:"active_faults"`
}

// Register registers the filter; its per-route settings are its own message.
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &faultv3.HTTPFault{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return settingsFromAny(cfg, "typed_per_filter_config") },
		PerRouteConfig: &faultv3.HTTPFault{},
	})
}

// Filter is one configured fault filter. Immutable; safe for concurrent use.
type Filter struct {
	name     string
	ctx      *filter.Context
	settings *Settings
	stats    *Stats
	release  func()
	sleep    func(time.Duration) // paces response bodies; time.Sleep
}

// FromAny builds the filter from its typed_config (nil is an empty HTTPFault).
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	s, err := settingsFromAny(cfg, "typed_config")
	if err != nil {
		return nil, err
	}
	return New(s, ctx), nil
}

// New builds the filter around compiled settings.
func New(s *Settings, ctx *filter.Context) *Filter {
	if ctx == nil {
		ctx = &filter.Context{}
	}
	// Real clock: request path, the injected delay (see internal/clock/direct_test.go).
	f := &Filter{name: ctx.Name, ctx: ctx, settings: s, sleep: time.Sleep}
	if f.name == "" {
		f.name = Name
	}
	f.stats, f.release = filter.AcquireStats[Stats](ctx.Stats, ctx.StatPrefix+"fault.")
	return f
}

// Close drops the filter's hold on its stats.
func (f *Filter) Close() error {
	f.release()
	return nil
}

// settingsFor is the request's settings: the most specific per-route ones, else the filter's.
func (f *Filter) settingsFor(x *filter.Exchange) *Settings {
	if pc, ok := x.PerFilterConfig(f.name); ok {
		if s, ok := pc.Config.(*Settings); ok {
			return s
		}
	}
	return f.settings
}

// plan is what faults one request gets.
type plan struct {
	delay       time.Duration // 0: none
	abortStatus int           // HTTP status, 0: none
	abortGRPC   int           // gRPC status + 1, 0: none
	kbps        uint64        // response rate limit, 0: none
}

func (p *plan) empty() bool {
	return p.delay == 0 && p.abortStatus == 0 && p.abortGRPC == 0 && p.kbps == 0
}

// NewStream decides the request's faults; a request without any is of no further interest
// (and costs nothing more). One with faults counts as an active fault until its stream ends.
func (f *Filter) NewStream(x *filter.Exchange) filter.Stream {
	s := f.settingsFor(x)
	if s.delay == none && s.abort == none && s.rateLimit == none {
		return nil
	}
	if !s.matches(x) {
		return nil
	}
	if s.tooManyActive(f) {
		f.stats.FaultsOverflow.Inc()
		return nil
	}
	p := f.plan(s, x.Request.Header)
	if p.empty() {
		return nil
	}
	st := &stream{f: f, plan: p, kbps: p.kbps}
	f.stats.ActiveFaults.Inc()
	if p.kbps > 0 {
		f.stats.ResponseRLInjected.Inc()
	}
	x.Keep(f, st)
	return st
}

func (s *Settings) tooManyActive(f *Filter) bool {
	limit := ^uint64(0)
	if s.hasMaxActive {
		limit = s.maxActive
	}
	limit = f.ctx.RuntimeValue(s.maxActiveKey, limit)
	return f.stats.ActiveFaults.Value() >= limit
}

// plan draws the request's faults from the settings, the runtime and its headers.
func (f *Filter) plan(s *Settings, h http.Header) plan {
	var p plan
	switch s.delay {
	case fixed:
		if f.enabled(s.delayPercent, h, "") {
			p.delay = time.Duration(f.ctx.RuntimeValue(s.delayDurationKey, uint64(s.delayDuration.Milliseconds()))) * time.Millisecond
		}
	case fromHeader:
		if ms, ok := headerUint(h, hdrDelay); ok && f.enabled(s.delayPercent, h, hdrDelayPercent) {
			p.delay = time.Duration(ms) * time.Millisecond
		}
	}
	switch s.abort {
	case fixed:
		if f.enabled(s.abortPercent, h, "") {
			if s.abortGRPC != 0 {
				p.abortGRPC = int(f.ctx.RuntimeValue(s.grpcKey, uint64(s.abortGRPC-1))) + 1
			} else {
				p.abortStatus = int(f.ctx.RuntimeValue(s.abortStatusKey, uint64(s.abortStatus)))
			}
		}
	case fromHeader:
		p.abortStatus, p.abortGRPC = f.headerAbort(s, h)
	}
	if p.abortStatus != 0 && (p.abortStatus < 200 || p.abortStatus >= 600) {
		p.abortStatus = 0 // a runtime value out of range aborts nothing
	}
	switch s.rateLimit {
	case fixed:
		if f.enabled(s.rateLimitPercent, h, "") {
			p.kbps = s.rateLimitKbps
		}
	case fromHeader:
		if kbps, ok := headerUint(h, hdrThroughput); ok && kbps > 0 && f.enabled(s.rateLimitPercent, h, hdrThroughputPercent) {
			p.kbps = kbps
		}
	}
	return p
}

// headerAbort reads a header-controlled abort: an HTTP status in [200, 600) or a gRPC status.
func (f *Filter) headerAbort(s *Settings, h http.Header) (status, grpc int) {
	if v, ok := headerUint(h, hdrAbort); ok && v >= 200 && v < 600 {
		status = int(v)
	}
	if v, ok := headerUint(h, hdrAbortGRPC); ok && status == 0 {
		grpc = int(v) + 1
	}
	if (status != 0 || grpc != 0) && f.enabled(s.abortPercent, h, hdrAbortPercent) {
		return status, grpc
	}
	return 0, 0
}

// enabled draws the fault's percentage; a header-controlled fault's request may lower its
// numerator with percentHeader.
func (f *Filter) enabled(pct filter.Fraction, h http.Header, percentHeader string) bool {
	if percentHeader != "" {
		if n, ok := headerUint(h, percentHeader); ok && n < pct.Numerator {
			pct.Numerator = n
		}
	}
	return f.ctx.FractionEnabled(pct.Key, pct.Numerator, pct.Denominator, rand.Uint64())
}

func headerUint(h http.Header, key string) (uint64, bool) {
	v, ok := headermatch.Value(h[key])
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// OnRequest delays the request, then aborts it, as its plan says.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	st, ok := x.Kept(f).(*stream)
	if !ok || st == nil {
		return nil
	}
	p := &st.plan
	cluster, _ := headermatch.Value(x.Request.Header[hdrDownstreamCluster])
	if p.delay > 0 && x.Downstream != nil {
		x.Flags |= accesslog.DelayInjected
		f.stats.DelaysInjected.Inc()
		f.clusterCounter(cluster, "delays_injected")
		if x.Downstream.Pause(nil, p.delay) {
			return nil // the client went away
		}
	}
	if p.abortStatus == 0 && p.abortGRPC == 0 {
		return nil
	}
	f.stats.AbortsInjected.Inc()
	f.clusterCounter(cluster, "aborts_injected")
	flags := accesslog.FaultInjected
	s := f.settingsFor(x)
	if p.abortGRPC != 0 {
		h := http.Header{"Content-Type": {"application/grpc"}, "Grpc-Status": {strconv.Itoa(p.abortGRPC - 1)}, "Grpc-Message": {s.abortBody}}
		return &filter.Reply{Status: http.StatusOK, Flags: flags, Details: detailsAbort, Header: h}
	}
	return &filter.Reply{Status: p.abortStatus, Body: s.abortBody, Flags: flags, Details: detailsAbort}
}

// clusterCounter counts a fault under the request's downstream cluster, unless disabled.
func (f *Filter) clusterCounter(cluster, name string) {
	if cluster == "" || !f.settings.clusterStats {
		return
	}
	f.ctx.Stats.Counter(f.ctx.StatPrefix + "fault." + cluster + "." + name).Inc()
}

// OnResponse does nothing: response faults pace the body (stream.ResponseBody).
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}
