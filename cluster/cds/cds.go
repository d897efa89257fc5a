package cds

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// InitTarget is the name of the init target CDS registers: ready once the first CDS response
// (or its initial_fetch_timeout) has been handled and every cluster it added has received its
// first EDS assignment (or timed out) and its SDS secrets.
const InitTarget = "cds"

// Config holds a Discovery's configuration and dependencies. Client, Clusters and Stats are
// required; every other field has the default stated in its comment.
type Config struct {
	// Client is the xDS client the subscriptions go through.
	Client watch.Streams
	// DynamicResources is the bootstrap's dynamic_resources: its cds_config (and
	// cds_resources_locator) are read. Nil means no CDS; only the bootstrap's EDS clusters
	// are served.
	DynamicResources *bootstrapv3.Bootstrap_DynamicResources
	// Clusters is the cluster manager CDS and EDS update.
	Clusters *cluster.Manager
	// Stats is the store for cluster_manager.cds.* and the EDS clusters' cluster.<name>.*.
	Stats *stats.Store
	// Logger logs rejected updates; nil discards.
	Logger *logging.Logger
	// Init registers the CDS init target (InitTarget); nil means none.
	Init func(name string) (ready func(), err error)
	// Clock schedules initial fetch timeouts; nil means the system clock.
	Clock clock.Clock
	// Limits are the command-line limits applied to CDS clusters (--max-obj-name-len).
	Limits config.Limits
	// Secrets watches the SDS secrets of CDS clusters (tlsutil.SDS); nil refuses them.
	Secrets SecretWatcher
}

// SecretWatcher watches SDS secrets (tlsutil.SDS.Watch): onChange runs after each change.
type SecretWatcher interface {
	Watch(cs *corev3.ConfigSource, name string, onChange func()) (watch.Subscription, error)
}

// Discovery is the cluster manager's xDS side: CDS (a wildcard subscription whose clusters
// are added, updated and removed in one batch per response, warming until their first EDS
// assignment and SDS secrets) and EDS (one subscription per service name and transport,
// feeding the clusters that use it, the bootstrap's EDS clusters included).
//
// Concurrency: New, Start and Stop are called once by the server. The xDS client calls the
// appliers on its transport goroutines and the timers fire on theirs; mu guards the CDS and
// EDS state and serialises every update. Lock order: mu, then the cluster manager's locks,
// then the client's. The dumps may be called from any goroutine.
type Discovery struct {
	cfg   Config
	log   *logging.Logger
	clock clock.Clock

	mu  sync.Mutex // guards cds and eds and their state
	cds *cdsHandler
	eds *edsHandler
}

// New validates cds_config and subscribes to every cluster it delivers (the client sends the
// request once it runs); Start starts the initial fetch.
func New(cfg Config) (*Discovery, error) {
	if cfg.Client == nil || cfg.Clusters == nil || cfg.Stats == nil {
		return nil, errors.New("cds: Client, Clusters and Stats are required")
	}
	d := &Discovery{cfg: cfg, log: cfg.Logger, clock: cfg.Clock}
	if d.clock == nil {
		d.clock = clock.Real()
	}
	d.eds = newEDSHandler(d)
	dr := cfg.DynamicResources
	if dr.GetCdsResourcesLocator() != "" {
		return nil, fmt.Errorf("dynamic_resources.cds_resources_locator = %q; xdstp:// locators are not supported", dr.GetCdsResourcesLocator())
	}
	cs := dr.GetCdsConfig()
	if cs == nil {
		return d, nil
	}
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return nil, fmt.Errorf("dynamic_resources.cds_config.%w", err)
	}
	if src.Self {
		return nil, errors.New("dynamic_resources.cds_config.self is not valid here; self needs a parent resource")
	}
	h := newCDSHandler(d, cs, src)
	if h.stream, err = cfg.Client.Stream(watch.ClusterType, cs, true, h); err != nil {
		h.reg.Unregister()
		return nil, fmt.Errorf("dynamic_resources.cds_config: %w", err)
	}
	if cfg.Init != nil {
		ready, err := cfg.Init(InitTarget)
		if err != nil {
			h.reg.Unregister()
			return nil, fmt.Errorf("xds: %w", err)
		}
		h.initReady = ready
	}
	d.cds = h
	return d, nil
}

// Start subscribes the bootstrap's EDS clusters and starts CDS's initial fetch timeout. The
// server calls it before the client runs.
func (d *Discovery) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.eds.bindStaticLocked()
	if d.cds != nil {
		d.cds.startLocked()
	}
}

// Stop ends the timers and secret subscriptions and unregisters the stats, after the client
// stopped.
func (d *Discovery) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cds != nil {
		d.cds.stopLocked()
	}
	d.eds.stopLocked()
}

