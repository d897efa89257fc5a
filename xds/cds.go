package xds

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// failure is the error_state of a rejected resource: Envoy's UpdateFailureState.
type failure struct {
	resource *anypb.Any
	at       time.Time
	details  string
	version  string
}

// cdsHandler applies CDS responses to the cluster manager: wildcard subscription, add, update
// and remove (only clusters added through the API), EDS subscriptions for EDS clusters, and
// the CDS part of initialization. Its state is guarded by Client.mu.
type cdsHandler struct {
	c     *Client
	src   resource.Source
	m     *mux
	stats SubscriptionStats
	reg   *stats.Registration

	// clusters are the API clusters currently applied, by name.
	clusters map[string]*resource.Cluster
	// failures are the rejected clusters, by name, for error_state.
	failures map[string]*failure
	// secrets are the SDS subscriptions of clusters with upstream SDS secrets, by name.
	secrets map[string]*clusterSecrets

	// lastDuration is how long the last update took to apply.
	lastDuration time.Duration

	initReady   func()
	initTimer   clock.Timer
	initFetched bool
	// initPending are the clusters of the first update still waiting for their first EDS
	// assignment.
	initPending map[string]bool
}

func newCDSHandler(c *Client, src resource.Source, m *mux) *cdsHandler {
	h := &cdsHandler{c: c, src: src, m: m, clusters: map[string]*resource.Cluster{}, failures: map[string]*failure{}, secrets: map[string]*clusterSecrets{}, initPending: map[string]bool{}}
	h.reg = c.cfg.Stats.Register("cluster_manager.cds.", &h.stats)
	return h
}

