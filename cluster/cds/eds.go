package cds

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

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

// edsHandler keeps one subscription per (transport, EDS service name) and hands each
// ClusterLoadAssignment to the clusters that use the service name
// (eds_cluster_config.service_name, or the cluster name). Its state is guarded by
// Discovery.mu.
type edsHandler struct {
	d *Discovery
	// services by serviceKey.
	services map[serviceKey]*edsService
	// byCluster are the bindings by cluster name.
	byCluster map[string]*edsBinding
	// statEntries are the cluster.<stat name>.* subscription stats, by stat name.
	statEntries map[string]*edsStatEntry
	// pendingAdd and pendingRemove are service names to (un)subscribe at the next flush, so
	// that a CDS update with many clusters changes each transport's subscription once.
	pendingAdd, pendingRemove map[watch.Stream][]string
}

// serviceKey identifies a subscription: the client gives sources sharing a transport one
// Stream.
type serviceKey struct {
	s    watch.Stream
	name string
}

// edsService is one subscribed EDS resource.
type edsService struct {
	s        watch.Stream
	name     string
	bindings map[string]*edsBinding
	// cla and version are the last accepted assignment; nil until one arrives.
	cla     *endpointv3.ClusterLoadAssignment
	version string
}

// edsBinding is one EDS cluster's subscription.
type edsBinding struct {
	svc      *edsService
	cl       *cluster.Cluster
	stats    *edsStatEntry
	received bool // got its first assignment, or its initial fetch timed out
	timer    clock.Timer
}

type edsStatEntry struct {
	stats edsStats
	reg   *stats.Registration
	refs  int
}

func newEDSHandler(d *Discovery) *edsHandler {
	return &edsHandler{
		d: d, services: map[serviceKey]*edsService{}, byCluster: map[string]*edsBinding{},
		statEntries: map[string]*edsStatEntry{}, pendingAdd: map[watch.Stream][]string{}, pendingRemove: map[watch.Stream][]string{},
	}
}

// bindStaticLocked subscribes the bootstrap's EDS clusters.
func (h *edsHandler) bindStaticLocked() {
	all := append(h.d.cfg.Clusters.Snapshot(), h.d.cfg.Clusters.Warming()...)
	for _, cl := range all {
		cfg := cl.Config()
		if cl.AddedViaAPI() || cfg.Type != config.EDS || cfg.EDS == nil {
			continue
		}
		src, err := resource.SourceFromProto(cfg.EDS.Source)
		if err == nil && src.Self {
			err = errors.New("self is only valid for clusters delivered by CDS")
		}
		if err == nil {
			err = h.bindLocked(cl, cfg.EDS.Source)
		}
		if err != nil {
			h.d.log.Errorf("xds: cluster %q: eds_cluster_config.eds_config: %v", cl.Name(), err)
		}
	}
	h.flushLocked()
}

// receivedLocked reports whether the EDS cluster called name has had its first assignment (or
// timed out); clusters without a binding count as received.
func (h *edsHandler) receivedLocked(name string) bool {
	b := h.byCluster[name]
	return b == nil || b.received
}

// bindLocked subscribes cl (warming, or a bootstrap EDS cluster) to its service name on the
// config source cs. A cluster that replaces one using the same service gets the cached
// assignment at once.
func (h *edsHandler) bindLocked(cl *cluster.Cluster, cs *corev3.ConfigSource) error {
	s, err := h.d.cfg.Client.Stream(watch.EndpointType, cs, false, h)
	if err != nil {
		return fmt.Errorf("cluster %q: eds_cluster_config.eds_config: %w", cl.Name(), err)
	}
	name, service := cl.Name(), cl.EDSServiceName()
	if old := h.byCluster[name]; old != nil {
		if old.svc.s == s && old.svc.name == service {
			old.cl = cl
			if old.svc.cla != nil {
				h.applyLocked(old, old.svc.cla, old.svc.version)
			}
			return nil
		}
		h.unbindLocked(name)
	}
	key := serviceKey{s, service}
	svc := h.services[key]
	if svc == nil {
		svc = &edsService{s: s, name: service, bindings: map[string]*edsBinding{}}
		h.services[key] = svc
		h.pendingAdd[s] = append(h.pendingAdd[s], service)
	}
	b := &edsBinding{svc: svc, cl: cl, stats: h.statsRefLocked(cl.Config().StatName)}
	svc.bindings[name] = b
	h.byCluster[name] = b
	cl.Stats().UpdateAttempt.Inc() // the subscription starts
	if svc.cla != nil {
		h.applyLocked(b, svc.cla, svc.version)
		return nil
	}
	// Stream accepted cs, so it parses.
	if src, _ := resource.SourceFromProto(cs); src.InitialFetchTimeout > 0 {
		b.timer = h.d.clock.AfterFunc(src.InitialFetchTimeout, func() { h.initTimeout(b) })
	}
	return nil
}

