package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/breaker"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/health"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/originaldst"
	"github.com/legateproxy/legate/lb/subset"
	"github.com/legateproxy/legate/outlier"
	"github.com/legateproxy/legate/stats"
)

// Snapshot is the immutable state of one cluster the data plane reads: hosts, balancer,
// circuit breakers and stats. It is published through an atomic pointer after every applied
// update; all its methods are safe for concurrent use, take no lock and do not allocate.
type Snapshot struct {
	// Cluster is the cluster the snapshot belongs to.
	Cluster *Cluster
	// PrioritySet holds the hosts by priority.
	PrioritySet *host.PrioritySet
	// Balancer picks hosts. For a custom cluster type it is the type's balancer (an
	// aggregate's delegates to its members).
	Balancer lb.Balancer
	// Breaker holds the circuit-breaker resources.
	Breaker *breaker.Breaker
	// Stats are the cluster.<name>.* stats.
	Stats *Stats
	// DropOverloads are the assignment's drop_overloads (EDS).
	DropOverloads []config.DropOverload

	hostStats map[*host.Host]*HostStats
}

// HostStats returns the statistics of h, or nil when h is not a host of this snapshot.
func (s *Snapshot) HostStats(h *host.Host) *HostStats { return s.hostStats[h] }

// Pick picks a host for one request. For ORIGINAL_DST clusters use Cluster.Pick, which creates
// unknown destinations.
func (s *Snapshot) Pick(ctx *lb.Context) (*host.Host, error) {
	h, err := s.Balancer.Pick(ctx)
	if err == nil && s.Cluster.cfg.Type == config.OriginalDst {
		s.markUsed(h)
	}
	return h, err
}

// markUsed marks an ORIGINAL_DST host picked.
func (s *Snapshot) markUsed(h *host.Host) {
	if st := s.hostStats[h]; st != nil && !st.used.Load() {
		st.used.Store(true)
	}
}

// Cluster is one upstream cluster of the Manager. Its configuration is fixed; a CDS update
// builds a new Cluster that replaces it under the same name once warmed.
//
// Concurrency: Snapshot and Pick are lock-free. Host updates (discovery, health changes) run
// under mu, which guards the fields below it; a published Snapshot is never modified.
type Cluster struct {
	m           *Manager
	cfg         *config.Cluster
	addedViaAPI bool
	version     string
	lastUpdated time.Time
	stats       *statsEntry
	breaker     *breaker.Breaker
	snap        atomic.Pointer[Snapshot]
	warmed      atomic.Bool
	// published is whether Manager.Get returns this cluster for its name (publishLocked sets
	// and clears it as it publishes each set of active clusters), read by callers that kept
	// the cluster and want to know it is still the one, without a lookup by name.
	published atomic.Bool
	// odstHeaders are the headers that override an ORIGINAL_DST destination, canonical.
	odstHeaders []string
	// dns is a dynamic forward proxy cluster's DNS cache (nil for other clusters), and
	// dnsDefaultPort the port of an authority without one.
	dns            *DNSCache
	dnsDefaultPort uint32
	// sub are the sub-clusters of a dynamic forward proxy cluster with sub_clusters_config
	// (nil for other clusters).
	sub *subClusters
	// socketMatches count the hosts created per transport socket, by host.Config.SocketMatch.
	socketMatches []*stats.Counter
	// disc runs the discovery goroutine (DNS refresh, cleanup); nil for clusters without one.
	disc func(ctx context.Context)

	mu          sync.Mutex // guards the fields below
	hosts       []*host.Host
	hostStats   map[*host.Host]*HostStats
	settings    setSettings
	pending     *pendingUpdate
	mergeTimer  Timer
	lastApplied time.Time
	applied     bool
	cancel      context.CancelFunc
	closed      bool
	odst        map[string]*host.Host // ORIGINAL_DST hosts by address, dynamic forward proxy hosts by name:port
	// membershipGen counts applied membership changes; syncHealthHosts compares it.
	membershipGen uint64

	// syncMu serialises handing membership changes to the health checker and outlier detector
	// and guards syncedGen and syncedHosts. Lock order: syncMu before mu.
	syncMu      sync.Mutex
	syncedGen   uint64
	syncedHosts []*host.Host

	// health is the active health checking of the cluster; nil without health_checks.
	health *clusterHealth
	// outlier is the outlier detector; nil without outlier_detection.
	outlier *outlier.Detector
}

// setSettings are the assignment-wide settings of a host update.
type setSettings struct {
	overprovisioning       uint32
	weightedPriorityHealth bool
	// localityWeights by priority; nil when the assignment carries none.
	localityWeights map[uint32]map[host.Locality]uint32
	drops           []config.DropOverload
}

