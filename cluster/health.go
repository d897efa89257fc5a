package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/health"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/outlier"
	"github.com/legateproxy/legate/runtime"
	"github.com/legateproxy/legate/tlsutil"
)

// RuntimeSource gives the current runtime snapshot. *runtime.Runtime implements it; Snapshot may
// return nil, meaning no overrides.
type RuntimeSource interface {
	Snapshot() *runtime.Snapshot
}

// healthPlan is a cluster's active health check and outlier detection, as the config path
// converted and checked them, with the TLS the checks use, built before the cluster is so that a
// cluster whose TLS fails is refused before it replaces anything.
type healthPlan struct {
	check   *config.HealthCheck          // nil without health_checks
	outlier *config.OutlierDetection     // nil without outlier_detection
	tlsFor  func(*host.Host) *tls.Config // nil: plain-text checks
}

// planHealth takes cfg's health check and outlier detection and builds the health checks' TLS.
func (m *Manager) planHealth(cfg *config.Cluster) (*healthPlan, error) {
	p := &healthPlan{check: cfg.HealthCheck, outlier: cfg.OutlierDetection}
	if p.check != nil && (cfg.TLS || len(cfg.TransportSocketMatches) > 0) {
		var err error
		if p.tlsFor, err = m.hcTLS(cfg); err != nil {
			return nil, fmt.Errorf("cluster %q: health_checks[0]: TLS for health checks: %w", cfg.Name, err)
		}
	}
	return p, nil
}

// defaultHealthCheckTLS builds the TLS client configurations of a cluster's transport sockets
// without SDS: a host is checked over the socket its traffic uses, or, with the check's
// transport_socket_match_criteria, over the socket those criteria select (as in Envoy).
func defaultHealthCheckTLS(r *registry.Registry, cfg *config.Cluster) (func(*host.Host) *tls.Config, error) {
	ctxs := make([]*tlsutil.ClientContext, 1+len(cfg.TransportSocketMatches))
	for i := range ctxs {
		up, err := tlsutil.Upstream(r, cfg.TransportSocketPath(i), cfg.TransportSocketFor(i))
		if err != nil {
			return nil, err
		}
		if up == nil {
			continue
		}
		if ctxs[i], err = tlsutil.NewClientContext(*up, tlsutil.Deps{}); err != nil {
			return nil, err
		}
	}
	fixed := -1
	if hc := cfg.HealthCheck; hc != nil && hc.SocketMatchCriteria != nil {
		fixed = cfg.MatchTransportSocket(hc.SocketMatchCriteria, nil)
	}
	return func(h *host.Host) *tls.Config {
		i := h.SocketMatch()
		if fixed >= 0 {
			i = fixed
		}
		if i >= len(ctxs) || ctxs[i] == nil {
			return nil
		}
		return ctxs[i].ConfigForHost(h.Hostname())
	}, nil
}

// clusterHealth is the active health checking of one cluster.
type clusterHealth struct {
	checker *health.Checker
	// logPath is the event_log_path the cluster holds a reference on; "" for none.
	logPath string
	// started is set once Run has started the checker.
	started atomic.Bool

	// Guarded by Cluster.mu: the hosts whose first check the cluster waits for before it is warm
	// (Envoy's pending_initialize_health_checks_), counted from the first applied host set.
	armed   bool
	pending map[*host.Host]struct{}
}

// firstRoundDoneLocked reports whether the cluster may warm: true without health checking, else
// once every host of the first applied host set has had its first check. The first call arms
// the count with hosts. Caller holds Cluster.mu.
func (hs *clusterHealth) firstRoundDoneLocked(hosts []*host.Host) bool {
	if hs == nil {
		return true
	}
	if !hs.armed {
		hs.armed = true
		hs.pending = make(map[*host.Host]struct{}, len(hosts))
		for _, h := range hosts {
			hs.pending[h] = struct{}{}
		}
	}
	return len(hs.pending) == 0
}

