package xds

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/legateproxy/legate/stats"
)

// SubscriptionStats are Envoy's subscription stats (cluster_manager.cds.*): see
// envoy-admin-formats §26.10. update_attempt counts the subscription's start, every response
// and every failure; update_failure counts transport failures, update_rejected NACKs.
type SubscriptionStats struct {
	InitFetchTimeout stats.Counter     `stat:"init_fetch_timeout"`
	UpdateAttempt    stats.Counter     `stat:"update_attempt"`
	UpdateFailure    stats.Counter     `stat:"update_failure"`
	UpdateRejected   stats.Counter     `stat:"update_rejected"`
	UpdateSuccess    stats.Counter     `stat:"update_success"`
	UpdateTime       stats.Gauge       `stat:"update_time,never_import"`
	Version          stats.Gauge       `stat:"version,never_import"`
	VersionText      stats.TextReadout `stat:"version_text"`
	UpdateDuration   stats.Histogram   `stat:"update_duration,unit=ms"`
}

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

// versionHash is the value of the version gauge: Envoy's xxHash64 of version_info.
func versionHash(v string) uint64 { return xxhash.Sum64String(v) }

// durationMs is d in whole milliseconds, for update_duration.
func durationMs(d time.Duration) uint64 {
	if d < 0 {
		return 0
	}
	return uint64(d / time.Millisecond)
}

// accepted records a successful update on s.
func (s *SubscriptionStats) accepted(version string, now time.Time, took time.Duration) {
	s.UpdateAttempt.Inc()
	s.UpdateSuccess.Inc()
	s.UpdateTime.Set(uint64(now.UnixMilli()))
	s.Version.Set(versionHash(version))
	s.VersionText.Set(version)
	s.UpdateDuration.Record(durationMs(took))
}

// logIgnored warns, once per response, about fields its resources set that Legate accepts
// without implementing (config's Ignored lists; a static bootstrap warns about the same at
// load). fields counts the resources setting each field path.
func (c *Client) logIgnored(api, kind string, fields map[string]int) {
	if len(fields) == 0 {
		return
	}
	paths := make([]string, 0, len(fields))
	for f := range fields {
		paths = append(paths, f)
	}
	slices.Sort(paths)
	var b strings.Builder
	for i, f := range paths {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%d %s", f, fields[f], kind)
		if fields[f] > 1 {
			b.WriteString("s")
		}
		b.WriteString(")")
	}
	c.log.Warnf("xds: %s: set, but not implemented by Legate; ignored: %s", api, b.String())
}
