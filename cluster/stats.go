package cluster

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/legateproxy/legate/internal/procpin"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/stats"
)

// ManagerStats are the cluster_manager.* stats (Envoy's ClusterManagerStats).
type ManagerStats struct {
	ClusterAdded           stats.Counter `stat:"cluster_added"`
	ClusterModified        stats.Counter `stat:"cluster_modified"`
	ClusterRemoved         stats.Counter `stat:"cluster_removed"`
	ClusterUpdated         stats.Counter `stat:"cluster_updated"`
	ClusterUpdatedViaMerge stats.Counter `stat:"cluster_updated_via_merge"`
	UpdateMergeCancelled   stats.Counter `stat:"update_merge_cancelled"`
	UpdateOutOfMergeWindow stats.Counter `stat:"update_out_of_merge_window"`
	ActiveClusters         stats.Gauge   `stat:"active_clusters,never_import"`
	WarmingClusters        stats.Gauge   `stat:"warming_clusters,never_import"`
}

// Stats are the cluster.<name>.* stats of one cluster (Envoy's ClusterTrafficStats,
// ClusterConfigUpdateStats, ClusterEndpointStats and ClusterLbStats). The data plane increments
// the upstream_* fields; the manager maintains the update, membership and version fields.
// Fields are atomics: safe for concurrent use without locks.
type Stats struct {
	// TrafficStats is registered on its own, so that its listing can be
	// deferred; its fields are promoted.
	TrafficStats `stat:"-"`

	// Configuration updates.
	AssignmentStale           stats.Counter `stat:"assignment_stale"`
	AssignmentTimeoutReceived stats.Counter `stat:"assignment_timeout_received"`
	AssignmentUseCached       stats.Counter `stat:"assignment_use_cached"`
	UpdateAttempt             stats.Counter `stat:"update_attempt"`
	UpdateEmpty               stats.Counter `stat:"update_empty"`
	UpdateFailure             stats.Counter `stat:"update_failure"`
	UpdateNoRebuild           stats.Counter `stat:"update_no_rebuild"`
	UpdateSuccess             stats.Counter `stat:"update_success"`
	Version                   stats.Gauge   `stat:"version,never_import"`
	WarmingState              stats.Gauge   `stat:"warming_state,never_import"`

	// Membership.
	MaxHostWeight      stats.Gauge   `stat:"max_host_weight,never_import"`
	MembershipDegraded stats.Gauge   `stat:"membership_degraded,never_import"`
	MembershipExcluded stats.Gauge   `stat:"membership_excluded,never_import"`
	MembershipHealthy  stats.Gauge   `stat:"membership_healthy,never_import"`
	MembershipTotal    stats.Gauge   `stat:"membership_total,never_import"`
	MembershipChange   stats.Counter `stat:"membership_change"`

	// Load balancing.
	LbHealthyPanic              stats.HotCounter `stat:"lb_healthy_panic"`
	LbLocalClusterNotOK         stats.HotCounter `stat:"lb_local_cluster_not_ok"`
	LbRecalculateZoneStructures stats.Counter    `stat:"lb_recalculate_zone_structures"`
	LbSubsetsCreated            stats.Counter    `stat:"lb_subsets_created"`
	LbSubsetsFallback           stats.HotCounter `stat:"lb_subsets_fallback"`
	LbSubsetsFallbackPanic      stats.HotCounter `stat:"lb_subsets_fallback_panic"`
	LbSubsetsRemoved            stats.Counter    `stat:"lb_subsets_removed"`
	LbSubsetsSelected           stats.HotCounter `stat:"lb_subsets_selected"`
	LbZoneClusterTooSmall       stats.Counter    `stat:"lb_zone_cluster_too_small"`
	LbZoneNoCapacityLeft        stats.HotCounter `stat:"lb_zone_no_capacity_left"`
	LbZoneRoutingAllDirectly    stats.HotCounter `stat:"lb_zone_routing_all_directly"`
	LbZoneRoutingCrossZone      stats.HotCounter `stat:"lb_zone_routing_cross_zone"`
	LbZoneRoutingSampled        stats.HotCounter `stat:"lb_zone_routing_sampled"`
	LbSubsetsActive             stats.Gauge      `stat:"lb_subsets_active,never_import"`

	// Transport socket matches: the hosts created on the cluster's own transport_socket.
	DefaultTotalMatchCount stats.Counter `stat:"default.total_match_count"`

	lines   atomic.Pointer[stats.HotBlock[TrafficLine]] // made on the first request (Lines)
	linesMu sync.Mutex                                  // serializes making them
}

