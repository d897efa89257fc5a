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
	// AggregateClusterType is the name of the one custom cluster type Legate implements.
	AggregateClusterType = "envoy.clusters.aggregate"
)

// clusters checks Legate's rules on each static cluster and returns their names.
func (v *validator) clusters(cs []*clusterv3.Cluster) []string {
	var names []string
	for i, c := range cs {
		names = append(names, c.GetName())
		v.cluster(fmt.Sprintf("cluster %q: static_resources.clusters[%d]", c.GetName(), i), c)
	}
	return v.names("static_resources.clusters", names)
}

// listeners returns the static listener names after checking them.
func (v *validator) listeners(ls []*listenerv3.Listener) []string {
	var names []string
	for _, l := range ls {
		names = append(names, l.GetName())
	}
	return v.names("static_resources.listeners", names)
}

// cluster checks the rules Envoy applies to one cluster outside its proto annotations. at is
// `cluster "name": <path>`, the prefix of every error.
func (v *validator) cluster(at string, c *clusterv3.Cluster) {
	v.discovery(at, c)
	v.lbConfig(at, c)
	if t := c.GetCommonLbConfig().GetHealthyPanicThreshold(); t != nil && (t.GetValue() < 0 || t.GetValue() > 100) {
		v.fail("%s.common_lb_config.healthy_panic_threshold.value = %g: must be in 0..100", at, t.GetValue())
	}
}

// discovery checks the discovery type against the fields that depend on it.
func (v *validator) discovery(at string, c *clusterv3.Cluster) {
	if ct := c.GetClusterType(); ct != nil {
		if ct.GetName() != AggregateClusterType {
			v.fail("%s.cluster_type.name = %q: unknown cluster type; Legate implements %s", at, ct.GetName(), AggregateClusterType)
		}
		if c.GetEdsClusterConfig() != nil {
			v.fail("%s.eds_cluster_config is set, but the cluster has cluster_type %q; it applies only to type EDS", at, ct.GetName())
		}
		return
	}
	t := c.GetType()
	if c.GetEdsClusterConfig() != nil && t != clusterv3.Cluster_EDS {
		v.fail("%s.eds_cluster_config is set, but type = %s; it applies only to type EDS", at, t)
	}
	switch t {
	case clusterv3.Cluster_STATIC, clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		if c.GetLoadAssignment() == nil {
			v.fail("%s.load_assignment is missing; type %s needs it to list the cluster's hosts", at, t)
		}
	}
}

// lbConfig checks that a policy-specific lb config matches lb_policy, and the ring sizes.
func (v *validator) lbConfig(at string, c *clusterv3.Cluster) {
	policy := c.GetLbPolicy()
	checks := []struct {
		field string
		set   bool
		want  clusterv3.Cluster_LbPolicy
	}{
		{"ring_hash_lb_config", c.GetRingHashLbConfig() != nil, clusterv3.Cluster_RING_HASH},
		{"least_request_lb_config", c.GetLeastRequestLbConfig() != nil, clusterv3.Cluster_LEAST_REQUEST},
		{"maglev_lb_config", c.GetMaglevLbConfig() != nil, clusterv3.Cluster_MAGLEV},
	}
	for _, ch := range checks {
		if ch.set && policy != ch.want {
			v.fail("%s.%s is set, but lb_policy = %s; %s applies only to lb_policy %s", at, ch.field, policy, ch.field, ch.want)
		}
	}
	ring := c.GetRingHashLbConfig()
	if ring == nil {
		return
	}
	minSize, maxSize := uint64(DefaultMinRingSize), uint64(MaxRingSize)
	if m := ring.GetMinimumRingSize(); m != nil {
		minSize = m.GetValue()
	}
	if m := ring.GetMaximumRingSize(); m != nil {
		maxSize = m.GetValue()
	}
	if minSize > MaxRingSize {
		v.fail("%s.ring_hash_lb_config.minimum_ring_size = %d: must be <= %d", at, minSize, MaxRingSize)
	}
	if maxSize > MaxRingSize {
		v.fail("%s.ring_hash_lb_config.maximum_ring_size = %d: must be <= %d", at, maxSize, MaxRingSize)
	}
	if minSize > maxSize {
		v.fail("%s.ring_hash_lb_config.minimum_ring_size = %d: must be <= maximum_ring_size (%d)", at, minSize, maxSize)
	}
}