func (a setSettings) equal(b setSettings) bool {
	return a.overprovisioning == b.overprovisioning && a.weightedPriorityHealth == b.weightedPriorityHealth &&
		slices.Equal(a.drops, b.drops) &&
		maps.EqualFunc(a.localityWeights, b.localityWeights, func(x, y map[host.Locality]uint32) bool { return maps.Equal(x, y) })
}

// pendingUpdate is a host update waiting for the merge window.
type pendingUpdate struct {
	hosts     []*host.Host
	weights   map[*host.Host]uint32
	edsHealth map[*host.Host]host.HealthFlag
	settings  setSettings
	stats     map[*host.Host]*HostStats // new per-host stats, nil when membership is unchanged
}

// edsFlags are the health flags EDS controls.
const edsFlags = host.FailedEDSHealth | host.DegradedEDSHealth | host.EDSStatusDraining

// Name returns the cluster name.
func (c *Cluster) Name() string { return c.cfg.Name }

// Config returns the cluster's configuration.
func (c *Cluster) Config() *config.Cluster { return c.cfg }

// AddedViaAPI reports whether CDS added the cluster (false for bootstrap clusters).
func (c *Cluster) AddedViaAPI() bool { return c.addedViaAPI }

// Version returns the CDS version the cluster came with ("" for bootstrap clusters).
func (c *Cluster) Version() string { return c.version }

// LastUpdated returns when the cluster was added or last modified.
func (c *Cluster) LastUpdated() time.Time { return c.lastUpdated }

// Warm reports whether the cluster has received its first host set.
func (c *Cluster) Warm() bool { return c.warmed.Load() }

// Snapshot returns the current snapshot. Before the cluster is warm it has no hosts.
func (c *Cluster) Snapshot() *Snapshot { return c.snap.Load() }

// Stats returns the cluster.<name>.* stats.
func (c *Cluster) Stats() *Stats { return &c.stats.stats }

// Pick picks a host for one request from the current snapshot. ORIGINAL_DST clusters create the
// host of ctx.OverrideHost when it is not known yet (the only allocating path).
func (c *Cluster) Pick(ctx *lb.Context) (*host.Host, error) {
	snap := c.snap.Load()
	if snap == nil {
		return nil, lb.ErrNoHealthyHost
	}
	// Snapshot.Pick written out: a proxied request picks here, and the call was a frame of
	// its own.
	h, err := snap.Balancer.Pick(ctx)
	if err == nil {
		if c.cfg.Type == config.OriginalDst {
			snap.markUsed(h)
		}
		return h, nil
	}
	if c.cfg.Type == config.OriginalDst && errors.Is(err, originaldst.ErrUnknownDestination) {
		return c.addOriginalDst(ctx.OverrideHost)
	}
	if c.dns != nil && errors.Is(err, errUnknownForwardHost) {
		return c.addForwardHost(ctx.OverrideHost)
	}
	return h, err
}

// hostUpdate is a full host set from discovery.
type hostUpdate struct {
	hosts    []host.Config
	settings setSettings
	// sameMembership treats address changes of hosts as updates of the same hosts (LOGICAL_DNS:
	// the logical host keeps its statistics).
	keepStatsByHostname bool
}

// hostKey identifies a host across updates: a host with the same key and identity is reused,
// keeping its health flags and statistics.
func hostKey(cfg *host.Config) string { return cfg.Address }

func sameIdentity(h *host.Host, cfg *host.Config) bool {
	if h.Hostname() != cfg.Hostname || h.Locality() != cfg.Locality || h.Priority() != cfg.Priority ||
		h.Canary() != cfg.Canary || h.SocketMatch() != cfg.SocketMatch || h.MetadataLen() != len(cfg.Metadata) {
		return false
	}
	for k, v := range cfg.Metadata {
		if got, ok := h.Metadata(k); !ok || got != v {
			return false
		}
	}
	return true
}

// countSocketMatch counts a new host in the stats of its transport socket, as Envoy counts
// each host's socket resolution.
func (c *Cluster) countSocketMatch(h *host.Host) {
	if i := h.SocketMatch(); i < len(c.socketMatches) {
		c.socketMatches[i].Inc()
	}
}

// update applies a discovery result: membership changes at once, health and weight changes
// through the merge window. It reports whether anything changed.
func (c *Cluster) update(u hostUpdate) error {
	c.mu.Lock()
	warmedNow, changed, err := c.updateLocked(u)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.afterApply(warmedNow, changed)
	return nil
}