// TrafficLine is a P's share of the traffic counters every HTTP request to the cluster adds
// to: upstream_rq_total, upstream_rq_completed and upstream_cx_rx/tx_bytes_total, bound to
// those counters (stats.HotBlock). The pool and the router add to the fields of their line.
type TrafficLine struct {
	RqTotal, RqCompleted, CxRxBytes, CxTxBytes atomic.Uint64
}

// Lines returns the cluster's traffic lines, made and bound on the first call (a cluster the
// pools carry nothing to has none). Small enough to be inlined.
func (s *Stats) Lines() *stats.HotBlock[TrafficLine] {
	if b := s.lines.Load(); b != nil {
		return b
	}
	return s.makeLines()
}

func (s *Stats) makeLines() *stats.HotBlock[TrafficLine] {
	s.linesMu.Lock()
	defer s.linesMu.Unlock()
	if b := s.lines.Load(); b != nil {
		return b
	}
	// Bound before they are published: no add lands on lines the counters do not read yet.
	b := stats.NewHotBlock[TrafficLine]()
	stats.BindCounter(&s.UpstreamRqTotal, b, func(l *TrafficLine) *atomic.Uint64 { return &l.RqTotal })
	stats.BindCounter(&s.UpstreamRqCompleted, b, func(l *TrafficLine) *atomic.Uint64 { return &l.RqCompleted })
	stats.BindCounter(&s.UpstreamCxRxBytesTotal, b, func(l *TrafficLine) *atomic.Uint64 { return &l.CxRxBytes })
	stats.BindCounter(&s.UpstreamCxTxBytesTotal, b, func(l *TrafficLine) *atomic.Uint64 { return &l.CxTxBytes })
	s.lines.Store(b)
	return b
}

// SocketMatchStats are the cluster.<name>.<match name>.* stats of one entry of
// transport_socket_matches (Envoy's TransportSocketMatchStats).
type SocketMatchStats struct {
	// TotalMatchCount counts the hosts created whose metadata selected the entry.
	TotalMatchCount stats.Counter `stat:"total_match_count"`
}

// HostStats are the per-host statistics /clusters prints (cx_total, cx_active, …). They are not
// in the stats store, as in Envoy. The connection counters are atomics. The request counters,
// which every request to the host writes, are kept on a line per P (RqStarted, RqEnded) and
// summed when read (Rq), so that the cores proxying to one host do not queue for one shared
// line. Safe for concurrent use.
type HostStats struct {
	CxTotal       atomic.Uint64
	CxConnectFail atomic.Uint64
	CxActive      atomic.Int64

	rq atomic.Pointer[HostLines] // made on the host's first request

	// used is set by picks on ORIGINAL_DST clusters and cleared by the cleanup timer.
	used atomic.Bool
}

// HostRq are a host's request statistics.
type HostRq struct {
	Total, Timeout, Success, Error uint64
	Active                         int64
}

// RqEnd is how a request to a host ended.
type RqEnd uint8

const (
	RqCancelled RqEnd = iota // the downstream went away: counted in neither success nor error
	RqTimedOut               // rq_timeout and rq_error
	RqFailed                 // rq_error: a failed exchange or a 5xx response
	RqSucceeded              // rq_success
)

// maxHostLines bounds a host's lines: a host costs at most maxHostLines*64 bytes once it has
// had a request (16 cores or more: 1 KiB), and on more Ps than lines a line is shared by
// GOMAXPROCS/maxHostLines of them (4 on 64 cores) instead of by all.
const maxHostLines = 16

// HostLines is a host's table of request lines: line[p] is P p's. It is made for GOMAXPROCS at
// the host's first request and made again, larger, when a P beyond it comes (GOMAXPROCS raised
// by the program, or by the runtime following a container's CPU limit): a request ends on the
// line it started on (RqStarted returns it), so the lines of a replaced table are not moved
// but kept (prev) and summed by Rq, and every count stays exact.
type HostLines struct {
	// mask maps a P to its line: len-1 once the table has maxHostLines lines (more Ps share
	// them), all ones before, so that a P beyond the table fails line's bounds check and grows it.
	mask uint64
	line []HostLine
	prev *HostLines // the table this one replaced, nil for the first
}

