package cluster

import (
	"sort"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ConfigDump returns the ClustersConfigDump of /config_dump (tracker key "clusters"): bootstrap
// clusters in static_clusters, CDS clusters in dynamic_active_clusters and
// dynamic_warming_clusters, each list sorted by name, with last_updated. Clusters whose name
// match rejects are left out. Safe for concurrent use.
func (m *Manager) ConfigDump(match func(string) bool) proto.Message {
	out := &adminv3.ClustersConfigDump{}
	if v := m.versionInfo.Load(); v != nil {
		out.VersionInfo = *v
	}
	clusters := append(m.Snapshot(), m.Warming()...)
	sort.SliceStable(clusters, func(i, j int) bool { return clusters[i].cfg.Name < clusters[j].cfg.Name })
	for _, c := range clusters {
		if c.addedViaAPI && !c.Warm() {
			continue // listed in dynamic_warming_clusters below; static clusters always list here
		}
		if match != nil && !match(c.cfg.Name) {
			continue
		}
		a, err := anypb.New(c.cfg.Proto)
		if err != nil {
			continue
		}
		ts := timestamppb.New(c.lastUpdated)
		if !c.addedViaAPI {
			out.StaticClusters = append(out.StaticClusters, &adminv3.ClustersConfigDump_StaticCluster{Cluster: a, LastUpdated: ts})
			continue
		}
		out.DynamicActiveClusters = append(out.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{
			VersionInfo: c.version, Cluster: a, LastUpdated: ts,
		})
	}
	for _, c := range m.Warming() {
		if (match != nil && !match(c.cfg.Name)) || !c.addedViaAPI {
			continue
		}
		a, err := anypb.New(c.cfg.Proto)
		if err != nil {
			continue
		}
		out.DynamicWarmingClusters = append(out.DynamicWarmingClusters, &adminv3.ClustersConfigDump_DynamicCluster{
			VersionInfo: c.version, Cluster: a, LastUpdated: timestamppb.New(c.lastUpdated),
		})
	}
	return out
}