func (h *edsHandler) statsRefLocked(statName string) *edsStatEntry {
	e := h.statEntries[statName]
	if e == nil {
		e = &edsStatEntry{}
		e.reg = h.d.cfg.Stats.Register("cluster."+statName+".", &e.stats)
		h.statEntries[statName] = e
	}
	e.refs++
	return e
}

// unbindLocked ends the subscription of the cluster called name, if any.
func (h *edsHandler) unbindLocked(name string) {
	b := h.byCluster[name]
	if b == nil {
		return
	}
	delete(h.byCluster, name)
	if b.timer != nil {
		b.timer.Stop()
	}
	svc := b.svc
	delete(svc.bindings, name)
	if len(svc.bindings) == 0 {
		delete(h.services, serviceKey{svc.s, svc.name})
		h.pendingRemove[svc.s] = append(h.pendingRemove[svc.s], svc.name)
	}
	b.stats.refs--
	if b.stats.refs == 0 {
		b.stats.reg.Unregister()
		delete(h.statEntries, b.cl.Config().StatName)
	}
}

// flushLocked sends the subscription changes collected since the last flush.
func (h *edsHandler) flushLocked() {
	for s, add := range h.pendingAdd {
		s.SetNames(add, h.pendingRemove[s])
		delete(h.pendingRemove, s)
	}
	for s, rm := range h.pendingRemove {
		s.SetNames(nil, rm)
	}
	clear(h.pendingAdd)
	clear(h.pendingRemove)
}

func (h *edsHandler) stopLocked() {
	for _, b := range h.byCluster {
		if b.timer != nil {
			b.timer.Stop()
		}
	}
	for name, e := range h.statEntries {
		e.reg.Unregister()
		delete(h.statEntries, name)
	}
}

// initTimeout warms a cluster whose first assignment did not come within
// initial_fetch_timeout, with no hosts, as Envoy lets initialization proceed.
func (h *edsHandler) initTimeout(b *edsBinding) {
	d := h.d
	d.mu.Lock()
	defer d.unlockAndReady()
	if h.byCluster[b.cl.Name()] != b || b.received {
		return
	}
	b.stats.stats.InitFetchTimeout.Inc()
	b.cl.Stats().UpdateAttempt.Inc()
	d.log.Warnf("xds: cluster %q: EDS initial fetch of %q timed out", b.cl.Name(), b.svc.name)
	h.warmEmptyLocked(b)
}

// warmEmptyLocked ends b's initial fetch without an assignment: the cluster warms with no
// hosts, as Envoy's EDS cluster completes its initialization after an initial fetch timeout or
// a rejected first answer.
func (h *edsHandler) warmEmptyLocked(b *edsBinding) {
	if err := b.cl.ApplyAssignment(&endpointv3.ClusterLoadAssignment{ClusterName: b.svc.name}); err != nil {
		h.d.log.Errorf("xds: %v", err)
	}
	h.markReceivedLocked(b)
}

// markReceivedLocked marks b as having its first assignment.
func (h *edsHandler) markReceivedLocked(b *edsBinding) {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if !b.received {
		b.received = true
		if h.d.cds != nil {
			h.d.cds.clusterWarmLocked(b.cl.Name())
		}
	}
}