// HostLine is one P's share of a host's request counters, a cache line of its own. RqStarted
// returns the line a request was counted on, and its end is counted on the same line.
type HostLine struct {
	total, timeout, success, errors atomic.Uint64
	active                          atomic.Int64
	_                               [24]byte
}

// line returns the share of P l.P() (l a stream's stats.Line, or ThisLine). A P with a line
// costs what the mask alone did (an and and the bounds check); the first request, or a P beyond
// the table, makes it (grow).
func (s *HostStats) line(l stats.Line) *HostLine {
	p := uint64(l.P())
	if ls := s.rq.Load(); ls != nil {
		if i := p & ls.mask; i < uint64(len(ls.line)) {
			return &ls.line[i]
		}
	}
	return s.grow(p)
}

// grow installs a table of a line for P p and for every P of GOMAXPROCS now (a power of two, at
// most maxHostLines) in place of the table there is, kept as its prev, and returns P p's line
// (in this table or a concurrent caller's).
func (s *HostStats) grow(p uint64) *HostLine {
	for {
		old := s.rq.Load()
		if old != nil {
			if i := p & old.mask; i < uint64(len(old.line)) {
				return &old.line[i]
			}
		}
		// p is at least the old table's length, a power of two, so n is larger.
		n := min(max(procpin.Slots(), 1<<bits.Len64(min(p, maxHostLines))), maxHostLines)
		t := &HostLines{mask: ^uint64(0), line: make([]HostLine, n), prev: old}
		if n == maxHostLines {
			t.mask = maxHostLines - 1
		}
		if s.rq.CompareAndSwap(old, t) {
			return &t.line[p&t.mask]
		}
	}
}

// RqStarted counts a request sent to the host (rq_total, rq_active) on line l, the sending
// stream's (stats.ThisLine): the counters are atomics, so a stale line only costs cache
// traffic. Its end is counted on the line returned (RqEnded), without finding it again.
//
// It finds a P's line as line does, written out: every request sent counts here, and line's
// call was a third of the count.
func (s *HostStats) RqStarted(l stats.Line) *HostLine {
	var ln *HostLine
	p := uint64(l.P())
	if ls := s.rq.Load(); ls != nil && p&ls.mask < uint64(len(ls.line)) {
		ln = &ls.line[p&ls.mask]
	} else {
		ln = s.grow(p)
	}
	ln.total.Add(1)
	ln.active.Add(1)
	return ln
}

// RqEnded counts the end of a request RqStarted counted on ln.
func (ln *HostLine) RqEnded(e RqEnd) {
	ln.active.Add(-1)
	switch e {
	case RqTimedOut:
		ln.timeout.Add(1)
		ln.errors.Add(1)
	case RqFailed:
		ln.errors.Add(1)
	case RqSucceeded:
		ln.success.Add(1)
	}
}

// AddRq adds d to the request statistics at once (for a test's fixed values; the pools count
// with RqStarted and RqEnded).
func (s *HostStats) AddRq(d HostRq) {
	l := s.line(stats.ThisLine())
	l.total.Add(d.Total)
	l.timeout.Add(d.Timeout)
	l.success.Add(d.Success)
	l.errors.Add(d.Error)
	l.active.Add(d.Active)
}

// Rq sums the request statistics over the lines, those of replaced tables included.
func (s *HostStats) Rq() HostRq {
	var r HostRq
	for l := s.rq.Load(); l != nil; l = l.prev {
		for i := range l.line {
			ln := &l.line[i]
			r.Total += ln.total.Load()
			r.Timeout += ln.timeout.Load()
			r.Success += ln.success.Load()
			r.Error += ln.errors.Load()
			r.Active += ln.active.Load()
		}
	}
	return r
}

