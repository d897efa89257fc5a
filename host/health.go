package host

import "strings"

// HealthFlag is one reason a host is unhealthy, degraded or excluded. Flags combine as a bitmask.
// The values mirror Envoy's Host::HealthFlag enumeration.
type HealthFlag uint32

// Health flags, in the order Envoy prints them in /clusters (health_flags).
const (
	// FailedActiveHC: the host failed active health checking.
	FailedActiveHC HealthFlag = 1 << iota
	// FailedOutlierCheck: the outlier detector ejected the host.
	FailedOutlierCheck
	// FailedEDSHealth: EDS reported the host UNHEALTHY (or TIMEOUT, UNKNOWN-as-unhealthy).
	FailedEDSHealth
	// DegradedActiveHC: the active health check reported the host degraded.
	DegradedActiveHC
	// DegradedEDSHealth: EDS reported the host DEGRADED.
	DegradedEDSHealth
	// PendingDynamicRemoval: discovery removed the host but it is kept until it fails health
	// checking (or its connections drain).
	PendingDynamicRemoval
	// PendingActiveHC: the host has not been health checked yet and is excluded until it is.
	PendingActiveHC
	// ExcludedViaImmediateHCFail: the host answered a health check with
	// x-envoy-immediate-health-check-fail and is excluded from load balancing.
	ExcludedViaImmediateHCFail
	// ActiveHCTimeout: the last active health check timed out.
	ActiveHCTimeout
	// EDSStatusDraining: EDS reported the host DRAINING.
	EDSStatusDraining
)

// unhealthyFlags make a host unhealthy (Envoy's coarseHealth() == Unhealthy).
const unhealthyFlags = FailedActiveHC | FailedOutlierCheck | FailedEDSHealth | ActiveHCTimeout | EDSStatusDraining

// degradedFlags make an otherwise healthy host degraded.
const degradedFlags = DegradedActiveHC | DegradedEDSHealth

// excludedFlags remove a host from load balancing and from the denominators of priority, locality
// and panic computations (Envoy's "excluded endpoints").
const excludedFlags = PendingActiveHC | ExcludedViaImmediateHCFail

var healthTokens = [...]struct {
	flag  HealthFlag
	token string
}{
	{FailedActiveHC, "/failed_active_hc"},
	{FailedOutlierCheck, "/failed_outlier_check"},
	{FailedEDSHealth, "/failed_eds_health"},
	{DegradedActiveHC, "/degraded_active_hc"},
	{DegradedEDSHealth, "/degraded_eds_health"},
	{PendingDynamicRemoval, "/pending_dynamic_removal"},
	{PendingActiveHC, "/pending_active_hc"},
	{ExcludedViaImmediateHCFail, "/excluded_via_immediate_hc_fail"},
	{ActiveHCTimeout, "/active_hc_timeout"},
	{EDSStatusDraining, "/eds_status_draining"},
}

// String renders the flags as the /clusters text output does: each set flag appends its token
// ("/failed_active_hc", …) in Envoy's fixed order, and no flag at all renders as "healthy".
func (f HealthFlag) String() string {
	if f == 0 {
		return "healthy"
	}
	var b strings.Builder
	for _, t := range healthTokens {
		if f&t.flag != 0 {
			b.WriteString(t.token)
		}
	}
	return b.String()
}

// Health is the coarse health of a host, as Envoy's Host::Health.
type Health uint8

// Coarse health values.
const (
	Unhealthy Health = iota
	Degraded
	Healthy
)

// String returns "unhealthy", "degraded" or "healthy".
func (h Health) String() string {
	switch h {
	case Healthy:
		return "healthy"
	case Degraded:
		return "degraded"
	default:
		return "unhealthy"
	}
}

// Coarse maps a flag set to its coarse health: any failure flag makes the host unhealthy, else
// any degraded flag makes it degraded, else it is healthy (pending and exclusion flags do not
// change coarse health).
func (f HealthFlag) Coarse() Health {
	switch {
	case f&unhealthyFlags != 0:
		return Unhealthy
	case f&degradedFlags != 0:
		return Degraded
	default:
		return Healthy
	}
}

// Excluded reports whether the flags exclude the host from load balancing.
func (f HealthFlag) Excluded() bool { return f&excludedFlags != 0 }