// applyLocked hands cla to b's cluster and records the subscription stats.
func (h *edsHandler) applyLocked(b *edsBinding, cla *endpointv3.ClusterLoadAssignment, version string) error {
	start := h.d.clock.Now()
	if err := b.cl.ApplyAssignment(cla); err != nil {
		return err
	}
	now := h.d.clock.Now()
	st := &b.stats.stats
	st.UpdateTime.Set(uint64(now.UnixMilli()))
	st.VersionText.Set(version)
	st.UpdateDuration.Record(watch.DurationMs(now.Sub(start)))
	b.cl.Stats().Version.Set(watch.VersionHash(version))
	h.markReceivedLocked(b)
	return nil
}

// Apply applies an EDS response delivered on s. Assignments for names nobody subscribed are
// ignored; an assignment equal to the one a cluster already has is counted
// (update_no_rebuild) but not reapplied, so a state-of-the-world response resending thousands
// of unchanged assignments costs little. A removed resource leaves the cluster's hosts in
// place.
func (h *edsHandler) Apply(s watch.Stream, r watch.Response) error {
	d := h.d
	d.mu.Lock()
	defer d.unlockAndReady()
	var err error
	d.cfg.Clusters.Batch(func() { err = h.applyUpdateLocked(s, r) })
	return err
}

// applyUpdateLocked is Apply under Discovery.mu.
func (h *edsHandler) applyUpdateLocked(s watch.Stream, u watch.Response) error {
	d := h.d
	var errs []string
	for i, a := range u.Resources {
		e, err := DecodeEndpoints(a)
		name := ""
		switch {
		case e != nil:
			name = e.Name
		case u.Names != nil:
			name = u.Names[i]
		default:
			// A rejected assignment still names its subscription (update_rejected, and the
			// end of its initial fetch).
			cla := &endpointv3.ClusterLoadAssignment{}
			if proto.Unmarshal(a.GetValue(), cla) == nil {
				name = cla.GetClusterName()
			}
		}
		svc := h.services[serviceKey{s, name}]
		if err == nil && u.Names != nil && u.Names[i] != name {
			err = fmt.Errorf("cluster_load_assignment %q: resource name %q differs from cluster_name", name, u.Names[i])
		}
		if err != nil {
			errs = append(errs, err.Error())
			if svc != nil {
				for _, b := range svc.bindings {
					b.stats.stats.UpdateRejected.Inc()
					b.cl.Stats().UpdateAttempt.Inc()
					if !b.received {
						// "Allow server startup to continue even if we have a bad config"
						// (Envoy's EdsClusterImpl::onConfigUpdateFailed).
						h.warmEmptyLocked(b)
					}
				}
			}
			continue
		}
		if svc == nil {
			continue
		}
		if svc.cla != nil && proto.Equal(svc.cla, e.Proto) {
			svc.version = u.Version
			for _, b := range svc.bindings {
				st := b.cl.Stats()
				st.UpdateAttempt.Inc()
				st.UpdateSuccess.Inc()
				st.UpdateNoRebuild.Inc()
				b.stats.stats.VersionText.Set(u.Version)
				st.Version.Set(watch.VersionHash(u.Version))
			}
			continue
		}
		ok := true
		for _, b := range svc.bindings {
			if err := h.applyLocked(b, e.Proto, u.Version); err != nil {
				ok = false
				errs = append(errs, err.Error())
			}
		}
		if ok {
			svc.cla, svc.version = e.Proto, u.Version
		}
	}
	for _, name := range u.Removed {
		if h.services[serviceKey{s, name}] != nil {
			d.log.Infof("xds: EDS resource %q removed; its clusters keep their hosts", name)
		}
	}
	if len(errs) > 0 {
		err := errors.New(strings.Join(errs, "; "))
		d.log.Warnf("xds: EDS update %q rejected: %v", u.Version, err)
		return err
	}
	return nil
}

// Failed counts a transport failure on every cluster subscribed through s.
func (h *edsHandler) Failed(s watch.Stream) {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	for _, svc := range h.services {
		if svc.s != s {
			continue
		}
		for _, b := range svc.bindings {
			b.cl.Stats().UpdateAttempt.Inc()
			b.cl.Stats().UpdateFailure.Inc()
		}
	}
}
