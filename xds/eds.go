package xds

import (
	"errors"
	"fmt"
	"strings"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// edsHandler keeps one subscription per (transport, EDS service name) and hands each
// ClusterLoadAssignment to the clusters that use the service name
// (eds_cluster_config.service_name, or the cluster name). Its state is guarded by Client.mu.
type edsHandler struct {
	c *Client
	// services by serviceKey.
	services map[string]*edsService
	// byCluster are the bindings by cluster name.
	byCluster map[string]*edsBinding
	// statEntries are the cluster.<stat name>.* subscription stats, by stat name.
	statEntries map[string]*edsStatEntry
	// pendingAdd and pendingRemove are service names to (un)subscribe at the next flush, so
	// that a CDS update with many clusters changes each transport's subscription once.
	pendingAdd, pendingRemove map[*mux][]string
	// watched are the transports this handler watches.
	watched map[*mux]bool
}

// edsService is one subscribed EDS resource.
type edsService struct {
	m        *mux
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

// edsWatch is the handler a transport calls for EndpointType.
type edsWatch struct{ h *edsHandler }

func newEDSHandler(c *Client) *edsHandler {
	return &edsHandler{
		c: c, services: map[string]*edsService{}, byCluster: map[string]*edsBinding{},
		statEntries: map[string]*edsStatEntry{}, pendingAdd: map[*mux][]string{}, pendingRemove: map[*mux][]string{},
		watched: map[*mux]bool{},
	}
}

func serviceKey(m *mux, name string) string { return m.key + "\x00" + name }

// bindStaticLocked subscribes the bootstrap's EDS clusters.
func (h *edsHandler) bindStaticLocked() {
	all := append(h.c.cfg.Clusters.Snapshot(), h.c.cfg.Clusters.Warming()...)
	for _, cl := range all {
		cfg := cl.Config()
		if cl.AddedViaAPI() || !isEDS(cfg) || cfg.EDS == nil {
			continue
		}
		src, err := resource.SourceFromProto(cfg.EDS.Source)
		if err == nil && src.Self {
			err = errors.New("self is only valid for clusters delivered by CDS")
		}
		if err == nil {
			err = h.bindLocked(cl, src)
		}
		if err != nil {
			h.c.log.Errorf("xds: cluster %q: eds_cluster_config.eds_config: %v", cl.Name(), err)
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

// bindLocked subscribes cl (warming, or a bootstrap EDS cluster) to its service name on src. A
// cluster that replaces one using the same service gets the cached assignment at once.
func (h *edsHandler) bindLocked(cl *cluster.Cluster, src resource.Source) error {
	m, err := h.c.muxFor(src, resource.EndpointType)
	if err != nil {
		return fmt.Errorf("cluster %q: eds_cluster_config.eds_config: %w", cl.Name(), err)
	}
	name, service := cl.Name(), cl.EDSServiceName()
	if old := h.byCluster[name]; old != nil {
		if old.svc.m == m && old.svc.name == service {
			old.cl = cl
			if old.svc.cla != nil {
				h.applyLocked(old, old.svc.cla, old.svc.version)
			}
			return nil
		}
		h.unbindLocked(name)
	}
	if !h.watched[m] {
		h.watched[m] = true
		m.addWatch(resource.EndpointType, edsWatch{h}, false)
	}
	key := serviceKey(m, service)
	svc := h.services[key]
	if svc == nil {
		svc = &edsService{m: m, name: service, bindings: map[string]*edsBinding{}}
		h.services[key] = svc
		h.pendingAdd[m] = append(h.pendingAdd[m], service)
	}
	b := &edsBinding{svc: svc, cl: cl, stats: h.statsRefLocked(cl.Config().StatName)}
	svc.bindings[name] = b
	h.byCluster[name] = b
	cl.Stats().UpdateAttempt.Inc() // the subscription starts
	if svc.cla != nil {
		h.applyLocked(b, svc.cla, svc.version)
		return nil
	}
	if t := src.InitialFetchTimeout; t > 0 {
		b.timer = h.c.clock.AfterFunc(t, func() { h.initTimeout(b) })
	}
	return nil
}

func (h *edsHandler) statsRefLocked(statName string) *edsStatEntry {
	e := h.statEntries[statName]
	if e == nil {
		e = &edsStatEntry{}
		e.reg = h.c.cfg.Stats.Register("cluster."+statName+".", &e.stats)
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
		delete(h.services, serviceKey(svc.m, svc.name))
		h.pendingRemove[svc.m] = append(h.pendingRemove[svc.m], svc.name)
	}
	b.stats.refs--
	if b.stats.refs == 0 {
		b.stats.reg.Unregister()
		delete(h.statEntries, b.cl.Config().StatName)
	}
}

// flushLocked sends the subscription changes collected since the last flush.
func (h *edsHandler) flushLocked() {
	for m, add := range h.pendingAdd {
		m.setNames(resource.EndpointType, add, h.pendingRemove[m])
		delete(h.pendingRemove, m)
	}
	for m, rm := range h.pendingRemove {
		m.setNames(resource.EndpointType, nil, rm)
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
	c := h.c
	c.mu.Lock()
	if h.byCluster[b.cl.Name()] != b || b.received {
		c.mu.Unlock()
		return
	}
	b.stats.stats.InitFetchTimeout.Inc()
	b.cl.Stats().UpdateAttempt.Inc()
	c.log.Warnf("xds: cluster %q: EDS initial fetch of %q timed out", b.cl.Name(), b.svc.name)
	h.warmEmptyLocked(b)
	var ready func()
	if c.cds != nil {
		ready = c.cds.takeReadyLocked()
	}
	c.mu.Unlock()
	if ready != nil {
		ready()
	}
}

// warmEmptyLocked ends b's initial fetch without an assignment: the cluster warms with no
// hosts, as Envoy's EDS cluster completes its initialization after an initial fetch timeout or
// a rejected first answer.
func (h *edsHandler) warmEmptyLocked(b *edsBinding) {
	if err := b.cl.ApplyAssignment(&endpointv3.ClusterLoadAssignment{ClusterName: b.svc.name}); err != nil {
		h.c.log.Errorf("xds: %v", err)
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
		if h.c.cds != nil {
			h.c.cds.clusterWarmLocked(b.cl.Name())
		}
	}
}

// applyLocked hands cla to b's cluster and records the subscription stats.
func (h *edsHandler) applyLocked(b *edsBinding, cla *endpointv3.ClusterLoadAssignment, version string) error {
	start := h.c.clock.Now()
	if err := b.cl.ApplyAssignment(cla); err != nil {
		return err
	}
	now := h.c.clock.Now()
	st := &b.stats.stats
	st.UpdateTime.Set(uint64(now.UnixMilli()))
	st.VersionText.Set(version)
	st.UpdateDuration.Record(xdswatch.DurationMs(now.Sub(start)))
	b.cl.Stats().Version.Set(versionHash(version))
	h.markReceivedLocked(b)
	return nil
}

// apply applies an EDS response from src. Assignments for names nobody subscribed are ignored;
// an assignment equal to the one a cluster already has is counted (update_no_rebuild) but not
// reapplied, so a state-of-the-world response resending thousands of unchanged assignments costs
// little. A removed resource leaves the cluster's hosts in place.
func (w edsWatch) apply(src *mux, u update) error {
	c := w.h.c
	c.mu.Lock()
	var err error
	c.batch(func() { err = w.h.applyUpdateLocked(src, u) })
	var ready func()
	if c.cds != nil {
		ready = c.cds.takeReadyLocked()
	}
	c.mu.Unlock()
	if ready != nil {
		ready()
	}
	return err
}

// applyUpdateLocked is edsWatch.apply under Client.mu.
func (h *edsHandler) applyUpdateLocked(src *mux, u update) error {
	c := h.c
	var errs []string
	for i, a := range u.resources {
		e, err := resource.DecodeEndpoints(a)
		name := ""
		switch {
		case e != nil:
			name = e.Name
		case u.names != nil:
			name = u.names[i]
		default:
			// A rejected assignment still names its subscription (update_rejected, and the
			// end of its initial fetch).
			cla := &endpointv3.ClusterLoadAssignment{}
			if proto.Unmarshal(a.GetValue(), cla) == nil {
				name = cla.GetClusterName()
			}
		}
		svc := h.services[serviceKey(src, name)]
		if err == nil && u.names != nil && u.names[i] != name {
			err = fmt.Errorf("cluster_load_assignment %q: resource name %q differs from cluster_name", name, u.names[i])
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
			svc.version = u.version
			for _, b := range svc.bindings {
				st := b.cl.Stats()
				st.UpdateAttempt.Inc()
				st.UpdateSuccess.Inc()
				st.UpdateNoRebuild.Inc()
				b.stats.stats.VersionText.Set(u.version)
				st.Version.Set(versionHash(u.version))
			}
			continue
		}
		ok := true
		for _, b := range svc.bindings {
			if err := h.applyLocked(b, e.Proto, u.version); err != nil {
				ok = false
				errs = append(errs, err.Error())
			}
		}
		if ok {
			svc.cla, svc.version = e.Proto, u.version
		}
	}
	for _, name := range u.removed {
		if h.services[serviceKey(src, name)] != nil {
			c.log.Infof("xds: EDS resource %q removed; its clusters keep their hosts", name)
		}
	}
	if len(errs) > 0 {
		err := errors.New(strings.Join(errs, "; "))
		c.log.Warnf("xds: EDS update %q rejected: %v", u.version, err)
		return err
	}
	return nil
}

// failed counts a transport failure on every cluster subscribed through src.
func (w edsWatch) failed(src *mux) {
	h := w.h
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	for _, svc := range h.services {
		if svc.m != src {
			continue
		}
		for _, b := range svc.bindings {
			b.cl.Stats().UpdateAttempt.Inc()
			b.cl.Stats().UpdateFailure.Inc()
		}
	}
}

// failed counts a transport failure on CDS.
func (h *cdsHandler) failed(*mux) {
	h.stats.UpdateFailure.Inc()
	h.stats.UpdateAttempt.Inc()
}
