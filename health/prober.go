package health

import (
	"context"

	"github.com/legateproxy/legate/host"
)

// FailureType is envoy.data.core.v3.HealthCheckFailureType: why a check failed.
type FailureType uint8

// Failure types, numbered as Envoy's enum.
const (
	// Active: the host answered, and the answer was wrong (status, payload, gRPC status).
	Active FailureType = iota
	// Passive: the data plane reported the host unhealthy (ReportPassiveFailure).
	Passive
	// Network: connecting, writing or reading failed.
	Network
	// NetworkTimeout: no answer within the timeout.
	NetworkTimeout
)

var failureNames = [...]string{"ACTIVE", "PASSIVE", "NETWORK", "NETWORK_TIMEOUT"}

// String returns Envoy's enum name ("ACTIVE", …).
func (f FailureType) String() string {
	if int(f) < len(failureNames) {
		return failureNames[f]
	}
	return "UNKNOWN"
}

// network reports whether failures of this type count toward unhealthy_threshold regardless of
// retriability (Envoy's networkHealthCheckFailureType).
func (f FailureType) network() bool { return f == Network || f == NetworkTimeout }

// Outcome is the verdict of one check.
type Outcome uint8

// Outcomes.
const (
	Succeeded Outcome = iota
	// SucceededDegraded: the check passed and the host asked to be marked degraded (HTTP
	// x-envoy-degraded).
	SucceededDegraded
	Failed
)

// Result is what one check found.
type Result struct {
	Outcome Outcome
	// Failure is the failure type when Outcome is Failed: Active or Network. (The checker itself
	// produces NetworkTimeout and Passive.)
	Failure FailureType
	// Retriable marks an Active failure that counts toward unhealthy_threshold instead of failing
	// the host at once (HTTP retriable_statuses).
	Retriable bool
	// ImmediateFail is set when a failing HTTP response carried x-envoy-immediate-health-check-fail:
	// the host is also flagged /excluded_via_immediate_hc_fail.
	ImmediateFail bool
	// HTTPStatus is the response status of an HTTP check (0 otherwise), reported in failure
	// events.
	HTTPStatus int
	// VerifiedCluster is set when the service_name_matcher check ran (health_check.verify_cluster).
	VerifiedCluster bool
	// Err describes a failure, for debugging; nil on success.
	Err error
}

// Prober creates the per-host state of one kind of check. The HTTP, TCP and gRPC probers of this
// package implement it; tests use fakes.
//
// Session is called from the goroutine calling Checker.SetHosts or Checker.Start, and must not
// block.
type Prober interface {
	Session(h *host.Host) ProbeSession
}

// ProbeSession checks one host, keeping whatever connection state reuse_connection allows.
//
// The checker never calls Check concurrently with itself or with Close, and calls Close once,
// after the last Check has returned.
type ProbeSession interface {
	// Check runs one check and returns its result. It must return promptly once ctx is done: the
	// checker cancels ctx when the timeout fires (the result is then ignored) and when the host
	// is removed or the checker closed.
	Check(ctx context.Context) Result
	// Close releases connections.
	Close()
}

func failed(t FailureType, err error) Result { return Result{Outcome: Failed, Failure: t, Err: err} }
