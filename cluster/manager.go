package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/health"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/outlier"
	"github.com/legateproxy/legate/stats"
)

// Clock is the manager's time source: merge windows, DNS refresh, ORIGINAL_DST cleanup, and the
// health checkers' and outlier detectors' timers. It is internal/clock's Clock, so one fake clock
// drives every timer of a test.
type Clock = clock.Clock

// Timer is a pending AfterFunc call.
type Timer = clock.Timer

// InitFunc registers a target with the server's init manager and returns the function that
// marks it ready (server.Init.Add followed by Target.Ready).
type InitFunc func(name string) (ready func(), err error)

// InitTargetName is the name of the init target the manager registers for its static clusters.
const InitTargetName = "cluster_manager"

// ManagerConfig holds the Manager's dependencies. Stats is required; every other field has a
// default stated in its comment.
type ManagerConfig struct {
	// Stats is the store the cluster_manager.* and cluster.<name>.* stats are registered in.
	Stats *stats.Store
	// Logger logs discovery failures; nil discards.
	Logger *logging.Logger
	// Clock; nil means the system clock.
	Clock Clock
	// Resolver resolves STRICT_DNS and LOGICAL_DNS names; nil means NewDNSResolver().
	Resolver Resolver
	// Init registers the manager's init target; nil means none (the server does not wait).
	Init InitFunc
	// LocalClusterName is cluster_manager.local_cluster_name (zone-aware routing); "" for none.
	LocalClusterName string
	// ServiceZone is --service-zone, the zone of this proxy's locality.
	ServiceZone string
	// LocalLocality is node.locality; ServiceZone overrides its zone. Nil with an empty
	// ServiceZone means the locality is unknown.
	LocalLocality *host.Locality
	// Extensions are the extensions Legate is built with (extensions.New), of which the
	// manager reads the cluster types, the balancers (lb.Balancers) and the transport
	// sockets; nil means config's, tlsutil's, lb's policies' and the manager's own.
	Extensions *registry.Registry
	// Rand is the balancers' random source (also the health checkers' jitter and the outlier
	// detectors' enforcing_* draws); nil means math/rand/v2.
	Rand func() uint64
	// Runtime gives the runtime snapshot health checkers (health_check.min_interval, …) and
	// outlier detectors (outlier_detection.* overrides) read; the server passes its
	// *runtime.Runtime. nil means no runtime overrides.
	Runtime RuntimeSource
	// HealthScheduler bounds concurrent active health checks across every cluster; nil means
	// health.NewScheduler(0).
	HealthScheduler *health.Scheduler
	// OutlierEventLogPath is cluster_manager.outlier_detection.event_log_path; "" for none.
	OutlierEventLogPath string
	// HealthCheckTLS returns the TLS client configuration health checks of a cluster with a TLS
	// transport socket use, per host. nil builds it from the cluster's transport_socket with
	// tlsutil (files and inline data; SDS secrets need the server's function).
	HealthCheckTLS func(c *config.Cluster) (func(h *host.Host) *tls.Config, error)
	// DeferTrafficStats is deferred_stat_options.enable_deferred_creation_stats:
	// a cluster's traffic stats are listed only once it carries traffic, and
	// the hidden gauge cluster.<name>.ClusterTrafficStats.initialized says so.
	DeferTrafficStats bool
}

