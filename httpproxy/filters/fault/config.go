package fault

import (
	"fmt"
	"time"

	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/headermatch"
)

// Envoy's default runtime keys.
const (
	keyDelayPercent   = "fault.http.delay.fixed_delay_percent"
	keyAbortPercent   = "fault.http.abort.abort_percent"
	keyDelayDuration  = "fault.http.delay.fixed_duration_ms"
	keyAbortStatus    = "fault.http.abort.http_status"
	keyAbortGRPC      = "fault.http.abort.grpc_status"
	keyMaxActive      = "fault.http.max_active_faults"
	keyRateLimitRatio = "fault.http.rate_limit.response_percent"
)

// source says where a fault's value comes from.
type source uint8

const (
	none source = iota
	fixed
	fromHeader
)

// Settings are one compiled HTTPFault (the filter's or a route's). Immutable.
type Settings struct {
	delay         source
	delayDuration time.Duration
	delayPercent  filter.Fraction

	abort        source
	abortStatus  int // HTTP status; 0 with abortGRPC set
	abortGRPC    int // gRPC status + 1; 0 for none
	abortPercent filter.Fraction
	abortBody    string
	grpcKey      string

	rateLimit        source
	rateLimitKbps    uint64
	rateLimitPercent filter.Fraction

	upstreamCluster string
	headers         []headermatch.Header
	downstreamNodes []string

	maxActive    uint64 // 0 with hasMaxActive false: unlimited
	hasMaxActive bool

	delayDurationKey, abortStatusKey, maxActiveKey string
	clusterStats                                   bool
}

// compile checks and compiles an HTTPFault; path names it in errors.
func compile(pb *faultv3.HTTPFault, path string) (*Settings, error) {
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(pb.GetFilterMetadata().GetFields()) > 0 {
		return nil, fmt.Errorf("%s.filter_metadata: not implemented by Legate", path)
	}
	s := &Settings{
		upstreamCluster:  pb.GetUpstreamCluster(),
		downstreamNodes:  pb.GetDownstreamNodes(),
		delayDurationKey: orDefault(pb.GetDelayDurationRuntime(), keyDelayDuration),
		abortStatusKey:   orDefault(pb.GetAbortHttpStatusRuntime(), keyAbortStatus),
		grpcKey:          orDefault(pb.GetAbortGrpcStatusRuntime(), keyAbortGRPC),
		maxActiveKey:     orDefault(pb.GetMaxActiveFaultsRuntime(), keyMaxActive),
		clusterStats:     !pb.GetDisableDownstreamClusterStats(),
	}
	if pb.GetMaxActiveFaults() != nil {
		s.maxActive, s.hasMaxActive = uint64(pb.GetMaxActiveFaults().GetValue()), true
	}
	for i, h := range pb.GetHeaders() {
		m, err := headermatch.CompileHeader(h, fmt.Sprintf("%s.headers[%d]", path, i))
		if err != nil {
			return nil, err
		}
		s.headers = append(s.headers, m)
	}
	if err := s.compileDelay(pb.GetDelay(), orDefault(pb.GetDelayPercentRuntime(), keyDelayPercent), path+".delay"); err != nil {
		return nil, err
	}
	if err := s.compileAbort(pb.GetAbort(), orDefault(pb.GetAbortPercentRuntime(), keyAbortPercent), path+".abort"); err != nil {
		return nil, err
	}
	return s, s.compileRateLimit(pb.GetResponseRateLimit(), orDefault(pb.GetResponseRateLimitPercentRuntime(), keyRateLimitRatio), path+".response_rate_limit")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s *Settings) compileDelay(d *faultcommonv3.FaultDelay, key, path string) error {
	if d == nil {
		return nil
	}
	pct, err := filter.PercentFromProto(d.GetPercentage(), path+".percentage")
	if err != nil {
		return err
	}
	pct.Key = key
	s.delayPercent = pct
	switch {
	case d.GetHeaderDelay() != nil:
		s.delay = fromHeader
	case d.GetFixedDelay() != nil:
		s.delay, s.delayDuration = fixed, d.GetFixedDelay().AsDuration()
	}
	return nil
}

func (s *Settings) compileAbort(a *faultv3.FaultAbort, key, path string) error {
	if a == nil {
		return nil
	}
	pct, err := filter.PercentFromProto(a.GetPercentage(), path+".percentage")
	if err != nil {
		return err
	}
	pct.Key = key
	s.abortPercent = pct
	s.abortBody = orDefault(a.GetResponseBody(), "fault filter abort")
	switch t := a.GetErrorType().(type) {
	case *faultv3.FaultAbort_HeaderAbort_:
		s.abort = fromHeader
	case *faultv3.FaultAbort_HttpStatus:
		if t.HttpStatus < 200 || t.HttpStatus >= 600 {
			return fmt.Errorf("%s.http_status = %d: must be in [200, 600)", path, t.HttpStatus)
		}
		s.abort, s.abortStatus = fixed, int(t.HttpStatus)
	case *faultv3.FaultAbort_GrpcStatus:
		s.abort, s.abortGRPC = fixed, int(t.GrpcStatus)+1
	}
	return nil
}

func (s *Settings) compileRateLimit(r *faultcommonv3.FaultRateLimit, key, path string) error {
	if r == nil {
		return nil
	}
	pct, err := filter.PercentFromProto(r.GetPercentage(), path+".percentage")
	if err != nil {
		return err
	}
	pct.Key = key
	s.rateLimitPercent = pct
	switch {
	case r.GetHeaderLimit() != nil:
		s.rateLimit = fromHeader
	case r.GetFixedLimit() != nil:
		s.rateLimit, s.rateLimitKbps = fixed, r.GetFixedLimit().GetLimitKbps()
	}
	return nil
}

// settingsFromAny unmarshals and compiles an HTTPFault.
func settingsFromAny(cfg *anypb.Any, path string) (*Settings, error) {
	var pb faultv3.HTTPFault
	if cfg != nil {
		if cfg.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("%s: %s: type %q; want %s", Name, path, cfg.GetTypeUrl(), TypeURL)
		}
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", Name, path, err)
		}
	}
	s, err := compile(&pb, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return s, nil
}

// matches reports whether the request is one the settings may fault: its route's cluster,
// its headers and its downstream node.
func (s *Settings) matches(x *filter.Exchange) bool {
	if s.upstreamCluster != "" {
		if x.Downstream == nil {
			return false
		}
		if m := x.Downstream.Route(); m == nil || m.Cluster != s.upstreamCluster {
			return false
		}
	}
	for i := range s.headers {
		h := &s.headers[i]
		if !h.Match(x.Request.HeaderValue(h.Key())) {
			return false
		}
	}
	if len(s.downstreamNodes) > 0 {
		node, _ := headermatch.Value(x.Request.Header[hdrDownstreamNode])
		for _, n := range s.downstreamNodes {
			if n == node {
				return true
			}
		}
		return false
	}
	return true
}
