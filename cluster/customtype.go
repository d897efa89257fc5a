package cluster

import (
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/lb"
)

// customType is what the manager does for one cluster_type extension (config.CustomClusterType).
// Both functions run on the control side; the balancer they return is published in a Snapshot.
type customType struct {
	// dependencies are the clusters whose host changes, addition or removal rebuild a cluster
	// of this type.
	dependencies func(cfg *config.Cluster) []string
	// build returns the hosts and the balancer of c from the manager's clusters as they are now.
	build func(m *Manager, c *Cluster) (*host.PrioritySet, lb.Balancer)
}

// customTypes are the cluster_type extensions the manager implements, by name. The map is
// filled at package initialisation and never modified (DESIGN rule 3). Its names are those
// config.ClusterTypes accepts, so a cluster that passed config always finds its type here;
// TestCustomTypesMatchConfig holds the two sets equal.
var customTypes = map[string]customType{
	config.AggregateClusterType: {dependencies: aggregateMembers, build: buildAggregate},
}