func (c *Cluster) updateLocked(u hostUpdate) (warmedNow, changed bool, err error) {
	if c.closed {
		return false, false, nil
	}
	cur := make(map[string]*host.Host, len(c.hosts))
	for _, h := range c.hosts {
		cur[h.Address()] = h
	}
	byHostname := map[string]*HostStats{}
	if u.keepStatsByHostname {
		for _, h := range c.hosts {
			byHostname[h.Hostname()] = c.hostStats[h]
		}
	}
	p := &pendingUpdate{
		weights:   map[*host.Host]uint32{},
		edsHealth: map[*host.Host]host.HealthFlag{},
		settings:  u.settings,
	}
	membership := false
	seen := make(map[string]bool, len(u.hosts))
	var newStats map[*host.Host]*HostStats
	for i := range u.hosts {
		hc := &u.hosts[i]
		key := hostKey(hc)
		if seen[key] {
			continue // duplicate addresses collapse into one host, as in Envoy
		}
		seen[key] = true
		w := max(hc.Weight, 1)
		if old, ok := cur[key]; ok && sameIdentity(old, hc) {
			// Discovery lists the host again: it is no longer on its way out.
			old.ClearHealthFlag(host.PendingDynamicRemoval)
			p.hosts = append(p.hosts, old)
			if old.Weight() != w {
				p.weights[old] = w
			}
			if old.HealthFlags()&edsFlags != hc.Health&edsFlags {
				p.edsHealth[old] = hc.Health & edsFlags
			}
			continue
		}
		hcfg := *hc
		if c.health != nil {
			hcfg.Health |= health.InitialFlags(c.applied, c.cfg.CommonLb.IgnoreNewHostsUntilFirstHC)
		}
		h, err := host.New(hcfg)
		if err != nil {
			return false, false, fmt.Errorf("cluster %q: %w", c.cfg.Name, err)
		}
		c.countSocketMatch(h)
		if newStats == nil {
			newStats = make(map[*host.Host]*HostStats, len(u.hosts))
		}
		st := &HostStats{}
		if old, ok := cur[key]; ok && c.hostStats[old] != nil {
			st = c.hostStats[old]
		} else if s := byHostname[hc.Hostname]; s != nil {
			st = s
		}
		newStats[h] = st
		p.hosts = append(p.hosts, h)
		membership = true
	}
	p.hosts = c.keepRemovedLocked(p.hosts, seen)
	if len(p.hosts) != len(c.hosts) {
		membership = true
	}
	if membership {
		if newStats == nil {
			newStats = make(map[*host.Host]*HostStats, len(p.hosts))
		}
		for _, h := range p.hosts {
			if _, ok := newStats[h]; !ok {
				newStats[h] = c.hostStats[h]
			}
		}
		p.stats = newStats
	}
	if c.applied && !membership && len(p.weights) == 0 && len(p.edsHealth) == 0 && u.settings.equal(c.settings) {
		c.stats.stats.UpdateNoRebuild.Inc()
		return false, false, nil
	}
	if !membership && c.pending != nil {
		// Fold an earlier merged update into this one.
		for h, w := range c.pending.weights {
			if _, ok := p.weights[h]; !ok && slices.Contains(p.hosts, h) {
				p.weights[h] = w
			}
		}
	}
	warmedNow, err = c.schedule(p, membership || !u.settings.equal(c.settings))
	return warmedNow, true, err
}

// schedule applies p now or when the merge window ends (Envoy's scheduleUpdate): membership
// changes and the first update apply at once; other updates inside the window are merged.
func (c *Cluster) schedule(p *pendingUpdate, immediate bool) (warmedNow bool, err error) {
	window := c.cfg.CommonLb.UpdateMergeWindow
	now := c.m.clock.Now()
	c.pending = p
	if immediate || window <= 0 || !c.applied {
		if c.mergeTimer != nil && c.mergeTimer.Stop() {
			c.m.stats.UpdateMergeCancelled.Inc()
		}
		c.mergeTimer = nil
		return c.applyLocked()
	}
	if now.Sub(c.lastApplied) >= window && c.mergeTimer == nil {
		c.m.stats.UpdateOutOfMergeWindow.Inc()
		return c.applyLocked()
	}
	if c.mergeTimer == nil {
		c.mergeTimer = c.m.clock.AfterFunc(window, c.mergeTimerFired)
	}
	return false, nil
}