// Manager is the cluster manager: clusters by name, their discovery and their snapshots.
//
// Concurrency: Get, Clusters and every Snapshot read are lock-free (an atomic pointer to an
// immutable map). Adding, updating and removing clusters take mu, which guards the maps below
// it; each cluster's host updates take that cluster's own mutex. Lock order: Manager.mu is
// never acquired while a Cluster.mu is held.
type Manager struct {
	store         *stats.Store
	log           *logging.Logger
	clock         Clock
	resolver      Resolver
	ext           *registry.Registry // the cluster types (customTypes)
	rand          func() uint64
	localCluster  string
	localLocality *host.Locality
	stats         ManagerStats
	statsReg      *stats.Registration
	deferTraffic  bool
	initFn        InitFunc
	runtime       RuntimeSource
	hcSched       *health.Scheduler
	hcTLS         func(c *config.Cluster) (func(h *host.Host) *tls.Config, error)
	logs          logFiles
	outlierLog    *outlier.EventLog
	failureSubs   healthFailureSubs
	snapshotSubs  subs[*Cluster]
	retireSubs    subs[*Cluster]
	retired       []*Cluster // released under mu, for notifyRetired
	published     atomic.Pointer[map[string]*Cluster]
	versionInfo   atomic.Pointer[string]

	mu          sync.Mutex // guards the fields below
	active      map[string]*Cluster
	warming     map[string]*Cluster
	statEntries map[string]*statsEntry
	dependents  map[string][]string // cluster name -> custom clusters that depend on it (customType.dependencies)
	runCtx      context.Context
	wg          sync.WaitGroup
	initReady   func()
	initPending map[*Cluster]bool
	// batching counts the open batches (Batch, AddStatic); while it is positive the active map
	// is not published (publishPending records that it must be) and aggregate rebuilds wait
	// in deferredMembers. See batch.go.
	batching        int
	publishPending  bool
	deferredMembers map[string]bool
	// stopped is set when Run's context has ended: no more background work starts.
	stopped bool
	// dnsCaches are the dynamic forward proxy DNS caches by name (DNSCache).
	dnsCaches map[string]*DNSCache
	// activeWaiters are closed when the cluster of their name is published (whenActive).
	activeWaiters map[string]chan struct{}

	// bgMu guards the DNS caches' background work (goBackground): bgCtx is Run's context once
	// it runs, bgQueue what was asked for before, bgStopped set once Run ends.
	bgMu      sync.Mutex
	bgCtx     context.Context
	bgQueue   []func(context.Context)
	bgStopped bool

	// Test hooks, set before the first cluster is added: testProber replaces the health
	// checkers' probers; healthEvent runs after every health-check and outlier callback.
	testProber  health.Prober
	healthEvent func()
}

// statsEntry is one cluster.<stat name>.* registration, shared by the clusters (old, warming
// and aliased by alt_stat_name) that use the name.
type statsEntry struct {
	stats Stats
	// lb points at the lb_* fields of stats for the balancers (lb.Params.Stats).
	lb  lb.Stats
	reg *stats.Registration
	// traffic registers stats.TrafficStats; deferred is the hidden
	// initialized gauge when their listing is deferred, else nil.
	traffic  *stats.Registration
	deferred *registered[deferredInit]
	refs     int
	// health and outlier are the health_check.* and outlier_detection.* stats, registered by the
	// first cluster of this name that has a health check or an outlier detector. (One pointer
	// each keeps the entry inside the 2304-byte allocation class.)
	health  *registered[health.Stats]
	outlier *registered[outlier.Stats]
	// matches are the stats of the transport_socket_matches names the entry's clusters have
	// used, by name; registered when a cluster naming them is built, kept with the entry.
	matches map[string]*registered[SocketMatchStats]
}

// registered is a stats struct with its registration.
type registered[T any] struct {
	stats T
	reg   *stats.Registration
}