// attachHealthLocked builds c's health checker and outlier detector from plan, registering their
// stats on c's stats entry. Caller holds m.mu.
func (m *Manager) attachHealthLocked(c *Cluster, plan *healthPlan) error {
	if plan == nil {
		return nil
	}
	e, prefix := c.stats, "cluster."+c.cfg.StatName+"."
	if plan.check != nil {
		if e.health == nil {
			e.health = &registered[health.Stats]{}
			e.health.reg = m.store.Register(prefix+"health_check.", &e.health.stats)
		}
		opts := health.Options{
			ClusterName:  c.cfg.Name,
			Stats:        &e.health.stats,
			OnChange:     c.onHealthCheck,
			OnResult:     c.onHealthResult,
			Clock:        m.clock,
			Scheduler:    m.hcSched,
			Runtime:      m.runtime,
			Rand:         m.rand,
			HadTraffic:   c.hadTraffic,
			TLSConfigFor: plan.tlsFor,
			Prober:       m.testProber,
		}
		hs := &clusterHealth{}
		if path := plan.check.EventLogPath; path != "" {
			f, err := m.logs.open(path)
			if err != nil {
				return fmt.Errorf("cluster %q: health_checks[0].event_log_path = %q: %w", c.cfg.Name, path, err)
			}
			opts.EventLog, hs.logPath = f, path
		}
		chk, err := health.New(plan.check, opts)
		if err != nil {
			m.logs.release(hs.logPath)
			return fmt.Errorf("cluster %q: health_checks[0]: %w", c.cfg.Name, err)
		}
		hs.checker = chk
		c.health = hs
	}
	if plan.outlier != nil {
		if e.outlier == nil {
			e.outlier = &registered[outlier.Stats]{}
			e.outlier.reg = m.store.Register(prefix+"outlier_detection.", &e.outlier.stats)
		}
		d, err := outlier.New(plan.outlier, outlier.Options{
			ClusterName: c.cfg.Name,
			Stats:       &e.outlier.stats,
			Runtime:     m.runtime,
			Clock:       m.clock,
			Random:      m.rand,
			OnChange:    c.onOutlierChange,
			EventLog:    m.outlierLog,
		})
		if err != nil {
			if c.health != nil {
				c.health.checker.Close()
				m.logs.release(c.health.logPath)
				c.health = nil
			}
			return fmt.Errorf("cluster %q: outlier_detection: %w", c.cfg.Name, err)
		}
		c.outlier = d
	}
	return nil
}

// closeHealthLocked stops c's health checks and takes its hosts out of the health_check.healthy
// gauge and the outlier detector's ejections_active. It runs on its own goroutine: Checker.Close
// waits for running checks, whose callbacks may be waiting for m.mu, which the caller holds.
func (m *Manager) closeHealthLocked(c *Cluster) {
	if c.health == nil && c.outlier == nil {
		return
	}
	finish := func() {
		c.syncMu.Lock()
		defer c.syncMu.Unlock()
		if hs := c.health; hs != nil {
			hs.checker.SetHosts(nil)
			_ = hs.checker.Close()
			m.logs.release(hs.logPath)
		}
		if c.outlier != nil {
			c.outlier.UpdateHosts(nil, c.syncedHosts)
		}
		c.syncedHosts = nil
	}
	if m.stopped {
		go finish() // Run has returned; nothing is left to wait for it
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		finish()
	}()
}

// syncHealthHosts hands the cluster's current hosts to its health checker and outlier detector
// after a membership change. It must be called without locks held: SetHosts may call back into
// the cluster.
func (c *Cluster) syncHealthHosts() {
	if c.health == nil && c.outlier == nil {
		return
	}
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.mu.Lock()
	if c.closed || c.membershipGen == c.syncedGen {
		c.mu.Unlock()
		return
	}
	hosts, gen := c.hosts, c.membershipGen
	c.mu.Unlock()
	if c.outlier != nil {
		added, removed := diffHosts(c.syncedHosts, hosts)
		c.outlier.UpdateHosts(added, removed)
	}
	if c.health != nil {
		c.health.checker.SetHosts(hosts)
	}
	c.syncedHosts, c.syncedGen = hosts, gen
}

// diffHosts returns the hosts of cur not in prev and those of prev not in cur.
func diffHosts(prev, cur []*host.Host) (added, removed []*host.Host) {
	in := make(map[*host.Host]bool, len(prev))
	for _, h := range prev {
		in[h] = true
	}
	for _, h := range cur {
		if in[h] {
			delete(in, h)
			continue
		}
		added = append(added, h)
	}
	for _, h := range prev {
		if in[h] {
			removed = append(removed, h)
		}
	}
	return added, removed
}