// mergeTimerFired applies the merged updates at the end of the window.
func (c *Cluster) mergeTimerFired() {
	c.mu.Lock()
	c.mergeTimer = nil
	if c.pending == nil || c.closed {
		c.mu.Unlock()
		return
	}
	warmedNow, err := c.applyLocked()
	if err == nil {
		c.m.stats.ClusterUpdatedViaMerge.Inc()
	}
	c.mu.Unlock()
	if err != nil {
		c.m.log.Errorf("cluster %q: applying merged update: %v", c.cfg.Name, err)
		return
	}
	c.afterApply(warmedNow, true)
}

// HealthChanged tells the cluster that health checking or outlier detection changed the health
// flags of its hosts. The new partitions are published through the merge window. Safe for
// concurrent use.
func (c *Cluster) HealthChanged() {
	c.mu.Lock()
	if c.closed || !c.applied {
		c.mu.Unlock()
		return
	}
	warmedNow, err := c.schedule(c.pendingOrCurrentLocked(), false)
	c.mu.Unlock()
	if err == nil {
		c.afterApply(warmedNow, true)
	}
}

// pendingOrCurrentLocked is the update waiting for the merge window, or one that republishes
// the current hosts. Caller holds c.mu.
func (c *Cluster) pendingOrCurrentLocked() *pendingUpdate {
	if c.pending != nil {
		return c.pending
	}
	return &pendingUpdate{hosts: c.hosts, settings: c.settings}
}

// applyLocked publishes c.pending as a new snapshot.
func (c *Cluster) applyLocked() (warmedNow bool, err error) {
	p := c.pending
	c.pending = nil
	for h, w := range p.weights {
		h.SetWeight(w)
	}
	for h, f := range p.edsHealth {
		h.ClearHealthFlag(edsFlags &^ f)
		h.SetHealthFlag(f)
	}
	hostStats := c.hostStats
	if p.stats != nil {
		hostStats = p.stats
	}
	snap, err := c.build(p.hosts, p.settings, hostStats)
	if err != nil {
		return false, err
	}
	membership := p.stats != nil
	c.hosts, c.hostStats, c.settings = p.hosts, hostStats, p.settings
	c.snap.Store(snap)
	c.lastApplied = c.m.clock.Now()
	c.applied = true
	st := &c.stats.stats
	if membership {
		st.MembershipChange.Inc()
		c.membershipGen++
	}
	c.publishMembership(snap.PrioritySet)
	c.m.stats.ClusterUpdated.Inc()
	c.m.snapshotSubs.notify(c)
	if c.warmed.Load() || !c.health.firstRoundDoneLocked(p.hosts) {
		return false, nil
	}
	c.warmed.Store(true)
	return true, nil
}

// publishMembership sets the membership_* and max_host_weight gauges.
func (c *Cluster) publishMembership(ps *host.PrioritySet) {
	var healthy, degraded, excluded, total, maxW uint64
	for _, s := range ps.Sets() {
		healthy += uint64(len(s.HealthyHosts()))
		degraded += uint64(len(s.DegradedHosts()))
		excluded += uint64(len(s.ExcludedHosts()))
		total += uint64(len(s.Hosts()))
		for _, h := range s.Hosts() {
			maxW = max(maxW, uint64(h.Weight()))
		}
	}
	st := &c.stats.stats
	st.MembershipHealthy.Set(healthy)
	st.MembershipDegraded.Set(degraded)
	st.MembershipExcluded.Set(excluded)
	st.MembershipTotal.Set(total)
	st.MaxHostWeight.Set(maxW)
}

// afterApply runs outside c.mu: warming bookkeeping and dependent (aggregate) clusters.
func (c *Cluster) afterApply(warmedNow, changed bool) {
	c.syncHealthHosts()
	if warmedNow {
		c.m.clusterWarmed(c)
	}
	if changed {
		c.m.memberChanged(c.cfg.Name)
	}
}

// build makes the snapshot of hosts.
func (c *Cluster) build(hosts []*host.Host, s setSettings, hostStats map[*host.Host]*HostStats) (*Snapshot, error) {
	ps, err := c.prioritySet(hosts, s)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.cfg.Name, err)
	}
	snap := &Snapshot{
		Cluster:       c,
		PrioritySet:   ps,
		Breaker:       c.breaker,
		Stats:         &c.stats.stats,
		DropOverloads: s.drops,
		hostStats:     hostStats,
	}
	if c.cfg.Type == config.Custom {
		ct, _ := c.m.customType(c.cfg.CustomType.Name)
		snap.PrioritySet, snap.Balancer = ct.build(c.m, c, ps)
		return snap, nil
	}
	snap.Balancer, err = c.balancer(ps)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.cfg.Name, err)
	}
	return snap, nil
}