// CDSStats returns the cluster_manager.cds.* stats, or nil without CDS.
func (d *Discovery) CDSStats() *watch.SubscriptionStats {
	if d.cds == nil {
		return nil
	}
	return &d.cds.stats
}

// LastCDSDuration is how long the last CDS update took to apply (benchmarks).
func (d *Discovery) LastCDSDuration() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cds == nil {
		return 0
	}
	return d.cds.lastDuration
}

// cdsHandler applies CDS responses to the cluster manager: wildcard subscription, add, update
// and remove (only clusters added through the API), EDS subscriptions for EDS clusters, and
// the CDS part of initialization. Its state is guarded by Discovery.mu.
type cdsHandler struct {
	d      *Discovery
	cs     *corev3.ConfigSource
	src    resource.Source
	stream watch.Stream
	stats  watch.SubscriptionStats
	reg    *stats.Registration

	// clusters are the API clusters currently applied, by name.
	clusters map[string]*Cluster
	// failures are the error states of the rejected clusters, by name.
	failures map[string]*adminv3.UpdateFailureState
	// secrets are the SDS subscriptions of clusters with upstream SDS secrets, by name.
	secrets map[string]*clusterSecrets

	// lastDuration is how long the last update took to apply.
	lastDuration time.Duration

	initReady   func()
	initTimer   clock.Timer
	initFetched bool
	// initPending are the clusters of the first update still waiting for their first EDS
	// assignment or their secrets.
	initPending map[string]bool
}

func newCDSHandler(d *Discovery, cs *corev3.ConfigSource, src resource.Source) *cdsHandler {
	h := &cdsHandler{d: d, cs: cs, src: src, clusters: map[string]*Cluster{}, failures: map[string]*adminv3.UpdateFailureState{}, secrets: map[string]*clusterSecrets{}, initPending: map[string]bool{}}
	h.reg = d.cfg.Stats.Register("cluster_manager.cds.", &h.stats)
	return h
}

// startLocked counts the subscription's start and starts the initial fetch timeout.
func (h *cdsHandler) startLocked() {
	h.stats.UpdateAttempt.Inc()
	if t := h.src.InitialFetchTimeout; t > 0 {
		h.initTimer = h.d.clock.AfterFunc(t, h.initTimeout)
	}
}

func (h *cdsHandler) stopLocked() {
	if h.initTimer != nil {
		h.initTimer.Stop()
	}
	for name := range h.secrets {
		h.removeSecretsLocked(name)
	}
	h.reg.Unregister()
}

func (h *cdsHandler) initTimeout() {
	d := h.d
	d.mu.Lock()
	if !h.initFetched {
		h.stats.InitFetchTimeout.Inc()
		h.stats.UpdateAttempt.Inc()
		d.log.Warnf("xds: CDS initial fetch timed out after %v", h.src.InitialFetchTimeout)
		h.fetchedLocked()
	}
	ready := h.takeReadyLocked()
	d.mu.Unlock()
	if ready != nil {
		ready()
	}
}

// fetchedLocked ends CDS's initial fetch: initialization now waits only for the EDS clusters.
func (h *cdsHandler) fetchedLocked() {
	if h.initFetched {
		return
	}
	h.initFetched = true
	if h.initTimer != nil {
		h.initTimer.Stop()
	}
	for name, rc := range h.clusters {
		if (rc.EDS != nil && !h.d.eds.receivedLocked(name)) || h.waitingForSecretsLocked(name) {
			h.initPending[name] = true
		}
	}
}

// clusterWarmLocked notes that an EDS cluster got its first assignment or timed out.
func (h *cdsHandler) clusterWarmLocked(name string) { delete(h.initPending, name) }

// takeReadyLocked returns the init target's ready function once initialization is complete,
// exactly once.
func (h *cdsHandler) takeReadyLocked() func() {
	if h.initReady == nil || !h.initFetched || len(h.initPending) != 0 {
		return nil
	}
	r := h.initReady
	h.initReady = nil
	return r
}

// takeReadyLocked is the CDS init target's ready function when initialization just
// completed; nil without CDS.
func (d *Discovery) takeReadyLocked() func() {
	if d.cds == nil {
		return nil
	}
	return d.cds.takeReadyLocked()
}

// unlockAndReady releases mu, then completes the CDS init target when it just became ready.
func (d *Discovery) unlockAndReady() {
	ready := d.takeReadyLocked()
	d.mu.Unlock()
	if ready != nil {
		ready()
	}
}

// Apply applies a CDS response. Valid clusters are applied even when others are rejected; a
// rejected cluster keeps its previous version serving and is reported in the NACK and in
// error_state. A state-of-the-world response removes the API clusters it does not list.
func (h *cdsHandler) Apply(_ watch.Stream, r watch.Response) error {
	d := h.d
	d.mu.Lock()
	defer d.unlockAndReady()
	var err error
	d.cfg.Clusters.Batch(func() { err = h.applyLocked(r) })
	return err
}