// hadTraffic is Envoy's test for the no-traffic intervals: has the cluster opened or used an
// upstream connection.
func (c *Cluster) hadTraffic() bool {
	st := &c.stats.stats
	return st.UpstreamCxTotal.Used() || st.UpstreamCxTxBytesTotal.Used() || st.UpstreamCxRxBytesTotal.Used()
}

// onHealthCheck is the checker's OnChange: it counts first checks toward warming, republishes
// the snapshot when a host's health changed (through the merge window, at once when this
// finishes warming), drops an EDS host that discovery removed once it fails, and tells the
// health-failure subscribers.
func (c *Cluster) onHealthCheck(h *host.Host, changed bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.m.testEvent()
		return
	}
	hs := c.health
	firstDone := false
	if _, ok := hs.pending[h]; ok {
		delete(hs.pending, h)
		firstDone = len(hs.pending) == 0
	}
	failed := h.HasHealthFlag(host.FailedActiveHC)
	var warmedNow, applied bool
	var err error
	switch {
	case changed && failed && c.cfg.Type == config.EDS && h.HasHealthFlag(host.PendingDynamicRemoval):
		// Envoy's EDS cluster removes a host that discovery dropped as soon as it fails.
		applied = true
		warmedNow, err = c.dropHostLocked(h)
	case firstDone && c.applied && !c.warmed.Load():
		// The first round is complete: publish the checked partitions at once and warm (Envoy
		// reloads healthy hosts in finishInitialization).
		applied = true
		warmedNow, err = c.schedule(c.pendingOrCurrentLocked(), true)
	case changed && c.applied:
		applied = true
		warmedNow, err = c.schedule(c.pendingOrCurrentLocked(), false)
	}
	c.mu.Unlock()
	if err != nil {
		c.m.log.Errorf("cluster %q: publishing a health change: %v", c.cfg.Name, err)
	} else if applied {
		c.afterApply(warmedNow, true)
	}
	if changed && failed {
		c.m.failureSubs.notify(h, c.cfg.CloseConnectionsOnHostHealthFailure)
	}
	c.m.testEvent()
}

func (m *Manager) testEvent() {
	if m.healthEvent != nil {
		m.healthEvent()
	}
}

// dropHostLocked removes h from the hosts at once (a membership change). Caller holds c.mu.
func (c *Cluster) dropHostLocked(h *host.Host) (bool, error) {
	base := c.pendingOrCurrentLocked()
	i := slices.Index(base.hosts, h)
	if i < 0 {
		return false, nil
	}
	p := &pendingUpdate{
		hosts:     slices.Delete(slices.Clone(base.hosts), i, i+1),
		weights:   base.weights,
		edsHealth: base.edsHealth,
		settings:  base.settings,
	}
	st := base.stats
	if st == nil {
		st = c.hostStats
	}
	p.stats = maps.Clone(st)
	delete(p.stats, h)
	if p.stats == nil {
		p.stats = map[*host.Host]*HostStats{}
	}
	return c.schedule(p, true)
}

// keepRemovedLocked appends to hosts the current hosts that discovery no longer lists (their
// address is not in seen) but that must stay, as Envoy keeps them: with active health checking
// and without ignore_health_on_host_removal, a removed host that is not failing its health check
// stays, flagged /pending_dynamic_removal, until it fails or a later update drops it while
// failed. Caller holds c.mu.
func (c *Cluster) keepRemovedLocked(hosts []*host.Host, seen map[string]bool) []*host.Host {
	if c.health == nil || c.cfg.DrainConnectionsOnHostRemoval {
		return hosts
	}
	for _, h := range c.hosts {
		if seen[h.Address()] || h.HasHealthFlag(host.FailedActiveHC) {
			continue
		}
		h.SetHealthFlag(host.PendingDynamicRemoval)
		hosts = append(hosts, h)
	}
	return hosts
}

// onHealthResult is the checker's OnResult: a passing check may return an ejected host to
// service (successful_active_health_check_uneject_host).
func (c *Cluster) onHealthResult(h *host.Host, passed bool) {
	if passed && c.outlier != nil {
		c.outlier.ActiveHealthCheckPassed(h)
	}
}