func (c *Cluster) prioritySet(hosts []*host.Host, s setSettings) (*host.PrioritySet, error) {
	byPrio := map[uint32][]*host.Host{}
	for _, h := range hosts {
		byPrio[h.Priority()] = append(byPrio[h.Priority()], h)
	}
	sets := make([]*host.Set, 0, len(byPrio))
	for p, hs := range byPrio {
		set, err := host.NewSet(host.SetConfig{
			Priority:               p,
			Hosts:                  hs,
			LocalityWeights:        s.localityWeights[p],
			LocalLocality:          c.m.localLocality,
			OverprovisioningFactor: s.overprovisioning,
			WeightedPriorityHealth: s.weightedPriorityHealth,
		})
		if err != nil {
			return nil, err
		}
		sets = append(sets, set)
	}
	return host.NewPrioritySet(sets...)
}

// lbConfig converts the cluster's load balancing settings for the lb package.
func lbConfig(cfg *config.Cluster) *lb.Config {
	panicThreshold := float64(cfg.CommonLb.HealthyPanicThreshold)
	bias := cfg.LeastRequest.ActiveRequestBias
	out := &lb.Config{
		Policy:                cfg.LbPolicy,
		HealthyPanicThreshold: &panicThreshold,
		LocalityWeighted:      cfg.CommonLb.LocalityWeighted,
		LeastRequest:          lb.LeastRequestConfig{ChoiceCount: cfg.LeastRequest.ChoiceCount, ActiveRequestBias: &bias},
		RingHash: lb.RingHashConfig{
			MinimumRingSize: cfg.RingHash.MinimumRingSize,
			MaximumRingSize: cfg.RingHash.MaximumRingSize,
			HashFunction:    lb.HashFunction(cfg.RingHash.HashFunction),
		},
		Maglev:                lb.MaglevConfig{TableSize: cfg.Maglev.TableSize},
		UseHostnameForHashing: cfg.CommonLb.UseHostnameForHashing,
	}
	if z := cfg.CommonLb.ZoneAware; z != nil {
		re, mcs := z.RoutingEnabled, z.MinClusterSize
		out.ZoneAware = lb.ZoneAwareConfig{RoutingEnabled: &re, MinClusterSize: &mcs, FailTrafficOnPanic: z.FailTrafficOnPanic}
	}
	return out
}

func (c *Cluster) balancer(ps *host.PrioritySet) (lb.Balancer, error) {
	params := lb.Params{PrioritySet: ps, Rand: c.m.rand, Stats: &c.stats.lb}
	if c.m.localCluster != "" && c.m.localCluster != c.cfg.Name {
		if local := c.m.Get(c.m.localCluster); local != nil {
			if s := local.Snapshot(); s != nil {
				params.Local = s.PrioritySet
			}
		}
	}
	factory, ok := c.m.balancerFactory(c.lbPolicy())
	if !ok {
		return nil, fmt.Errorf("lb_policy = %q; not a supported load balancing policy", c.cfg.LbPolicy)
	}
	if sc := c.cfg.LbSubset; sc != nil {
		cfg := subset.Config{
			FallbackPolicy:      subset.FallbackPolicy(sc.FallbackPolicy),
			Selectors:           sc.Selectors,
			LocalityWeightAware: sc.LocalityWeightAware,
			ScaleLocalityWeight: sc.ScaleLocalityWeight,
			PanicModeAny:        sc.PanicModeAny,
		}
		for k, v := range sc.DefaultSubset {
			cfg.DefaultSubset = append(cfg.DefaultSubset, lb.Criterion{Name: k, Value: v})
		}
		lb.SortCriteria(cfg.DefaultSubset)
		b, err := subset.New(params, c.lbCfg(), cfg, factory)
		if err != nil {
			return nil, err
		}
		var prev *subset.Balancer
		if old := c.snap.Load(); old != nil {
			prev, _ = old.Balancer.(*subset.Balancer)
		}
		b.CountChanges(prev)
		return b, nil
	}
	return factory(params, c.lbCfg())
}

func (c *Cluster) lbPolicy() string { return c.cfg.LbPolicy }

func (c *Cluster) lbCfg() *lb.Config { return c.m.withRuntime(lbConfig(c.cfg)) }

// close stops the cluster's timers and discovery; the stats stay with the manager's entry.
func (c *Cluster) close() {
	c.mu.Lock()
	c.closed = true
	if c.mergeTimer != nil {
		c.mergeTimer.Stop()
		c.mergeTimer = nil
	}
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