// Failed counts a transport failure on CDS.
func (h *cdsHandler) Failed(watch.Stream) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	h.stats.UpdateFailure.Inc()
	h.stats.UpdateAttempt.Inc()
}

// applyLocked is Apply under Discovery.mu.
func (h *cdsHandler) applyLocked(u watch.Response) error {
	d := h.d
	start := d.clock.Now()
	var errs []string
	names := watch.NewNaming("cluster", &u)
	var eds []*Cluster
	ignored := map[string]int{}
	defer watch.LogIgnored(d.log, "CDS", "cluster", ignored)
	for i, a := range u.Resources {
		rc, err := DecodeCluster(a, d.cfg.Limits)
		if rc != nil {
			for _, f := range rc.Config.Ignored {
				ignored[f]++
			}
		}
		decoded := ""
		if rc != nil {
			decoded = rc.Name
		}
		name, err := names.Name(i, decoded, ClusterName, err)
		if err == nil && rc.EDS != nil {
			err = h.checkEDSSource(rc)
		}
		var wait bool
		if err == nil {
			wait, err = h.holdForSecretsLocked(rc, u.Version, start)
		}
		if err == nil && !wait {
			var changed bool
			changed, err = d.cfg.Clusters.AddOrUpdate(rc.Config, u.Version)
			if err == nil {
				if old := h.clusters[name]; changed && old != nil && old.EDS != nil && rc.EDS == nil {
					d.eds.unbindLocked(name)
				}
				if changed && rc.EDS != nil {
					eds = append(eds, rc)
				}
			}
		}
		if err != nil {
			errs = append(errs, err.Error())
			h.failures[name] = watch.FailureState(a, start, err, u.Version)
			continue
		}
		delete(h.failures, name)
		h.clusters[name] = rc
	}
	var removed []string
	if u.Full {
		for name := range h.clusters {
			if !names.Seen(name) {
				removed = append(removed, name)
			}
		}
		for name := range h.failures {
			if !names.Seen(name) {
				delete(h.failures, name)
			}
		}
	} else {
		removed = u.Removed
	}
	for _, name := range removed {
		if _, ok := h.clusters[name]; !ok {
			continue
		}
		d.eds.unbindLocked(name)
		d.cfg.Clusters.Remove(name)
		h.removeSecretsLocked(name)
		delete(h.clusters, name)
		delete(h.failures, name)
		delete(h.initPending, name)
	}
	h.bindEDSLocked(eds)
	d.eds.flushLocked()
	var err error
	if len(errs) > 0 {
		h.stats.UpdateRejected.Inc()
		h.stats.UpdateAttempt.Inc()
		err = errors.New(strings.Join(errs, "; "))
		d.log.Warnf("xds: CDS update %q rejected: %v", u.Version, err)
	} else {
		d.cfg.Clusters.SetVersionInfo(u.Version)
		h.stats.Accepted(u.Version, d.clock.Now(), d.clock.Now().Sub(start))
	}
	h.lastDuration = d.clock.Now().Sub(start)
	h.fetchedLocked()
	return err
}

// checkEDSSource reports whether an EDS cluster's eds_config can be served.
func (h *cdsHandler) checkEDSSource(rc *Cluster) error {
	if rc.EDS.ADS && !h.d.cfg.Client.HasADS() {
		return fmt.Errorf("cluster %q: eds_cluster_config.eds_config.ads is set but dynamic_resources.ads_config is not", rc.Name)
	}
	return nil
}

// edsConfig is the config source of an EDS cluster's assignments: its eds_config, where self
// is the CDS source with eds_config's initial_fetch_timeout.
func (h *cdsHandler) edsConfig(rc *Cluster) *corev3.ConfigSource {
	cs := rc.Config.EDS.Source
	if !rc.EDS.Self {
		return cs
	}
	out := proto.Clone(h.cs).(*corev3.ConfigSource)
	out.InitialFetchTimeout = cs.GetInitialFetchTimeout()
	return out
}

// bindEDSLocked subscribes the new or changed EDS clusters to their assignments. The clusters
// are warming until then; one Warming call finds them all.
func (h *cdsHandler) bindEDSLocked(eds []*Cluster) {
	if len(eds) == 0 {
		return
	}
	warming := map[string]*cluster.Cluster{}
	for _, cl := range h.d.cfg.Clusters.Warming() {
		warming[cl.Name()] = cl
	}
	for _, rc := range eds {
		cl := warming[rc.Name]
		if cl == nil {
			cl = h.d.cfg.Clusters.Get(rc.Name)
		}
		if cl == nil || cl.Config() != rc.Config {
			continue
		}
		if err := h.d.eds.bindLocked(cl, h.edsConfig(rc)); err != nil {
			h.d.log.Errorf("xds: %v", err)
		}
	}
}