// NewManager builds an empty manager and registers the cluster_manager.* stats.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Stats == nil {
		return nil, errors.New("cluster manager: stats store is required")
	}
	m := &Manager{
		store:        cfg.Stats,
		log:          cfg.Logger,
		clock:        cfg.Clock,
		resolver:     cfg.Resolver,
		ext:          cfg.Extensions,
		rand:         cfg.Rand,
		localCluster: cfg.LocalClusterName,
		initFn:       cfg.Init,
		runtime:      cfg.Runtime,
		hcSched:      cfg.HealthScheduler,
		hcTLS:        cfg.HealthCheckTLS,
		active:       map[string]*Cluster{},
		warming:      map[string]*Cluster{},
		statEntries:  map[string]*statsEntry{},
		dependents:   map[string][]string{},
		initPending:  map[*Cluster]bool{},
		deferTraffic: cfg.DeferTrafficStats,
	}
	if m.ext == nil {
		m.ext = ownExtensions()
	}
	if m.clock == nil {
		m.clock = clock.Real()
	}
	if m.hcSched == nil {
		m.hcSched = health.NewScheduler(0)
	}
	if m.hcTLS == nil {
		m.hcTLS = func(c *config.Cluster) (func(*host.Host) *tls.Config, error) { return defaultHealthCheckTLS(m.ext, c) }
	}
	if cfg.OutlierEventLogPath != "" {
		f, err := m.logs.open(cfg.OutlierEventLogPath)
		if err != nil {
			return nil, fmt.Errorf("cluster manager: cluster_manager.outlier_detection.event_log_path = %q: %w", cfg.OutlierEventLogPath, err)
		}
		m.outlierLog = outlier.NewEventLog(f)
	}
	if m.resolver == nil {
		m.resolver = NewDNSResolver()
	}
	if m.rand == nil {
		m.rand = rand.Uint64
	}
	if cfg.LocalLocality != nil || cfg.ServiceZone != "" {
		l := host.Locality{}
		if cfg.LocalLocality != nil {
			l = *cfg.LocalLocality
		}
		if cfg.ServiceZone != "" {
			l.Zone = cfg.ServiceZone
		}
		m.localLocality = &l
	}
	empty := map[string]*Cluster{}
	m.published.Store(&empty)
	m.statsReg = m.store.Register("cluster_manager.", &m.stats)
	return m, nil
}

// Stats returns the cluster_manager.* stats.
func (m *Manager) Stats() *ManagerStats { return &m.stats }

// Get returns the active (warm) cluster called name, or nil. Lock-free.
func (m *Manager) Get(name string) *Cluster { return (*m.published.Load())[name] }

// Published reports whether c is the cluster Get returns for its name: active, and not yet
// replaced or removed. Lock-free, and no lookup by name.
func (c *Cluster) Published() bool { return c.published.Load() }

// HasConfig reports whether c is the configuration of an active or warming cluster, that is,
// whether CDS has not replaced or removed it.
func (m *Manager) HasConfig(c *config.Cluster) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.active[c.Name]; a != nil && a.cfg == c {
		return true
	}
	w := m.warming[c.Name]
	return w != nil && w.cfg == c
}

// Has reports whether a cluster called name is active or warming: what route validation
// (validate_clusters) and other configuration checks accept, as Envoy's hasCluster does, so a
// static cluster still waiting for its first health check round can be named.
func (m *Manager) Has(name string) bool {
	if m.Get(name) != nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active[name] != nil || m.warming[name] != nil
}

// Snapshot returns the active clusters sorted by name, for the admin interface.
func (m *Manager) Snapshot() []*Cluster {
	p := *m.published.Load()
	out := make([]*Cluster, 0, len(p))
	for _, c := range p {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].cfg.Name < out[j].cfg.Name })
	return out
}

// Warming returns the warming clusters sorted by name.
func (m *Manager) Warming() []*Cluster {
	m.mu.Lock()
	out := make([]*Cluster, 0, len(m.warming))
	for _, c := range m.warming {
		out = append(out, c)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].cfg.Name < out[j].cfg.Name })
	return out
}

// VersionInfo returns the version of the last CDS update, or "static" without CDS.
func (m *Manager) VersionInfo() string {
	if v := m.versionInfo.Load(); v != nil {
		return *v
	}
	return "static"
}

// SetVersionInfo records the version of an accepted CDS update.
func (m *Manager) SetVersionInfo(v string) { m.versionInfo.Store(&v) }

