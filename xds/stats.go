package xds

import (
	"github.com/legateproxy/legate/stats"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// SubscriptionStats are Envoy's subscription stats (xds/watch.SubscriptionStats).
type SubscriptionStats = xdswatch.SubscriptionStats

// edsStats are the subscription stats of an EDS cluster that the cluster package does not
// already keep under cluster.<name>. (update_attempt, update_success, update_failure,
// update_empty and version are cluster.Stats fields, shared as in Envoy, where both live in the
// cluster's scope).
type edsStats struct {
	InitFetchTimeout stats.Counter     `stat:"init_fetch_timeout"`
	UpdateRejected   stats.Counter     `stat:"update_rejected"`
	UpdateTime       stats.Gauge       `stat:"update_time,never_import"`
	VersionText      stats.TextReadout `stat:"version_text"`
	UpdateDuration   stats.Histogram   `stat:"update_duration,unit=ms"`
}

// ControlPlaneStats are the control_plane.* stats of the gRPC streams, shared by every
// stream of a Client as Envoy's streams share them. Identifier is the control_plane.identifier
// of the last gRPC response (ADS, state-of-the-world or delta) that carried a control_plane,
// for a type the stream subscribes to; REST and file sources leave it alone, as in Envoy.
type ControlPlaneStats struct {
	ConnectedState    stats.Gauge       `stat:"connected_state,never_import"`
	PendingRequests   stats.Gauge       `stat:"pending_requests,accumulate"`
	RateLimitEnforced stats.Counter     `stat:"rate_limit_enforced"`
	Identifier        stats.TextReadout `stat:"identifier"`
}

// versionHash is the value of the version gauge (xds/watch.VersionHash).
func versionHash(v string) uint64 { return xdswatch.VersionHash(v) }
