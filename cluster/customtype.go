package cluster

import (
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/lb/leastrequest"
	"github.com/legateproxy/legate/lb/maglev"
	"github.com/legateproxy/legate/lb/originaldst"
	"github.com/legateproxy/legate/lb/random"
	"github.com/legateproxy/legate/lb/ringhash"
	"github.com/legateproxy/legate/lb/roundrobin"
	"github.com/legateproxy/legate/tlsutil"
)

// customType is what the manager does for one cluster_type extension (config.CustomClusterType).
// Both functions run on the control side; the balancer they return is published in a Snapshot.
type customType struct {
	// dependencies are the clusters whose host changes, addition or removal rebuild a cluster
	// of this type.
	dependencies func(cfg *config.Cluster) []string
	// build returns the hosts and the balancer of c from the manager's clusters as they are
	// now; ps are the cluster's own hosts (those it added itself).
	build func(m *Manager, c *Cluster, ps *host.PrioritySet) (*host.PrioritySet, lb.Balancer)
	// attach, when set, runs as a cluster of the type is made (m.mu held); detach when it is
	// released.
	attach func(m *Manager, c *Cluster) error
	detach func(c *Cluster)
}

// customTypes is the kind of cluster_type extensions as the manager builds them. Package
// config reads their typed_config under the same names (config.ClusterTypeDecoders);
// TestCustomTypesMatchConfig holds the two sets equal, so a cluster that passed config
// always finds its type here.
var customTypes = registry.Kind[customType]{Category: registry.ClusterType, Facet: "cluster"}

// Register registers the cluster types the manager builds: envoy.clusters.aggregate and
// envoy.clusters.dynamic_forward_proxy.
func Register(b *registry.Builder) {
	registry.Add(b, customTypes, config.AggregateClusterType, &aggregatev3.ClusterConfig{},
		customType{dependencies: aggregateMembers, build: buildAggregate})
	registerDynamicForwardProxy(b)
}

// ownExtensions is the registry of a manager built without one: config's cluster types and
// policies, the transport sockets, the balancers and the manager's own cluster types, which
// TestCustomTypesMatchConfig holds free of conflicts.
func ownExtensions() *registry.Registry {
	b := registry.NewBuilder()
	config.Register(b)
	tlsutil.Register(b)
	for _, register := range []func(*registry.Builder){roundrobin.Register, leastrequest.Register, ringhash.Register, random.Register, maglev.Register, originaldst.Register} {
		register(b)
	}
	Register(b)
	r, _ := b.Build()
	return r
}

// balancerFactory returns how the balancer of the lb_policy policy is built.
func (m *Manager) balancerFactory(policy string) (lb.Factory, bool) {
	name, ok := lb.ExtensionName(policy)
	if !ok {
		return nil, false
	}
	f, _, ok := registry.Lookup(m.ext, lb.Balancers, name, "")
	return f, ok
}

// customType returns the behaviour of the cluster type name.
func (m *Manager) customType(name string) (customType, bool) {
	ct, _, ok := registry.Lookup(m.ext, customTypes, name, "")
	return ct, ok
}
