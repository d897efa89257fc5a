package config

import (
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	clusterprovidedv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/cluster_provided/v3"
	lbcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/registry"
)

// typedLbPolicy is the result of converting one load_balancing_policy.policies entry: the
// LbPolicy name it maps to and the settings it carries. The legacy per-policy configs keep
// their defaults for the fields the entry leaves unset.
type typedLbPolicy struct {
	policy       string
	ringHash     RingHashLbConfig
	leastRequest LeastRequestLbConfig
	maglev       MaglevLbConfig
	// locality is the policy's locality_lb_config (or locality_weighted_lb_config of the hash
	// policies); zero when unset.
	localityWeighted bool
	zoneAware        *ZoneAwareLbConfig
	// useHostname is consistent_hashing_lb_config.use_hostname_for_hashing.
	useHostname bool
}

// lbPolicyDecoder converts the typed_config of one policy extension. at is the field path of
// typed_config, used in errors; r holds the policies a nested policy may name.
type lbPolicyDecoder func(r *registry.Registry, at string, a *anypb.Any, depth int) (*typedLbPolicy, error)

// maxLbPolicyDepth bounds WrrLocality nesting (Envoy accepts one level: the endpoint picking
// policy of a WrrLocality cannot itself be a WrrLocality).
const maxLbPolicyDepth = 1

// selectLbPolicy returns the first entry of p.policies whose type is a policy of r, as Envoy
// picks the first policy it has a factory for. at is the field path of p.
func selectLbPolicy(r *registry.Registry, at string, p *clusterv3.LoadBalancingPolicy, depth int) (*typedLbPolicy, error) {
	var skipped []string
	for i, pol := range p.GetPolicies() {
		tec := pol.GetTypedExtensionConfig()
		url := tec.GetTypedConfig().GetTypeUrl()
		decode, _, ok := registry.Lookup(r, lbPolicies, "", url)
		if !ok {
			skipped = append(skipped, fmt.Sprintf("%q (%s)", tec.GetName(), url))
			continue
		}
		return decode(r, fmt.Sprintf("%s.policies[%d].typed_extension_config.typed_config", at, i), tec.GetTypedConfig(), depth)
	}
	if len(skipped) == 0 {
		return nil, fmt.Errorf("%s.policies is empty; at least one policy is required", at)
	}
	return nil, fmt.Errorf("%s.policies: none of %s is implemented by Legate; want one of RoundRobin, LeastRequest, Random, RingHash, Maglev, ClusterProvided or WrrLocality", at, strings.Join(skipped, ", "))
}

func unmarshalPolicy(at string, a *anypb.Any, m proto.Message) error {
	if err := a.UnmarshalTo(m); err != nil {
		return fmt.Errorf("%s: %v", at, err)
	}
	return nil
}

func notImplemented(at, field string) error {
	return fmt.Errorf("%s.%s: set; not implemented by Legate", at, field)
}

func decodeRoundRobin(_ *registry.Registry, at string, a *anypb.Any, _ int) (*typedLbPolicy, error) {
	var m roundrobinv3.RoundRobin
	if err := unmarshalPolicy(at, a, &m); err != nil {
		return nil, err
	}
	if m.GetSlowStartConfig() != nil {
		return nil, notImplemented(at, "slow_start_config")
	}
	out := &typedLbPolicy{policy: "ROUND_ROBIN"}
	return out, out.locality(at+".locality_lb_config", m.GetLocalityLbConfig())
}

