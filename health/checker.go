package health

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/runtime"
	"github.com/legateproxy/legate/stats"
)

// Stats are a cluster's health-check stats, named as Envoy names them. Register them under
// "cluster.<stat name>.health_check." (Store.Register) before passing them to New.
type Stats struct {
	Attempt        stats.Counter `stat:"attempt"`
	Success        stats.Counter `stat:"success"`
	Failure        stats.Counter `stat:"failure"`
	PassiveFailure stats.Counter `stat:"passive_failure"`
	NetworkFailure stats.Counter `stat:"network_failure"`
	VerifyCluster  stats.Counter `stat:"verify_cluster"`
	Healthy        stats.Gauge   `stat:"healthy,never_import"`
	Degraded       stats.Gauge   `stat:"degraded,never_import"`
}

// RuntimeSource gives the current runtime snapshot (runtime.Runtime implements it). The checker
// reads health_check.min_interval, health_check.max_interval and health_check.verify_cluster.
type RuntimeSource interface {
	Snapshot() *runtime.Snapshot
}

// Options are a Checker's dependencies. Every field but ClusterName and Stats has a default, given
// in its comment.
type Options struct {
	// ClusterName is the cluster's name: the default HTTP Host and gRPC authority, and
	// cluster_name in events. Required.
	ClusterName string
	// Stats receives the health_check.* stats. Required.
	Stats *Stats
	// OnChange is called after every completed check, passive failure and removal of a host
	// that never finished its first check (Envoy's host-check-complete callbacks). changed is true
	// when the host's health, degraded or pending state flipped and the cluster must publish a new
	// snapshot. It is called without locks held, from checker goroutines, possibly concurrently
	// for different hosts. nil: no callback.
	OnChange func(h *host.Host, changed bool)
	// OnResult is called just before OnChange after every completed check and passive failure,
	// with whether that check passed (Envoy's current_check_result): the outlier detector uses it
	// for successful_active_health_check_uneject_host. Same calling rules as OnChange. nil: no
	// callback.
	OnResult func(h *host.Host, passed bool)
	// Clock; nil means the real clock.
	Clock clock.Clock
	// Scheduler bounds concurrent checks; share one across all clusters. nil: a private
	// Scheduler with the default bound.
	Scheduler *Scheduler
	// Runtime; nil means no runtime overrides.
	Runtime RuntimeSource
	// Rand returns uniform random numbers for jitter; nil means math/rand/v2.Uint64.
	Rand func() uint64
	// HadTraffic reports whether the cluster has seen upstream traffic (Envoy checks
	// upstream_cx_total, upstream_cx_tx_bytes_total, upstream_cx_rx_bytes_total). Until it does,
	// checks run at no_traffic_interval / no_traffic_healthy_interval. nil means traffic has been
	// seen: the cluster manager should pass its stats-based function to match Envoy exactly.
	HadTraffic func() bool
	// Prober overrides the prober built from the spec (tests, custom checkers). nil: HTTP, TCP or
	// gRPC per the spec.
	Prober Prober
	// Dial opens probe connections; nil means a net.Dialer.
	Dial DialFunc
	// TLSConfigFor returns the TLS client configuration for a host (the cluster's transport
	// socket, matched per host); nil, or a nil result, means plain text. The checker applies
	// tls_options.alpn_protocols on a clone.
	TLSConfigFor func(h *host.Host) *tls.Config
	// AddressFor returns the address to check for a host (endpoint health_check_config.port_value
	// overrides); nil means h.Address().
	AddressFor func(h *host.Host) string
	// EventLog receives HealthCheckEvent JSON lines. nil: the file at event_log_path when set
	// (opened for append, created 0644, closed by Close), else no event log.
	EventLog io.Writer
}

