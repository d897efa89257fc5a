package server

import (
	"github.com/legateproxy/legate/admin/configdump"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/host"
)

// buildClusterManager creates the cluster manager with the bootstrap's
// static clusters. Static clusters that need discovery (DNS) hold the
// server's initialization until their first resolution, through the init
// manager.
func (s *Server) buildClusterManager() error {
	node := s.Node()
	var local *host.Locality
	if l := node.GetLocality(); l != nil {
		local = &host.Locality{Region: l.GetRegion(), Zone: l.GetZone(), SubZone: l.GetSubZone()}
	}
	m, err := cluster.NewManager(cluster.ManagerConfig{
		Clock:             s.clock,
		Stats:             s.store,
		DeferTrafficStats: s.boot.Proto.GetDeferredStatOptions().GetEnableDeferredCreationStats(),
		Logger:            s.logs.Logger("upstream"),
		Init: func(name string) (func(), error) {
			t, err := s.init.Add(name)
			if err != nil {
				return nil, err
			}
			return t.Ready, nil
		},
		LocalClusterName:    s.boot.Proto.GetClusterManager().GetLocalClusterName(),
		ServiceZone:         s.opts.ServiceZone,
		LocalLocality:       local,
		Runtime:             s.runtime,
		Extensions:          s.ext,
		OutlierEventLogPath: s.boot.Proto.GetClusterManager().GetOutlierDetection().GetEventLogPath(),
	})
	if err != nil {
		return err
	}
	if err := m.AddStatic(s.boot.Clusters); err != nil {
		return err
	}
	s.clusters = m
	return s.dumps.Add(configdump.Tracker{Key: configdump.EndpointKey, Dump: m.EndpointsDump})
}