func decodeLeastRequest(_ *registry.Registry, at string, a *anypb.Any, _ int) (*typedLbPolicy, error) {
	var m leastrequestv3.LeastRequest
	if err := unmarshalPolicy(at, a, &m); err != nil {
		return nil, err
	}
	switch {
	case m.GetSlowStartConfig() != nil:
		return nil, notImplemented(at, "slow_start_config")
	case m.GetEnableFullScan().GetValue():
		return nil, fmt.Errorf("%s.enable_full_scan = true; not implemented by Legate", at)
	case m.GetSelectionMethod() != leastrequestv3.LeastRequest_N_CHOICES:
		return nil, fmt.Errorf("%s.selection_method = %s; not implemented by Legate (only N_CHOICES)", at, m.GetSelectionMethod())
	}
	out := &typedLbPolicy{policy: "LEAST_REQUEST", leastRequest: LeastRequestLbConfig{
		ChoiceCount: u32Or(m.GetChoiceCount(), DefaultChoiceCount), ActiveRequestBias: 1,
	}}
	if out.leastRequest.ChoiceCount < 2 {
		return nil, fmt.Errorf("%s.choice_count = %d; must be >= 2", at, out.leastRequest.ChoiceCount)
	}
	if bias := m.GetActiveRequestBias(); bias != nil {
		v := bias.GetDefaultValue()
		if v < 0 || v != v {
			return nil, fmt.Errorf("%s.active_request_bias.default_value = %v; must be >= 0", at, v)
		}
		out.leastRequest.ActiveRequestBias = v
	}
	return out, out.locality(at+".locality_lb_config", m.GetLocalityLbConfig())
}

func decodeRandom(_ *registry.Registry, at string, a *anypb.Any, _ int) (*typedLbPolicy, error) {
	var m randomv3.Random
	if err := unmarshalPolicy(at, a, &m); err != nil {
		return nil, err
	}
	out := &typedLbPolicy{policy: "RANDOM"}
	return out, out.locality(at+".locality_lb_config", m.GetLocalityLbConfig())
}

func decodeRingHash(_ *registry.Registry, at string, a *anypb.Any, _ int) (*typedLbPolicy, error) {
	var m ringhashv3.RingHash
	if err := unmarshalPolicy(at, a, &m); err != nil {
		return nil, err
	}
	out := &typedLbPolicy{policy: "RING_HASH", ringHash: RingHashLbConfig{
		MinimumRingSize: u64Or(m.GetMinimumRingSize(), DefaultMinRingSize),
		MaximumRingSize: u64Or(m.GetMaximumRingSize(), MaxRingSize),
	}}
	switch m.GetHashFunction() {
	case ringhashv3.RingHash_DEFAULT_HASH, ringhashv3.RingHash_XX_HASH:
		out.ringHash.HashFunction = XXHash
	case ringhashv3.RingHash_MURMUR_HASH_2:
		out.ringHash.HashFunction = MurmurHash2
	default:
		return nil, fmt.Errorf("%s.hash_function = %d; must be DEFAULT_HASH, XX_HASH or MURMUR_HASH_2", at, m.GetHashFunction())
	}
	if err := out.ringHash.check(at); err != nil {
		return nil, err
	}
	if m.GetHashBalanceFactor() != nil {
		return nil, notImplemented(at, "hash_balance_factor")
	}
	out.useHostname = m.GetUseHostnameForHashing()
	if err := out.consistentHashing(at+".consistent_hashing_lb_config", m.GetConsistentHashingLbConfig()); err != nil {
		return nil, err
	}
	out.localityWeighted = m.GetLocalityWeightedLbConfig() != nil
	return out, nil
}

func decodeMaglev(_ *registry.Registry, at string, a *anypb.Any, _ int) (*typedLbPolicy, error) {
	var m maglevv3.Maglev
	if err := unmarshalPolicy(at, a, &m); err != nil {
		return nil, err
	}
	out := &typedLbPolicy{policy: "MAGLEV", maglev: MaglevLbConfig{TableSize: u64Or(m.GetTableSize(), DefaultMaglevTableSize)}}
	if err := out.maglev.check(at); err != nil {
		return nil, err
	}
	if err := out.consistentHashing(at+".consistent_hashing_lb_config", m.GetConsistentHashingLbConfig()); err != nil {
		return nil, err
	}
	out.localityWeighted = m.GetLocalityWeightedLbConfig() != nil
	return out, nil
}

func decodeClusterProvided(_ *registry.Registry, at string, a *anypb.Any, _ int) (*typedLbPolicy, error) {
	var m clusterprovidedv3.ClusterProvided
	if err := unmarshalPolicy(at, a, &m); err != nil {
		return nil, err
	}
	return &typedLbPolicy{policy: "CLUSTER_PROVIDED"}, nil
}