// AddStatic adds the bootstrap's static clusters. Names must be unique. With an init hook the
// manager registers InitTargetName, ready once every one of these clusters is warm. Call it
// once, before Run.
func (m *Manager) AddStatic(cs []*config.Cluster) error {
	plans := make([]*healthPlan, len(cs))
	for i, cfg := range cs {
		p, err := m.planHealth(cfg)
		if err != nil {
			return err
		}
		plans[i] = p
	}
	m.mu.Lock()
	seen := map[string]bool{}
	var built []*Cluster
	for i, cfg := range cs {
		if seen[cfg.Name] || m.active[cfg.Name] != nil || m.warming[cfg.Name] != nil {
			m.mu.Unlock()
			return fmt.Errorf("cluster %q: name is not unique; cluster names must be unique", cfg.Name)
		}
		seen[cfg.Name] = true
		c, err := m.newClusterLocked(cfg, false, "", nil, plans[i])
		if err != nil {
			m.mu.Unlock()
			return err
		}
		built = append(built, c)
		m.warming[cfg.Name] = c
		m.initPending[c] = true
	}
	if m.initFn != nil {
		ready, err := m.initFn(InitTargetName)
		if err != nil {
			m.mu.Unlock()
			return fmt.Errorf("cluster manager: %w", err)
		}
		m.initReady = ready
	}
	m.stats.WarmingClusters.Set(uint64(len(m.warming)))
	m.batching++
	m.publishPending = true
	m.mu.Unlock()
	var err error
	for _, c := range built {
		m.stats.ClusterAdded.Inc()
		if err = m.startCluster(c); err != nil {
			break
		}
	}
	m.endBatch()
	if err != nil {
		return err
	}
	for _, c := range built {
		if c.cfg.Type == config.Custom {
			c.rebuild() // members were not published while batching
		}
	}
	m.checkInit()
	return nil
}

// AddOrUpdate adds or replaces a CDS cluster (added_via_api). It returns false when an
// identical cluster is already present. A replacement warms while the old cluster keeps
// serving, then takes its place. Bootstrap clusters cannot be replaced.
func (m *Manager) AddOrUpdate(cfg *config.Cluster, version string) (bool, error) {
	plan, err := m.planHealth(cfg)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	old := m.active[cfg.Name]
	if w := m.warming[cfg.Name]; w != nil {
		old = w
	}
	if old != nil {
		if !old.addedViaAPI {
			m.mu.Unlock()
			return false, fmt.Errorf("cluster %q: a static cluster cannot be updated through the API", cfg.Name)
		}
		if proto.Equal(old.cfg.Proto, cfg.Proto) {
			m.mu.Unlock()
			return false, nil
		}
	}
	var reuse *breaker.Breaker
	if a := m.active[cfg.Name]; a != nil && a.cfg.CircuitBreakers == cfg.CircuitBreakers && a.cfg.StatName == cfg.StatName {
		reuse = a.breaker
	}
	c, err := m.newClusterLocked(cfg, true, version, reuse, plan)
	if err != nil {
		m.mu.Unlock()
		return false, err
	}
	if w := m.warming[cfg.Name]; w != nil {
		delete(m.warming, cfg.Name)
		m.releaseLocked(w, w.breaker != reuse && (m.active[cfg.Name] == nil || w.breaker != m.active[cfg.Name].breaker))
	}
	modified := m.active[cfg.Name] != nil || old != nil
	m.warming[cfg.Name] = c
	m.stats.WarmingClusters.Set(uint64(len(m.warming)))
	m.mu.Unlock()
	m.notifyRetired()
	if modified {
		m.stats.ClusterModified.Inc()
	} else {
		m.stats.ClusterAdded.Inc()
	}
	return true, m.startCluster(c)
}

// Remove removes a CDS cluster. It returns false when no such API cluster exists.
func (m *Manager) Remove(name string) bool {
	return m.remove(name, nil)
}

// remove removes the API cluster name; with cfg, only when its active or warming version is
// the one built from cfg (a dynamic forward proxy's sub-cluster, which a newer owner may have
// made again).
func (m *Manager) remove(name string, cfg *config.Cluster) bool {
	m.mu.Lock()
	a, w := m.active[name], m.warming[name]
	if (a != nil && !a.addedViaAPI) || (a == nil && w == nil) ||
		(cfg != nil && (a == nil || a.cfg != cfg) && (w == nil || w.cfg != cfg)) {
		m.mu.Unlock()
		return false
	}
	delete(m.activeWaiters, name)
	if w != nil {
		delete(m.warming, name)
		m.releaseLocked(w, a == nil || w.breaker != a.breaker)
	}
	if a != nil {
		delete(m.active, name)
		m.releaseLocked(a, true)
		m.publishSoonLocked()
	}
	m.gaugesLocked()
	m.mu.Unlock()
	m.notifyRetired()
	m.stats.ClusterRemoved.Inc()
	m.memberChanged(name)
	return true
}

