package outlier

import "github.com/legateproxy/legate/stats"

// Stats are Envoy's outlier_detection.* statistics of one cluster. The caller registers the
// struct under "cluster.<stat name>.outlier_detection." (Store.Register) before handing it to
// New. The zero value is ready to use; every field is updated with atomics.
type Stats struct {
	// EjectionsConsecutive5xx is deprecated in Envoy but still emitted: consecutive-5xx
	// detections, enforced or not, that were not dropped as stale.
	EjectionsConsecutive5xx                    stats.Counter `stat:"ejections_consecutive_5xx"`
	EjectionsDetectedConsecutive5xx            stats.Counter `stat:"ejections_detected_consecutive_5xx"`
	EjectionsDetectedConsecutiveGatewayFailure stats.Counter `stat:"ejections_detected_consecutive_gateway_failure"`
	EjectionsDetectedSuccessRate               stats.Counter `stat:"ejections_detected_success_rate"`
	EjectionsDetectedFailurePercentage         stats.Counter `stat:"ejections_detected_failure_percentage"`
	EjectionsEnforcedConsecutive5xx            stats.Counter `stat:"ejections_enforced_consecutive_5xx"`
	EjectionsEnforcedConsecutiveGatewayFailure stats.Counter `stat:"ejections_enforced_consecutive_gateway_failure"`
	EjectionsEnforcedSuccessRate               stats.Counter `stat:"ejections_enforced_success_rate"`
	EjectionsEnforcedFailurePercentage         stats.Counter `stat:"ejections_enforced_failure_percentage"`
	EjectionsDetectedConsecutiveLocalOrigin    stats.Counter `stat:"ejections_detected_consecutive_local_origin_failure"`
	EjectionsEnforcedConsecutiveLocalOrigin    stats.Counter `stat:"ejections_enforced_consecutive_local_origin_failure"`
	EjectionsDetectedLocalOriginSuccessRate    stats.Counter `stat:"ejections_detected_local_origin_success_rate"`
	EjectionsEnforcedLocalOriginSuccessRate    stats.Counter `stat:"ejections_enforced_local_origin_success_rate"`
	EjectionsDetectedLocalOriginFailurePercent stats.Counter `stat:"ejections_detected_local_origin_failure_percentage"`
	EjectionsEnforcedLocalOriginFailurePercent stats.Counter `stat:"ejections_enforced_local_origin_failure_percentage"`
	EjectionsEnforcedTotal                     stats.Counter `stat:"ejections_enforced_total"`
	EjectionsOverflow                          stats.Counter `stat:"ejections_overflow"`
	// EjectionsSuccessRate is deprecated in Envoy: success-rate outliers found (either origin).
	EjectionsSuccessRate stats.Counter `stat:"ejections_success_rate"`
	// EjectionsTotal is deprecated in Envoy: consecutive-5xx and success-rate ejections that
	// max_ejection_percent allowed, enforced or not.
	EjectionsTotal stats.Counter `stat:"ejections_total"`
	// EjectionsActive is the number of hosts currently ejected.
	EjectionsActive stats.Gauge `stat:"ejections_active,accumulate"`
}

func (s *Stats) detected(t EjectionType) *stats.Counter {
	switch t {
	case Consecutive5xx:
		return &s.EjectionsDetectedConsecutive5xx
	case ConsecutiveGatewayFailure:
		return &s.EjectionsDetectedConsecutiveGatewayFailure
	case SuccessRate:
		return &s.EjectionsDetectedSuccessRate
	case ConsecutiveLocalOriginFailure:
		return &s.EjectionsDetectedConsecutiveLocalOrigin
	case SuccessRateLocalOrigin:
		return &s.EjectionsDetectedLocalOriginSuccessRate
	case FailurePercentage:
		return &s.EjectionsDetectedFailurePercentage
	default:
		return &s.EjectionsDetectedLocalOriginFailurePercent
	}
}

func (s *Stats) enforced(t EjectionType) *stats.Counter {
	switch t {
	case Consecutive5xx:
		return &s.EjectionsEnforcedConsecutive5xx
	case ConsecutiveGatewayFailure:
		return &s.EjectionsEnforcedConsecutiveGatewayFailure
	case SuccessRate:
		return &s.EjectionsEnforcedSuccessRate
	case ConsecutiveLocalOriginFailure:
		return &s.EjectionsEnforcedConsecutiveLocalOrigin
	case SuccessRateLocalOrigin:
		return &s.EjectionsEnforcedLocalOriginSuccessRate
	case FailurePercentage:
		return &s.EjectionsEnforcedFailurePercentage
	default:
		return &s.EjectionsEnforcedLocalOriginFailurePercent
	}
}