// decodeWrrLocality is locality-weighted balancing over localities with the endpoint picking
// policy inside each: Legate's locality_weighted_lb_config with that policy.
func decodeWrrLocality(r *registry.Registry, at string, a *anypb.Any, depth int) (*typedLbPolicy, error) {
	var m wrrlocalityv3.WrrLocality
	if err := unmarshalPolicy(at, a, &m); err != nil {
		return nil, err
	}
	if depth >= maxLbPolicyDepth {
		return nil, fmt.Errorf("%s: a WrrLocality inside a WrrLocality is not supported", at)
	}
	inner, err := selectLbPolicy(r, at+".endpoint_picking_policy", m.GetEndpointPickingPolicy(), depth+1)
	if err != nil {
		return nil, err
	}
	switch {
	case inner.policy == "CLUSTER_PROVIDED":
		return nil, fmt.Errorf("%s.endpoint_picking_policy: ClusterProvided cannot pick endpoints inside localities", at)
	case inner.zoneAware != nil:
		return nil, fmt.Errorf("%s.endpoint_picking_policy: locality_lb_config.zone_aware_lb_config conflicts with WrrLocality's locality weighting", at)
	}
	inner.localityWeighted = true
	return inner, nil
}

// locality applies a policy's LocalityLbConfig.
func (t *typedLbPolicy) locality(at string, l *lbcommonv3.LocalityLbConfig) error {
	if l == nil {
		return nil
	}
	if l.GetLocalityWeightedLbConfig() != nil {
		t.localityWeighted = true
		return nil
	}
	z := l.GetZoneAwareLbConfig()
	if z == nil {
		return nil
	}
	at += ".zone_aware_lb_config"
	switch {
	case z.GetForceLocalityDirectRouting():
		return fmt.Errorf("%s.force_locality_direct_routing = true; not implemented by Legate", at)
	case z.GetForceLocalZone() != nil:
		return notImplemented(at, "force_local_zone")
	case z.GetLocalityBasis() != lbcommonv3.LocalityLbConfig_ZoneAwareLbConfig_HEALTHY_HOSTS_NUM:
		return fmt.Errorf("%s.locality_basis = %s; not implemented by Legate (only HEALTHY_HOSTS_NUM)", at, z.GetLocalityBasis())
	}
	t.zoneAware = &ZoneAwareLbConfig{
		RoutingEnabled:     DefaultZoneRoutingEnabled,
		MinClusterSize:     u64Or(z.GetMinClusterSize(), DefaultMinClusterSize),
		FailTrafficOnPanic: z.GetFailTrafficOnPanic(),
	}
	if r := z.GetRoutingEnabled(); r != nil {
		v := r.GetValue()
		if v < 0 || v > 100 || v != v {
			return fmt.Errorf("%s.routing_enabled.value = %g; must be in 0..100", at, v)
		}
		t.zoneAware.RoutingEnabled = v
	}
	return nil
}

// consistentHashing applies a hash policy's ConsistentHashingLbConfig.
func (t *typedLbPolicy) consistentHashing(at string, c *lbcommonv3.ConsistentHashingLbConfig) error {
	switch {
	case c == nil:
		return nil
	case c.GetHashBalanceFactor() != nil:
		return notImplemented(at, "hash_balance_factor")
	case len(c.GetHashPolicy()) > 0:
		return fmt.Errorf("%s.hash_policy: set; not implemented by Legate (hash policies are read from the route)", at)
	}
	t.useHostname = t.useHostname || c.GetUseHostnameForHashing()
	return nil
}

// typedPolicy applies load_balancing_policy, which replaces lb_policy and its config oneof as
// in Envoy. The locality settings of the chosen policy replace those of common_lb_config.
func (b *clusterBuilder) typedPolicy(p *clusterv3.LoadBalancingPolicy, out *Cluster) {
	t, err := selectLbPolicy(b.ext, "load_balancing_policy", p, 0)
	if err != nil {
		b.fail("%v", err)
		return
	}
	out.LbPolicy = t.policy
	switch t.policy {
	case "RING_HASH":
		out.RingHash = t.ringHash
	case "LEAST_REQUEST":
		out.LeastRequest = t.leastRequest
	case "MAGLEV":
		out.Maglev = t.maglev
	}
	out.CommonLb.LocalityWeighted = t.localityWeighted
	out.CommonLb.ZoneAware = t.zoneAware
	out.CommonLb.UseHostnameForHashing = t.useHostname
}
