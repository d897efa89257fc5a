package config

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

const (
	// MaxRingSize is the largest minimum_ring_size and maximum_ring_size Envoy accepts (8M).
	MaxRingSize = 8388608
	// DefaultMinRingSize is Envoy's default ring_hash_lb_config.minimum_ring_size.
	DefaultMinRingSize = 1024
	// AggregateClusterType is the cluster_type name of aggregate clusters.
	AggregateClusterType = "envoy.clusters.aggregate"
)

// clusters builds each static cluster with ClusterFromProto (which checks the per-cluster
// rules), then checks what concerns the set: unique names, and the load_assignment that
// STRICT_DNS clusters need at bootstrap (LOGICAL_DNS's is checked by ClusterFromProto). A STATIC
// cluster without one is accepted with no hosts, as Envoy does (control planes declare such
// clusters before they have endpoints).
func (v *validator) clusters(cs []*clusterv3.Cluster) ([]*Cluster, []string) {
	var (
		built []*Cluster
		names []string
	)
	for i, c := range cs {
		names = append(names, c.GetName())
		path := fmt.Sprintf("static_resources.clusters[%d]", i)
		if c.GetClusterType() == nil && c.GetLoadAssignment() == nil {
			if t := c.GetType(); t == clusterv3.Cluster_STRICT_DNS {
				v.fail("%s: cluster %q: load_assignment is missing; type %s needs it to list the cluster's hosts", path, c.GetName(), t)
				continue
			}
		}
		cl, err := ClusterFromProto(c, v.lim)
		if err != nil {
			v.fail("%s: %w", path, err)
			continue
		}
		built = append(built, cl)
	}
	v.duplicates("static_resources.clusters", names)
	return built, names
}

// listeners returns the static listener names after checking them.
func (v *validator) listeners(ls []*listenerv3.Listener) []string {
	var names []string
	for i, l := range ls {
		names = append(names, l.GetName())
		if max := v.lim.maxObjNameLen(); len(l.GetName()) > max {
			v.fail("static_resources.listeners[%d].name = %q: %d characters, longer than the limit of %d (--max-obj-name-len)", i, l.GetName(), len(l.GetName()), max)
		}
	}
	v.duplicates("static_resources.listeners", names)
	return names
}

// duplicates reports each name that repeats an earlier one in the list at path.
func (v *validator) duplicates(path string, names []string) {
	first := make(map[string]int, len(names))
	for i, n := range names {
		if n == "" {
			continue // a required name is protoc-gen-validate's rule; Envoy names empty listeners itself
		}
		if j, dup := first[n]; dup {
			v.fail("%s[%d].name = %q: duplicate of %s[%d]", path, i, n, lastSegment(path), j)
			continue
		}
		first[n] = i
	}
}