// onOutlierChange is the detector's OnChange: republish through the merge window, and tell the
// health-failure subscribers about an ejection.
func (c *Cluster) onOutlierChange(h *host.Host) {
	c.HealthChanged()
	if h.HasHealthFlag(host.FailedOutlierCheck) {
		c.m.failureSubs.notify(h, c.cfg.CloseConnectionsOnHostHealthFailure)
	}
	c.m.testEvent()
}

// HealthChecker returns the cluster's active health checker, or nil without health_checks. The
// router reports x-envoy-immediate-health-check-fail through its ReportPassiveFailure.
func (c *Cluster) HealthChecker() *health.Checker {
	if c.health == nil {
		return nil
	}
	return c.health.checker
}

// OnHostHealthFailure subscribes fn to hosts turning unhealthy: a failed active health check
// (the transition to /failed_active_hc) or an outlier ejection, in any cluster. closeConnections
// is the host's cluster's close_connections_on_host_health_failure. Subscribers are the
// connection pools and the TCP proxy: as Envoy does, they drain the host's HTTP connections on
// every failure and, when closeConnections is set, close all of its connections (TCP ones
// included) at once. fn runs on the health checker's or outlier detector's goroutine without
// locks held and must not block. The returned function cancels the subscription.
func (m *Manager) OnHostHealthFailure(fn func(h *host.Host, closeConnections bool)) (cancel func()) {
	return m.failureSubs.add(fn)
}

// healthFailureSubs are the OnHostHealthFailure subscribers. mu guards next and fns.
type healthFailureSubs struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(*host.Host, bool)
}

func (s *healthFailureSubs) add(fn func(*host.Host, bool)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[int]func(*host.Host, bool){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

func (s *healthFailureSubs) notify(h *host.Host, closeConnections bool) {
	s.mu.Lock()
	fns := slices.Collect(maps.Values(s.fns))
	s.mu.Unlock()
	for _, fn := range fns {
		fn(h, closeConnections)
	}
}

// Reopen reopens the health-check event logs (event_log_path) and the outlier detection event
// log, for the server's /reopen_logs and SIGUSR1. It returns the errors of the files that failed;
// those keep writing to their old file.
func (m *Manager) Reopen() error { return m.logs.reopen() }

// logFiles shares one append-only file per path between the clusters that log to it. mu guards
// files.
type logFiles struct {
	mu    sync.Mutex
	files map[string]*logFile
}

// logFile is an event log file that can be reopened after logrotate renamed it. mu guards f and
// orders each line's Write against Reopen.
type logFile struct {
	path string
	refs int // guarded by logFiles.mu

	mu sync.Mutex
	f  *os.File
}

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}

// open returns the file for path, opening it on first use, and takes a reference on it.
func (l *logFiles) open(path string) (*logFile, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.files[path]; f != nil {
		f.refs++
		return f, nil
	}
	fd, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	if l.files == nil {
		l.files = map[string]*logFile{}
	}
	f := &logFile{path: path, refs: 1, f: fd}
	l.files[path] = f
	return f, nil
}

// release drops a reference taken by open, closing the file with the last one. "" does nothing.
func (l *logFiles) release(path string) {
	if path == "" {
		return
	}
	l.mu.Lock()
	f := l.files[path]
	if f != nil {
		f.refs--
		if f.refs > 0 {
			f = nil
		} else {
			delete(l.files, path)
		}
	}
	l.mu.Unlock()
	if f != nil {
		f.mu.Lock()
		_ = f.f.Close()
		f.mu.Unlock()
	}
}

func (l *logFiles) reopen() error {
	l.mu.Lock()
	files := slices.Collect(maps.Values(l.files))
	l.mu.Unlock()
	var errs []error
	for _, f := range files {
		fd, err := openAppend(f.path)
		if err != nil {
			errs = append(errs, fmt.Errorf("reopening %q: %w", f.path, err))
			continue
		}
		f.mu.Lock()
		old := f.f
		f.f = fd
		f.mu.Unlock()
		_ = old.Close()
	}
	return errors.Join(errs...)
}

// Write appends p (one event line) to the file.
func (f *logFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.f.Write(p)
}
