package watch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
)

// SubscriptionStats are Envoy's subscription stats (cluster_manager.cds.*,
// listener_manager.lds.*, an RDS subscription's): see envoy-admin-formats §26.10.
// update_attempt counts the subscription's start, every response and every failure;
// update_failure counts transport failures, update_rejected NACKs.
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

// Accepted records a successful update of version at now that took took to apply.
func (s *SubscriptionStats) Accepted(version string, now time.Time, took time.Duration) {
	s.UpdateAttempt.Inc()
	s.UpdateSuccess.Inc()
	s.UpdateTime.Set(uint64(now.UnixMilli()))
	s.Version.Set(VersionHash(version))
	s.VersionText.Set(version)
	s.UpdateDuration.Record(DurationMs(took))
}

// VersionHash is the value of a version gauge: Envoy's xxHash64 of version_info.
func VersionHash(v string) uint64 { return xxhash.Sum64String(v) }

// DurationMs is d in whole milliseconds, for update_duration.
func DurationMs(d time.Duration) uint64 {
	if d < 0 {
		return 0
	}
	return uint64(d / time.Millisecond)
}

// LogIgnored warns on log, once per response of api ("CDS"), about the fields its resources
// (of kind "cluster") set that Legate accepts without implementing (config's Ignored lists; a
// static bootstrap warns about the same at load). fields counts the resources setting each
// field path.
func LogIgnored(log *logging.Logger, api, kind string, fields map[string]int) {
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
	log.Warnf("xds: %s: set, but not implemented by Legate; ignored: %s", api, b.String())
}

// FailureState is the error_state of a rejected resource a, as the config dumps show it
// (Envoy's UpdateFailureState): the resource, when the update was tried, why it was rejected
// and the version it came with.
func FailureState(a *anypb.Any, at time.Time, err error, version string) *adminv3.UpdateFailureState {
	return &adminv3.UpdateFailureState{FailedConfiguration: a, LastUpdateAttempt: timestamppb.New(at), Details: err.Error(), VersionInfo: version}
}