// Checker runs one core.HealthCheck against every host of one cluster: each host on its own
// schedule (interval, jitter, edge and no-traffic intervals), with Envoy's thresholds, timeouts
// as network failures, health flags (/failed_active_hc, /degraded_active_hc, /pending_active_hc,
// /active_hc_timeout, /excluded_via_immediate_hc_fail), health_check.* stats and the
// event_log_path log.
//
// All methods are safe for concurrent use. Checks run on goroutines the Checker owns; Close stops
// them and waits.
type Checker struct {
	spec    *config.HealthCheck
	opts    Options
	clock   clock.Clock
	sched   *Scheduler
	prober  Prober
	events  *eventLog
	closeFn func() error

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards sessions, started and closed, and orders wg.Add against Close's wg.Wait.
	mu       sync.Mutex
	sessions map[*host.Host]*session
	started  bool
	closed   bool
}

// New builds a Checker for spec. It opens the event log file when one is configured. Checks
// begin at Start.
func New(spec *config.HealthCheck, opts Options) (*Checker, error) {
	if spec == nil {
		return nil, fmt.Errorf("health: cluster %q: health check spec is nil", opts.ClusterName)
	}
	if opts.Stats == nil {
		return nil, fmt.Errorf("health: cluster %q: Options.Stats is nil; stats are required", opts.ClusterName)
	}
	c := &Checker{spec: spec, opts: opts, clock: opts.Clock, sched: opts.Scheduler, prober: opts.Prober,
		sessions: map[*host.Host]*session{}}
	if c.clock == nil {
		c.clock = clock.Real()
	}
	if c.sched == nil {
		c.sched = NewScheduler(0)
	}
	if c.opts.Rand == nil {
		c.opts.Rand = rand.Uint64
	}
	if c.prober == nil {
		p, err := newProber(spec, &c.opts)
		if err != nil {
			return nil, fmt.Errorf("health: cluster %q: %w", opts.ClusterName, err)
		}
		c.prober = p
	}
	w := opts.EventLog
	if w == nil && spec.EventLogPath != "" {
		f, err := os.OpenFile(spec.EventLogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("health: cluster %q: event_log_path = %q: %w", opts.ClusterName, spec.EventLogPath, err)
		}
		w, c.closeFn = f, f.Close
	}
	if w != nil {
		c.events = &eventLog{w: w, cluster: opts.ClusterName, kind: spec.Kind, now: c.clock.Now}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// InitialFlags returns the health flags a host must be created with when its cluster has active
// health checking, as Envoy sets them: /failed_active_hc until the first check passes, plus
// /pending_active_hc (excluded from load balancing) when the host is added after the cluster's
// initial set and common_lb_config.ignore_new_hosts_until_first_hc is set. The cluster manager
// puts them in host.Config.Health.
func InitialFlags(addedLater, ignoreNewHostsUntilFirstHC bool) host.HealthFlag {
	f := host.FailedActiveHC
	if addedLater && ignoreNewHostsUntilFirstHC {
		f |= host.PendingActiveHC
	}
	return f
}

// SetHosts replaces the set of hosts to check (all priorities). Hosts are identified by pointer:
// a host seen before keeps its session, counters and schedule; a new one gets a session (and, once
// started, its first check, after initial_jitter); a host no longer listed is dropped, its check
// cancelled. SetHosts does not change health flags (see InitialFlags).
func (c *Checker) SetHosts(hosts []*host.Host) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	keep := make(map[*host.Host]struct{}, len(hosts))
	var added, removed []*session
	for _, h := range hosts {
		if h == nil {
			continue
		}
		keep[h] = struct{}{}
		if _, ok := c.sessions[h]; ok {
			continue
		}
		s := c.newSession(h)
		c.sessions[h] = s
		added = append(added, s)
	}
	for h, s := range c.sessions {
		if _, ok := keep[h]; !ok {
			delete(c.sessions, h)
			removed = append(removed, s)
		}
	}
	started := c.started
	c.mu.Unlock()

	for _, s := range removed {
		s.remove()
	}
	if started {
		for _, s := range added {
			s.start()
		}
	}
}

// Start begins checking the current and future hosts. Calling it again does nothing.
func (c *Checker) Start() {
	c.mu.Lock()
	if c.started || c.closed {
		c.mu.Unlock()
		return
	}
	c.started = true
	all := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		all = append(all, s)
	}
	c.mu.Unlock()
	for _, s := range all {
		s.start()
	}
}

