package cds

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// clusterSecrets holds the SDS subscriptions of one accepted CDS cluster whose
// UpstreamTlsContext names secrets with an sds_config. Until every secret has arrived (or
// its initial_fetch_timeout passed) the cluster is not given to the cluster manager: it warms
// here, as Envoy's cluster warms on its SDS init target. The subscriptions last as long as
// the cluster, so rotated secrets keep arriving (tlsutil.SDS's changed hook reloads the contexts).
// Its fields are guarded by Discovery.mu.
type clusterSecrets struct {
	rc      *Cluster
	version string
	updated time.Time
	refs    []watch.Subscription
	// added is set once the cluster went to the cluster manager.
	added bool
}

func (cs *clusterSecrets) release() {
	for _, r := range cs.refs {
		r.Cancel()
	}
	cs.refs = nil
}

// readyLocked reports whether every secret arrived or timed out.
func (cs *clusterSecrets) readyLocked() bool {
	for _, r := range cs.refs {
		if !r.Ready() {
			return false
		}
	}
	return true
}

// holdForSecretsLocked subscribes the secrets of rc. It returns true when the cluster must wait
// for them (it is then kept in h.secrets and added by secretArrived), false when it has no SDS
// secrets or they are all here and the caller adds it now. A cluster identical to the one
// already waiting keeps waiting. The subscriptions of the cluster's previous version end after
// the new ones are made, so a shared secret is not resubscribed.
func (h *cdsHandler) holdForSecretsLocked(rc *Cluster, version string, now time.Time) (bool, error) {
	prev := h.secrets[rc.Name]
	if prev != nil && !prev.added && proto.Equal(prev.rc.Config.Proto, rc.Config.Proto) {
		return true, nil
	}
	if len(rc.Secrets) == 0 {
		if prev != nil {
			prev.release()
			delete(h.secrets, rc.Name)
		}
		return false, nil
	}
	cs := &clusterSecrets{rc: rc, version: version, updated: now}
	for _, d := range rc.Secrets {
		ref, err := h.watchSecret(d, func() { h.secretArrived(cs) })
		if err != nil {
			cs.release()
			return false, fmt.Errorf("cluster %q: transport_socket sds secret %q: %w", rc.Name, d.Name, err)
		}
		cs.refs = append(cs.refs, ref)
	}
	if prev != nil {
		prev.release()
	}
	h.secrets[rc.Name] = cs
	if cs.readyLocked() {
		cs.added = true
		return false, nil
	}
	return true, nil
}

// secretArrived adds a cluster waiting for its secrets once they are all here.
func (h *cdsHandler) secretArrived(cs *clusterSecrets) {
	d := h.d
	d.mu.Lock()
	defer d.unlockAndReady()
	if d.cds != h || h.secrets[cs.rc.Name] != cs || cs.added || !cs.readyLocked() {
		return
	}
	cs.added = true
	name := cs.rc.Name
	d.cfg.Clusters.Batch(func() {
		changed, err := d.cfg.Clusters.AddOrUpdate(cs.rc.Config, cs.version)
		if err != nil {
			d.log.Errorf("xds: CDS: cluster %q: %v", name, err)
			a, _ := anypb.New(cs.rc.Config.Proto)
			h.failures[name] = watch.FailureState(a, d.clock.Now(), err, cs.version)
			return
		}
		if changed && cs.rc.EDS != nil {
			h.bindEDSLocked([]*Cluster{cs.rc})
			d.eds.flushLocked()
		}
	})
	if cs.rc.EDS == nil || d.eds.receivedLocked(name) {
		delete(h.initPending, name)
	}
}

// watchSecret watches the SDS secret dep of a CDS cluster through Config.Secrets (TLS owns
// SDS); onChange runs after each change.
func (h *cdsHandler) watchSecret(dep resource.Dependency, onChange func()) (watch.Subscription, error) {
	if h.d.cfg.Secrets == nil {
		return nil, errors.New("SDS is not available (no secret watcher)")
	}
	return h.d.cfg.Secrets.Watch(dep.Config, dep.Name, onChange)
}

// removeSecretsLocked ends the secret subscriptions of a removed cluster.
func (h *cdsHandler) removeSecretsLocked(name string) {
	if cs := h.secrets[name]; cs != nil {
		cs.release()
		delete(h.secrets, name)
	}
}

// waitingForSecretsLocked reports whether the cluster called name waits for its secrets.
func (h *cdsHandler) waitingForSecretsLocked(name string) bool {
	cs := h.secrets[name]
	return cs != nil && !cs.added
}

// secretWarmingDumpLocked returns dynamic_warming_clusters entries for the clusters waiting
// for their secrets, in name order.
func (h *cdsHandler) secretWarmingDumpLocked(match func(string) bool) []*adminv3.ClustersConfigDump_DynamicCluster {
	var out []*adminv3.ClustersConfigDump_DynamicCluster
	for _, name := range slices.Sorted(maps.Keys(h.secrets)) {
		cs := h.secrets[name]
		if cs.added || (match != nil && !match(name)) {
			continue
		}
		a, err := anypb.New(cs.rc.Config.Proto)
		if err != nil {
			continue
		}
		out = append(out, &adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: cs.version, Cluster: a, LastUpdated: timestamppb.New(cs.updated)})
	}
	return out
}
