package runtime

// Runtime keys Envoy reads for the cluster manager, load balancers, health
// checking and outlier detection, spelled exactly as Envoy spells them.
const (
	KeyHealthyPanicThreshold     = "upstream.healthy_panic_threshold"
	KeyZoneRoutingEnabled        = "upstream.zone_routing.enabled"
	KeyZoneRoutingMinClusterSize = "upstream.zone_routing.min_cluster_size"
	KeyUseHTTP2                  = "upstream.use_http2"
	KeyWeightEnabled             = "upstream.weight_enabled"

	KeyHealthCheckMinInterval   = "health_check.min_interval"
	KeyHealthCheckMaxInterval   = "health_check.max_interval"
	KeyHealthCheckVerifyCluster = "health_check.verify_cluster"

	KeyOutlierConsecutive5xx                         = "outlier_detection.consecutive_5xx"
	KeyOutlierConsecutiveGatewayFailure              = "outlier_detection.consecutive_gateway_failure"
	KeyOutlierConsecutiveLocalOriginFailure          = "outlier_detection.consecutive_local_origin_failure"
	KeyOutlierIntervalMs                             = "outlier_detection.interval_ms"
	KeyOutlierBaseEjectionTimeMs                     = "outlier_detection.base_ejection_time_ms"
	KeyOutlierMaxEjectionTimeMs                      = "outlier_detection.max_ejection_time_ms"
	KeyOutlierMaxEjectionTimeJitterMs                = "outlier_detection.max_ejection_time_jitter_ms"
	KeyOutlierMaxEjectionPercent                     = "outlier_detection.max_ejection_percent"
	KeyOutlierEnforcingConsecutive5xx                = "outlier_detection.enforcing_consecutive_5xx"
	KeyOutlierEnforcingConsecutiveGatewayFailure     = "outlier_detection.enforcing_consecutive_gateway_failure"
	KeyOutlierEnforcingConsecutiveLocalOriginFailure = "outlier_detection.enforcing_consecutive_local_origin_failure"
	KeyOutlierEnforcingSuccessRate                   = "outlier_detection.enforcing_success_rate"
	KeyOutlierEnforcingLocalOriginSuccessRate        = "outlier_detection.enforcing_local_origin_success_rate"
	KeyOutlierSuccessRateMinimumHosts                = "outlier_detection.success_rate_minimum_hosts"
	KeyOutlierSuccessRateRequestVolume               = "outlier_detection.success_rate_request_volume"
	KeyOutlierSuccessRateStdevFactor                 = "outlier_detection.success_rate_stdev_factor"
	KeyOutlierFailurePercentageThreshold             = "outlier_detection.failure_percentage_threshold"
	KeyOutlierEnforcingFailurePercentage             = "outlier_detection.enforcing_failure_percentage"
	KeyOutlierEnforcingFailurePercentageLocalOrigin  = "outlier_detection.enforcing_failure_percentage_local_origin"
	KeyOutlierFailurePercentageMinimumHosts          = "outlier_detection.failure_percentage_minimum_hosts"
	KeyOutlierFailurePercentageRequestVolume         = "outlier_detection.failure_percentage_request_volume"
)

// HealthyPanicThreshold returns the panic threshold percentage, capped at
// 100: upstream.healthy_panic_threshold, or def (the cluster's
// common_lb_config.healthy_panic_threshold, 50 by default).
func (s *Snapshot) HealthyPanicThreshold(def uint64) uint64 {
	return min(s.Uint64(KeyHealthyPanicThreshold, def), 100)
}

// ZoneRoutingEnabled draws whether zone-aware routing applies to this pick:
// upstream.zone_routing.enabled as a percentage, def (100 in Envoy) by
// default.
func (s *Snapshot) ZoneRoutingEnabled(def uint64) bool {
	return s.FeatureEnabled(KeyZoneRoutingEnabled, def)
}

// ZoneRoutingMinClusterSize returns upstream.zone_routing.min_cluster_size,
// or def (the cluster's zone_aware_lb_config.min_cluster_size, 6 by default).
func (s *Snapshot) ZoneRoutingMinClusterSize(def uint64) uint64 {
	return s.Uint64(KeyZoneRoutingMinClusterSize, def)
}
