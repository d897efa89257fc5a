package config

import (
	"errors"
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// ErrOutlierDetection is wrapped by every error OutlierDetectionFromProto returns.
var ErrOutlierDetection = errors.New("invalid outlier_detection")

// OutlierDetection is everything of a cluster.OutlierDetection that the outlier package runs,
// with Envoy's defaults applied: ClusterFromProto builds it once, with OutlierDetectionFromProto,
// into Cluster.OutlierDetection. Each field is the proto field of the same name.
//
// The value is immutable once built and safe to share between goroutines.
type OutlierDetection struct {
	Consecutive5xx                         uint32
	Interval                               time.Duration
	BaseEjectionTime                       time.Duration
	MaxEjectionTime                        time.Duration
	MaxEjectionPercent                     uint32
	EnforcingConsecutive5xx                uint32
	EnforcingSuccessRate                   uint32
	SuccessRateMinimumHosts                uint32
	SuccessRateRequestVolume               uint32
	SuccessRateStdevFactor                 uint32
	ConsecutiveGatewayFailure              uint32
	EnforcingConsecutiveGatewayFailure     uint32
	SplitExternalLocalOriginErrors         bool
	ConsecutiveLocalOriginFailure          uint32
	EnforcingConsecutiveLocalOriginFailure uint32
	EnforcingLocalOriginSuccessRate        uint32
	FailurePercentageThreshold             uint32
	EnforcingFailurePercentage             uint32
	EnforcingFailurePercentageLocalOrigin  uint32
	FailurePercentageMinimumHosts          uint32
	FailurePercentageRequestVolume         uint32
	// MaxEjectionTimeJitter is max_ejection_time_jitter (default 0): each ejection lasts a random
	// extra time in [0, MaxEjectionTimeJitter], drawn in whole milliseconds.
	MaxEjectionTimeJitter time.Duration
	// SuccessfulActiveHealthCheckUnejectHost is successful_active_health_check_uneject_host
	// (default true): a passing active health check returns an ejected host to service.
	SuccessfulActiveHealthCheckUnejectHost bool
	// AlwaysEjectOneHost is always_eject_one_host (default false): when no host is ejected, one
	// may be ejected even if that exceeds MaxEjectionPercent.
	AlwaysEjectOneHost bool
}

// OutlierDetectionFromProto converts a cluster.OutlierDetection into an OutlierDetection. It
// applies Envoy's defaults (including max_ejection_time defaulting to the larger of 300 s and
// base_ejection_time) and checks the rules Envoy enforces: the proto's range annotations
// (durations > 0, percentages <= 100) and max_ejection_time >= base_ejection_time. A nil proto
// means outlier detection is off and gives (nil, nil). Errors wrap ErrOutlierDetection and name
// the field, the value and the rule.
//
// Passive monitor extensions (monitors) and detect_degraded_hosts are not implemented and are
// rejected rather than ignored.
func OutlierDetectionFromProto(o *clusterv3.OutlierDetection) (*OutlierDetection, error) {
	if o == nil {
		return nil, nil
	}
	s := &OutlierDetection{
		Consecutive5xx:                         u32Or(o.GetConsecutive_5Xx(), 5),
		Interval:                               durationOr(o.GetInterval(), 10*time.Second),
		BaseEjectionTime:                       durationOr(o.GetBaseEjectionTime(), 30*time.Second),
		MaxEjectionTime:                        durationOr(o.GetMaxEjectionTime(), 300*time.Second),
		MaxEjectionPercent:                     u32Or(o.GetMaxEjectionPercent(), 10),
		EnforcingConsecutive5xx:                u32Or(o.GetEnforcingConsecutive_5Xx(), 100),
		EnforcingSuccessRate:                   u32Or(o.GetEnforcingSuccessRate(), 100),
		SuccessRateMinimumHosts:                u32Or(o.GetSuccessRateMinimumHosts(), 5),
		SuccessRateRequestVolume:               u32Or(o.GetSuccessRateRequestVolume(), 100),
		SuccessRateStdevFactor:                 u32Or(o.GetSuccessRateStdevFactor(), 1900),
		ConsecutiveGatewayFailure:              u32Or(o.GetConsecutiveGatewayFailure(), 5),
		EnforcingConsecutiveGatewayFailure:     u32Or(o.GetEnforcingConsecutiveGatewayFailure(), 0),
		SplitExternalLocalOriginErrors:         o.GetSplitExternalLocalOriginErrors(),
		ConsecutiveLocalOriginFailure:          u32Or(o.GetConsecutiveLocalOriginFailure(), 5),
		EnforcingConsecutiveLocalOriginFailure: u32Or(o.GetEnforcingConsecutiveLocalOriginFailure(), 100),
		EnforcingLocalOriginSuccessRate:        u32Or(o.GetEnforcingLocalOriginSuccessRate(), 100),
		FailurePercentageThreshold:             u32Or(o.GetFailurePercentageThreshold(), 85),
		EnforcingFailurePercentage:             u32Or(o.GetEnforcingFailurePercentage(), 0),
		EnforcingFailurePercentageLocalOrigin:  u32Or(o.GetEnforcingFailurePercentageLocalOrigin(), 0),
		FailurePercentageMinimumHosts:          u32Or(o.GetFailurePercentageMinimumHosts(), 5),
		FailurePercentageRequestVolume:         u32Or(o.GetFailurePercentageRequestVolume(), 50),
		MaxEjectionTimeJitter:                  durationOr(o.GetMaxEjectionTimeJitter(), 0),
		SuccessfulActiveHealthCheckUnejectHost: o.GetSuccessfulActiveHealthCheckUnejectHost() == nil || o.GetSuccessfulActiveHealthCheckUnejectHost().GetValue(),
		AlwaysEjectOneHost:                     o.GetAlwaysEjectOneHost().GetValue(),
	}
	if o.GetMaxEjectionTime() == nil && s.BaseEjectionTime > s.MaxEjectionTime {
		s.MaxEjectionTime = s.BaseEjectionTime
	}
	if err := s.check(o); err != nil {
		return nil, err
	}
	return s, nil
}

func odErr(format string, args ...any) error {
	return fmt.Errorf("%w: outlier_detection."+format, append([]any{ErrOutlierDetection}, args...)...)
}

func (s *OutlierDetection) check(o *clusterv3.OutlierDetection) error {
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"interval", s.Interval},
		{"base_ejection_time", s.BaseEjectionTime},
		{"max_ejection_time", s.MaxEjectionTime},
	}
	for _, d := range durations {
		if d.v <= 0 {
			return odErr("%s = %v; must be > 0", d.name, d.v)
		}
	}
	if s.MaxEjectionTimeJitter < 0 {
		return odErr("max_ejection_time_jitter = %v; must be >= 0", s.MaxEjectionTimeJitter)
	}
	percents := []struct {
		name string
		v    uint32
	}{
		{"max_ejection_percent", s.MaxEjectionPercent},
		{"enforcing_consecutive_5xx", s.EnforcingConsecutive5xx},
		{"enforcing_success_rate", s.EnforcingSuccessRate},
		{"enforcing_consecutive_gateway_failure", s.EnforcingConsecutiveGatewayFailure},
		{"enforcing_consecutive_local_origin_failure", s.EnforcingConsecutiveLocalOriginFailure},
		{"enforcing_local_origin_success_rate", s.EnforcingLocalOriginSuccessRate},
		{"failure_percentage_threshold", s.FailurePercentageThreshold},
		{"enforcing_failure_percentage", s.EnforcingFailurePercentage},
		{"enforcing_failure_percentage_local_origin", s.EnforcingFailurePercentageLocalOrigin},
	}
	for _, p := range percents {
		if p.v > 100 {
			return odErr("%s = %d; must be <= 100", p.name, p.v)
		}
	}
	if s.MaxEjectionTime < s.BaseEjectionTime {
		return odErr("max_ejection_time = %v; must be >= base_ejection_time (%v)", s.MaxEjectionTime, s.BaseEjectionTime)
	}
	if n := len(o.GetMonitors()); n > 0 {
		return odErr("monitors: %d monitor extension(s) configured; passive monitor extensions are not supported", n)
	}
	if o.GetDetectDegradedHosts().GetValue() {
		return odErr("detect_degraded_hosts = true; degraded-host detection is not supported")
	}
	return nil
}