// lbStats points at the lb_* fields of s, for the balancers.
func (s *Stats) lbStats() lb.Stats {
	return lb.Stats{
		HealthyPanic:              &s.LbHealthyPanic,
		LocalClusterNotOK:         &s.LbLocalClusterNotOK,
		RecalculateZoneStructures: &s.LbRecalculateZoneStructures,
		ZoneClusterTooSmall:       &s.LbZoneClusterTooSmall,
		ZoneRoutingAllDirectly:    &s.LbZoneRoutingAllDirectly,
		ZoneRoutingSampled:        &s.LbZoneRoutingSampled,
		ZoneRoutingCrossZone:      &s.LbZoneRoutingCrossZone,
		ZoneNoCapacityLeft:        &s.LbZoneNoCapacityLeft,
		SubsetsSelected:           &s.LbSubsetsSelected,
		SubsetsFallback:           &s.LbSubsetsFallback,
		SubsetsFallbackPanic:      &s.LbSubsetsFallbackPanic,
		SubsetsCreated:            &s.LbSubsetsCreated,
		SubsetsRemoved:            &s.LbSubsetsRemoved,
		SubsetsActive:             &s.LbSubsetsActive,
	}
}

// TrafficStats are the upstream_* and related stats of one cluster (Envoy's
// ClusterTrafficStats), which deferred_stat_options.enable_deferred_creation_stats
// keeps out of the listings until the cluster first carries traffic.
type TrafficStats struct {
	BindErrors                             stats.Counter    `stat:"bind_errors"`
	OriginalDstHostInvalid                 stats.Counter    `stat:"original_dst_host_invalid"`
	RetryOrShadowAbandoned                 stats.Counter    `stat:"retry_or_shadow_abandoned"`
	UpstreamCxCloseNotify                  stats.Counter    `stat:"upstream_cx_close_notify"`
	UpstreamCxConnectAttemptsExceeded      stats.Counter    `stat:"upstream_cx_connect_attempts_exceeded"`
	UpstreamCxConnectFail                  stats.Counter    `stat:"upstream_cx_connect_fail"`
	UpstreamCxConnectTimeout               stats.Counter    `stat:"upstream_cx_connect_timeout"`
	UpstreamCxConnectWith0RTT              stats.Counter    `stat:"upstream_cx_connect_with_0_rtt"`
	UpstreamCxDestroy                      stats.Counter    `stat:"upstream_cx_destroy"`
	UpstreamCxDestroyLocal                 stats.Counter    `stat:"upstream_cx_destroy_local"`
	UpstreamCxDestroyLocalWithActiveRq     stats.Counter    `stat:"upstream_cx_destroy_local_with_active_rq"`
	UpstreamCxDestroyRemote                stats.Counter    `stat:"upstream_cx_destroy_remote"`
	UpstreamCxDestroyRemoteWithActiveRq    stats.Counter    `stat:"upstream_cx_destroy_remote_with_active_rq"`
	UpstreamCxDestroyWithActiveRq          stats.Counter    `stat:"upstream_cx_destroy_with_active_rq"`
	UpstreamCxHTTP1Total                   stats.Counter    `stat:"upstream_cx_http1_total"`
	UpstreamCxHTTP2Total                   stats.Counter    `stat:"upstream_cx_http2_total"`
	UpstreamCxHTTP3Total                   stats.Counter    `stat:"upstream_cx_http3_total"`
	UpstreamCxIdleTimeout                  stats.Counter    `stat:"upstream_cx_idle_timeout"`
	UpstreamCxMaxDurationReached           stats.Counter    `stat:"upstream_cx_max_duration_reached"`
	UpstreamCxMaxRequests                  stats.Counter    `stat:"upstream_cx_max_requests"`
	UpstreamCxNoneHealthy                  stats.Counter    `stat:"upstream_cx_none_healthy"`
	UpstreamCxOverflow                     stats.Counter    `stat:"upstream_cx_overflow"`
	UpstreamCxPoolOverflow                 stats.Counter    `stat:"upstream_cx_pool_overflow"`
	UpstreamCxProtocolError                stats.Counter    `stat:"upstream_cx_protocol_error"`
	UpstreamCxRxBytesTotal                 stats.HotCounter `stat:"upstream_cx_rx_bytes_total"`
	UpstreamCxTotal                        stats.Counter    `stat:"upstream_cx_total"`
	UpstreamCxTxBytesTotal                 stats.HotCounter `stat:"upstream_cx_tx_bytes_total"`
	UpstreamFlowControlBackedUpTotal       stats.Counter    `stat:"upstream_flow_control_backed_up_total"`
	UpstreamFlowControlDrainedTotal        stats.Counter    `stat:"upstream_flow_control_drained_total"`
	UpstreamFlowControlPausedReadingTotal  stats.Counter    `stat:"upstream_flow_control_paused_reading_total"`
	UpstreamFlowControlResumedReadingTotal stats.Counter    `stat:"upstream_flow_control_resumed_reading_total"`
	UpstreamInternalRedirectFailedTotal    stats.Counter    `stat:"upstream_internal_redirect_failed_total"`
	UpstreamInternalRedirectSucceededTotal stats.Counter    `stat:"upstream_internal_redirect_succeeded_total"`
	UpstreamRqCancelled                    stats.Counter    `stat:"upstream_rq_cancelled"`
	UpstreamRqCompleted                    stats.HotCounter `stat:"upstream_rq_completed"`
	UpstreamRqMaintenanceMode              stats.Counter    `stat:"upstream_rq_maintenance_mode"`
	UpstreamRqMaxDurationReached           stats.Counter    `stat:"upstream_rq_max_duration_reached"`
	UpstreamRqPendingFailureEject          stats.Counter    `stat:"upstream_rq_pending_failure_eject"`
	UpstreamRqPendingOverflow              stats.Counter    `stat:"upstream_rq_pending_overflow"`
	UpstreamRqPendingTotal                 stats.Counter    `stat:"upstream_rq_pending_total"`
	UpstreamRq0RTT                         stats.Counter    `stat:"upstream_rq_0rtt"`
	UpstreamRqPerTryTimeout                stats.Counter    `stat:"upstream_rq_per_try_timeout"`
	UpstreamRqPerTryIdleTimeout            stats.Counter    `stat:"upstream_rq_per_try_idle_timeout"`
	UpstreamRqRetry                        stats.Counter    `stat:"upstream_rq_retry"`
	UpstreamRqRetryBackoffExponential      stats.Counter    `stat:"upstream_rq_retry_backoff_exponential"`
	UpstreamRqRetryBackoffRatelimited      stats.Counter    `stat:"upstream_rq_retry_backoff_ratelimited"`
	UpstreamRqRetryLimitExceeded           stats.Counter    `stat:"upstream_rq_retry_limit_exceeded"`
	UpstreamRqRetryOverflow                stats.Counter    `stat:"upstream_rq_retry_overflow"`
	UpstreamRqRetrySuccess                 stats.Counter    `stat:"upstream_rq_retry_success"`
	UpstreamRqRxReset                      stats.Counter    `stat:"upstream_rq_rx_reset"`
	UpstreamRqTimeout                      stats.Counter    `stat:"upstream_rq_timeout"`
	UpstreamRqTotal                        stats.HotCounter `stat:"upstream_rq_total"`
	UpstreamRqTxReset                      stats.Counter    `stat:"upstream_rq_tx_reset"`
	UpstreamHTTP3Broken                    stats.Counter    `stat:"upstream_http3_broken"`
	UpstreamCxActive                       stats.Gauge      `stat:"upstream_cx_active,accumulate"`
	UpstreamCxRxBytesBuffered              stats.Gauge      `stat:"upstream_cx_rx_bytes_buffered,accumulate"`
	UpstreamCxTxBytesBuffered              stats.Gauge      `stat:"upstream_cx_tx_bytes_buffered,accumulate"`
	UpstreamRqActive                       stats.HotGauge   `stat:"upstream_rq_active,accumulate"`
	UpstreamRqPendingActive                stats.Gauge      `stat:"upstream_rq_pending_active,accumulate"`
	UpstreamCxConnectMs                    stats.Histogram  `stat:"upstream_cx_connect_ms,unit=ms"`
	UpstreamCxLengthMs                     stats.Histogram  `stat:"upstream_cx_length_ms,unit=ms"`
	UpstreamRqPerCx                        stats.Histogram  `stat:"upstream_rq_per_cx,unit=unspecified"`
}

// deferredInit is Envoy's hidden gauge that tells whether a cluster's
// deferred traffic stats exist yet.
type deferredInit struct {
	Initialized stats.Gauge `stat:"ClusterTrafficStats.initialized,hidden"`
}