// newClusterLocked builds a cluster, its health checker and outlier detector, and takes a
// reference on its stats entry.
func (m *Manager) newClusterLocked(cfg *config.Cluster, api bool, version string, reuse *breaker.Breaker, plan *healthPlan) (*Cluster, error) {
	if cfg.Type == config.Custom {
		if cfg.CustomType == nil {
			return nil, fmt.Errorf("cluster %q: cluster_type is missing; a custom cluster needs one", cfg.Name)
		}
		if _, ok := m.customType(cfg.CustomType.Name); !ok {
			return nil, fmt.Errorf("cluster %q: cluster_type.name = %q; must match a supported cluster type (%s)", cfg.Name, cfg.CustomType.Name, strings.Join(config.ClusterTypes(m.ext), ", "))
		}
	}
	e := m.statEntries[cfg.StatName]
	if e == nil {
		e = &statsEntry{}
		e.lb = e.stats.lbStats()
		m.registerStatsLocked(e, "cluster."+cfg.StatName+".")
		m.statEntries[cfg.StatName] = e
	}
	e.refs++
	c := &Cluster{m: m, cfg: cfg, addedViaAPI: api, version: version, lastUpdated: m.clock.Now(), stats: e}
	c.socketMatches = m.socketMatchCountersLocked(e, cfg)
	c.odstHeaders = originalDstHeaders(&cfg.OriginalDst)
	if cfg.Type == config.Custom {
		if ct, _ := m.customType(cfg.CustomType.Name); ct.attach != nil {
			if err := ct.attach(m, c); err != nil {
				m.dropStatsLocked(c)
				return nil, err
			}
		}
	}
	if err := m.attachHealthLocked(c, plan); err != nil {
		m.dropStatsLocked(c)
		return nil, err
	}
	c.breaker = reuse
	if c.breaker == nil {
		var rt breaker.RuntimeSource
		if m.runtime != nil {
			rt = m.runtime
		}
		c.breaker = breaker.New(cfg.CircuitBreakers, m.store, "cluster."+cfg.StatName+".", rt, cfg.Name)
	}
	e.stats.WarmingState.Set(1)
	if cfg.Type == config.Custom {
		ct, _ := m.customType(cfg.CustomType.Name)
		for _, dep := range ct.dependencies(cfg) {
			m.dependents[dep] = append(m.dependents[dep], cfg.Name)
		}
	}
	return c, nil
}

// releaseLocked stops c and drops its stats reference; closeBreaker unregisters its breaker.
func (m *Manager) releaseLocked(c *Cluster, closeBreaker bool) {
	c.close()
	m.retired = append(m.retired, c)
	if closeBreaker {
		c.breaker.Close()
	}
	if c.cfg.Type == config.Custom {
		ct, _ := m.customType(c.cfg.CustomType.Name)
		if ct.detach != nil {
			ct.detach(c)
		}
		for _, dep := range ct.dependencies(c.cfg) {
			list := m.dependents[dep]
			for i, n := range list {
				if n == c.cfg.Name {
					m.dependents[dep] = append(list[:i:i], list[i+1:]...)
					break
				}
			}
		}
	}
	delete(m.initPending, c)
	m.closeHealthLocked(c)
	m.dropStatsLocked(c)
}

// registerStatsLocked lists e's stats under prefix; the traffic stats wait
// for their first use when deferred creation is on, as in Envoy.
func (m *Manager) registerStatsLocked(e *statsEntry, prefix string) {
	e.reg = m.store.Register(prefix, &e.stats)
	if !m.deferTraffic {
		e.traffic = m.store.Register(prefix, &e.stats.TrafficStats)
		return
	}
	e.deferred = &registered[deferredInit]{}
	e.deferred.reg = m.store.Register(prefix, &e.deferred.stats)
	e.traffic = m.store.RegisterDeferred(prefix, &e.stats.TrafficStats, &e.deferred.stats.Initialized)
}