// startLocked subscribes to every cluster and starts the initial fetch timeout.
func (h *cdsHandler) startLocked() {
	h.stats.UpdateAttempt.Inc()
	h.m.addWatch(resource.ClusterType, h, true)
	if t := h.src.InitialFetchTimeout; t > 0 {
		h.initTimer = h.c.clock.AfterFunc(t, h.initTimeout)
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

// CDSStats returns the cluster_manager.cds.* stats, or nil without CDS.
func (c *Client) CDSStats() *SubscriptionStats {
	if c.cds == nil {
		return nil
	}
	return &c.cds.stats
}

func (h *cdsHandler) initTimeout() {
	c := h.c
	c.mu.Lock()
	if !h.initFetched {
		h.stats.InitFetchTimeout.Inc()
		h.stats.UpdateAttempt.Inc()
		c.log.Warnf("xds: CDS initial fetch timed out after %v", h.src.InitialFetchTimeout)
		h.fetchedLocked()
	}
	ready := h.takeReadyLocked()
	c.mu.Unlock()
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
		if (rc.EDS != nil && !h.c.eds.receivedLocked(name)) || h.waitingForSecretsLocked(name) {
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

// apply applies a CDS response. Valid clusters are applied even when others are rejected; a
// rejected cluster keeps its previous version serving and is reported in the NACK and in
// error_state. A state-of-the-world response removes the API clusters it does not list.
func (h *cdsHandler) apply(_ *mux, u update) error {
	c := h.c
	c.mu.Lock()
	var err error
	c.batch(func() { err = h.applyLocked(u) })
	ready := h.takeReadyLocked()
	c.mu.Unlock()
	if ready != nil {
		ready()
	}
	return err
}

// applyLocked is apply under Client.mu.
func (h *cdsHandler) applyLocked(u update) error {
	c := h.c
	start := c.clock.Now()
	var errs []string
	seen := make(map[string]bool, len(u.resources))
	var eds []*resource.Cluster
	ignored := map[string]int{}
	defer xdswatch.LogIgnored(c.log, "CDS", "cluster", ignored)
	for i, a := range u.resources {
		rc, err := resource.DecodeCluster(a, c.cfg.Limits)
		if rc != nil {
			for _, f := range rc.Config.Ignored {
				ignored[f]++
			}
		}
		name := ""
		switch {
		case rc != nil:
			name = rc.Name
		case u.names != nil:
			name = u.names[i]
		default:
			name = resource.ClusterName(a)
		}
		if err == nil && u.names != nil && u.names[i] != name {
			err = fmt.Errorf("cluster %q: resource name %q differs from the cluster's name", name, u.names[i])
		}
		if err == nil && seen[name] {
			err = fmt.Errorf("cluster %q: listed more than once in the response; cluster names must be unique", name)
		}
		if name != "" {
			seen[name] = true
		}
		if err == nil && rc.EDS != nil {
			err = h.checkEDSSource(rc)
		}
		var wait bool
		if err == nil {
			wait, err = h.holdForSecretsLocked(rc, u.version, start)
		}
		if err == nil && !wait {
			var changed bool
			changed, err = c.cfg.Clusters.AddOrUpdate(rc.Config, u.version)
			if err == nil {
				if old := h.clusters[name]; changed && old != nil && old.EDS != nil && rc.EDS == nil {
					c.eds.unbindLocked(name)
				}
				if changed && rc.EDS != nil {
					eds = append(eds, rc)
				}
			}
		}
		if err != nil {
			errs = append(errs, err.Error())
			h.failures[name] = &failure{resource: a, at: start, details: err.Error(), version: u.version}
			continue
		}
		delete(h.failures, name)
		h.clusters[name] = rc
	}
	var removed []string
	if u.full {
		for name := range h.clusters {
			if !seen[name] {
				removed = append(removed, name)
			}
		}
		for name := range h.failures {
			if !seen[name] {
				delete(h.failures, name)
			}
		}
	} else {
		removed = u.removed
	}
	for _, name := range removed {
		if _, ok := h.clusters[name]; !ok {
			continue
		}
		c.eds.unbindLocked(name)
		c.cfg.Clusters.Remove(name)
		h.removeSecretsLocked(name)
		delete(h.clusters, name)
		delete(h.failures, name)
		delete(h.initPending, name)
	}
	h.bindEDSLocked(eds)
	c.eds.flushLocked()
	var err error
	if len(errs) > 0 {
		h.stats.UpdateRejected.Inc()
		h.stats.UpdateAttempt.Inc()
		err = errors.New(strings.Join(errs, "; "))
		c.log.Warnf("xds: CDS update %q rejected: %v", u.version, err)
	} else {
		c.cfg.Clusters.SetVersionInfo(u.version)
		h.stats.Accepted(u.version, c.clock.Now(), c.clock.Now().Sub(start))
	}
	h.lastDuration = c.clock.Now().Sub(start)
	h.fetchedLocked()
	return err
}

// checkEDSSource reports whether an EDS cluster's eds_config can be served.
func (h *cdsHandler) checkEDSSource(rc *resource.Cluster) error {
	src := h.edsSource(*rc.EDS)
	if src.ADS && h.c.ads == nil {
		return fmt.Errorf("cluster %q: eds_cluster_config.eds_config.ads is set but dynamic_resources.ads_config is not", rc.Name)
	}
	return nil
}

// edsSource resolves `self` to the CDS source.
func (h *cdsHandler) edsSource(src resource.Source) resource.Source {
	if !src.Self {
		return src
	}
	out := h.src
	out.InitialFetchTimeout = src.InitialFetchTimeout
	return out
}

// bindEDSLocked subscribes the new or changed EDS clusters to their assignments. The clusters
// are warming until then; one Warming call finds them all.
func (h *cdsHandler) bindEDSLocked(eds []*resource.Cluster) {
	if len(eds) == 0 {
		return
	}
	warming := map[string]*cluster.Cluster{}
	for _, cl := range h.c.cfg.Clusters.Warming() {
		warming[cl.Name()] = cl
	}
	for _, rc := range eds {
		cl := warming[rc.Name]
		if cl == nil {
			cl = h.c.cfg.Clusters.Get(rc.Name)
		}
		if cl == nil || cl.Config() != rc.Config {
			continue
		}
		if err := h.c.eds.bindLocked(cl, h.edsSource(*rc.EDS)); err != nil {
			h.c.log.Errorf("xds: %v", err)
		}
	}
}

// isEDS reports whether cfg is an EDS cluster.
func isEDS(cfg *config.Cluster) bool { return cfg.Type == config.EDS }
