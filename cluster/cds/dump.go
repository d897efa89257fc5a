package cds

import (
	"sort"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
)

// ClustersDumpExtras returns the error states of the CDS clusters rejected, by cluster name:
// Envoy's UpdateFailureState (failed_configuration, last_update_attempt, details,
// version_info). A state lasts until the cluster is accepted or leaves the configuration.
// ClustersConfigDump merges them into the cluster manager's dump. Safe for concurrent use.
func (d *Discovery) ClustersDumpExtras() map[string]*adminv3.UpdateFailureState {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cds == nil || len(d.cds.failures) == 0 {
		return nil
	}
	// Copies: a dump's messages are the caller's to change.
	out := make(map[string]*adminv3.UpdateFailureState, len(d.cds.failures))
	for name, f := range d.cds.failures {
		out[name] = proto.Clone(f).(*adminv3.UpdateFailureState)
	}
	return out
}

// secretWarmingDump is cdsHandler.secretWarmingDumpLocked under mu; nil without CDS.
func (d *Discovery) secretWarmingDump(match func(string) bool) []*adminv3.ClustersConfigDump_DynamicCluster {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cds == nil {
		return nil
	}
	return d.cds.secretWarmingDumpLocked(match)
}

// ClustersConfigDump is the cluster manager's ClustersConfigDump (tracker key "clusters") with
// the error_state of rejected CDS clusters: set on the cluster's dynamic entry when the
// previous version still serves, else added as a dynamic_active_clusters entry of its own, in
// name order. match filters by cluster name as in cluster.Manager.ConfigDump. client_status
// stays unset here and in every other dump, as in Envoy, whose admin dumps never fill it (the
// field is marked not-implemented in config_dump_shared.proto; CSDS clients use it). Safe for
// concurrent use.
func (d *Discovery) ClustersConfigDump(match func(string) bool) proto.Message {
	base := d.cfg.Clusters.ConfigDump(match)
	dump, ok := base.(*adminv3.ClustersConfigDump)
	if !ok {
		return base
	}
	dump.DynamicWarmingClusters = append(dump.DynamicWarmingClusters, d.secretWarmingDump(match)...)
	extras := d.ClustersDumpExtras()
	if len(extras) == 0 {
		return dump
	}
	for _, list := range [][]*adminv3.ClustersConfigDump_DynamicCluster{dump.DynamicActiveClusters, dump.DynamicWarmingClusters} {
		for _, dc := range list {
			cl := &clusterv3.Cluster{}
			if dc.GetCluster().UnmarshalTo(cl) != nil {
				continue
			}
			if es := extras[cl.GetName()]; es != nil {
				dc.ErrorState = es
				delete(extras, cl.GetName())
			}
		}
	}
	names := make([]string, 0, len(extras))
	for name := range extras {
		if match == nil || match(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		dump.DynamicActiveClusters = append(dump.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{ErrorState: extras[name]})
	}
	if len(names) > 0 {
		sort.SliceStable(dump.DynamicActiveClusters, func(i, j int) bool {
			return dumpName(dump.DynamicActiveClusters[i]) < dumpName(dump.DynamicActiveClusters[j])
		})
	}
	return dump
}

// dumpName is the cluster name of a dump entry (from the cluster, or from the failed
// configuration of an error-only entry).
func dumpName(dc *adminv3.ClustersConfigDump_DynamicCluster) string {
	a := dc.GetCluster()
	if a == nil {
		a = dc.GetErrorState().GetFailedConfiguration()
	}
	cl := &clusterv3.Cluster{}
	if a == nil || a.UnmarshalTo(cl) != nil {
		return ""
	}
	return cl.GetName()
}