// socketMatchCountersLocked returns the total_match_count counters of cfg's transport
// sockets, by MatchTransportSocket's index (0: default.total_match_count), registering the
// ones e lacks. Envoy creates them with the cluster, so they are listed before any host.
func (m *Manager) socketMatchCountersLocked(e *statsEntry, cfg *config.Cluster) []*stats.Counter {
	out := make([]*stats.Counter, 1+len(cfg.TransportSocketMatches))
	out[0] = &e.stats.DefaultTotalMatchCount
	for i, tm := range cfg.TransportSocketMatches {
		if tm.Name == "default" {
			out[i+1] = out[0] // the same stat name: one counter
			continue
		}
		r := e.matches[tm.Name]
		if r == nil {
			if e.matches == nil {
				e.matches = map[string]*registered[SocketMatchStats]{}
			}
			r = &registered[SocketMatchStats]{}
			r.reg = m.store.Register("cluster."+cfg.StatName+"."+tm.Name+".", &r.stats)
			e.matches[tm.Name] = r
		}
		out[i+1] = &r.stats.TotalMatchCount
	}
	return out
}

// dropStatsLocked releases c's reference on its stats entry, unregistering the entry's stats
// with the last one.
func (m *Manager) dropStatsLocked(c *Cluster) {
	e := c.stats
	e.refs--
	if e.refs > 0 {
		return
	}
	e.reg.Unregister()
	e.traffic.Unregister()
	if e.deferred != nil {
		e.deferred.reg.Unregister()
	}
	if e.health != nil {
		e.health.reg.Unregister()
	}
	if e.outlier != nil {
		e.outlier.reg.Unregister()
	}
	for _, r := range e.matches {
		r.reg.Unregister()
	}
	delete(m.statEntries, c.cfg.StatName)
}

// startCluster publishes the first host set of clusters that have one at once and starts the
// discovery of the others.
func (m *Manager) startCluster(c *Cluster) error {
	switch c.cfg.Type {
	case config.Static:
		if err := c.startStatic(); err != nil {
			return err
		}
	case config.StrictDNS, config.LogicalDNS:
		c.disc = c.runDNS
	case config.OriginalDst:
		c.disc = c.runCleanup
		if err := c.update(hostUpdate{settings: setSettings{overprovisioning: host.DefaultOverprovisioningFactor}}); err != nil {
			return err
		}
	case config.Custom:
		return c.update(hostUpdate{settings: setSettings{overprovisioning: host.DefaultOverprovisioningFactor}})
	case config.EDS:
		// Warming until the xDS client calls ApplyAssignment.
	}
	m.mu.Lock()
	if m.runCtx != nil && !m.stopped {
		m.goLocked(c)
	}
	m.mu.Unlock()
	return nil
}

// goLocked starts c's background work under the Run context: its discovery goroutine, its
// outlier detector's Run and its health checks.
func (m *Manager) goLocked(c *Cluster) {
	ctx, cancel := context.WithCancel(m.runCtx)
	c.mu.Lock()
	if c.closed || c.cancel != nil {
		c.mu.Unlock()
		cancel()
		return
	}
	c.cancel = cancel
	c.mu.Unlock()
	if c.disc != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			c.disc(ctx)
		}()
	}
	if d := c.outlier; d != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			_ = d.Run(ctx)
		}()
	}
	if c.health != nil {
		c.health.started.Store(true)
		c.health.checker.Start()
	}
}

// Run owns the background work of current and future clusters: discovery goroutines (DNS
// refresh, ORIGINAL_DST cleanup), outlier detectors and active health checks. Health checks do
// not start before Run, so a health-checked cluster warms only under Run. Run returns after ctx
// is cancelled, every health checker is closed and every goroutine has ended; the manager starts
// no background work afterwards.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.runCtx != nil {
		m.mu.Unlock()
		return errors.New("cluster manager: Run called twice")
	}
	m.runCtx = ctx
	for _, set := range []map[string]*Cluster{m.active, m.warming} {
		for _, c := range set {
			m.goLocked(c)
		}
	}
	m.mu.Unlock()
	m.startBackground(ctx)
	runtimeDone := make(chan struct{})
	go func() {
		defer close(runtimeDone)
		m.watchRuntime(ctx)
	}()
	<-ctx.Done()
	<-runtimeDone
	m.stopBackground()
	m.mu.Lock()
	m.stopped = true
	var all []*Cluster
	for _, set := range []map[string]*Cluster{m.active, m.warming} {
		for _, c := range set {
			all = append(all, c)
		}
	}
	m.mu.Unlock()
	// Without m.mu: a check callback may be waiting for it.
	for _, c := range all {
		if c.health != nil {
			c.health.checker.Close()
		}
	}
	m.wg.Wait()
	return nil
}