// Close stops every check, waits for the checker's goroutines and closes the event log file it
// opened. Hosts keep their flags. Close is idempotent.
func (c *Checker) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	all := make([]*session, 0, len(c.sessions))
	for h, s := range c.sessions {
		all = append(all, s)
		delete(c.sessions, h)
	}
	c.mu.Unlock()
	c.cancel()
	for _, s := range all {
		s.stop()
	}
	c.wg.Wait()
	if c.closeFn != nil {
		return c.closeFn()
	}
	return nil
}

// ReportPassiveFailure marks h unhealthy at once because the data plane saw it fail (Envoy's
// HealthCheckHostMonitor::setUnhealthy), counting passive_failure. With immediate set (the
// upstream answered with x-envoy-immediate-health-check-fail) the host is also excluded from load
// balancing until a check passes. Unknown hosts are ignored. OnChange runs before it returns.
func (c *Checker) ReportPassiveFailure(h *host.Host, immediate bool) {
	if immediate {
		h.SetHealthFlag(host.ExcludedViaImmediateHCFail)
	}
	c.mu.Lock()
	s := c.sessions[h]
	c.mu.Unlock()
	if s != nil {
		s.passiveFailure()
	}
}

// Spec returns the health check the checker runs.
func (c *Checker) Spec() *config.HealthCheck { return c.spec }

// spawn runs fn on a goroutine owned by the checker; it reports false once the checker is closed.
func (c *Checker) spawn(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

func (c *Checker) hadTraffic() bool { return c.opts.HadTraffic == nil || c.opts.HadTraffic() }

func snapshotOf(o *Options) *runtime.Snapshot {
	if o.Runtime == nil {
		return nil
	}
	return o.Runtime.Snapshot()
}

// interval picks the wait before the next check after a check that found the host healthy or
// not, and whether that check left a threshold transition pending (Envoy's interval()).
func (c *Checker) interval(healthy bool, t transition) time.Duration {
	s := c.spec
	var base time.Duration
	switch {
	case !c.hadTraffic():
		base = s.NoTrafficInterval
		if healthy && t != changePending {
			base = s.NoTrafficHealthyInterval
		}
	case !healthy && t == changePending:
		base = s.UnhealthyEdgeInterval
	case !healthy:
		base = s.UnhealthyInterval
	case t == changePending:
		base = s.HealthyEdgeInterval
	default:
		base = s.Interval
	}
	return c.withJitter(base, s.IntervalJitter)
}

// withJitter adds interval_jitter_percent of base and up to jitter to base, in whole
// milliseconds as Envoy does, then clamps it to the runtime's health_check.min_interval and
// health_check.max_interval and to at least 1 ms.
func (c *Checker) withJitter(base, jitter time.Duration) time.Duration {
	ms := uint64(base.Milliseconds())
	if mod := uint64(c.spec.IntervalJitterPercent) * ms / 100; mod > 0 {
		ms += c.opts.Rand() % mod
	}
	if j := uint64(jitter.Milliseconds()); j > 0 {
		ms += c.opts.Rand() % j
	}
	minMs, maxMs := uint64(0), ^uint64(0)
	if snap := snapshotOf(&c.opts); snap != nil {
		minMs = snap.Uint64(runtime.KeyHealthCheckMinInterval, 0)
		maxMs = snap.Uint64(runtime.KeyHealthCheckMaxInterval, maxMs)
	}
	ms = max(min(ms, maxMs), minMs, 1)
	const maxMillis = uint64(1<<63-1) / uint64(time.Millisecond)
	return time.Duration(min(ms, maxMillis)) * time.Millisecond
}

// verifyCluster draws health_check.verify_cluster (default 100%).
func (t target) verifyCluster() bool {
	snap := snapshotOf(t.opts)
	return snap == nil || snap.FeatureEnabled(runtime.KeyHealthCheckVerifyCluster, 100)
}