// clusterWarmed moves c from warming to active once its first host set is published.
func (m *Manager) clusterWarmed(c *Cluster) {
	m.mu.Lock()
	if m.warming[c.cfg.Name] != c {
		m.mu.Unlock()
		return
	}
	delete(m.warming, c.cfg.Name)
	if old := m.active[c.cfg.Name]; old != nil {
		m.releaseLocked(old, old.breaker != c.breaker)
	}
	m.active[c.cfg.Name] = c
	c.stats.stats.WarmingState.Set(0)
	delete(m.initPending, c)
	m.publishSoonLocked()
	m.gaugesLocked()
	m.mu.Unlock()
	m.notifyRetired()
	m.checkInit()
}

// checkInit marks the init target ready once no static cluster is warming.
func (m *Manager) checkInit() {
	m.mu.Lock()
	ready := m.initReady
	if len(m.initPending) != 0 || ready == nil || m.batching > 0 {
		m.mu.Unlock()
		return
	}
	m.initReady = nil
	m.mu.Unlock()
	ready()
}

func (m *Manager) gaugesLocked() {
	m.stats.ActiveClusters.Set(uint64(len(m.active)))
	m.stats.WarmingClusters.Set(uint64(len(m.warming)))
}

// publishLocked publishes a copy of the active map for lock-free Get.
func (m *Manager) publishLocked() {
	m.publishPending = false
	p := make(map[string]*Cluster, len(m.active))
	for k, v := range m.active {
		p[k] = v
		v.published.Store(true)
	}
	for k, v := range *m.published.Load() {
		if p[k] != v {
			v.published.Store(false)
		}
	}
	m.published.Store(&p)
	for name, ch := range m.activeWaiters {
		if p[name] != nil {
			close(ch)
			delete(m.activeWaiters, name)
		}
	}
}

// whenActive returns a channel closed once a cluster named name is published (Get finds it):
// at once when it is. One channel per name, shared by its waiters, dropped when published or
// removed.
func (m *Manager) whenActive(name string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if (*m.published.Load())[name] != nil {
		return closedChan
	}
	ch := m.activeWaiters[name]
	if ch == nil {
		if m.activeWaiters == nil {
			m.activeWaiters = map[string]chan struct{}{}
		}
		ch = make(chan struct{})
		m.activeWaiters[name] = ch
	}
	return ch
}

// closedChan is a channel already closed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// memberChanged rebuilds the clusters whose balancers read name's hosts: the custom clusters
// (aggregates) that contain it and, when name is the local cluster, every other cluster, whose
// zone-aware routing plan depends on it (Envoy recomputes each balancer's locality structures
// on a local cluster update).
func (m *Manager) memberChanged(name string) {
	m.mu.Lock()
	if m.deferMemberLocked(name) {
		m.mu.Unlock()
		return
	}
	var targets []*Cluster
	if name == m.localCluster {
		for n, c := range m.active {
			if n != name {
				targets = append(targets, c)
			}
		}
	} else {
		for _, a := range m.dependents[name] {
			for _, c := range []*Cluster{m.active[a], m.warming[a]} {
				if c != nil {
					targets = append(targets, c)
				}
			}
		}
	}
	m.mu.Unlock()
	for _, c := range targets {
		c.rebuild()
	}
}

// rebuild republishes the snapshot with the current hosts (aggregate membership changes).
func (c *Cluster) rebuild() {
	c.mu.Lock()
	if c.closed || !c.applied {
		c.mu.Unlock()
		return
	}
	snap, err := c.build(c.hosts, c.settings, c.hostStats)
	if err == nil {
		c.snap.Store(snap)
	}
	c.mu.Unlock()
	if err != nil {
		c.m.log.Errorf("%v", err)
	}
}
